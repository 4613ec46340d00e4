"""The daemon's two clocks.

- `wall()`: the time of day, for what is written down (a record's `fetched`, due times saved for the
  next run). A person or NTP may set it forward or back at any moment.
- `ScheduleClock`: what the daemon schedules by within a run. It reads the wall clock once, at
  start, and then counts with time.monotonic, so a wall clock set a year ahead (or an hour back)
  while the daemon runs moves no due time. Its values are epoch seconds, so they can be saved; at
  the next start, a saved due time further ahead than its interval is pulled back (parser/sources/state.py,
  parser/jobs/job_files.py), which covers a clock that jumped between two runs.

Test hook, and nothing else: when the environment variable PARSER_CLOCK_OFFSET_FILE names a file,
`wall()` adds the number of seconds written in it (re-read at every call; a missing or unreadable
file counts as 0). Tests rewrite that file to set the daemon's wall clock forward and back while
it runs, which they could not do to the machine's clock.
"""
from __future__ import annotations

import os
import time

OFFSET_ENV = "PARSER_CLOCK_OFFSET_FILE"


def wall() -> float:
    """Epoch seconds now, by the wall clock (plus the test offset, when one is set)."""
    path = os.environ.get(OFFSET_ENV)
    return time.time() + (_offset(path) if path else 0.0)


def _offset(path: str) -> float:
    try:
        with open(path, encoding="ascii") as f:
            return float(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0.0


class ScheduleClock:
    """Epoch seconds that advance with time.monotonic from the wall clock's reading at creation."""

    def __init__(self, start: float | None = None):
        self._start_wall = wall() if start is None else start
        self._start_monotonic = time.monotonic()

    def __call__(self) -> float:
        return self._start_wall + (time.monotonic() - self._start_monotonic)
