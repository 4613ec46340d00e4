"""What the daemon's loop asks of a collector, one per collector: the feeds' cyclic pass
(parser/feeds/feed_pass.py) and the two-pass jobs (parser/jobs/runner.py) both answer these calls, and the loop
knows nothing else of them.

A turn of the loop: offer() on each, the scheduler dispatches, its absorb() hands every piece of work
that finished to the `absorb` its collector gave with it (parser/fetch/scheduler.py's Work: kept for the
turn), then stage() on each; save() and summary() after it, take_pushed() a few times a second. At a
flush, take_pushed() and sinks(); at the stop, keep_finished() and close().
Collectors makes them one: the loop calls it as it would call one collector.
"""
from __future__ import annotations

import math
from typing import Protocol

from .pipeline.sink import RecordSink


class Collector(Protocol):
    def offer(self) -> None:
        """Main thread: hand the work due now to the scheduler (parser/fetch/scheduler.py), each Work with
        the collector's own step for its result."""

    def stage(self) -> None:
        """Main thread, after the scheduler's absorb: stage what came back this turn (records before
        the state that says they were fetched), then its state and log lines."""

    def keep_finished(self) -> None:
        """Stopping, or --once done: what came back is staged; what the stop cut short is no failure."""

    def finished(self) -> bool:
        """--once: nothing of this run is left to offer, running or to stage."""

    def sinks(self) -> list[RecordSink]:
        """Where its records are staged; flushed by the daemon, the feeds' first."""

    def take_pushed(self) -> None:
        """Main thread: stage what arrived without an offer (the feeds' webhook deliveries, WebSub pushes)."""

    def next_due(self) -> float:
        """The clock's time its next work is due (the loop waits no longer); math.inf: it does not say."""

    def save(self, *, force: bool = False) -> bool:
        """Its state written, in batches unless `force`; whether anything was written."""

    def summary(self, *, due_only: bool = False) -> None:
        """Its summary line in parser.log; `due_only`: only when its time has come."""

    def close(self) -> None:
        """Files and connections of its own closed (the sinks included)."""


class Collectors:
    """The collectors the loop drives, the feeds' first: each call goes to each of them in turn."""

    def __init__(self, *collectors: Collector):
        self.each: list[Collector] = list(collectors)

    def add(self, collector: Collector) -> None:
        self.each.append(collector)

    def offer(self) -> None:
        for collector in self.each:
            collector.offer()

    def stage(self) -> None:
        for collector in self.each:
            collector.stage()

    def keep_finished(self) -> None:
        for collector in self.each:
            collector.keep_finished()

    def finished(self) -> bool:
        return all(collector.finished() for collector in self.each)

    def sinks(self) -> list[RecordSink]:
        return [sink for collector in self.each for sink in collector.sinks()]

    def take_pushed(self) -> None:
        for collector in self.each:
            collector.take_pushed()

    def next_due(self) -> float:
        return min((collector.next_due() for collector in self.each), default=math.inf)

    def save(self, *, force: bool = False) -> bool:
        saved = [collector.save(force=force) for collector in self.each]  # each, not the first that saved
        return any(saved)

    def summary(self, *, due_only: bool = False) -> None:
        for collector in self.each:
            collector.summary(due_only=due_only)

    def close(self) -> None:
        for collector in self.each:
            collector.close()
