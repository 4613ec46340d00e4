"""The loop: poll due sources concurrently, stage their new records, flush on FLUSH_INTERVAL.

This is the one place that strings fetch -> parse -> uniqueness -> staging -> flush together.
Fetching and parsing run in worker threads; everything that writes (staging, hash files,
state, logs) runs in the main thread, one source's result at a time, so nothing needs a lock.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TextIO

from db.store import Database

from . import logs
from .adapters import Parsed
from .dedup import open_uniqueness
from .errors import FetchError, ParseError, StorageError
from .fetch import Fetcher, FetchResult
from .fulltext import FullText, remember_path
from .inbox import Inbox
from .jobs import JobRunner, select_jobs
from .lock import FolderLock
from .poll import Poller
from .ratelimit import RateLimits
from .record import RECORD_FIELDS, now_iso
from .settings import Settings, Source
from .sink import Sink, print_records, select_new
from .state import SourceState, load_states, save_states
from .urls import redact_url

log = logging.getLogger("parser")
MAX_BACKOFF = 24 * 3600.0
RETRY_AFTER_MAX = 24 * 3600.0


@dataclass(frozen=True)
class RunOptions:
    once: bool = False
    sources: tuple[str, ...] = ()   # empty: every enabled source
    dry_run: bool = False
    jobs: tuple[str, ...] = ()      # two-pass jobs (LINK_JOBS); empty: every enabled job
    links_only: bool = False        # the jobs' pass 1 alone


@dataclass
class PollOutcome:
    """What a worker hands back to the main thread for one source."""
    source: Source
    seconds: float
    result: FetchResult | None = None
    parsed: Parsed | None = None
    error: str | None = None
    fetch_error: FetchError | None = None


@dataclass
class CycleSummary:
    polled: int = 0
    not_modified: int = 0
    errors: int = 0
    new: int = 0
    duplicates: int = 0


def select_sources(settings: Settings, names: tuple[str, ...]) -> list[Source]:
    """Enabled sources, or exactly the named ones (named but disabled still runs: the user asked)."""
    if not names:
        return [s for s in settings.sources if s.enabled]
    by_name = {s.name: s for s in settings.sources}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"no source named {', '.join(map(repr, unknown))} in {settings.params_path.name}"
                         f" (sources: {', '.join(by_name) or 'none'})")
    return [by_name[n] for n in dict.fromkeys(names)]


class Daemon:
    def __init__(self, settings: Settings, options: RunOptions, *, stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.time, out: TextIO = sys.stdout):
        self.settings = settings
        self.options = options
        self.stop = stop or threading.Event()
        self.clock = clock
        self.out = out
        self.sources = select_sources(settings, options.sources)
        self.link_jobs = select_jobs(settings, options.jobs)
        if (options.jobs or options.links_only) and not options.sources:
            self.sources = []    # --job / --links-only alone: the jobs, not the feeds
        elif options.sources and not options.jobs:
            self.link_jobs = []  # --source alone: the feeds, not the jobs
        self.jobs: JobRunner | None = None
        # Webhook sources are never polled: their records arrive at the listener (parser/webhook.py),
        # as do WebSub pushes; both reach the main thread through the inbox (parser/inbox.py).
        self.listened = [s for s in self.sources if s.protocol in ("webhook", "websub")]
        self.sources = [s for s in self.sources if s.protocol != "webhook"]
        self.inbox: Inbox | None = None
        self.listener = None
        self.poller: Poller | None = None
        self.lock = FolderLock(settings.staging_dir)
        self.state_path = settings.staging_dir / "state.json"
        self.states: dict[str, SourceState] = {}
        self.sink: Sink | None = None
        self.dry_run_check = None  # --dry-run: a read-only uniqueness check, and the digests this run saw
        self.dry_run_seen: set[str] = set()
        self.db: Database | None = None
        self.fetcher: Fetcher | None = None
        self.pool: ThreadPoolExecutor | None = None

    # -- life cycle ---------------------------------------------------------------------------
    def run(self) -> int:
        """Run until stopped (or one cycle with --once); return the process exit code."""
        s = self.settings
        if self.options.dry_run:
            logs.setup(None)
        else:
            logs.setup(s.log_dir, max_bytes=s.log_max_bytes, backups=s.log_backups)
            self.lock.acquire()
        try:
            self._open()
            return self._loop()
        finally:
            self._close()

    def _open(self) -> None:
        s = self.settings
        self.fetcher = Fetcher(user_agent=s.user_agent, timeout=s.timeout, deadline=s.deadline,
                               max_bytes=s.max_bytes, max_redirects=s.max_redirects, per_host=s.per_host,
                               pool_size=s.concurrency, stop=self.stop)
        self.pool = ThreadPoolExecutor(max_workers=s.concurrency, thread_name_prefix="fetch")
        full_text = FullText(self.fetcher.with_timeout(s.full_text_timeout),
                             None if self.options.dry_run else remember_path(s.staging_dir)) \
            if any(src.full_text for src in self.sources) else None
        self.poller = Poller(self.fetcher, stop=self.stop, max_wait=s.deadline, rates=RateLimits(),
                             full_text=full_text)
        if self.options.dry_run:
            self.dry_run_check = open_uniqueness(s.dedup, s.staging_dir, s.hash, read_only=True)
            if self.link_jobs:  # both passes in memory, their records printed (parser/jobs.py)
                self.jobs = JobRunner(s, self.link_jobs, fetcher=self.fetcher, pool=self.pool, stop=self.stop,
                                      clock=self.clock, once=True, links_only=self.options.links_only,
                                      dry_run=True, out=self.out)
                self.jobs.open()
            return
        self.states = load_states(self.state_path)
        self.sink = Sink(table="items", columns=RECORD_FIELDS, unique_fields=s.unique_fields,
                         staging_dir=s.staging_dir, csv_name="staging.csv", hash_stem="hashes",
                         dedup_mode=s.dedup, algorithm=s.hash)
        self.db = Database(s.db_url)
        self.inbox = Inbox(s.staging_dir)  # drained at every flush: even a killed run's deliveries
        if self.listened and not self.options.once:
            from .webhook import open_listener
            self.listener = open_listener(s, self.listened, self.inbox, self.fetcher, self.stop)
        if self.link_jobs:
            self.jobs = JobRunner(s, self.link_jobs, fetcher=self.fetcher, pool=self.pool, stop=self.stop,
                                  clock=self.clock, once=self.options.once, links_only=self.options.links_only)
            self.jobs.open()
        log.info("started: %d sources, dedup %s, database %s, pid %s", len(self.sources), s.dedup,
                 redact_url(s.db_url), os.getpid())

    def _close(self) -> None:
        if self.listener:
            self.listener.close()
        if self.pool:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if self.fetcher:
            self.fetcher.close()
        if self.sink:
            self.sink.close()
        if self.jobs:
            self.jobs.close()
        if self.db:
            self.db.close()
        self.lock.release()

    def _loop(self) -> int:
        s = self.settings
        flush_ok = self.flush("start") if not self.options.dry_run else True  # a crash's leftovers first
        next_flush = self.clock() + s.flush_interval
        while not self.stop.is_set():
            due = self._due_sources()
            if due:
                self.run_cycle(due)
            if self.jobs:
                self.jobs.run_due()
            self._stage_received()
            if self.options.once:
                break
            if self.clock() >= next_flush:
                self.flush("interval")
                next_flush = self.clock() + s.flush_interval
            self.stop.wait(self._seconds_until_next(next_flush))
        if self.options.dry_run:
            return 0
        flush_ok = self.flush("stop" if not self.options.once else "once")
        if self.stop.is_set():
            log.info("stopped on signal; staged records flushed" if flush_ok else
                     "stopped on signal; the flush failed, records stay in staging")
        return 0 if flush_ok or not self.options.once else 1

    def _due_sources(self) -> list[Source]:
        now = self.clock()
        due = []
        for source in self.sources:
            state = self._state(source)
            if state.not_before > now:
                if self.options.once:
                    log.info("%s  skipped: the server asked to wait %.0f s more (Retry-After)",
                             source.name, state.not_before - now)
                continue
            if self.options.once or state.next_due <= now:
                due.append(source)
        return due

    def _seconds_until_next(self, next_flush: float) -> float:
        now = self.clock()
        upcoming = [max(self._state(s).next_due, self._state(s).not_before) for s in self.sources]
        if self.jobs:
            upcoming.append(self.jobs.next_due())
        soonest = min([next_flush, *upcoming])
        return min(max(soonest - now, 0.05), 60.0)

    def _state(self, source: Source) -> SourceState:
        state = self.states.get(source.name)
        if state is None or state.url != source.url:
            state = self.states[source.name] = SourceState(url=source.url)
        return state

    # -- one cycle ----------------------------------------------------------------------------
    def run_cycle(self, due: list[Source]) -> CycleSummary:
        started = time.monotonic()
        summary = CycleSummary()
        pending: dict[Future, Source] = {}
        # At most twice CONCURRENCY polls are submitted ahead, so the bodies and records waiting for
        # this thread depend on CONCURRENCY, not on the number of sources.
        ahead = 2 * self.settings.concurrency
        waiting = iter(due)

        def submit_more() -> None:
            while len(pending) < ahead and (source := next(waiting, None)) is not None:
                state = self._state(source)
                pending[self.pool.submit(self._poll, source, state.etag, state.last_modified)] = source
        submit_more()
        while pending and not self.stop.is_set():
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                source = pending.pop(future)
                try:
                    outcome = future.result()
                except Exception as exc:  # a bug in a worker is that source's error, not the daemon's
                    outcome = PollOutcome(source=source, seconds=0.0, error=f"internal error: {exc!r}")
                    log.error("internal error polling %s:\n%s", source.name, traceback.format_exc())
                self._absorb(outcome, summary)
            if not self.stop.is_set():
                submit_more()
        for future in pending:  # stopping: abandon what has not finished
            future.cancel()
        if not self.options.dry_run:
            save_states(self.state_path, self.states)
        log.info("cycle: %d sources in %.2f s: %d new records, %d duplicates, %d not modified, %d errors",
                 summary.polled, time.monotonic() - started, summary.new, summary.duplicates,
                 summary.not_modified, summary.errors)
        return summary

    def _poll(self, source: Source, etag: str | None, last_modified: str | None) -> PollOutcome:
        """Worker thread: fetch and parse one source. Touches no shared state."""
        started = time.monotonic()
        outcome = PollOutcome(source=source, seconds=0.0)
        try:
            # Rate, pages, full text: whatever the source's protocol needs (parser/poll.py).
            outcome.result, outcome.parsed = self.poller.poll(source, etag=etag, last_modified=last_modified,
                                                              fetched=now_iso(self.clock))
        except FetchError as exc:
            outcome.error, outcome.fetch_error = str(exc), exc
        except ParseError as exc:
            outcome.error = str(exc)
        outcome.seconds = time.monotonic() - started
        return outcome

    def _absorb(self, outcome: PollOutcome, summary: CycleSummary) -> None:
        """Main thread: stage one source's records, then update its state and write its log lines."""
        source, now = outcome.source, self.clock()
        summary.polled += 1
        if self.options.dry_run:
            self._print_dry_run(outcome)
            return
        state = self._state(source)
        if outcome.error is not None:
            self._failed(source, state, outcome, now)
            summary.errors += 1
            return
        result = outcome.result
        if result.moved_to:
            logs.error_line(source.name, source.url, f"moved permanently to {redact_url(result.moved_to)}"
                            " (update its url in params.py)")
            log.info("%s  moved permanently to %s", source.name, redact_url(result.moved_to))
        if result.not_modified:
            log.info("%s  304 not modified  %.2f s", source.name, outcome.seconds)
            summary.not_modified += 1
            state.last_outcome = "304"
        else:
            staged = self.sink.stage(outcome.parsed.records)  # StorageError here is critical: let it rise
            for warning in outcome.parsed.warnings:
                logs.error_line(source.name, source.url, warning)
            log.info("%s  new %d  duplicates %d  %.2f s  %s", source.name, len(staged.new), staged.duplicates,
                     outcome.seconds, outcome.parsed.kind)  # kind: what the body was found to be
            summary.new += len(staged.new)
            summary.duplicates += staged.duplicates
            state.last_outcome = f"new {len(staged.new)}"
            # Validators are kept only now that the records they cover are staged.
            state.etag, state.last_modified = result.etag, result.last_modified
        if state.failures >= self.settings.dead_after:
            log.info("%s  back after %d failures", source.name, state.failures)
        state.failures = 0
        state.next_due = now + source.interval

    def _failed(self, source: Source, state: SourceState, outcome: PollOutcome, now: float) -> None:
        state.failures += 1
        state.last_outcome = f"error: {outcome.error}"
        logs.error_line(source.name, source.url, outcome.error)
        log.info("%s  error  %s  %.2f s", source.name, outcome.error, outcome.seconds)
        delay = source.interval
        dead_after = self.settings.dead_after
        exc = outcome.fetch_error
        if state.failures >= dead_after:
            delay = min(source.interval * 2 ** (state.failures - dead_after + 1), max(MAX_BACKOFF, source.interval))
            if state.failures == dead_after:
                why = "gone" if exc is not None and exc.status == 410 else "dead"
                log.info("%s  marked %s after %d failures in a row; polled with backoff", source.name, why,
                         state.failures)
                logs.error_line(source.name, source.url, f"marked {why} after {state.failures} failures in a "
                                f"row; next polls back off up to every {MAX_BACKOFF / 3600:.0f} h")
        elif exc is not None and exc.status == 410:
            delay = max(delay, MAX_BACKOFF / 4)  # gone: ask rarely, but keep asking
        if exc is not None and exc.retry_after is not None:
            wait_s = min(exc.retry_after, RETRY_AFTER_MAX)
            state.not_before = now + wait_s
            delay = max(delay, wait_s)
        state.next_due = now + delay

    def _print_dry_run(self, outcome: PollOutcome) -> None:
        name = outcome.source.name
        if outcome.error is not None:
            print(f"# {name}: error: {outcome.error}", file=self.out)
        elif outcome.result.not_modified:
            print(f"# {name}: not modified", file=self.out)
        else:
            records = outcome.parsed.records
            staged = select_new(records, self.dry_run_check, self.settings.unique_fields, self.settings.hash,
                                self.dry_run_seen)
            print(f"# {name}: {len(records)} records, {len(staged.new)} new would be staged", file=self.out)
            print_records(staged.new, self.out)
        self.out.flush()

    def _stage_received(self) -> None:
        """Main thread: stage what the listener took in (webhook deliveries, WebSub pushes)."""
        if self.inbox is None:
            return

        def stage(name: str, records: list[dict]) -> None:
            staged = self.sink.stage(records)
            log.info("%s  new %d  duplicates %d  received", name, len(staged.new), staged.duplicates)
        self.inbox.drain(stage)

    # -- flush --------------------------------------------------------------------------------
    def flush(self, why: str) -> bool:
        """Staged records into the database; on failure they stay staged and the next flush retries."""
        self._stage_received()
        # The Bloom filter is saved here, not every cycle: it can be megabytes, and a restart catches
        # up from the hash file anyway.
        self.sink.save()
        jobs_ok = self.jobs.flush(self.db, why) if self.jobs else True
        try:
            written, already = self.sink.flush(self.db)
        except StorageError as exc:
            pending = self.sink.staging.pending_rows()
            logs.error_line("flush", redact_url(self.settings.db_url),
                            f"{exc}; {pending} records kept in staging for the next flush")
            log.info("flush (%s) failed: %s", why, exc)
            return False
        if written or already or why != "start":
            log.info("flush (%s): %d rows written to items%s", why, written,
                     f", {already} already stored" if already else "")
        return jobs_ok

