"""The cyclic pass: each polled source, when it is due, fetched and parsed in a worker thread
(parser/sources/poll.py), its new records staged in the main thread, then its state and log lines written.
With the jobs (parser/jobs/runner.py) it is one of the two techniques the daemon's loop drives through
parser/collectors.py; pushed records (webhook, WebSub) come through the inbox to the same sink.

A turn: offer() hands the due sources to the scheduler; each poll that comes back is kept
(_poll_back); stage() then stages all of the turn's records at once (one fsync, parser/pipeline/sink.py) and
hands each outcome to parser/feeds/poll_outcome.py: a failure and its backoff, or an answer with its
redirects, records and counts, each a transition of the source's state (parser/sources/state.py).
"""
from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..adapters.parsed import FeedInfo
from ..core.cpu_pool import CpuPool
from ..core.errors import FetchError, ParseError, ParseProcessError
from ..core.record import Record, now_iso
from ..core.runinfo import RunInfo
from ..fetch.http import Fetcher, slot_wait
from ..fetch.scheduler import Scheduler, Work
from ..group.parts import Parts
from ..pipeline.filters import over_age
from ..pipeline.fulltext import FullText
from ..pipeline.inbox import Inbox
from ..pipeline.last_polls import LastPolls
from ..pipeline.sink import Batch, RecordSink, Staged
from ..settings.params import Settings, Source
from ..sources.offering import EveryDue, Offering
from ..sources.poll import Keying, Poller
from ..sources.source_schedule import Schedule
from ..sources.state import MAX_BACKOFF, RETRY_AFTER_MAX, SourceState
from .poll_outcome import PollOutcome, PollRecorder, blocked_text

if TYPE_CHECKING:  # the listener's type for the checker; the module itself is imported in open_push
    from ..push.listener import Listener  # imported on first use: pushed sources only (start-up time)

log = logging.getLogger("parser")
STAGE_EVERY = 0.2  # seconds the polls back may wait for more to be staged with them (one fsync) ...
STAGE_MANY = 64    # ... unless this many are waiting
PARSE_MODULES = ("parser.pipeline.first_read", "parser.sources.parse_view")
# After a source's poll is taken: (source, its state, whether the poll succeeded); the operator's
# requests waiting for that poll are answered (parser/operate/operator_requests.py).
Polled = Callable[[Source, SourceState, bool], None]


def polled_at(source: Source, state: SourceState) -> Source:
    """The source as it is polled: at its new address after a permanent redirect or a discovered
    feed; the credentials it was given go only to its own server (as fetch/http.py does on redirects)."""
    address = state.address()
    if address == source.url:
        return source
    if urlsplit(address)[:2] != urlsplit(source.url)[:2]:
        return replace(source, url=address, headers=MappingProxyType({}), auth=None)
    return replace(source, url=address)


@dataclass(frozen=True)
class FeedLoop:
    """What the feed pass shares of the daemon's loop: the fetcher (and its host slots), the scheduler its
    polls are work items of, the event that stops the daemon, the clock the schedule runs on and the wall
    clock a record's `fetched` is stamped with."""
    fetcher: Fetcher
    scheduler: Scheduler
    stop: threading.Event
    clock: Callable[[], float]
    wall: Callable[[], float]


@dataclass(frozen=True)
class FeedMode:
    """What the run asks of the feed pass: which sources each turn offers (forever or --once: its parts'
    Offering, parser/sources/offering.py), and whether --source named them (`named`)."""
    offering: Offering = field(default_factory=EveryDue)
    named: bool = False


class FeedPass:
    def __init__(self, settings: Settings, sources: list[Source], *, listened: list[Source], loop: FeedLoop,
                 mode: FeedMode, run_info: RunInfo, parts: Parts, polled: Polled = lambda source, state, ok: None):
        """`sources`: the polled ones; `listened`: the pushed ones, whose records the inbox brings
        (parser/push/webhook.py, parser/push/websub.py); `parts`: this daemon's or the group's
        (parser/group/parts.py); `polled`: called after each poll is taken. Opens the schedule and the
        states (state.json, the group's, or a dry run's in memory), then the feeds' sink (table `items`, or
        a dry run's PrintSink): both are the parts'."""
        fetcher = loop.fetcher
        self.settings, self.sources, self.listened = settings, sources, listened
        self.scheduler, self.clock, self.wall, self.stop = loop.scheduler, loop.clock, loop.wall, loop.stop
        self.offering, self.parts, self.polled = mode.offering, parts, polled
        self.schedule = self._open_schedule(fetcher, named=mode.named)
        # Per source, the keys and digests of its last poll (parser/pipeline/last_polls.py): its next poll reads
        # whole only the entries new or changed since, and an entry changed is staged as an update. Saved
        # by the sink with the hashes at each flush; none with DEDUP "off" (nothing is known to be stored).
        # A dry run reads them, so that it shows an edit as the update a real run would stage; its PrintSink
        # takes none to save.
        remember = settings.dedup != "off"
        try:
            self.last_polls = LastPolls(settings.staging_dir / "known.tsv" if remember else None,
                                      settings.staging_dir / "hashes.txt")
            self.sink = parts.items_sink(settings, last_polls=self.last_polls if remember else None)
        except BaseException:  # hashes that do not fit the settings (exit 2): the group's claims given back
            self.schedule.close()
            raise
        self.recorder = PollRecorder(self.sink, run_info, dead_after=settings.dead_after)
        self.inbox: Inbox | None = None  # webhook deliveries and WebSub pushes: open_push()
        self.listener: Listener | None = None
        self.in_flight = 0  # polls offered and not back yet
        self.back: list[PollOutcome] = []  # back from the workers, taken together by stage()
        self.back_since = 0.0  # when the first of them came back
        # Per source, the feed's own addresses from its last poll: a pushed entry linking to one of
        # them (a podcast's show page) is not identified by that link either (parser/pipeline/identity.py).
        self.feed_links: dict[str, tuple[str, ...]] = {}
        self.once_lines_logged: set[str] = set()  # identity's once-per-source lines said from parse processes
        # A body's parse is bounded as its fetch is (DEADLINE): one past it is abandoned and refused. The
        # forkserver loads what a parse process runs (the source comes as a ParseView), so that it starts
        # without importing it and shares those pages with its siblings.
        self.cpu = CpuPool(settings.parse_processes, preload=PARSE_MODULES,
                           on_demand=settings.parse_on_demand, timeout=settings.deadline)
        full_text = FullText(fetcher.with_timeout(settings.full_text_timeout), parts.full_text_memory()) \
            if any(src.full_text for src in sources) else None
        self.poller = Poller(fetcher, stop=self.stop, max_wait=settings.deadline, rates=parts.rate_limits(),
                             full_text=full_text, cpu=self.cpu)

    def _open_schedule(self, fetcher: Fetcher, *, named: bool) -> Schedule[Source]:
        schedule = self.parts.schedule(self.clock, every=lambda: self.settings.sources, named=named)
        schedule.load(self.sources, lambda src: max(src.interval, MAX_BACKOFF, RETRY_AFTER_MAX),
                      spread=self.offering.spread)
        now = self.clock()
        for state in list(schedule.states.values()):  # a source's Retry-After holds its host's crawl too
            fetcher.hold_crawl(state.address(), state.not_before - now)
        return schedule

    def open_push(self, fetcher: Fetcher) -> None:
        """The inbox, drained at every flush (even a killed run's deliveries), and, in forever mode,
        the listener that fills it."""
        s = self.settings
        # Delivery ids and subscriptions are the group's with SHARED; without pushed sources, a leftover
        # inbox of an earlier run is still drained.
        self.inbox = self.parts.inbox(s.staging_dir) if self.listened else Inbox(s.staging_dir)
        if self.listened and self.offering.listens:
            from ..push.endpoints import open_listener  # imported on first use: pushed sources only (start-up time)
            self.listener = open_listener(s, self.listened, self.inbox, fetcher, self.stop, self.parts.subscriber())

    def use(self, settings: Settings, sources: list[Source]) -> None:
        """SIGHUP: the settings and polled sources read again (parser/operate/reload.py)."""
        self.settings, self.sources = settings, sources
        self.recorder.dead_after = settings.dead_after

    # -- the loop's calls (parser/collectors.py) ---------------------------------------------------
    def offer(self) -> None:
        """Hand the sources the run's Offering says to the scheduler: the due ones (SHARED: those this daemon
        claims); --once: every selected source once, at the first call (a server's Retry-After still honoured)."""
        for source in self.offering.sources(self.schedule, self.sources, self.clock()):
            self._offer(source)

    def stage(self) -> None:
        """Main thread, after the scheduler's absorb: the polls back, their records staged together
        (one fsync for all of them, parser/pipeline/sink.py), then each source's state and log lines.
        While more polls are under way, what came back waits for them up to STAGE_EVERY seconds: on a
        first poll of 1,000 feeds, the turns took one or two polls each, and so many fsyncs."""
        if self.back and self.in_flight and len(self.back) < STAGE_MANY \
                and time.monotonic() - self.back_since < STAGE_EVERY:
            return
        self._stage()

    def _stage(self) -> None:
        outcomes, self.back = self.back, []
        try:
            kept = [o for o in outcomes if not o.abandoned]  # cut short by the stop: no failure, no state
            staged = self._stage_records(kept)
            for outcome in kept:
                state = self.schedule.state(outcome.source)
                ok = self.recorder.record(outcome, staged.get(id(outcome)), state, self.clock())
                self.polled(outcome.source, state, ok)  # the operator's requests waiting for it answered
        finally:
            for outcome in outcomes:
                self.schedule.done(outcome.source, self.schedule.state(outcome.source))

    def keep_finished(self) -> None:
        """Stopping or done: what came back is kept; what the stop cut short is no failure. With every
        poll back, the parse processes are ended now, not at close(): the last flush's memory and theirs
        are never held at the same time."""
        self._stage()
        if not self.in_flight:
            self.cpu.close()

    def finished(self) -> bool:
        """--once: every poll offered has come back and been taken."""
        return self.offering.offered_all() and not self.in_flight and not self.back

    def sinks(self) -> list[RecordSink]:
        return [self.sink]

    def next_due(self) -> float:
        return self.schedule.next_due()

    def save(self, *, force: bool = False) -> bool:
        """state.json (or the group's states), in batches (parser/sources/source_schedule.py's SAVE_EVERY)."""
        return self.schedule.save(force=force)

    def summary(self, *, due_only: bool = False) -> None:
        """The "polled:" line (parser/feeds/poll_outcome.py)."""
        self.recorder.summary(due_only=due_only)

    def known_sources(self) -> list[tuple[Source, SourceState, FeedInfo | None]]:
        """Each source, polled or pushed, with its state and what its feed last said of itself this run
        (None: nothing yet), for the `sources` table (parser/flush_all.py)."""
        return [(source, self.schedule.state(source), self.recorder.feed_info.get(source.name))
                for source in (*self.sources, *self.listened)]

    def running(self) -> tuple[list[Source], bool]:
        """For a reload: the polled sources now, and whether full text is set up."""
        return self.sources, self.poller.full_text is not None

    def close(self) -> None:
        """The sink and the schedule (the listener is closed by the daemon, before the workers), then the
        parse processes."""
        self.sink.close()
        self.cpu.close()
        self.schedule.close()

    # -- one poll ------------------------------------------------------------------------------------
    def _offer(self, source: Source) -> None:
        state = self.schedule.state(source)
        address = polled_at(source, state)
        self.in_flight += 1
        keying = Keying(rule=(self.settings.unique_fields, self.settings.hash, "items"),
                        last_poll=self.last_polls.get(source.name), feed_urls=(source.url,))
        self.scheduler.add(Work(url=address.url,
                                run=partial(self._poll, address, state.etag, state.last_modified,
                                            state.may_discover(), keying),
                                absorb=partial(self._poll_back, source),
                                failed=partial(self._poll_crashed, source)))

    def _poll(self, source: Source, etag: str | None, last_modified: str | None,
              discover: bool = True, keying: Keying | None = None) -> PollOutcome:
        """Worker thread: fetch and parse one source, and drop what its keep/block rules drop. Touches no
        shared state. Its seconds are its own: the wait for a slot on a host busy with other fetches is
        not counted."""
        started = time.monotonic()
        slot_wait()  # from zero for this poll
        result = parsed = keyed = error = fetch_error = None
        abandoned = False
        blocked = 0
        try:
            # Rate, pages, full text: whatever the source's protocol needs (parser/sources/poll.py).
            result, parsed, keyed = self.poller.poll(source, etag=etag, last_modified=last_modified,
                                                     fetched=now_iso(self.wall), discover=discover, keying=keying)
        except FetchError as exc:
            error, fetch_error = str(exc), exc
            abandoned = self.stop.is_set() and exc.retry_after is None
        except ParseError as exc:
            error = str(exc)
            abandoned = self.stop.is_set() and isinstance(exc, ParseProcessError)
        too_old = 0
        if parsed is not None:
            # Never staged nor hashed, so a rule changed later lets them in (parser/pipeline/filters.py).
            records, keys, blocked = source.entry_filter.split(parsed.records, keyed.keys if keyed else None)
            # Older than the source's RETAIN items: the next pass would delete them, and one deleted must
            # not come back, edited or out of UNIQUE_WINDOW (parser/retention.py).
            records, keys, too_old = over_age(records, self.settings.retain_of(source).items, self.wall(), keys)
            if blocked or too_old:
                parsed = replace(parsed, records=records)
                keyed = replace(keyed, keys=keys) if keyed and keys is not None else keyed
        return PollOutcome(source=source, seconds=max(time.monotonic() - started - slot_wait(), 0.0),
                           result=result, parsed=parsed, keyed=keyed, error=error, fetch_error=fetch_error,
                           abandoned=abandoned, blocked=blocked, too_old=too_old)

    def _poll_back(self, source: Source, outcome: PollOutcome) -> None:
        """Main thread: a poll back from its worker, kept for this turn's stage()."""
        self.in_flight -= 1
        if not self.back:
            self.back_since = time.monotonic()
        self.back.append(replace(outcome, source=source))  # as params.py has it, not the address polled

    def _poll_crashed(self, source: Source, exc: BaseException) -> None:
        """A bug in a worker is that source's error, not the daemon's."""
        log.error("internal error polling %s:\n%s", source.name,
                  "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        self._poll_back(source, PollOutcome(source=source, seconds=0.0, error=f"internal error: {exc!r}"))

    def _stage_records(self, outcomes: list[PollOutcome]) -> dict[int, Staged]:
        """id(outcome) -> what its records staged. A StorageError here is critical: let it rise."""
        answered = [o for o in outcomes if o.error is None and not o.answer.not_modified]
        results = self.sink.stage_many([self._batch(o) for o in answered])
        for outcome, staged in zip(answered, results, strict=True):
            if outcome.keyed is not None:
                self._say(outcome.keyed.log_lines)
            if self.last_polls.path is not None:  # packed: 16 bytes an entry (parser/pipeline/last_polls.py)
                self.last_polls.put(outcome.source.name, staged.digests)
        return {id(o): staged for o, staged in zip(answered, results, strict=True)}

    def _batch(self, outcome: PollOutcome) -> Batch:
        """One poll's records for the sink (its keep/block rules applied in the worker, _poll)."""
        parsed, keyed = outcome.parsed_body, outcome.keyed
        source = outcome.source
        keys, repeated, digests = None, 0, None
        if keyed is not None:
            keys, repeated = keyed.keys, len(keyed.repeated)
            # The digests of what is kept and of the entries left unread, not of the blocked ones: those are
            # never hashed, so they must not be known either (a changed rule lets them in).
            digests = {key: keyed.digests[key] for key in (*keys, *keyed.repeated) if key in keyed.digests}
        return Batch(parsed.records, self._feed_links(source, outcome), keys, repeated,
                     digests=digests or None, previous=self.last_polls.get(source.name),
                     updates=source.updates != "ignore" and self.last_polls.path is not None
                     and self.last_polls.checks(source.name))

    def _say(self, lines: list[tuple[bool, str]]) -> None:
        """Identity's lines from where the body was parsed; a once-per-source line once per run."""
        for once, line in lines:
            if once and line in self.once_lines_logged:
                continue
            if once:
                self.once_lines_logged.add(line)
            log.info("%s", line)

    def _feed_links(self, source: Source, outcome: PollOutcome) -> tuple[str, ...]:
        """The feed's own addresses (home page, configured and fetched URL), remembered for its pushes."""
        links = tuple(u for u in (outcome.parsed_body.home, source.url, outcome.answer.url) if u)
        self.feed_links[source.name] = links
        return links

    # -- pushed records ---------------------------------------------------------------------------
    def take_pushed(self) -> None:
        """Main thread: stage what the listener took in (webhook deliveries, WebSub pushes)."""
        if self.inbox is None:  # --dry-run
            return

        def stage(name: str, records: list[Record]) -> None:
            source = next((s for s in self.listened if s.name == name), None)
            blocked = 0
            if source is not None:  # its keep/block rules and its retention, as for its polls (_poll)
                records, _, blocked = source.entry_filter.split(records)
                records, _, too_old = over_age(records, self.settings.retain_of(source).items, self.wall())
                blocked += too_old
            remember = source is not None and source.updates != "ignore" and self.last_polls.path is not None
            staged = self.sink.stage_many([Batch(records, self.feed_links.get(name, ()),
                                                 previous=self.last_polls.get(name),
                                                 updates=remember and self.last_polls.checks(name))])[0]
            if remember:
                self.last_polls.merge(name, staged.digests)
            if source is not None:  # counted like a poll's entries, for `status` and the page
                self.schedule.changed()
                self.recorder.stats.received(self.schedule.state(source), self.clock(), new=len(staged.new),
                                          duplicates=staged.duplicates, blocked=blocked)
            log.info("%s  new %d  duplicates %d%s  received", name, len(staged.new), staged.duplicates,
                     blocked_text(blocked))
        self.inbox.drain(stage)
