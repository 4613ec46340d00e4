"""One two-pass job's files, owned by the main thread: link file, harvest log, sink, state.json.

state.json keeps when pass 1 last finished and the hosts that asked for a pause (429/503 with
Retry-After) with the time until which they get no request, so a restart or the next --once
honours the pause too. Under --dry-run every file is read as it is and nothing is written: the
link file and harvest live in memory, and the records go to a DryRunSink, which prints them.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from linkgen.harvest import Harvest
from linkgen.linkfile import LinkFile, Mark

from .dedup import open_uniqueness
from .extract import compile_selector
from .job_settings import LinkJob
from .settings import Settings
from .sink import Sink, Staged, print_records, select_new
from .staging import read_rows


def job_folder(staging_dir: Path, name: str) -> Path:
    return staging_dir / "jobs" / name


class DryRunSink:
    """--dry-run: the records that would be staged, printed as JSON lines. The job's hash file is read
    (so what is stored already is not shown), never written."""

    def __init__(self, job: LinkJob, settings: Settings, folder: Path, out: TextIO):
        self.unique_fields = job.unique_fields
        self.algorithm = settings.hash
        self.out = out
        self.dedup = open_uniqueness(settings.dedup, folder, settings.hash, "hashes", read_only=True)
        self.seen: set[str] = set()  # this run's digests: the read-only check does not take new ones

    def stage(self, records: list[dict]) -> Staged:
        staged = select_new(records, self.dedup, self.unique_fields, self.algorithm, self.seen)
        print_records(staged.new, self.out)
        return staged

    def save(self) -> None:
        pass

    def close(self) -> None:
        self.dedup.close()


class JobState:
    """One job's files and counters."""

    def __init__(self, job: LinkJob, settings: Settings, clock: Callable[[], float], *,
                 dry_run: bool = False, out: TextIO | None = None):
        self.job = job
        self.dry_run = dry_run
        self.folder = job_folder(settings.staging_dir, job.name)
        self.links = LinkFile(self.folder, job.name, clock=clock, read_only=dry_run)
        if dry_run:
            self.sink: Sink | DryRunSink = DryRunSink(job, settings, self.folder, out)
        else:
            self.sink = Sink(table=job.name, columns=job.columns, unique_fields=job.unique_fields,
                             staging_dir=self.folder, csv_name="staging.csv", hash_stem="hashes",
                             dedup_mode=settings.dedup, algorithm=settings.hash)
        self.harvest = Harvest(self.folder, job.name, job.harvest, clock=clock, read_only=dry_run) \
            if job.harvest else None
        self.selectors = {name: compile_selector(sel) for name, sel in job.fields.items()}
        self.state_path = self.folder / "state.json"
        saved = self._load_state()
        self.pass1_at = float(saved.get("pass1_at", 0.0))
        holds = saved.get("holds", {})
        # host key ("http://host:port") -> epoch seconds before which it gets no request
        self.holds: dict[str, float] = {k: float(v) for k, v in holds.items()} if isinstance(holds, dict) else {}
        self.waited = 0.0  # seconds this run has waited for held hosts (bounded under --once)

    def _load_state(self) -> dict:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (FileNotFoundError, ValueError):
            return {}

    def _save_state(self, now: float) -> None:
        if self.dry_run:
            return
        self.holds = {host: until for host, until in self.holds.items() if until > now}
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pass1_at": self.pass1_at, "holds": self.holds}), encoding="utf-8")
        os.replace(tmp, self.state_path)

    def pass1_finished(self, at: float) -> None:
        self.pass1_at = at
        self._save_state(at)

    def remember_hold(self, host: str, until: float, now: float) -> None:
        """A host asked for no requests before `until` (epoch): kept for a restart or the next --once."""
        if until > self.holds.get(host, 0.0):
            self.holds[host] = until
            self._save_state(now)

    def pass1_due(self, now: float) -> bool:
        return bool(self.harvest and self.harvest.active) or now >= self.pass1_at + self.job.interval

    def recover_staged(self) -> int:
        """Links whose records reached the staging CSV but whose 'done' line a crash cut off: mark them."""
        if self.dry_run:
            return 0
        staging = self.sink.staging
        staged: dict[str, None] = {}
        for path in [*staging.batches(), staging.path]:
            if path.exists():
                for row in read_rows(path):
                    if row.get("url"):
                        staged[row["url"]] = None
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
