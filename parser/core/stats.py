"""The run's one stats object (Scrapy's StatsCollector is the model): every component counts into it by
key, and every reader (the "polled:" line, daemon.json and through it `status`, the status page and
/metrics) reads it. Keys are namespaced by who counts: the run's own totals under their plain names
("polls", "new", "flushes": core/runinfo.py's COUNTERS, as daemon.json's `totals` has always named them),
a feed's and a job's under "source/<name>/..." and "job/<name>/..."; each field's coverage per pass
(core/coverage.py) lives beside the values. Main thread only: the workers hand back values, the main
thread counts them.
"""
from __future__ import annotations

from collections.abc import Iterable

from .coverage import Coverage


class Stats:
    def __init__(self, values: dict[str, float] | None = None, coverage: Coverage | None = None):
        self._values: dict[str, float] = dict(values or {})
        self.coverage = coverage if coverage is not None else Coverage()

    def inc_value(self, key: str, count: float = 1) -> None:
        self._values[key] = self._values.get(key, 0) + count

    def values(self, keys: Iterable[str]) -> dict[str, float]:
        """`keys`, each with its value (0 when nothing counted it yet)."""
        return {key: self._values.get(key, 0) for key in keys}

    def snapshot(self) -> dict[str, float]:
        """A copy for a reader: what is counted later does not change it."""
        return dict(self._values)
