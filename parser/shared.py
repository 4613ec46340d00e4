"""SHARED = True: the daemon's side of several daemons sharing one PostgreSQL (SQL in db/coord.py).

SharedSchedule stands in for the local schedule (state.json and each state's next_due): due sources
are claimed from the database with a lease, their state comes with them into the daemon's `states`,
and once polled their state and next due time go back. The daemon polls and absorbs exactly as it
does alone; only where sources are picked and where their state is written differ.
"""
from __future__ import annotations

import logging
import time
from collections.abc import MutableMapping, Sequence

from db.coord import Coordinator

from . import logs
from .errors import StorageError
from .settings import Settings, Source
from .state import SourceState, load_state
from .urls import redact_url

log = logging.getLogger("parser")
# Not written to the shared row: due times are the daemon's schedule clock, the row's due_at is the
# database's (the machines may disagree about the time of day).
LOCAL_FIELDS = ("next_due", "not_before")
RETRY_UNREACHABLE = 5.0  # seconds between looks at a database that did not answer


class SharedSchedule:
    """The sources' schedule in the shared database. Main thread only (as the daemon's states)."""

    def __init__(self, settings: Settings, sources: Sequence[Source], states: MutableMapping[str, SourceState],
                 *, named: bool = False, batch: int | None = None):
        self.settings = settings
        self.states = states
        self.coord = Coordinator(settings.db_url)
        # Started with --source: only those, whether or not params.py enables them; else every
        # enabled source of params.py (the same file on every machine).
        self.named = named
        self.batch = batch or settings.concurrency
        self.by_name: dict[str, Source] = {}
        self.finished: list[tuple[str, dict, float]] = []
        self.outage: str | None = None  # the database's error while it is unreachable
        self.taken: list[Source] = []   # claimed for the operator, polled in the next cycle
        self.claimed_at = time.monotonic()  # the last claim or lease renewal
        self.sources = sources

    def open(self) -> None:
        self.coord.create_schema()
        self.sync(self.sources, self.settings.sources)
        log.info("shared: daemon %s, lease %.0f s, claims up to %d sources at a time", self.coord.owner,
                 self.settings.shared_lease, self.batch)

    def sync(self, sources: Sequence[Source], every: Sequence[Source]) -> None:
        """params.py's sources (`every` of them, enabled or not) into the table, at start and after
        SIGHUP; this daemon polls `sources`."""
        self.sources = list(sources)
        self.by_name = {s.name: s for s in self.sources}
        polled = [s for s in every if s.protocol != "webhook"]
        self.coord.sync_sources((s.name, s.url, s.interval, s.enabled) for s in polled)

    def _names(self) -> list[str] | None:
        return list(self.by_name) if self.named else None

    def due(self, now: float, limit: int | None = None) -> list[Source]:
        """Claim due sources; their shared state replaces what this daemon last knew of them."""
        if not self.by_name:  # --job alone: no feeds
            return []
        try:
            self.save()  # what an earlier outage kept back first
            claimed = self.coord.claim_sources(limit or self.batch, self.settings.shared_lease, self._names())
        except StorageError as exc:
            self._unreachable(exc)
            return []
        self.outage = None
        self.claimed_at = time.monotonic()
        due, self.taken = self.taken, []  # claimed by take(): polled first
        for row in claimed:
            source = self.by_name.get(row.name)
            if source is None:  # another daemon's newer params.py: not ours to poll; give it back
                self.finished.append((row.name, row.state, 0.0))
                continue
            state = load_state(row.state, url=source.url)
            state.next_due = state.not_before = now
            self.states[row.name] = state
            due.append(source)
        return due

    def take(self, source: Source, now: float) -> bool:
        """Claim one source now, due or not (the operator's `poll` or `reset` on this machine); False
        while another daemon holds it. Polled in the next cycle, with the group's state."""
        try:
            claimed = self.coord.claim_source(source.name, self.settings.shared_lease)
        except StorageError as exc:
            self._unreachable(exc)
            return False
        if claimed is None:
            return False
        state = load_state(claimed.state, url=source.url)
        state.next_due = state.not_before = now
        self.states[source.name] = state
        if source not in self.taken:
            self.taken.append(source)
        return True

    def next_due(self, now: float) -> float:
        """When (on the daemon's clock) the soonest source comes due, for any daemon to claim."""
        try:
            seconds = self.coord.seconds_to_next_source(self._names()) if self.by_name else None
        except StorageError as exc:
            self._unreachable(exc)
            return now + RETRY_UNREACHABLE
        return now + (60.0 if seconds is None else seconds)

    def _unreachable(self, exc: StorageError) -> None:
        """The database is away: nothing is claimed (the group's schedule is there), the daemon keeps
        running (flushes retry too) and asks again; said once per outage."""
        if self.outage is None:
            logs.error_line("shared", redact_url(self.settings.db_url), f"{exc}; no source is claimed until "
                            "the database answers again")
            log.info("shared: %s; no source is claimed until the database answers", exc, extra=logs.ALSO_IN_ERRORS)
        self.outage = str(exc)

    def done(self, source: Source, state: SourceState, now: float) -> None:
        """One polled source, written at the next save()."""
        due_in = max(state.next_due, state.not_before) - now
        shared = {k: v for k, v in vars(state).items() if k not in LOCAL_FIELDS}
        self.finished.append((source.name, shared, due_in))
        if time.monotonic() - self.claimed_at > self.settings.shared_lease / 3:
            # A long cycle (rate waits, full text, a slow server within DEADLINE): the sources still
            # in it stay this daemon's, so no other daemon polls them meanwhile.
            try:
                self.coord.renew_sources(self.settings.shared_lease)
                self.claimed_at = time.monotonic()
            except StorageError as exc:
                self._unreachable(exc)

    def save(self) -> None:
        """Polled sources' state and next due time into the table; kept for the next try while the
        database is away (their leases end meanwhile, and another daemon may poll them again)."""
        if not self.finished:
            return
        try:
            kept = self.coord.finish_sources(self.finished)
        except StorageError as exc:
            self._unreachable(exc)
            return
        finished, self.finished = self.finished, []
        if kept < len(finished):
            log.info("shared: %d of %d polled sources had passed their lease to another daemon (a poll "
                     "longer than SHARED_LEASE); their state is that daemon's", len(finished) - kept, len(finished))

    def close(self) -> None:
        """Write what was polled, give back what was claimed and not polled (a stop mid-cycle)."""
        try:
            self.save()
            released = self.coord.release_sources()
            if released:
                log.info("shared: %d claimed sources given back unpolled", released)
        except StorageError:
            pass  # their leases end by themselves
        finally:
            self.coord.close()
