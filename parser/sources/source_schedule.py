"""Which polled sources are due when, and their state between polls (state.json), for one daemon.

The daemon asks `due(now)` for the sources to poll, hands each back with `done(source, state)` once
its poll is absorbed (the state it leaves, to be written), and calls `save()` as often as it likes:
the file is written only when something changed, at most once per SAVE_EVERY seconds, and for a big
file less often still, so that its writes stay under STATE_WRITE_RATE (10,000 sources with a week
of history each make about 5 MiB: written every 40 s, not every second). A flush and the stop
always write it. A kill loses at most that much of validators, counters and due times (a source may
be polled once more than needed), never records: they are staged before their source's state
changes. Shared mode replaces this class with one that keeps the same calls on a database.

Sources sharing an interval are spread over it when there are more of them than workers: each is
first due at a fixed offset within its interval (from its name, so a restart keeps the spread),
instead of all at the same second.
"""
from __future__ import annotations

import heapq
import itertools
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from .state import SourceState, open_states, pull_back, save_states, state_of

SAVE_EVERY = 1.0  # seconds: state.json at most this often while polls come in
STATE_WRITE_RATE = 128 * 1024  # bytes a second, on average, that state.json may cost between flushes
SAVE_MAX_GAP = 60.0  # seconds: however big the file, it is written at least this often while it changes


def spread_offset(name: str, interval: float) -> float:
    """A fixed moment within `interval` for `name`: the same on every start, even across names."""
    return (zlib.crc32(name.encode("utf-8")) / 2**32) * interval


class ScheduledSource(Protocol):
    """What the schedule reads of a source: the settings' Source is one (passed in, so that this floor
    never imports the settings above it)."""

    @property
    def name(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def interval(self) -> float: ...


Src = TypeVar("Src", bound=ScheduledSource)


class Schedule(Protocol[Src]):
    """What the feeds, a reload and an operator's requests ask of a schedule: SourceSchedule, or with
    SHARED the group's (parser/group/shared.py's SharedSchedule), which keeps the same calls."""

    @property
    def states(self) -> Mapping[str, SourceState]: ...

    def load(self, sources: Iterable[Src], longest_delay: Callable[[Src], float], *, spread: bool) -> None: ...

    def set_sources(self, sources: Iterable[Src]) -> None: ...

    def due(self, now: float, limit: int | None = None) -> list[Src]: ...

    def each_once(self, now: float, sources: Sequence[Src]) -> list[Src]: ...

    def next_due(self) -> float: ...

    def done(self, source: Src, state: SourceState) -> None: ...

    def save(self, *, force: bool = False) -> bool: ...

    def state(self, source: Src) -> SourceState: ...

    def changed(self) -> None: ...

    def poll_now(self, source: Src) -> bool | None: ...

    def claim(self, source: Src) -> bool: ...

    def close(self) -> None: ...


class SourceSchedule(Generic[Src]):
    def __init__(self, path: Path | None, clock: Callable[[], float], *, workers: int):
        """path None (--dry-run): states in memory only."""
        self.path = path
        self.clock = clock
        self.workers = workers
        self.states: dict[str, SourceState] = {}
        self.sources: dict[str, Src] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._when: dict[str, float] = {}   # name -> the time of its live heap entry
        self._out: set[str] = set()         # handed out by due(), not done yet
        self._order = itertools.count()
        self._dirty = False
        self._saved_at = 0.0
        self._gap = SAVE_EVERY               # seconds between writes, from the size of the last one
        self.saves = 0                      # how many times state.json was written (for the bench)

    def load(self, sources: Iterable[Src], longest_delay: Callable[[Src], float], *,
             spread: bool) -> None:
        self.sources = {s.name: s for s in sources}
        if self.path is not None:
            self.states = open_states(self.path)
            pull_back(self.states, self.clock(), {s.name: longest_delay(s) for s in self.sources.values()})
        self._rebuild(spread=spread)

    def set_sources(self, sources: Iterable[Src]) -> None:
        """SIGHUP: the new list; a source's state stays, a new one is due at once."""
        self.sources = {s.name: s for s in sources}
        self._rebuild(spread=False)

    def _rebuild(self, *, spread: bool) -> None:
        now = self.clock()
        same_interval = Counter(s.interval for s in self.sources.values())
        self._heap, self._when = [], {}
        for source in self.sources.values():
            if source.name in self._out:
                continue
            state = self.state(source)
            # A group no larger than the pool is polled at once without waiting for a worker;
            # spreading it would only put its first polls off.
            if spread and state.next_due <= now and same_interval[source.interval] > self.workers:
                state.spread(now, spread_offset(source.name, source.interval))
            self._push(source.name, max(state.next_due, state.not_before))

    def _push(self, name: str, when: float) -> None:
        self._when[name] = when
        heapq.heappush(self._heap, (when, next(self._order), name))

    # -- the four calls ---------------------------------------------------------------------------
    def each_once(self, now: float, sources: Sequence[Src]) -> list[Src]:
        """--once (parser/feeds/offering.py): every selected source, due or not."""
        return list(sources)

    def due(self, now: float, limit: int | None = None) -> list[Src]:
        """The sources due by `now` (at most `limit`), earliest first; each is out until done()."""
        taken: list[Src] = []
        while self._heap and (limit is None or len(taken) < limit):
            when, _, name = self._heap[0]
            if self._when.get(name) != when or name not in self.sources or name in self._out:
                heapq.heappop(self._heap)  # superseded by a later push, or removed by SIGHUP
                continue
            if when > now:
                break
            heapq.heappop(self._heap)
            del self._when[name]
            self._out.add(name)
            taken.append(self.sources[name])
        return taken

    def next_due(self) -> float:
        """When the earliest source not out is due (inf when none)."""
        while self._heap:
            when, _, name = self._heap[0]
            if self._when.get(name) == when and name in self.sources and name not in self._out:
                return when
            heapq.heappop(self._heap)
        return float("inf")

    def done(self, source: Src, state: SourceState) -> None:
        """Its poll is absorbed (or was abandoned): `state` is written with the next save, and the source
        is due again at the time it says."""
        self._out.discard(source.name)
        self.changed()
        if source.name in self.sources:
            self._push(source.name, max(state.next_due, state.not_before))

    def save(self, *, force: bool = False) -> bool:
        """Write state.json when something changed and SAVE_EVERY has passed (or `force`)."""
        if self.path is None or not self._dirty:
            return False
        now = time.monotonic()
        if not force and now - self._saved_at < self._gap:
            return False
        save_states(self.path, self.states)
        size = self.path.stat().st_size
        self._gap = min(max(SAVE_EVERY, size / STATE_WRITE_RATE), SAVE_MAX_GAP)
        self._dirty, self._saved_at = False, now
        self.saves += 1
        return True

    # -- state ------------------------------------------------------------------------------------
    def state(self, source: Src) -> SourceState:
        return state_of(self.states, source.name, source.url)

    def changed(self) -> None:
        """A state was changed outside a poll (a push counted, an operator's reset): save it soon."""
        self._dirty = True

    def poll_now(self, source: Src) -> None:
        """An operator's `poll`/`reset`: due at once (unless it is being polled already)."""
        self.changed()
        if source.name not in self._out:
            self._push(source.name, max(self.state(source).next_due, self.state(source).not_before))

    def claim(self, source: Src) -> bool:
        """May an operator's request act on the source here? Alone, always (SHARED: parser/group/shared.py
        claims the group's row)."""
        return True

    def close(self) -> None:
        """Nothing to release (state.json is written by the flush before)."""
