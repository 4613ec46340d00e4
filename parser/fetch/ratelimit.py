"""Per-source request rates ("30/min", "30/min burst 5"), on top of the fetcher's per-host limit.

A token bucket per source: it holds up to `burst` requests and refills at count/seconds. A worker
that wants a request either gets one now, or reserves the next free one and sleeps until then, or
is told how long it would have to wait when that is longer than it may (so a poll never blocks a
cycle for longer than a fetch could).
"""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.setting_values import TIME_UNITS

UNITS = TIME_UNITS  # parser/core/setting_values.py: the durations of settings read the same units
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*(?:,?\s*burst\s+(\d+))?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Rate:
    count: int       # requests ...
    seconds: float   # ... per this many seconds
    burst: int       # requests that may go at once after a quiet spell
    text: str        # as written, for messages

    @property
    def per_second(self) -> float:
        return self.count / self.seconds


def parse_rate(text: object) -> Rate:
    """'30/min', '2/s', '100/hour burst 10', '5/10s'; raise ValueError saying what is accepted."""
    match = _RATE.match(text) if isinstance(text, str) else None
    unit = UNITS.get(match.group(3).lower()) if match else None
    if not isinstance(text, str) or not match or unit is None:
        raise ValueError(f"must look like '30/min' or '30/min burst 5' (units: s, min, hour, day), got {text!r}")
    count = int(match.group(1))
    seconds = float(int(match.group(2) or 1) * unit)
    burst = int(match.group(4)) if match.group(4) else 1
    if count <= 0 or seconds <= 0 or burst <= 0:
        raise ValueError(f"count, period and burst must be above 0, got {text!r}")
    return Rate(count=count, seconds=seconds, burst=burst, text=text.strip())


class TokenBucket:
    def __init__(self, rate: Rate, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.clock = clock
        self.tokens = float(rate.burst)
        self.stamp = clock()
        self._lock = threading.Lock()

    def reserve(self, max_wait: float) -> float | None:
        """Take a request slot: seconds to wait before using it, or None (nothing taken) when that
        would be longer than max_wait."""
        with self._lock:
            now = self.clock()
            self.tokens = min(float(self.rate.burst), self.tokens + (now - self.stamp) * self.rate.per_second)
            self.stamp = now
            wait = max(0.0, (1.0 - self.tokens) / self.rate.per_second)
            if wait > max_wait:
                return None
            self.tokens -= 1.0  # below zero: slots already promised to waiting workers
            return wait

    def next_free(self) -> float:
        """Seconds until a request would be allowed, without taking it."""
        with self._lock:
            tokens = min(float(self.rate.burst), self.tokens + (self.clock() - self.stamp) * self.rate.per_second)
            return max(0.0, (1.0 - tokens) / self.rate.per_second)


class RateLimits:
    """One bucket per source name, made on first use; shared by the worker threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    def wait(self, name: str, rate: Rate | None, max_wait: float, stop: threading.Event) -> float | None:
        """Block until `name` may send one request; return the seconds waited, or None when the wait
        would exceed max_wait (then nothing was waited or taken)."""
        if rate is None:
            return 0.0
        with self._lock:
            bucket = self._buckets.get(name)
            if bucket is None or bucket.rate != rate:
                bucket = self._buckets[name] = TokenBucket(rate, self.clock)
        return pause(bucket.reserve(max_wait), stop)

    def next_free(self, name: str) -> float:
        bucket = self._buckets.get(name)
        return bucket.next_free() if bucket else 0.0


def pause(wait: float | None, stop: threading.Event) -> float | None:
    """Sleep the `wait` a bucket reserved (until then or a stop); None (nothing reserved) passes through."""
    if wait is not None and wait > 0:
        stop.wait(wait)
    return wait
