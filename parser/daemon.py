"""The loop: each turn the collectors (one per technique) offer the work that is due (the feeds' polls,
parser/feeds/feed_pass.py; the jobs' pages and objects, parser/jobs/runner.py), worker threads do it
(parser/fetch/scheduler.py), and the main thread stages what came back; every FLUSH_INTERVAL the staged
records go to the database.

This module is the loop and how it starts and stops. Everything that writes (staging, hash files,
state, logs) runs in the main thread, one turn's results at a time, so nothing needs a lock and a slow
source delays nothing but itself (RETAIN's pass, parser/retention.py, is a thread of its own: it writes
the database alone, in short transactions, and its log line). Between turns: the operator's `reset`/`poll` requests
(parser/operate/operator_requests.py), pushed records (the inbox), and a SIGHUP's reload (parser/operate/reload.py).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from db.store import Database

from .collectors import Collectors
from .core.clock import ScheduleClock, wall
from .core.dates import iso
from .core.errors import StorageError
from .core.jsonfile import read_object, write_whole
from .core.runinfo import RunInfo
from .core.runs import RunLog
from .core.stats import Stats
from .core.urls import redact_url
from .feeds.feed_pass import FeedLoop, FeedMode, FeedPass
from .fetch.http import Fetcher
from .fetch.scheduler import Scheduler
from .flush_all import FlushRecord, SourcesWriter, flush_sinks, prepare_tables
from .group.parts import parts_for
from .jobs.runner import JobLoop, JobMode, JobParts, JobRunner
from .operate.control import ControlBox
from .operate.operator_requests import OperatorRequests
from .operate.reload import Reload, Running
from .retention import Retention, marks_of
from .settings.params import Settings, Source
from .settings.run_options import RunOptions, select_jobs, select_sources, unpolled_picks, unpolled_text
from .sources.protocols import polled, pushed
from .sources.state import SourceState

if TYPE_CHECKING:  # the status page's type for the checker; the module itself is imported in _open_operator
    from .operate.statuspage import StatusPage  # imported on first use: STATUS_LISTEN only (start-up time)

__all__ = ["Daemon", "RunOptions"]
log = logging.getLogger("parser")
EXIT_ALL_FAILED = 4  # --once: every source polled failed (cron tells it from a run that collected)
CONTROL_TICK = 0.25  # seconds between looks for control requests (parser/operate/control.py) and pushed records
STOPPED = {True: "stopped on signal; staged records flushed",  # by whether the last flush went through
           False: "stopped on signal; the flush failed, records stay in staging"}


class Daemon:
    def __init__(self, settings: Settings, options: RunOptions, *, stop: threading.Event | None = None,
                 clock: Callable[[], float] | None = None, out: TextIO = sys.stdout):
        if options.links_only and not options.once:  # a one-shot: pass 1 of the selected jobs, then exit 0
            options = dataclasses.replace(options, once=True)
        self.settings, self.options, self.out = settings, options, out
        self.stop = stop or threading.Event()
        # Scheduling counts with the monotonic clock (parser/core/clock.py); what is written down, by the wall.
        self.clock = clock or ScheduleClock()
        self.wall = clock or wall
        sources = select_sources(settings, options)
        self.link_jobs = select_jobs(settings, options)
        # Webhook sources are never polled: their records arrive at the listener (parser/push/webhook.py),
        # as do WebSub pushes; both reach the main thread through the inbox (parser/pipeline/inbox.py).
        self.listened, self.sources = pushed(sources), polled(sources)
        self.unpolled = unpolled_picks(sources, options)  # --once --source of a webhook: said at start
        if self.unpolled and not self.sources and not self.link_jobs:
            raise ValueError(f"--once has nothing to run: {unpolled_text(self.unpolled)}")
        # SHARED, --dry-run and --once read once: alone or the group's, forever or once, or a dry run
        # (parser/group/parts.py)
        self.parts = parts_for(settings, dry_run=options.dry_run, once=options.once, out=out)
        self.lock = self.parts.folder_lock()
        self.reload = Reload(options, clock=self.clock)  # SIGHUP sets its flag from the start
        self.fetcher: Fetcher | None = None
        self._scheduler: Scheduler | None = None
        self.db: Database | None = None
        self.sources_table: SourcesWriter | None = None  # the `sources` table, written at each flush
        self._feeds: FeedPass | None = None
        self.collectors = Collectors()  # the feeds, then the jobs
        self.ticked = 0.0  # time.monotonic() of the last look for control requests and pushed records
        # For the operator: daemon.json (parser/core/runinfo.py), `reset`/`poll` requests, and the status page
        # (parser/operate/statuspage.py), which reads files and the flushes' health only.
        # The one stats object every component counts into (parser/core/stats.py), saved in daemon.json; the
        # fields' coverage history goes on from the last run's (a dry run keeps nothing, so reads nothing).
        self.stats = Stats(coverage=self.parts.kept_coverage())
        self.run_info = RunInfo(pid=os.getpid(), started=iso(self.wall()), params=str(settings.params_path),
                                stats=self.stats, runs=RunLog(self.parts.daemon_name()))
        self.flushes = FlushRecord(self.run_info, self.wall)
        self._operator: OperatorRequests | None = None
        self.status_page: StatusPage | None = None
        self.retention: Retention | None = None  # RETAIN's passes (parser/retention.py); a real run's only

    # What _open makes, for the loop that runs after it: None before, and in _close after a start that failed.
    @property
    def scheduler(self) -> Scheduler:
        assert self._scheduler is not None, "opened by _open, before the loop"
        return self._scheduler

    @property
    def feeds(self) -> FeedPass:
        assert self._feeds is not None, "opened by _open, before the loop"
        return self._feeds

    @property
    def operator(self) -> OperatorRequests:
        assert self._operator is not None, "opened by _open_operator, before the loop (not with --dry-run)"
        return self._operator

    # -- start and stop ---------------------------------------------------------------------------
    def run(self) -> int:
        """Run until stopped (or every source once with --once); return the process exit code."""
        s = self.settings
        self.parts.setup_logs(s)  # a dry run's: no log files, errors.log's lines are comment lines among the records
        log.info("params: %s", s.params_path)  # first: which file, so a daemon started in the wrong folder says so
        if self.unpolled:
            log.warning("%s", unpolled_text(self.unpolled))
        self.lock.acquire()
        try:
            self._say_notes()
            self._open()
            return self._loop()
        finally:
            self._close()

    def _say_notes(self) -> None:
        """How the settings were read (an OPML title renamed, a feed listed twice): said in full when they
        differ from the last start's (staging/notes.json), else in one line, so a restart is no noise."""
        notes, path = list(self.settings.notes), self.parts.notes_path()
        if path is None:  # a dry run's: nothing remembered, every note said
            for note in notes:
                log.info("params: %s", note)
            return
        last = read_object(path)
        if not notes and last is None:
            return  # nothing to say, nor to remember
        if notes and last is not None and last.get("notes") == notes:
            log.info("params: %d %s as at the last start, not repeated (%s)", len(notes),
                     "note" if len(notes) == 1 else "notes", path)
            return
        for note in notes:
            log.info("params: %s", note)
        try:
            write_whole(path, {"notes": notes})
        except StorageError:
            pass  # said again at the next start; the staging folder's own writes report a full disk

    def _open(self) -> None:
        """Open what the run writes to, from the parts (parser/group/parts.py): a dry run's print their
        records and keep their states in memory; it has no database, inbox, listener or daemon.json."""
        s = self.settings
        slots = self.parts.host_slots(self.stop)  # PER_HOST, pacing, holds: one host slot for both
        self.fetcher = Fetcher(user_agent=s.user_agent, timeout=s.timeout, deadline=s.deadline,
                               max_bytes=s.max_bytes, max_redirects=s.max_redirects, per_host=s.per_host,
                               pool_size=s.concurrency, slots=slots)
        self._scheduler = Scheduler(s.concurrency, s.per_host, slots)
        self._feeds = FeedPass(s, self.sources, listened=self.listened,
                              loop=FeedLoop(self.fetcher, self.scheduler, self.stop, self.clock, self.wall),
                              mode=FeedMode(offering=self.parts.offering(), named=self.options.picks_sources),
                              run_info=self.run_info, parts=self.parts, polled=self._answer_polled)
        self.collectors.add(self.feeds)
        self.db = self.parts.database()
        if self.db is not None:
            self.sources_table = SourcesWriter(self.feeds)
            self.feeds.open_push(self.fetcher)
        if self.link_jobs:  # a dry run's: both passes in memory, their records printed (parser/jobs/runner.py)
            jobs = JobRunner(s, self.link_jobs, JobLoop(self.fetcher, self.scheduler, self.stop, self.clock),
                             mode=JobMode(links_only=self.options.links_only),
                             parts=JobParts(job_files=self.parts.job_files, pace=self.parts.job_pace(),
                                            max_objects=self.parts.max_objects),
                             runs=self.run_info.runs, stats=self.stats)
            jobs.open()
            self.collectors.add(jobs)
        if self.db is None:  # a dry run: nothing flushed, retained or asked for
            return
        for sink in self.collectors.sinks():
            sink.check_history(self.db)  # hashes flushed elsewhere: refused, exit 2
        prepare_tables(self.db, self.collectors.sinks())  # 0.5.x tables brought up, or refused: exit 2
        self.retention = Retention(s, self.db, stop=self.stop, wall=self.wall, marks=marks_of(s))
        self._open_operator()
        self._save_run_info()
        log.info("started: %d sources, dedup %s, database %s, pid %s", len(self.sources), s.dedup,
                 redact_url(s.db_url), os.getpid())

    def _open_operator(self) -> None:
        """Forever mode: `reset`/`poll` requests taken, the status page served (STATUS_LISTEN). Chosen here, where
        the daemon is assembled: the operate floor stands above the parts (parser/group/parts.py)."""
        self._operator = OperatorRequests(None if self.options.once else ControlBox(self.settings.staging_dir),
                                         schedule=self.feeds.schedule, run_info=self.run_info, clock=self.clock,
                                         save=lambda: self._save_state(force=True))
        if self.settings.status_listen and not self.options.once:
            from .operate.statuspage import (
                open_status_page,  # imported on first use: STATUS_LISTEN only (start-up time)
            )
            self.status_page = open_status_page(self.settings, lambda: self.flushes.health)
            self.run_info.status_listen = self.status_page.base_url

    def _answer_polled(self, source: Source, state: SourceState, ok: bool) -> None:
        """After each poll is taken: the operator's requests waiting for it answered (none in a dry run)."""
        if self._operator is not None:
            self._operator.answer_polled(source, state, ok)

    def _close(self) -> None:
        listener = self._feeds.listener if self._feeds else None  # before the workers: pushes may use them
        for part in (self.status_page, listener, self._scheduler, self.fetcher, self.collectors):
            if part:
                part.close()  # the feeds' close closes the schedule's states too
        if self.retention is not None:  # its pass ends after its batch (the stop is set, or --once is done)
            self.retention.close()
        if self.db is not None:  # opened, so the lock is ours and daemon.json is this run's
            self.db.close()
            self.run_info.running = False
            self._save_run_info()
        self.lock.release()

    def request_reload(self, *, at_start: bool = False) -> None:
        """From the SIGHUP handler: only a flag, the main thread reloads (parser/operate/reload.py);
        `at_start`: the SIGHUP came while the daemon was starting."""
        self.reload.request(at_start=at_start)

    # -- the loop -----------------------------------------------------------------------------------
    def _loop(self) -> int:
        if self.db is not None:
            self.flush("start")  # a crash's leftovers first
        if self.options.once:
            return self._run_once()
        next_flush = self.clock() + self.settings.flush_interval
        while not self.stop.is_set():
            if self.retention is not None:
                self.retention.tick()  # at start, then daily: beside the loop
            self._tick()
            self.collectors.offer()
            self._work(self._seconds_until_next(next_flush))
            if self.clock() >= next_flush:
                self.flush("interval")
                next_flush = self.clock() + self.settings.flush_interval  # SIGHUP may change it
            self._save_state()
            self.collectors.summary(due_only=True)
            if self.reload.pending():
                self._reload()
        self._keep_finished()
        flush_ok = self.flush("stop")
        self.collectors.summary()
        log.info(STOPPED[flush_ok])
        return 0

    def _run_once(self) -> int:
        """--once: every selected source once (Retry-After apart) and the jobs to their end, side by side
        on the one worker loop; then one flush."""
        self.collectors.offer()  # every source, before the loop: a stop coming at once still has them offered
        while not self.stop.is_set():
            self.collectors.offer()
            if self.scheduler.idle() and self.collectors.finished():
                break
            self._work(CONTROL_TICK)
        self._keep_finished()
        self.collectors.take_pushed()
        self.collectors.summary()
        if self.db is None:  # a dry run: nothing to flush
            return self._once_said(0)
        flush_ok = self.flush("stop" if self.stop.is_set() else "once")
        if self.stop.is_set():
            log.info(STOPPED[flush_ok])
        elif self.retention is not None and flush_ok:
            self.retention.run()  # after the flush: what it stored is held to RETAIN too
        return self._once_said(0 if flush_ok else 1)

    def _once_said(self, code: int) -> int:
        """--once's last line: how many of the sources polled failed, so cron's mail says it. A run in
        which every one failed collected nothing: exit EXIT_ALL_FAILED, not 0, unless the flush already
        failed (1). Counted from daemon.json's counters: in --once a source is polled once, a held
        one (Retry-After) not at all."""
        if not self.sources:
            return code  # --job alone: no feeds to speak of (--once: no reload changes them)
        polled, failed = int(self.run_info.totals["polls"]), int(self.run_info.totals["errors"])
        if not polled:
            log.info("done: no source polled (each held by its server's Retry-After)")
        elif not failed:
            log.info("done: %d %s polled, none failed", polled, "source" if polled == 1 else "sources")
        elif failed < polled:
            log.warning("done: %d of %d sources polled failed (errors.log says why)", failed, polled)
        else:
            code = code or EXIT_ALL_FAILED
            log.warning("done: every source polled failed (%d of %d; errors.log says why): exit %d", failed,
                        polled, code)
        return code

    def _seconds_until_next(self, next_flush: float) -> float:
        """How long the main thread may wait for finished work before something else is due."""
        soonest = min(next_flush, self.collectors.next_due())
        return min(max(soonest - self.clock(), 0.0), CONTROL_TICK)

    def _work(self, wait: float) -> None:
        """Start what is ready, wait up to `wait` s for finished work, and stage what came back."""
        self.scheduler.dispatch()
        self.scheduler.absorb(wait)  # each result to its collector (parser/collectors.py)
        self.collectors.stage()

    def _keep_finished(self) -> None:
        """Stopping or done: what finished is kept; what the stop cut short is no failure (not staged)."""
        self.scheduler.absorb(0)
        self.collectors.keep_finished()

    def _tick(self) -> None:
        """A few times a second at most: the status page's heartbeat, control requests, pushed records."""
        now = time.monotonic()
        self.flushes.beat()
        if now - self.ticked < CONTROL_TICK and not self.reload.requested.is_set():
            return
        self.ticked = now
        self.operator.apply(self.feeds.sources, self.settings)  # the operator's requests are the feeds'
        self.collectors.take_pushed()

    def _reload(self) -> None:
        """SIGHUP: params.py read again; what it changes for the feeds applied (the jobs keep theirs)."""
        sources, full_text = self.feeds.running()
        reloaded = self.reload.step(Running(self.settings, self.listened, sources, full_text), self.feeds.schedule)
        if reloaded is not None:
            self.settings = reloaded.settings
            if self.retention is not None:
                self.retention.settings = reloaded.settings  # the next pass's
            self.feeds.use(reloaded.settings, reloaded.sources)

    # -- what is written down -----------------------------------------------------------------------
    def flush(self, why: str) -> bool:
        """Staged records into the database (parser/flush_all.py); on failure they stay staged and the
        next flush retries. The outcome goes to daemon.json and the status page's health."""
        started = time.monotonic()
        self.collectors.take_pushed()
        flushed = flush_sinks(self.collectors.sinks(), self.db, why, db_url=self.settings.db_url,
                              feeds_idle=not (self.feeds.sources or self.feeds.listened),  # --job alone: no feeds' line
                              sources=self.sources_table, runs=self.run_info.runs)
        self.flushes.record(why, flushed, time.monotonic() - started)
        self._save_state(force=True)  # every flush writes the states it waited to write
        return flushed.ok

    def _save_state(self, *, force: bool = False) -> None:
        """state.json and daemon.json, in batches (parser/sources/source_schedule.py's SAVE_EVERY), not per poll;
        `force` (a flush, the stop, an operator's request) writes both now."""
        saved = self.collectors.save(force=force)
        if saved:
            self.stats.inc_value("state_writes")
        if saved or force:
            self._save_run_info()

    def _save_run_info(self) -> None:
        path = self.parts.daemon_json()
        if path is not None:
            self.run_info.save(path, iso(self.wall()))
