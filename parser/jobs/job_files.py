"""One two-pass job's files, owned by the main thread: link file, harvest log, sink, state.json.

state.json keeps when pass 1 last finished and the hosts that asked for a pause (429/503 with
Retry-After) with the time until which they get no request, so a restart or the next --once
honours the pause too. A dry run opens InMemoryJobFiles in their place (chosen by parser/group/parts.py):
every file is read as it is and nothing is written: the link file, harvest and state live in memory, and
the records go to a JobPrintSink (parser/jobs/job_sink.py), which prints them.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from linkgen.harvest import Harvest
from linkgen.linkfile import STATUS_FILE, LinkFile, Links, Mark

from ..adapters.extract import blank_values, compile_selector
from ..core.jsonfile import read_object, write_whole
from ..fetch.host_slots import MAX_HOLD
from ..pipeline.sink import SinkFiles, SinkSettings, UniqueRule, unique_rule
from ..settings.link_jobs import LinkJob
from ..settings.params import Settings
from ..sources.state import SLACK
from .job_sink import JobPrintSink, JobRecordSink, JobSink

log = logging.getLogger("parser")


def job_folder(staging_dir: Path, name: str) -> Path:
    return staging_dir / "jobs" / name


def job_unique_rule(job: str, unique_fields: Sequence[str], settings: SinkSettings) -> UniqueRule:
    """How a job's sink tells an object staged before: its `unique_fields`, named so in the messages."""
    return unique_rule(settings, unique_fields, f"unique_fields of job {job!r} (LINK_JOBS)")


class JobFiles:
    """One job's files: link file, harvest log, sink (staging CSV, hashes) and state.json."""
    revisits = True  # a done link is fetched again when its job's `refresh` comes (the group's files: not yet)

    read_only = False  # InMemoryJobFiles: the files read as they are, every change kept in memory

    def __init__(self, job: LinkJob, settings: Settings, clock: Callable[[], float]):
        self.job = job
        self.folder = job_folder(settings.staging_dir, job.name)
        self.links = self._open_links(settings, clock)
        self.updates = job.updates or settings.updates  # the job's own `updates`, else UPDATES
        self.sink = self._open_sink(job_unique_rule(job.name, job.unique_fields, settings))
        self.harvest = Harvest(self.folder, job.name, job.harvest, clock=clock, read_only=self.read_only) \
            if job.harvest else None
        self.selectors = {name: compile_selector(sel) for name, sel in job.fields.items()}
        self.blank = blank_values(self.selectors)  # what a page with nothing on it gives each field
        self.state_path = self.folder / "state.json"
        saved = self._load_state()
        self.pass1_at = float(saved.get("pass1_at", 0.0))
        holds, lengths = saved.get("holds", {}), saved.get("hold_seconds", {})
        # host key ("http://host:port") -> epoch seconds before which it gets no request, and how
        # long the server asked for (to tell a hold from a wall clock set back since it was saved)
        self.holds: dict[str, float] = {k: float(v) for k, v in holds.items()} if isinstance(holds, dict) else {}
        self.hold_seconds: dict[str, float] = \
            {k: float(v) for k, v in lengths.items()} if isinstance(lengths, dict) else {}
        self._pull_back(clock())
        self.waited = 0.0  # seconds this run has waited for held hosts (bounded under --once)

    def _open_links(self, settings: Settings, clock: Callable[[], float]) -> Links:
        """The job's link file (SHARED = True: the group's links, parser/group/shared_jobs.py)."""
        return LinkFile(self.folder, self.job.name, clock=clock, read_only=self.read_only, refresh=self.job.refresh)

    def _open_sink(self, unique: UniqueRule) -> JobRecordSink:
        return JobSink(table=self.job.name, columns=self.job.columns, unique=unique,
                       files=SinkFiles(self.folder, remembered_beside=(STATUS_FILE,)), updates=self.updates,
                       kinds=self.job.kinds)

    def _load_state(self) -> dict:
        return read_object(self.state_path) or {}

    def _pull_back(self, now: float) -> None:
        """Times saved by a run whose clock was ahead of this one's (the wall clock was set back since):
        a pass 1 'finished' in the future, or a hold longer than the server asked for, come back to now."""
        if self.pass1_at > now + SLACK:
            log.info("%s  pass 1 finished %.0f s in the future (the clock was set back): its interval counts"
                     " from now", self.job.name, self.pass1_at - now)
            self.pass1_at = now
        for host, until in list(self.holds.items()):
            longest = self.hold_seconds.get(host, MAX_HOLD)
            if until > now + longest + SLACK:
                log.info("%s  hold on %s ends in %.0f s, beyond its %.0f s (the clock was set back):"
                         " pulled back", self.job.name, host, until - now, longest)
                self.holds[host] = now + longest

    def _save_state(self, now: float) -> None:
        self.holds = {host: until for host, until in self.holds.items() if until > now}
        self.hold_seconds = {host: s for host, s in self.hold_seconds.items() if host in self.holds}
        write_whole(self.state_path, {"pass1_at": self.pass1_at, "holds": self.holds,
                                      "hold_seconds": self.hold_seconds})

    def pass1_finished(self, at: float) -> None:
        self.pass1_at = at
        self._save_state(at)

    def remember_hold(self, host: str, until: float, now: float) -> None:
        """A host asked for no requests before `until` (epoch): kept for a restart or the next --once."""
        if until > self.holds.get(host, 0.0):
            self.holds[host], self.hold_seconds[host] = until, until - now
            self._save_state(now)

    def pass1_due(self, now: float) -> bool:
        return bool(self.harvest and self.harvest.active) or now >= self.pass1_at + self.job.interval

    def recover_staged(self) -> int:
        """Links whose records reached the staging CSV but whose 'done' line a crash cut off: mark them."""
        # A JobPrintSink (a dry run) stages nothing, so nothing of it was cut off.
        staged = {row["url"]: None for row in self.sink.staged_rows() if row.get("url")}
        if not staged:
            return 0
        # One pass over links.txt finds their lines; no map of every link's URL is built for this.
        lines = self.links.find(set(staged))
        marks = [Mark(url, "done", "recovered from the staging CSV after a crash", lines[url])
                 for url in staged if url in lines and self.links.status_at(lines[url]) != "done"]
        self.links.mark(marks)
        return len(marks)

    def close(self) -> None:
        self.sink.close()
        self.links.close()
        if self.harvest:
            self.harvest.close()


class InMemoryJobFiles(JobFiles):
    """A dry run's job files: read as they are, written never; the records printed on `out`."""
    read_only = True

    def __init__(self, job: LinkJob, settings: Settings, clock: Callable[[], float], *, out: TextIO):
        self.out = out
        super().__init__(job, settings, clock)

    def _open_sink(self, unique: UniqueRule) -> JobRecordSink:
        return JobPrintSink(table=self.job.name, columns=self.job.columns, unique=unique,
                            files=SinkFiles(self.folder), out=self.out)

    def _save_state(self, now: float) -> None:
        """The state stays in memory."""
