"""SHARED = True: the daemon's side of several daemons sharing one PostgreSQL (SQL in db/coord.py).

SharedSchedule stands in for the local schedule (state.json and each state's next_due), with the
same calls as parser/sources/source_schedule.py's SourceSchedule (load, set_sources, due, next_due, done,
save, state, changed, poll_now): due sources are claimed from the database with a lease,
their state comes with them into `states`, and once polled their state and next due time go back.
The daemon polls and absorbs exactly as it does alone; only where sources are picked and where
their state is written differ.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, MutableMapping, Sequence

from db.coord import Coordinator, PerThread
from db.coord_jobs import JobTables

from ..core import logs
from ..core.errors import StorageError
from ..core.urls import redact_url
from ..fetch.ratelimit import Rate, RateLimits, pause
from ..settings.params import Settings, Source
from ..sources.protocols import polled
from ..sources.state import SourceState, load_state, on_disk, state_of

log = logging.getLogger("parser")
# Not written to the shared row: due times are the daemon's schedule clock, the row's due_at is the
# database's (the machines may disagree about the time of day).
LOCAL_FIELDS = ("next_due", "not_before")
RETRY_UNREACHABLE = 5.0  # seconds between looks at a database that did not answer
# Seconds a look at the table stands: a claim that found nothing due, or the soonest due time, is
# not asked again sooner (another daemon's dead lease or a SIGHUP shows at most this late).
LOOK_AGAIN = 1.0


class SharedSchedule:
    """The sources' schedule in the shared database. Main thread only (as the daemon's states)."""

    def __init__(self, settings: Settings, clock: Callable[[], float], *,
                 every: Callable[[], Sequence[Source]], named: bool = False,
                 states: MutableMapping[str, SourceState] | None = None):
        """`every()`: params.py's sources now (enabled or not), for the table; `named`: started with
        --source, so only this daemon's sources are claimed (else every enabled one of the file,
        which is the same on every machine)."""
        self.settings = settings
        self.clock = clock
        self.every = every
        self.named = named
        self.states: MutableMapping[str, SourceState] = {} if states is None else states
        self.coord = Coordinator(settings.db_url)
        self.batch = settings.concurrency
        self.sources: dict[str, Source] = {}
        self.finished: list[tuple[str, dict, float, float]] = []
        self.outage: str | None = None  # the database's error while it is unreachable
        self.taken: list[Source] = []   # claimed for the operator, polled in the next due()
        self._out: set[str] = set()     # claimed by this daemon, not done yet
        self.claimed_at = time.monotonic()  # the last claim or lease renewal
        self._next_look = 0.0               # (daemon clock) no claim before, when the last found none
        self._soonest = (float("-inf"), 0.0)  # (monotonic, seconds) the table's soonest due, as last asked
        self._seen_at = time.monotonic()    # this daemon's listing last marked as running
        self._group: tuple | None = None    # the other daemons' listings as last seen: (owner, digest)

    # -- the schedule's calls ---------------------------------------------------------------------
    def load(self, sources: Iterable[Source], longest_delay: Callable[[Source], float] | None = None, *,
             spread: bool = False) -> None:
        """The tables (made once for the group) and params.py's sources in them. The due times are
        the group's, so neither a local pull-back nor a spread applies."""
        self.coord.create_schema()
        self.set_sources(sources)
        log.info("shared: daemon %s, lease %.0f s, claims up to %d sources at a time", self.coord.owner,
                 self.settings.shared_lease, self.batch)

    def set_sources(self, sources: Iterable[Source]) -> None:
        """At start and after SIGHUP: this daemon polls `sources`; the table gets all of params.py's."""
        self.sources = {s.name: s for s in sources}
        # Each url as state.json writes it (on_disk): no password or token in the group's table.
        self.coord.sync_sources(((s.name, redact_url(s.url), s.interval, s.enabled) for s in polled(self.every())),
                                alive=self._alive())
        self._seen_at, self._group = time.monotonic(), None
        self._compare_files()

    def _alive(self) -> float:
        """Seconds a daemon's listing counts without a sign of life (it marks itself every lease/3)."""
        return 3 * self.settings.shared_lease

    def _compare_files(self) -> None:
        """Say when the running daemons' params.py files list other sources than this one. Each
        daemon says it in its own log, at its start or SIGHUP and when another daemon's file changes:
        a source one file lacks stays enabled while another running daemon lists it, and the group
        polls it; it is disabled once no running daemon's file has it."""
        try:
            group = self.coord.seen(self._alive())
            if group == self._group:
                return
            self._group = group
            (only_elsewhere, elsewhere_names), (only_here, here_names) = self.coord.disagreement(self._alive())
        except StorageError as exc:
            self._unreachable(exc)
            return
        if only_elsewhere:
            logs.error_line("shared", "params.py", "other running daemons' params.py enable "
                            f"{_some(only_elsewhere, elsewhere_names)} that this one lacks or disables; they stay "
                            "enabled and the daemons that list them poll them: deploy one params.py to every machine")
        if only_here:
            logs.error_line("shared", "params.py", f"this params.py enables {_some(only_here, here_names)} that the "
                            "other running daemons' files do not; this daemon polls them: deploy one params.py to "
                            "every machine")
        if only_elsewhere or only_here:
            log.warning("shared: the running daemons' params.py files disagree: %d sources listed elsewhere, not "
                        "here; %d here, nowhere else (errors.log names them)", only_elsewhere, only_here)
        elif group:
            log.info("shared: this params.py lists the same sources as the %d other running daemons", len(group))

    def each_once(self, now: float, sources: Sequence[Source]) -> list[Source]:
        """--once (parser/feeds/offering.py): as many of the group's due sources as this daemon lists, claimed."""
        return self.due(now, len(sources))

    def due(self, now: float, limit: int | None = None) -> list[Source]:
        """Claim due sources (CONCURRENCY at a time unless `limit` says); their shared state replaces
        what this daemon last knew of them."""
        if not self.sources:  # --job alone: no feeds
            return []
        if time.monotonic() - self._seen_at > self.settings.shared_lease / 3:
            self._seen_at = time.monotonic()
            self._compare_files()  # marks this daemon's listing as running, and notices a changed file
        if limit is None and len(self._out) > self.batch // 2:
            return []  # enough in flight: claim when half the window is free, not at every result
        if not self.taken and now < self._next_look:
            return []  # nothing was due at the last look, nor since (next_due says when)
        try:
            self.save(force=True)  # what an earlier outage kept back, first
            names = list(self.sources) if self.named else None
            claimed = self.coord.claim_sources(limit or self.batch, self.settings.shared_lease, names)
        except StorageError as exc:
            self._unreachable(exc)
            return []
        self.outage = None
        self.claimed_at = time.monotonic()
        self._soonest = (float("-inf"), 0.0)  # the claim changed the table: ask afresh
        self._next_look = 0.0 if claimed else now + min(LOOK_AGAIN, self._seconds_to_next(now))
        due, self.taken = self.taken, []  # claimed by take(): polled first
        for row in claimed:
            source = self.sources.get(row.name)
            if source is None:  # another daemon's newer params.py: not ours to poll; give it back
                self.finished.append((row.name, row.state, 0.0, row.hold_left))
                continue
            self._adopt(source, row.state, row.hold_left, now)
            due.append(source)
        self._out.update(s.name for s in due)
        return due

    def next_due(self, now: float | None = None) -> float:
        """When (on the daemon's clock) the soonest source comes due for any daemon to claim; inf
        when this daemon polls none."""
        now = self.clock() if now is None else now
        if not self.sources:
            return float("inf")
        if self._out and len(self._out) > self.batch // 2:
            return now + LOOK_AGAIN  # busy: the next claim comes as polls finish
        return max(now + self._seconds_to_next(now), self._next_look)

    def _seconds_to_next(self, now: float) -> float:
        """Seconds until the soonest source comes due in the table (asked at most every LOOK_AGAIN)."""
        at, seconds = self._soonest
        if time.monotonic() - at < LOOK_AGAIN:
            return max(0.0, seconds - (time.monotonic() - at))
        try:
            found = self.coord.seconds_to_next_source(list(self.sources) if self.named else None)
        except StorageError as exc:
            self._unreachable(exc)
            return RETRY_UNREACHABLE
        seconds = 60.0 if found is None else found
        self._soonest = (time.monotonic(), seconds)
        return seconds

    def done(self, source: Source, state: SourceState | None = None) -> None:
        """One polled (or abandoned) source: its state and next due time, written at the next save()."""
        self._out.discard(source.name)
        state, now = state or self.state(source), self.clock()
        due_in = max(state.next_due, state.not_before) - now
        if due_in <= 0:
            # Abandoned by a stop: its request may have reached the server, so it counts as a poll
            # for the group's spacing (the next one, by any daemon, brings what this one missed).
            due_in = source.interval
        shared = {k: v for k, v in on_disk(state).items() if k not in LOCAL_FIELDS}
        self.finished.append((source.name, shared, due_in, state.not_before - now))
        if self._out and time.monotonic() - self.claimed_at > self.settings.shared_lease / 3:
            # A long cycle (rate waits, full text, a slow server within DEADLINE): the sources still
            # in it stay this daemon's, so no other daemon polls them meanwhile.
            try:
                self.coord.renew_sources(self.settings.shared_lease)
                self.claimed_at = time.monotonic()
            except StorageError as exc:
                self._unreachable(exc)

    def save(self, *, force: bool = False) -> bool:
        """Polled sources' state and next due time into the table; kept for the next try while the
        database is away (their leases end meanwhile, and another daemon may poll them again)."""
        if not self.finished:
            return False
        try:
            kept = self.coord.finish_sources(self.finished)
        except StorageError as exc:
            self._unreachable(exc)
            return False
        finished, self.finished = self.finished, []
        if kept < len(finished):
            log.info("shared: %d of %d polled sources had passed their lease to another daemon (a poll "
                     "longer than SHARED_LEASE); their state is that daemon's", len(finished) - kept, len(finished))
        return True

    def state(self, source: Source) -> SourceState:
        return state_of(self.states, source.name, source.url)

    def changed(self) -> None:
        """A pushed record counted in a state: the group's row gets it with the source's next poll."""

    def claim(self, source: Source) -> bool:
        """An operator's `poll`/`reset` on this machine: the source is claimed here now, due or not,
        with the group's state (before the request changes it); False while another daemon holds it."""
        return self.take(source, self.clock())

    def poll_now(self, source: Source) -> bool:
        """Polled in the next due(): claimed by claim() (or now, when it was not)."""
        return self.take(source, self.clock())

    def take(self, source: Source, now: float) -> bool:
        if source.name in self._out or source in self.taken:
            return True  # being polled here already, or claimed for the next due()
        try:
            claimed = self.coord.claim_source(source.name, self.settings.shared_lease)
        except StorageError as exc:
            self._unreachable(exc)
            return False
        if claimed is None:
            return False
        self._adopt(source, claimed.state, claimed.hold_left, now)
        if source not in self.taken:
            self.taken.append(source)
        return True

    def close(self) -> None:
        """Write what was polled, give back what was claimed and not polled (a stop mid-cycle)."""
        try:
            self.save(force=True)
            released = self.coord.release_sources()
            self.coord.unlist()
            if released:
                log.info("shared: %d claimed sources given back unpolled", released)
        except StorageError:
            pass  # their leases end by themselves
        finally:
            self.coord.close()

    # -- helpers ------------------------------------------------------------------------------------
    def _adopt(self, source: Source, shared: dict, hold_left: float, now: float) -> None:
        state = load_state(shared, url=source.url)
        # claimed: due now, whatever this daemon's clock said; a Retry-After kept, for `poll`
        state.scheduled_by_group(now, due_in=0.0, hold_left=hold_left)
        self.states[source.name] = state

    def _unreachable(self, exc: StorageError) -> None:
        """The database is away: nothing is claimed (the group's schedule is there), the daemon keeps
        running (flushes retry too) and asks again; said once per outage."""
        if self.outage is None:
            logs.error_line("shared", redact_url(self.settings.db_url), f"{exc}; no source is claimed until "
                            "the database answers again")
            log.info("shared: %s; no source is claimed until the database answers", exc, extra=logs.ALSO_IN_ERRORS)
        self.outage = str(exc)


def _some(count: int, names: list[str]) -> str:
    more = ", ..." if count > len(names) else ""
    return f"{count} source{'s' if count != 1 else ''} ({', '.join(names)}{more})"


def group_view(settings: Settings, now: float) -> tuple[dict[str, SourceState], dict[str, dict[str, int]]]:
    """For `status` and the status page with SHARED = True: every source's state as the group has it
    (not only what this machine polled), and each job's link counts from the shared frontier.
    Raises StorageError when the database does not answer."""
    coord = Coordinator(settings.db_url)
    try:
        states = {}
        for name, shared, due_in, hold_left in coord.source_states():
            state = load_state(shared)
            state.scheduled_by_group(now, due_in=due_in, hold_left=hold_left)
            states[name] = state
        tables = JobTables(coord)
        links = {job.name: tables.link_counts(job.name) for job in settings.link_jobs}
        return states, links
    finally:
        coord.close()


class SharedRateLimits(RateLimits):
    """A source's `rate` budget for the whole group: whichever daemon polls it next spends from the
    same bucket (parser_rates), so handing a source to another daemon gives it no fresh burst.
    Worker threads: a connection each. While the database is away, this daemon's own buckets."""

    def __init__(self, db_url: str):
        super().__init__()
        self.coords = PerThread(db_url)
        self._rates: dict[str, Rate] = {}

    def wait(self, name: str, rate: Rate | None, max_wait: float, stop: threading.Event) -> float | None:
        if rate is None:
            return 0.0
        self._rates[name] = rate
        try:
            wait = self.coords.get().take_rate(name, rate.burst, rate.per_second, max_wait)
        except StorageError:
            return super().wait(name, rate, max_wait, stop)
        return pause(wait, stop)

    def next_free(self, name: str) -> float:
        rate = self._rates.get(name)
        if rate is None:
            return 0.0
        try:
            return self.coords.get().rate_free_in(name, rate.burst, rate.per_second)
        except StorageError:
            return super().next_free(name)
