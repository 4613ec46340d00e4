"""Two-pass jobs (LINK_JOBS): the runner the daemon calls next to its feed cycle.

Pass 1 writes a job's link file (linkgen: a template, or a harvest from a root page) when it is
due by the job's `interval`; pass 2 fetches each pending link once, extracts the job's fields and
stages one record per object through the job's own Sink (uniqueness, staging CSV, table named
after the job). Worker threads fetch and parse; this module's main-thread half does all writing,
one batch of results at a time, staging records before marking their links done.

Each job keeps its files in STAGING_DIR/jobs/<name>/: links.txt, links.status, harvest.log,
state.json, staging.csv and the hash file.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from db.store import Database
from linkgen.harvest import Harvest, PageResult, fetch_page, in_domains
from linkgen.linkfile import MAX_ATTEMPTS, Link, LinkFile, Mark
from linkgen.politeness import HostPacer, Robots, polite_get
from linkgen.templates import expand

from . import logs
from .errors import FetchError, ParseError, StorageError
from .extract import compile_selector, extract_fields, parse_html
from .fetch import Fetcher
from .job_settings import LinkJob
from .record import now_iso
from .settings import Settings
from .sink import Sink
from .staging import read_rows

log = logging.getLogger("parser")

SLICE_SECONDS = 30.0      # forever mode: the longest the jobs keep the loop from feeds and flushes
ABSORB_EVERY = 0.05        # seconds: results are staged in batches (one fsync each), at least this often
ABSORB_BATCH = 64
TEMPLATE_CHUNK = 10_000


def job_folder(staging_dir: Path, name: str) -> Path:
    return staging_dir / "jobs" / name


def select_jobs(settings: Settings, names: tuple[str, ...]) -> list[LinkJob]:
    """Enabled jobs, or exactly the named ones (named but disabled still runs: the user asked)."""
    jobs = getattr(settings, "link_jobs", ())
    if not names:
        return [j for j in jobs if j.enabled]
    by_name = {j.name: j for j in jobs}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"no job named {', '.join(map(repr, unknown))} in {settings.params_path.name}"
                         f" (jobs: {', '.join(by_name) or 'none'})")
    return [by_name[n] for n in dict.fromkeys(names)]


@dataclass
class ObjectOutcome:
    """What a worker hands back for one link of pass 2."""
    url: str
    record: dict | None = None
    empty: list[str] = field(default_factory=list)
    error: str | None = None
    final: bool = False  # 404/410 (or refused by robots.txt): never asked again
    abandoned: bool = False  # cut short because the daemon is stopping: still pending, no attempt spent


class JobState:
    """One job's files and counters, owned by the main thread."""

    def __init__(self, job: LinkJob, settings: Settings, clock: Callable[[], float]):
        self.job = job
        self.folder = job_folder(settings.staging_dir, job.name)
        self.links = LinkFile(self.folder, job.name, clock=clock)
        self.sink = Sink(table=job.name, columns=job.columns, unique_fields=job.unique_fields,
                         staging_dir=self.folder, csv_name="staging.csv", hash_stem="hashes",
                         dedup_mode=settings.dedup, algorithm=settings.hash)
        self.harvest = Harvest(self.folder, job.name, job.harvest, clock=clock) if job.harvest else None
        self.selectors = {name: compile_selector(sel) for name, sel in job.fields.items()}
        self.state_path = self.folder / "state.json"
        self.pass1_at = self._load_state().get("pass1_at", 0.0)

    def _load_state(self) -> dict:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else {}
        except (FileNotFoundError, ValueError):
            return {}

    def pass1_finished(self, at: float) -> None:
        self.pass1_at = at
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pass1_at": at}), encoding="utf-8")
        os.replace(tmp, self.state_path)

    def pass1_due(self, now: float) -> bool:
        return bool(self.harvest and self.harvest.active) or now >= self.pass1_at + self.job.interval

    def recover_staged(self) -> int:
        """Links whose records reached the staging CSV but whose 'done' line a crash cut off: mark them."""
        staging = self.sink.staging
        urls: dict[str, None] = {}
        for path in [*staging.batches(), staging.path]:
            if path.exists():
                for row in read_rows(path):
                    url = row.get("url")
                    if url in self.links and self.links.status(url) != "done":
                        urls[url] = None
        self.links.mark(Mark(u, "done", "recovered from the staging CSV after a crash") for u in urls)
        return len(urls)

    def close(self) -> None:
        self.sink.close()
        self.links.close()
        if self.harvest:
            self.harvest.close()


class JobRunner:
    def __init__(self, settings: Settings, jobs: list[LinkJob], *, fetcher: Fetcher, pool: ThreadPoolExecutor,
                 stop, clock: Callable[[], float] = time.time, once: bool = False, links_only: bool = False,
                 progress: TextIO | None = None):
        self.settings = settings
        self.jobs = jobs
        self.fetcher = fetcher
        self.pool = pool
        self.stop = stop
        self.clock = clock
        self.once = once
        self.links_only = links_only
        self.window = settings.concurrency
        self.robots = Robots(fetcher, settings.user_agent, clock=clock)
        self.pacer = HostPacer(stop=stop)
        self.states: list[JobState] = []
        self.progress = progress if progress is not None else (sys.stderr if sys.stderr.isatty() else None)
        self._progress_at = 0.0

    # -- life cycle ---------------------------------------------------------------------------
    def open(self) -> None:
        log.info("jobs: %s", ", ".join(f"{j.name} ({'harvest' if j.harvest else 'template'})" for j in self.jobs))
        for job in self.jobs:
            state = JobState(job, self.settings, self.clock)
            recovered = state.recover_staged()
            if recovered:
                log.info("%s  %d links marked done from the staging CSV (their status was cut by a crash)",
                         job.name, recovered)
            self.states.append(state)

    def close(self) -> None:
        for state in self.states:
            state.close()

    def flush(self, db: Database, why: str) -> bool:
        ok = True
        for state in self.states:
            state.sink.save()  # the Bloom filter, as the feeds' sink does: at flush, not every batch
            try:
                written, already = state.sink.flush(db)
            except StorageError as exc:
                pending = state.sink.staging.pending_rows()
                logs.error_line(state.job.name, "flush", f"{exc}; {pending} records kept in staging for the next flush")
                log.info("flush (%s) of %s failed: %s", why, state.job.name, exc)
                ok = False
                continue
            if written or already:
                log.info("flush (%s): %d rows written to %s%s", why, written, state.job.name,
                         f", {already} already stored" if already else "")
        return ok

    def next_due(self) -> float:
        """When run_due has work next (now, when links are pending or a harvest is half done)."""
        now = self.clock()
        soonest = float("inf")
        for state in self.states:
            if state.pass1_due(now):
                return now
            soonest = min(soonest, state.pass1_at + state.job.interval)
            if self.links_only:
                continue
            if state.links.pending():
                return now
            retry = state.links.next_retry()
            if retry is not None:
                soonest = min(soonest, retry)
        return soonest

    def run_due(self) -> None:
        """Run what is due: everything now with --once; else at most about SLICE_SECONDS of work."""
        deadline = None if self.once else time.monotonic() + SLICE_SECONDS
        for state in self.states:
            if self.stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                break
            self._run_job(state, deadline)

    def _run_job(self, state: JobState, deadline: float | None) -> None:
        if self.once or state.pass1_due(self.clock()):
            if state.harvest:
                self._harvest(state, deadline)
                if state.harvest.active:
                    return  # stopped or out of time half-way: resumed on the next call
            else:
                self._expand_template(state, scheduled=True)
        if self.links_only:
            return
        while not self.stop.is_set():
            tried = self._pass2(state, deadline)
            if not tried or self.stop.is_set() or (deadline is not None and time.monotonic() > deadline):
                return
            # An open range goes on as far as pass 2 confirms links; a closed job is done here.
            if state.job.stop_after_misses is None or not self._expand_template(state, scheduled=False):
                return

    # -- pass 1 -------------------------------------------------------------------------------
    def _expand_template(self, state: JobState, *, scheduled: bool) -> int:
        """Add the template's links to the link file; return how many were new."""
        job, links = state.job, state.links
        started, before = time.monotonic(), len(links)
        today = datetime.fromtimestamp(self.clock(), UTC).date()
        batch: list[Link] = []
        probes: list[str] = []
        for made in expand(job.template, job.values, today=today, stop_after_misses=job.stop_after_misses,
                           is_good=lambda url: links.status(url) == "done"):
            batch.append(Link(made.url, None, "template"))
            if made.probe:
                probes.append(made.url)
            if len(batch) >= TEMPLATE_CHUNK:
                links.add(batch)
                batch = []
        links.add(batch)
        new = len(links) - before
        reopened = 0
        if scheduled:
            # The misses that ended an open range are asked again each time pass 1 runs: new ids appear.
            gone = [u for u in probes if links.status(u) == "gone"]
            links.mark(Mark(u, "reopen", "end of an open range: asked again") for u in gone)
            reopened = len(gone)
            state.pass1_finished(self.clock())
            log.info("%s  pass 1 (template): %d links in the file, %d new%s  %.2f s", job.name, len(links), new,
                     f", {reopened} misses at the end of the range asked again" if reopened else "",
                     time.monotonic() - started)
        elif new:
            log.info("%s  pass 1 (template): %d more links past the last confirmed one", job.name, new)
        return new + reopened

    def _harvest(self, state: JobState, deadline: float | None) -> None:
        job, harvest, links = state.job, state.harvest, state.links
        started = time.monotonic()
        if not harvest.active:
            harvest.start(len(links))
        else:
            log.info("%s  pass 1: resuming harvest run %d (%d pages done)", job.name, harvest.run, harvest.pages_done)
        inflight: dict[Future, str] = {}
        while not self.stop.is_set():
            if deadline is None or time.monotonic() < deadline:
                for url, depth in harvest.take(self.window - len(inflight)):
                    future = self.pool.submit(fetch_page, url, depth, job.harvest, fetcher=self.fetcher,
                                              pacer=self.pacer, robots=self.robots, delay=job.delay)
                    inflight[future] = url
            if not inflight:
                break
            done, _ = wait(inflight, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                url = inflight.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # a bug in a worker fails that page, not the daemon
                    log.exception("internal error harvesting %s", url)
                    result = PageResult(url=url, depth=harvest.queued[url][0], error=f"internal error: {exc!r}")
                if result.error and self.stop.is_set():
                    harvest.release(url)  # cut short by the stop: fetched again when the run resumes
                    continue
                links.add(harvest.links_of(result))  # the links first: a page is marked done only after
                harvest.record(result)
                if result.error:
                    logs.error_line(job.name, url, f"harvest: {result.error}")
            self._show(f"{job.name}: pass 1: {harvest.pages_done} pages fetched, {len(links)} links")
        for future, url in inflight.items():
            future.cancel()
            harvest.release(url)
        if self.stop.is_set() or not harvest.finished():
            self._end_progress()
            return
        new = len(links) - harvest.links_before
        summary = (f"{harvest.pages_done} pages fetched ({harvest.failed} failed), {len(links)} links in the file, "
                   f"{new} new" + (f"; stopped at max_pages ({job.harvest.max_pages})" if harvest.stopped_at_max
                                   else ""))
        state.pass1_finished(self.clock())  # before 'end': a crash between them only ends an empty run again
        harvest.end(summary)
        self._end_progress()
        log.info("%s  pass 1 (harvest run %d): %s  %.2f s", job.name, harvest.run, summary, time.monotonic() - started)

    # -- pass 2 -------------------------------------------------------------------------------
    def _pass2(self, state: JobState, deadline: float | None) -> int:
        """Fetch the pending links (until the deadline); return how many were tried."""
        job = state.job
        todo = iter(state.links.pending(ignore_backoff=self.once))
        tally = Counter()
        empty = Counter()
        started = time.monotonic()
        inflight: dict[Future, str] = {}
        ready: list[ObjectOutcome] = []
        last_absorb = time.monotonic()
        exhausted = False
        while not self.stop.is_set():
            while not exhausted and len(inflight) < self.window and (deadline is None or time.monotonic() < deadline):
                url = next(todo, None)
                if url is None:
                    exhausted = True
                    break
                inflight[self.pool.submit(self._fetch_object, state, url)] = url
            if not inflight:
                break
            done, _ = wait(inflight, timeout=ABSORB_EVERY, return_when=FIRST_COMPLETED)
            for future in done:
                url = inflight.pop(future)
                try:
                    ready.append(future.result())
                except Exception as exc:  # a bug in a worker fails that link, not the daemon
                    log.exception("internal error fetching %s", url)
                    ready.append(ObjectOutcome(url=url, error=f"internal error: {exc!r}"))
            if len(ready) >= ABSORB_BATCH or not inflight or time.monotonic() - last_absorb >= ABSORB_EVERY:
                self._absorb(state, ready, tally, empty)
                ready, last_absorb = [], time.monotonic()
                counts = state.links.counts()
                self._show(f"{job.name}: pass 2: {counts['done']} objects done, {counts['pending']} pending")
        for future in inflight:
            future.cancel()
        self._absorb(state, ready, tally, empty)  # finished work is kept even when stopping
        self._end_progress()
        if not tally:
            return 0
        counts = state.links.counts()
        empties = ", ".join(f"{name} {n}" for name, n in empty.most_common())
        log.info("%s  pass 2: %d fetched: %d new, %d duplicates, %d gone (404/410), %d to retry, %d given up; "
                 "empty fields: %s; %d pending  %.2f s", job.name, sum(tally[k] for k in ("done", "gone", "retry",
                 "dead")), tally["new"], tally["duplicates"], tally["gone"], tally["retry"], tally["dead"],
                 empties or "none", counts["pending"], time.monotonic() - started)
        return sum(tally[k] for k in ("done", "gone", "retry", "dead"))

    def _fetch_object(self, state: JobState, url: str) -> ObjectOutcome:
        """Worker thread: fetch one object page and extract its fields. Touches no file."""
        try:
            harvest = state.job.harvest
            response = polite_get(url, fetcher=self.fetcher, pacer=self.pacer, delay=state.job.delay,
                                  robots=self.robots if harvest else None,
                                  may_follow=(lambda target: in_domains(target, harvest.allowed_domains))
                                  if harvest else None)
            doc = parse_html(response.body, content_type=response.headers.get("content-type", ""))
        except FetchError as exc:
            return ObjectOutcome(url=url, error=str(exc), final=exc.permanent, abandoned=self.stop.is_set())
        except ParseError as exc:
            return ObjectOutcome(url=url, error=str(exc))
        extracted = extract_fields(doc, state.selectors)
        record = {"url": url, "fetched": now_iso(self.clock), **extracted.values}
        return ObjectOutcome(url=url, record=record, empty=extracted.empty)

    def _absorb(self, state: JobState, ready: list[ObjectOutcome], tally: Counter, empty: Counter) -> None:
        """Main thread: stage the records (durably), then mark their links; log the failures."""
        ready = [o for o in ready if not o.abandoned]
        if not ready:
            return
        staged = state.sink.stage([o.record for o in ready if o.record is not None])
        tally["new"] += len(staged.new)
        tally["duplicates"] += staged.duplicates
        marks = []
        for outcome in ready:
            if outcome.record is not None:
                marks.append(Mark(outcome.url, "done"))
                empty.update(outcome.empty)
            else:
                marks.append(Mark(outcome.url, "gone" if outcome.final else "failed", outcome.error or ""))
        for mark, link_state in state.links.mark(marks):
            tally[link_state.status] += 1
            if mark.status == "done":
                continue
            if link_state.status == "gone":
                what = f"{mark.detail}; not asked again"
            elif link_state.status == "retry":
                what = f"{mark.detail}; attempt {link_state.attempts} of {MAX_ATTEMPTS}, asked again later"
            else:
                what = f"{mark.detail}; given up after {link_state.attempts} attempts"
            logs.error_line(state.job.name, mark.url, what)

    # -- the terminal ---------------------------------------------------------------------------
    def _show(self, text: str) -> None:
        if self.progress is None or time.monotonic() - self._progress_at < 0.25:
            return
        self._progress_at = time.monotonic()
        self.progress.write(f"\r\x1b[K{text}")
        self.progress.flush()

    def _end_progress(self) -> None:
        if self.progress is not None and self._progress_at:
            self.progress.write("\r\x1b[K")
            self.progress.flush()
            self._progress_at = 0.0
