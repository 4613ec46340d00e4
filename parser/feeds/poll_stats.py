"""The polls' counters, counted in one place (Scrapy's StatsCollector is the model): each count is said
once, here, and kept where its readers look: the run's totals in the run's stats object (core/stats.py,
saved in daemon.json: `status`, `status --json`, the status page and /metrics read them), the source's in
its state (state.json: its row in `status` and on the page, its hourly history). The "polled:" line of
parser.log is the run's totals since the last such line, not a third store.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.runinfo import RunInfo
from ..sources.state import SourceState

# The run's counters the "polled:" line reads (core/runinfo.py's COUNTERS).
LINE_COUNTERS = ("polls", "new", "duplicates", "not_modified", "errors")


@dataclass(frozen=True)
class SinceLast:
    """The polls since the last "polled:" line."""
    polls: int
    sources: int  # distinct sources among them
    seconds: float
    new: int
    duplicates: int
    not_modified: int
    errors: int


class PollStats:
    def __init__(self, run_info: RunInfo, clock: Callable[[], float] = time.monotonic):
        self.stats, self.clock = run_info.stats, clock  # the run's one stats object (core/stats.py)
        self._mark = self._line_totals()
        self._since = clock()
        self._sources: set[str] = set()

    # -- counting: one call per thing that happened ----------------------------------------------
    def answered(self, state: SourceState, now: float, name: str, *, body_bytes: int, not_modified: bool) -> None:
        """A poll the server answered (a 304 included)."""
        self._sources.add(name)
        self.stats.inc_value("polls")
        self.stats.inc_value("fetch_bytes", body_bytes)
        self.stats.inc_value("not_modified", int(not_modified))
        state.count(now, polls=1, bytes=body_bytes, **({"not_modified": 1} if not_modified else {}))

    def failed(self, state: SourceState, now: float, name: str) -> None:
        """A poll that failed (the server's error, a parse error, a host held)."""
        self._sources.add(name)
        self.stats.inc_value("polls")
        self.stats.inc_value("errors")
        state.count(now, polls=1, errors=1)

    def staged(self, state: SourceState, now: float, *, new: int, duplicates: int, blocked: int) -> None:
        """A poll's entries through the uniqueness check, `new` of them staged."""
        self.stats.inc_value("new", new)
        self.stats.inc_value("duplicates", duplicates)
        state.staged(now, new=new, duplicates=duplicates, blocked=blocked)

    def received(self, state: SourceState, now: float, *, new: int, duplicates: int, blocked: int) -> None:
        """Pushed entries (webhook, WebSub) through the uniqueness check: the source's counts, as a poll's;
        not the run's poll counters (no poll was made)."""
        state.received(now, new=new, duplicates=duplicates, blocked=blocked)

    # -- reading ---------------------------------------------------------------------------------
    def since_last(self) -> SinceLast:
        now_totals = self._line_totals()
        delta = {name: now_totals[name] - self._mark[name] for name in LINE_COUNTERS}
        return SinceLast(sources=len(self._sources), seconds=self.clock() - self._since, **delta)

    def seconds_since_last(self) -> float:
        return self.clock() - self._since

    def mark(self) -> None:
        """The "polled:" line said: what follows counts from now."""
        self._mark, self._since, self._sources = self._line_totals(), self.clock(), set()

    def _line_totals(self) -> dict[str, int]:
        return {name: int(count) for name, count in self.stats.values(LINE_COUNTERS).items()}
