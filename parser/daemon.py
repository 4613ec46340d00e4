"""The loop: poll each source when it is due, stage its new records, flush on FLUSH_INTERVAL.

This is the one place that strings fetch -> parse -> uniqueness -> staging -> flush together.
Fetching and parsing run in worker threads (parser/scheduler.py); everything that writes (staging,
hash files, state, logs) runs in the main thread, one source's result at a time as it arrives, so
nothing needs a lock and a slow source delays nothing but itself. Which source is due when is kept
by parser/source_schedule.py.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from functools import partial
from types import MappingProxyType
from typing import TextIO
from urllib.parse import urlsplit

from db.store import Database

from . import logs
from .adapters import Parsed
from .clock import ScheduleClock, wall
from .control import ControlBox, Request
from .errors import FetchError, ParseError, SettingsError, StorageError
from .fetch import Fetcher, FetchResult, slot_wait
from .fulltext import FullText, remember_path
from .inbox import Inbox
from .jobs import JobRunner
from .lock import FolderLock
from .poll import Poller
from .protocols import polled, protocol_of, pushed
from .ratelimit import RateLimits
from .record import RECORD_FIELDS, now_iso
from .runinfo import Health, RunInfo, daemon_status_path
from .scheduler import Scheduler, Work
from .settings import Settings, Source
from .settings_read import SettingsRead
from .sink import PrintSink, Sink, Staged, open_sink
from .source_schedule import SourceSchedule
from .state import SourceState, iso
from .urls import redact_url

log = logging.getLogger("parser")
# SIGHUP (Daemon.reload): the settings a running daemon takes over from a re-read params file; the
# others were built into the database, staging, fetcher, jobs or listener and wait for a restart.
RELOADABLE = ("sources", "poll_interval", "flush_interval", "dead_after", "max_items", "notes")
RESTART_TO_APPLY = tuple(f.name for f in fields(Settings) if f.name not in (*RELOADABLE, "params_path"))
MAX_BACKOFF = 24 * 3600.0
RETRY_AFTER_MAX = 24 * 3600.0
CONTROL_TICK = 0.25  # seconds between looks for control requests (parser/control.py) and pushed records
SUMMARY_EVERY = 60.0  # seconds between the "polled:" summary lines in parser.log


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
    abandoned: bool = False  # cut short because the daemon is stopping: not the source's failure


@dataclass
class PollTally:
    """Polls absorbed since the last summary line."""
    polled: int = 0
    not_modified: int = 0
    errors: int = 0
    new: int = 0
    duplicates: int = 0
    fetch_bytes: int = 0


def select_named(items: Sequence, names: tuple[str, ...], kind: str, params_name: str) -> list:
    """Enabled sources (or jobs), or exactly the named ones (named but disabled still runs: the user
    asked); `kind` ("source", "job") names them in the message about a name params.py lacks."""
    if not names:
        return [item for item in items if item.enabled]
    by_name = {item.name: item for item in items}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"no {kind} named {', '.join(map(repr, unknown))} in {params_name}"
                         f" ({kind}s: {', '.join(by_name) or 'none'})")
    return [by_name[n] for n in dict.fromkeys(names)]


def select_sources(settings: Settings, names: tuple[str, ...]) -> list[Source]:
    return select_named(settings.sources, names, "source", settings.params_path.name)


class Daemon:
    def __init__(self, settings: Settings, options: RunOptions, *, stop: threading.Event | None = None,
                 clock: Callable[[], float] | None = None, out: TextIO = sys.stdout):
        self.settings = settings
        self.options = options
        self.stop = stop or threading.Event()
        # Scheduling counts with the monotonic clock (parser/clock.py); what is written down, by the wall.
        self.clock = clock or ScheduleClock()
        self.wall = clock or wall
        self.out = out
        self.sources = select_sources(settings, options.sources)
        self.link_jobs = select_named(getattr(settings, "link_jobs", ()), options.jobs, "job",
                                      settings.params_path.name)
        if (options.jobs or options.links_only) and not options.sources:
            self.sources = []    # --job / --links-only alone: the jobs, not the feeds
        elif options.sources and not options.jobs:
            self.link_jobs = []  # --source alone: the feeds, not the jobs
        self.jobs: JobRunner | None = None
        # Webhook sources are never polled: their records arrive at the listener (parser/webhook.py),
        # as do WebSub pushes; both reach the main thread through the inbox (parser/inbox.py).
        self.listened = pushed(self.sources)
        self.sources = polled(self.sources)
        self.inbox: Inbox | None = None
        self.listener = None
        self.poller: Poller | None = None
        self.lock = FolderLock(settings.staging_dir)
        self.state_path = settings.staging_dir / "state.json"
        self.schedule = SourceSchedule(None if options.dry_run else self.state_path, self.clock,
                                       workers=settings.concurrency)
        self.tally = PollTally()
        self.finished_polls: list[PollOutcome] = []  # back from the workers, absorbed together
        self.tally_since = time.monotonic()
        self.sink: Sink | PrintSink | None = None  # --dry-run: a PrintSink, which writes nothing
        self.noted: set[tuple[str, str]] = set()  # (source, note) already said in parser.log this run
        # Per source, the feed's own addresses from its last poll: a pushed entry linking to one of
        # them (a podcast's show page) is not identified by that link either (parser/identity.py).
        self.feed_links: dict[str, tuple[str, ...]] = {}
        self.db: Database | None = None
        self.fetcher: Fetcher | None = None
        self.scheduler: Scheduler | None = None
        self.reload_requested = threading.Event()  # SIGHUP; acted on by the main thread between absorbs
        self.reading: SettingsRead | None = None  # a SIGHUP's read of params.py, going on in its thread
        self.ticked = 0.0  # time.monotonic() of the last look for control requests and pushed records
        # For the operator: daemon.json (parser/runinfo.py), `reset`/`poll` requests (parser/control.py),
        # and the status page (parser/statuspage.py), which reads files and `self.health` only.
        self.run_info = RunInfo(pid=os.getpid(), started=iso(self.wall()), params=str(settings.params_path))
        self.health = Health(tick=time.monotonic(), flush_ok=True, reason="starting")
        self.flush_failing_since: str | None = None  # ISO time of the first of the failed flushes in a row
        self.control: ControlBox | None = None
        self.awaiting: dict[str, list[Request]] = {}  # source name -> requests answered after its poll
        self.status_page = None

    # -- life cycle ---------------------------------------------------------------------------
    @property
    def states(self) -> dict[str, SourceState]:
        return self.schedule.states

    def run(self) -> int:
        """Run until stopped (or every source once with --once); return the process exit code."""
        s = self.settings
        if self.options.dry_run:  # no log files: errors.log's lines are comment lines among the records
            logs.setup(None, log_format=s.log_format, errors_on_console=False)
        else:
            logs.setup(s.log_dir, max_bytes=s.log_max_bytes, backups=s.log_backups, log_format=s.log_format)
        self._log_params(s)  # first: which file, so a daemon started in the wrong folder says so
        if not self.options.dry_run:
            self.lock.acquire()
        try:
            self._open()
            return self._loop()
        finally:
            self._close()

    @property
    def shared(self) -> bool:
        """SHARED = True and not a dry run (which opens this daemon's own files, in memory)."""
        return self.settings.shared and not self.options.dry_run

    def _open(self) -> None:
        """Open what the run writes to. The one place --dry-run is chosen: a PrintSink for the feeds and
        the jobs' files in memory (parser/job_files.py); no database, inbox, listener or daemon.json."""
        s = self.settings
        dry_run = self.options.dry_run
        self.fetcher = Fetcher(user_agent=s.user_agent, timeout=s.timeout, deadline=s.deadline,
                               max_bytes=s.max_bytes, max_redirects=s.max_redirects, per_host=s.per_host,
                               pool_size=s.concurrency, stop=self.stop)
        if self.shared:  # PER_HOST for the group (parser/shared_hosts.py)
            from .shared_hosts import SharedHostLimiter
            self.fetcher.limiter = SharedHostLimiter(s.db_url, s.per_host, s.deadline, self.stop)
        self.scheduler = Scheduler(s.concurrency, s.per_host)
        full_text = FullText(self.fetcher.with_timeout(s.full_text_timeout),
                             None if dry_run else remember_path(s.staging_dir)) \
            if any(src.full_text for src in self.sources) else None
        self.poller = Poller(self.fetcher, stop=self.stop, max_wait=s.deadline, rates=self._rate_limits(),
                             full_text=full_text)
        if self.shared:  # the group's schedule and states, in the database (parser/shared.py)
            from .shared import SharedSchedule
            self.schedule = SharedSchedule(s, self.clock, every=lambda: self.settings.sources,
                                           named=bool(self.options.sources))
        self.schedule.load(self.sources, lambda src: max(src.interval, MAX_BACKOFF, RETRY_AFTER_MAX),
                           spread=not self.options.once)
        self.sink = open_sink(s, table="items", columns=RECORD_FIELDS, unique_fields=s.unique_fields,
                              staging_dir=s.staging_dir, dry_run=dry_run, out=self.out)
        if not dry_run:
            self.db = Database(s.db_url, timeout=s.db_timeout)
            self.inbox = Inbox(s.staging_dir)  # drained at every flush: even a killed run's deliveries
            if s.shared and self.listened:  # delivery ids are the group's (parser/shared_push.py)
                from .shared_push import SharedInbox
                self.inbox = SharedInbox(s.staging_dir, s.db_url)
            if self.listened and not self.options.once:
                from .push import open_listener
                self.listener = open_listener(s, self.listened, self.inbox, self.fetcher, self.stop)
        if self.link_jobs:  # with --dry-run both passes in memory, their records printed (parser/jobs.py)
            self.jobs = JobRunner(s, self.link_jobs, fetcher=self.fetcher, scheduler=self.scheduler, stop=self.stop,
                                  clock=self.clock, once=self.options.once, links_only=self.options.links_only,
                                  dry_run=dry_run, out=self.out)
            self.jobs.open()
        if dry_run:
            return
        for sink in [self.sink, *(self.jobs.sinks() if self.jobs else ())]:
            sink.history.check_database(self.db, sink.table)  # hashes flushed elsewhere: refused, exit 2
        if not self.options.once:
            self.control = ControlBox(s.staging_dir)
            if s.status_listen:
                from .statuspage import open_status_page
                self.status_page = open_status_page(s, lambda: self.health)
                self.run_info.status_listen = self.status_page.base_url
        self._save_run_info()
        log.info("started: %d sources, dedup %s, database %s, pid %s", len(self.sources), s.dedup,
                 redact_url(s.db_url), os.getpid())

    def _rate_limits(self) -> RateLimits:
        """Sources' `rate` budgets: this daemon's, or with SHARED the group's (parser/shared.py)."""
        if self.shared:
            from .shared import SharedRateLimits
            return SharedRateLimits(self.settings.db_url)
        return RateLimits()

    def _close(self) -> None:
        for part in (self.status_page, self.listener, self.scheduler, self.fetcher, self.sink, self.jobs):
            if part:
                part.close()
        self.schedule.close()
        if self.db:
            self.db.close()
        if self.db is not None:  # opened, so the lock is ours and daemon.json is this run's
            self.run_info.running = False
            self._save_run_info()
        self.lock.release()

    def _loop(self) -> int:
        if not self.options.dry_run:
            self.flush("start")  # a crash's leftovers first
        if self.options.once:
            return self._run_once()
        next_flush = self.clock() + self.settings.flush_interval
        while not self.stop.is_set():
            self._tick()
            for source in self.schedule.due(self.clock()):
                self._offer(source)
            if self.jobs:
                self.jobs.offer()
            self.scheduler.dispatch()
            self._absorb_finished(self._seconds_until_next(next_flush))
            if self.clock() >= next_flush:
                self.flush("interval")
                next_flush = self.clock() + self.settings.flush_interval  # SIGHUP may change it
            self._save_state()
            if time.monotonic() - self.tally_since >= SUMMARY_EVERY:
                self._summary()
            if self.reload_requested.is_set() or self.reading is not None:
                self.reload()
        self._keep_finished()
        flush_ok = self.flush("stop")
        self._summary()
        log.info("stopped on signal; staged records flushed" if flush_ok else
                 "stopped on signal; the flush failed, records stay in staging")
        return 0

    def _run_once(self) -> int:
        """--once: every selected source once (Retry-After apart) and the jobs to their end, side by side
        on the one worker loop; then one flush."""
        now = self.clock()
        # SHARED: the sources due that this daemon claims (the others' polls are theirs).
        for source in self.schedule.due(now, len(self.sources)) if self.shared else self.sources:
            state = self.schedule.state(source)
            if state.not_before > now:
                log.info("%s  skipped: the server asked to wait %.0f s more (Retry-After)",
                         source.name, state.not_before - now)
                continue
            self._offer(source)
        while not self.stop.is_set():
            if self.jobs:
                self.jobs.offer()
            if self.scheduler.idle() and (self.jobs is None or self.jobs.finished()):
                break
            self.scheduler.dispatch()
            self._absorb_finished(CONTROL_TICK)
        self._keep_finished()
        self._stage_received()
        self._summary()
        if self.options.dry_run:
            return 0
        flush_ok = self.flush("stop" if self.stop.is_set() else "once")
        if self.stop.is_set():
            log.info("stopped on signal; staged records flushed" if flush_ok else
                     "stopped on signal; the flush failed, records stay in staging")
        return 0 if flush_ok else 1

    def _keep_finished(self) -> None:
        """Stopping or done: what finished is kept; what the stop cut short is no failure (not absorbed)."""
        self._absorb_finished(0)
        if self.jobs:
            self.jobs.keep_finished()

    def _tick(self) -> None:
        """A few times a second at most: the status page's heartbeat, control requests, pushed records."""
        now = time.monotonic()
        self.health = Health(tick=now, flush_ok=self.health.flush_ok, reason=self.health.reason)
        if now - self.ticked < CONTROL_TICK and not self.reload_requested.is_set():
            return
        self.ticked = now
        self._apply_control()
        self._stage_received()

    def _save_state(self, *, force: bool = False) -> None:
        """state.json and daemon.json, in batches (parser/source_schedule.py's SAVE_EVERY), not per poll;
        `force` (a flush, the stop, an operator's request) writes both now."""
        saved = self.schedule.save(force=force)
        if saved:
            self.run_info.add(state_writes=1)
        if saved or force:
            self._save_run_info()

    def _summary(self) -> None:
        t = self.tally
        if t.polled:
            log.info("polled: %d sources in %.0f s: %d new records, %d duplicates, %d not modified, %d errors",
                     t.polled, time.monotonic() - self.tally_since, t.new, t.duplicates, t.not_modified, t.errors)
        self.tally, self.tally_since = PollTally(), time.monotonic()

    def _apply_control(self) -> None:
        """Main thread: `reset SOURCE` and `poll SOURCE` from the operator (parser/control.py)."""
        if self.control is None or not self.control.waiting():
            return
        now = self.clock()
        by_name = {s.name: s for s in self.sources}
        for request in self.control.take():
            self.run_info.add(control_requests=1)
            source = by_name.get(request.source)
            if source is None:
                self.control.answer(request, ok=False, done=True, code=2, message=self._not_polled(request.source))
                continue
            if not self.schedule.claim(source):  # SHARED: the group's row, claimed on this machine
                self.control.answer(request, ok=False, done=True, message=f"{source.name} is being polled by "
                                    "another daemon of the group (SHARED); ask again in a moment")
                continue
            state = self._state(source)
            if request.verb == "reset":
                log.info("%s  reset by the operator: %d failures cleared, polled now%s", source.name, state.failures,
                         f"; the feed found on its page ({redact_url(state.feed_url)}) forgotten, its url asked"
                         " again" if state.feed_url else "")
                state.failures, state.dead, state.not_before = 0, False, 0.0
                state.forget_discovery()
            elif state.not_before > now:
                self.control.answer(request, ok=False, done=True, message=f"{source.name} is held until "
                                    f"{iso(state.not_before)} at the server's request (Retry-After); "
                                    f"`reset {source.name}` polls it anyway")
                continue
            else:
                log.info("%s  poll requested by the operator", source.name)
            state.next_due = now
            self.schedule.poll_now(source)
            self.awaiting.setdefault(source.name, []).append(request)
            self.control.answer(request, ok=True, done=False, message=f"{request.verb} {source.name}: polling now")

    def _not_polled(self, name: str) -> str:
        source = next((s for s in self.settings.sources if s.name == name), None)
        if source is None:
            return f"no source named {name!r} in {self.settings.params_path}"
        if not protocol_of(source).polled:
            return f"{name} is a {source.protocol} source: it is never polled, its records are delivered"
        if not source.enabled:
            return f"{name} is disabled in {self.settings.params_path.name} (enabled=False)"
        return f"{name} is not polled by this daemon (it was started with --source or --job)"

    def _answer_awaiting(self, source: Source, state: SourceState, ok: bool) -> None:
        requests = self.awaiting.pop(source.name, [])
        if requests:  # the operator looks at `status` next: the files say what the answer says
            self.schedule.changed()
            self._save_state(force=True)
        for request in requests:
            self.control.answer(request, ok=ok, done=True, message=f"{request.verb} {source.name}: "
                                f"{state.last_outcome or 'polled'}")

    def _save_run_info(self) -> None:
        if not self.options.dry_run:
            self.run_info.save(daemon_status_path(self.settings.staging_dir), iso(self.wall()))

    # -- settings -----------------------------------------------------------------------------
    @staticmethod
    def _log_params(s: Settings) -> None:
        log.info("params: %s", s.params_path)
        for note in s.notes:
            log.info("params: %s", note)

    def request_reload(self) -> None:
        """From the SIGHUP handler: only a flag, the main thread reloads."""
        self.reload_requested.set()

    def reload(self) -> bool | None:
        """Read the params file again, off the main thread (parser/settings_read.py): this call starts
        the read, or looks at the one going on, and never waits; None while it goes on. A good file
        applies at once (sources added, removed or changed, intervals, FLUSH_INTERVAL, DEAD_AFTER); a
        bad one, or one still reading after READ_LIMIT, is refused and the running settings stay.
        What the open database, staging, fetcher and listener were built from needs a restart.
        A SIGHUP during a read is kept for the next one, which then reads the file as it is by then."""
        old = self.settings
        if self.reading is None:
            self.reload_requested.clear()
            self.reading = SettingsRead(old.params_path)
        try:
            new = self.reading.result()
            if new is None:
                return None
            self.reading = None
            sources = select_sources(new, self.options.sources)
        except (SettingsError, ValueError) as exc:
            self.reading = None
            logs.error_line("params", str(old.params_path), f"SIGHUP: refused, the running settings stay: {exc}")
            log.info("params: SIGHUP: %s refused, the running settings stay", old.params_path,
                     extra=logs.ALSO_IN_ERRORS)
            return False
        if (self.options.jobs or self.options.links_only) and not self.options.sources:
            sources = []  # as in __init__: --job alone runs no feeds
        restart = [name.upper() for name in RESTART_TO_APPLY if getattr(new, name) != getattr(old, name)]
        self.settings = replace(old, **{name: getattr(new, name) for name in RELOADABLE})
        before = {src.name: src for src in self.listened + self.sources}
        listened = pushed(sources)
        if listened != self.listened:
            restart.append("webhook and websub sources (the listener's)")
        self.sources = polled(sources)
        if any(src.full_text for src in self.sources) and self.poller is not None and self.poller.full_text is None:
            restart.append("full_text")
        after = {src.name: src for src in listened + self.sources}
        added = [n for n in after if n not in before]
        removed = [n for n in before if n not in after]
        changed = [n for n in after if n in before and after[n] != before[n]]
        for name in changed:
            state = self._state(after[name])  # a new url drops the old address's validators and redirects
            # A shorter interval counts from now, not from the next poll the old one planned.
            state.next_due = min(state.next_due, self.clock() + after[name].interval)
        self.schedule.set_sources(self.sources)
        log.info("params: SIGHUP: %s read again: %d sources (added: %s; removed: %s; changed: %s)%s",
                 old.params_path, len(after), ", ".join(added) or "none", ", ".join(removed) or "none",
                 ", ".join(changed) or "none",
                 f"; a restart is needed for {', '.join(restart)}" if restart else "")
        for note in new.notes:
            log.info("params: %s", note)
        return True

    def _seconds_until_next(self, next_flush: float) -> float:
        """How long the main thread may wait for finished work before something else is due."""
        soonest = min(next_flush, self.schedule.next_due())
        return min(max(soonest - self.clock(), 0.0), CONTROL_TICK)

    def _state(self, source: Source) -> SourceState:
        return self.schedule.state(source)

    # -- one poll -----------------------------------------------------------------------------
    def _offer(self, source: Source) -> None:
        """Hand one source's poll to the scheduler; its result comes back to _absorb."""
        state = self._state(source)
        polled = self._polled(source, state)
        self.scheduler.add(Work(url=polled.url,
                                run=partial(self._poll, polled, state.etag, state.last_modified,
                                            state.may_discover()),
                                absorb=partial(self._absorbed, source),
                                failed=partial(self._poll_crashed, source)))

    def _absorbed(self, source: Source, outcome: PollOutcome) -> None:
        outcome.source = source  # as params.py has it, not the address it was polled at
        self.finished_polls.append(outcome)

    def _absorb_finished(self, timeout: float) -> None:
        """Wait up to `timeout` for finished work, then absorb it: the polls' records staged together
        (one fsync for all of them, parser/sink.py), then each source's state and log lines."""
        self.scheduler.absorb(timeout)
        outcomes, self.finished_polls = self.finished_polls, []
        try:
            kept = [o for o in outcomes if not o.abandoned]  # cut short by the stop: no failure, no state
            staged = self._stage_polls(kept)
            for outcome in kept:
                self._absorb(outcome, self.tally, staged.get(id(outcome)))
        finally:
            for outcome in outcomes:
                self.schedule.done(outcome.source, self._state(outcome.source))

    def _stage_polls(self, outcomes: list[PollOutcome]) -> dict[int, Staged]:
        """id(outcome) -> what its records staged. A StorageError here is critical: let it rise."""
        polled = [o for o in outcomes if o.error is None and not o.result.not_modified]
        batches = [(o.parsed.records, self._feed_links(o.source, o)) for o in polled]
        return {id(o): staged for o, staged in zip(polled, self.sink.stage_many(batches), strict=True)}

    def _poll_crashed(self, source: Source, exc: BaseException) -> None:
        """A bug in a worker is that source's error, not the daemon's."""
        log.error("internal error polling %s:\n%s", source.name,
                  "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        self._absorbed(source, PollOutcome(source=source, seconds=0.0, error=f"internal error: {exc!r}"))

    @staticmethod
    def _polled(source: Source, state: SourceState) -> Source:
        """The source as it is polled: at its new address after a permanent redirect or a discovered
        feed; the credentials it was given go only to its own server (as fetch.py does on redirects)."""
        address = state.address()
        if address == source.url:
            return source
        if urlsplit(address)[:2] != urlsplit(source.url)[:2]:
            return replace(source, url=address, headers=MappingProxyType({}), auth=None)
        return replace(source, url=address)

    def _poll(self, source: Source, etag: str | None, last_modified: str | None,
              discover: bool = True) -> PollOutcome:
        """Worker thread: fetch and parse one source. Touches no shared state. Its seconds are its own:
        the wait for a slot on a host busy with other fetches is not counted."""
        started = time.monotonic()
        slot_wait()  # from zero for this poll
        outcome = PollOutcome(source=source, seconds=0.0)
        try:
            # Rate, pages, full text: whatever the source's protocol needs (parser/poll.py).
            outcome.result, outcome.parsed = self.poller.poll(source, etag=etag, last_modified=last_modified,
                                                              fetched=now_iso(self.wall), discover=discover)
        except FetchError as exc:
            outcome.error, outcome.fetch_error = str(exc), exc
            outcome.abandoned = self.stop.is_set() and exc.retry_after is None
        except ParseError as exc:
            outcome.error = str(exc)
        outcome.seconds = max(time.monotonic() - started - slot_wait(), 0.0)
        return outcome

    def _absorb(self, outcome: PollOutcome, summary: PollTally, staged: Staged | None) -> None:
        """Main thread: stage one source's records, then update its state and write its log lines."""
        source, now = outcome.source, self.clock()
        summary.polled += 1
        state = self._state(source)
        state.last_poll = iso(now)
        if outcome.error is not None:
            self.sink.say(f"{source.name}: error: {outcome.error}")
            self._failed(source, state, outcome, now)
            summary.errors += 1
            self.run_info.add(polls=1, errors=1)
            state.count(now, polls=1, errors=1)
            self._answer_awaiting(source, state, ok=False)
            return
        result = outcome.result
        state.last_status, state.last_success = result.status, iso(now)
        summary.fetch_bytes += len(result.body)
        self.run_info.add(polls=1, fetch_bytes=len(result.body))
        state.count(now, polls=1, bytes=len(result.body))
        self._follow_address(source, state, result, outcome.parsed)
        if not state.feed_url:  # its own address answered (a feed, or a 304 to a feed's validators)
            state.was_feed = True
        if result.not_modified:
            self.sink.say(f"{source.name}: not modified")
            log.info("%s  304 not modified  %.2f s", source.name, outcome.seconds)
            summary.not_modified += 1
            self.run_info.add(not_modified=1)
            state.last_outcome = "304"
            state.count(now, not_modified=1)
        else:
            for warning in outcome.parsed.warnings:
                logs.error_line(source.name, source.url, warning)
            for note in outcome.parsed.notes:
                if (source.name, note) not in self.noted:
                    self.noted.add((source.name, note))
                    log.info("%s  %s", source.name, note)
            self.sink.say(f"{source.name}: {len(outcome.parsed.records)} records, {len(staged.new)} new would be "
                          "staged")
            self.sink.show(staged.new)  # --dry-run prints them; a real sink has staged them
            log.info("%s  new %d  duplicates %d  %.2f s  %s", source.name, len(staged.new), staged.duplicates,
                     outcome.seconds, outcome.parsed.kind)  # kind: what the body was found to be
            summary.new += len(staged.new)
            summary.duplicates += staged.duplicates
            self.run_info.add(new=len(staged.new), duplicates=staged.duplicates)
            state.last_outcome = f"new {len(staged.new)}"
            state.count(now, new=len(staged.new), duplicates=staged.duplicates)
            if staged.new:
                state.last_new = iso(now)
            # Validators are kept only now that the records they cover are staged.
            state.etag, state.last_modified = result.etag, result.last_modified
            if result.future_last_modified:
                self._future_last_modified(source, result)
        if state.failures >= self.settings.dead_after:
            log.info("%s  back after %d failures", source.name, state.failures)
        state.failures, state.dead = 0, False
        state.next_due, state.delay = now + source.interval, source.interval
        self._answer_awaiting(source, state, ok=True)

    def _future_last_modified(self, source: Source, result: FetchResult) -> None:
        """fetch.py dropped the answer's Last-Modified: said once per source and run, as the server
        will not mend it by the next poll."""
        if (source.name, "future Last-Modified") in self.noted:
            return
        self.noted.add((source.name, "future Last-Modified"))
        logs.error_line(source.name, result.url, f"Last-Modified {result.future_last_modified} is in the future "
                        "(later than the server's own Date, or ours without one): not kept nor sent back as "
                        "If-Modified-Since, which a server comparing dates would answer 304 until that day; polls "
                        "go on without it. The server's clock or its files' dates are wrong: tell the site's "
                        "owner if it lasts (said once per run)")

    def _follow_address(self, source: Source, state: SourceState, result: FetchResult,
                        parsed: Parsed | None) -> None:
        """A 301/308 seen on two polls in a row moves the source for good (one redirect may be a
        server's mistake); a feed found on the source's HTML page is polled from then on."""
        if parsed is not None and parsed.feed_url:
            state.feed_url = parsed.feed_url
            log.info("%s  the address is an HTML page; it links to the feed %s, polled from now on", source.name,
                     redact_url(parsed.feed_url))
        if not result.moved_to:
            state.redirect_seen = ""
            return
        target = redact_url(result.moved_to)
        if state.redirect_seen != result.moved_to:
            state.redirect_seen = result.moved_to
            logs.error_line(source.name, state.address(), f"moved permanently to {target}; polled there from"
                            " now on if the next poll says so too")
            return
        state.redirect_seen = ""
        if state.feed_url:  # the redirect was the feed's (a discovered one), not the page's
            state.feed_url = result.moved_to
        else:
            state.moved_to = result.moved_to
        logs.error_line(source.name, source.url, f"moved permanently to {target} (twice in a row): polled "
                        "there from now on; update its url in params.py")

    def _failed(self, source: Source, state: SourceState, outcome: PollOutcome, now: float) -> None:
        state.failures += 1
        state.last_status = outcome.fetch_error.status if outcome.fetch_error is not None else None
        state.last_outcome = f"error: {outcome.error}"
        logs.error_line(source.name, state.address(), outcome.error)
        log.info("%s  error  %s  %.2f s", source.name, outcome.error, outcome.seconds, extra=logs.ALSO_IN_ERRORS)
        delay = source.interval
        dead_after = self.settings.dead_after
        exc = outcome.fetch_error
        if state.failures >= dead_after:
            state.dead = True
            delay = min(source.interval * 2 ** (state.failures - dead_after + 1), max(MAX_BACKOFF, source.interval))
            if state.failures == dead_after:
                why = "gone" if exc is not None and exc.status == 410 else "dead"
                log.info("%s  marked %s after %d failures in a row; polled with backoff", source.name, why,
                         state.failures, extra=logs.ALSO_IN_ERRORS)
                logs.error_line(source.name, source.url, f"marked {why} after {state.failures} failures in a "
                                f"row; next polls back off up to every {MAX_BACKOFF / 3600:.0f} h")
        elif exc is not None and exc.status == 410:
            delay = max(delay, MAX_BACKOFF / 4)  # gone: ask rarely, but keep asking
        if exc is not None and exc.retry_after is not None:
            wait_s = min(exc.retry_after, RETRY_AFTER_MAX)
            state.not_before, state.hold = now + wait_s, wait_s
            delay = max(delay, wait_s)
        state.next_due, state.delay = now + delay, delay

    def _feed_links(self, source: Source, outcome: PollOutcome) -> tuple[str, ...]:
        """The feed's own addresses (home page, configured and fetched URL), remembered for its pushes."""
        links = tuple(u for u in (outcome.parsed.home, source.url, outcome.result.url) if u)
        self.feed_links[source.name] = links
        return links

    def _stage_received(self) -> None:
        """Main thread: stage what the listener took in (webhook deliveries, WebSub pushes)."""
        if self.inbox is None:
            return

        def stage(name: str, records: list[dict]) -> None:
            staged = self.sink.stage(records, self.feed_links.get(name, ()))
            source = next((s for s in self.listened if s.name == name), None)
            if source is not None:  # counted like a poll's entries, for `status` and the page
                now, state = self.clock(), self._state(source)
                self.schedule.changed()
                state.last_success = state.last_poll = iso(now)
                state.count(now, new=len(staged.new), duplicates=staged.duplicates)
                if staged.new:
                    state.last_new = iso(now)
            log.info("%s  new %d  duplicates %d  received", name, len(staged.new), staged.duplicates)
        self.inbox.drain(stage)

    # -- flush --------------------------------------------------------------------------------
    def flush(self, why: str) -> bool:
        """Staged records into the database; on failure they stay staged and the next flush retries.
        The outcome goes to daemon.json and the status page's health."""
        started = time.monotonic()
        ok, written, already, error = self._flush(why)
        seconds = time.monotonic() - started
        self.run_info.flushed(at=iso(self.wall()), why=why, ok=ok, rows=written, already=already,
                              seconds=seconds, error=error)
        if ok:
            self.flush_failing_since = None
        elif self.flush_failing_since is None:
            self.flush_failing_since = iso(self.wall())
        self.health = Health(tick=time.monotonic(), flush_ok=ok, reason="ok" if ok else
                             f"the last flush failed (failing since {self.flush_failing_since}): {error}")
        self._save_state(force=True)  # every flush writes the states it waited to write
        return ok

    def _flush(self, why: str) -> tuple[bool, int, int, str | None]:
        """Every sink (the feeds' and each job's) into its table, with one error path: a table that
        cannot be written keeps its rows staged for the next flush, and the others go on."""
        self._stage_received()
        written = already = 0
        errors: list[str] = []
        for sink in [self.sink, *(self.jobs.sinks() if self.jobs else ())]:
            # The Bloom filter is saved here, not per poll: it can be megabytes, and a restart catches
            # up from the hash file anyway.
            sink.save()
            try:
                rows, known = sink.flush(self.db)
            except StorageError as exc:
                pending = sink.staging.pending_rows()
                logs.error_line("flush", redact_url(self.settings.db_url),
                                f"{exc}; {pending} records kept in staging for the next flush"
                                + ("" if sink is self.sink else f" (table {sink.table})"))
                log.info("flush (%s) of %s failed: %s", why, sink.table, exc, extra=logs.ALSO_IN_ERRORS)
                errors.append(str(exc) if sink is self.sink else f"{sink.table}: {exc}")
                continue
            written, already = written + rows, already + known
            # An interval with nothing to write says nothing; the last flush always says how it went.
            if rows or known or (sink is self.sink and why in ("stop", "once")):
                log.info("flush (%s): %d rows written to %s%s", why, rows, sink.table,
                         f", {known} already stored" if known else "")
        return not errors, written, already, "; ".join(errors) or None
