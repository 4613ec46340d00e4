"""What the daemon remembers about each source between polls and across restarts:
validators for conditional GET, failures in a row, and when it may poll next.

Saved atomically (write a temp file, rename). It is saved only after the records of a poll are
staged, so a kill can lose an ETag (one unconditional fetch more) but never records.

Times are epoch seconds of the schedule clock (parser/clock.py). A wall clock set back between two
runs would leave them far ahead; pull_back, at start, brings a due time that is further ahead than
the delay that set it (the interval, the backoff, the Retry-After) back to now plus that delay.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger("parser")
SLACK = 2.0  # seconds: two runs' clocks read a moment apart are not a clock jump


@dataclass
class SourceState:
    etag: str | None = None
    last_modified: str | None = None
    failures: int = 0          # failures in a row; reset by any success
    next_due: float = 0.0      # epoch seconds; 0 = at once
    not_before: float = 0.0    # a server's Retry-After: honoured even by --once
    last_outcome: str = ""
    delay: float = 0.0         # seconds next_due was set ahead of its poll (interval or backoff)
    hold: float = 0.0          # seconds of the Retry-After that set not_before
    url: str = ""              # validators belong to this address; a changed url drops them


def load_states(path: Path) -> dict[str, SourceState]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError:
        return {}  # a damaged state file costs one unconditional poll per source, nothing more
    fields = SourceState.__dataclass_fields__
    return {name: SourceState(**{k: v for k, v in data.items() if k in fields})
            for name, data in raw.items() if isinstance(data, dict)}


def save_states(path: Path, states: dict[str, SourceState]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: asdict(v) for k, v in states.items()}, indent=1, sort_keys=True),
                   encoding="utf-8")
    os.replace(tmp, path)


def pull_back(states: dict[str, SourceState], now: float, longest_delay: Mapping[str, float]) -> None:
    """Due times further ahead of `now` than the delay that set them (the wall clock was set back
    since they were saved) are pulled back to now plus that delay, with a parser.log line each.
    `longest_delay` per source stands in for a state saved without its delay."""
    for name, state in states.items():
        delay = state.delay or longest_delay.get(name, 0.0)
        if delay and state.next_due > now + delay + SLACK:
            log.info("%s  next poll was due in %.0f s, beyond its %.0f s delay (the clock was set back):"
                     " pulled back", name, state.next_due - now, delay)
            state.next_due = now + delay
        hold = state.hold or longest_delay.get(name, 0.0)
        if hold and state.not_before > now + hold + SLACK:
            log.info("%s  Retry-After hold ends in %.0f s, beyond its %.0f s (the clock was set back):"
                     " pulled back", name, state.not_before - now, hold)
            state.not_before = now + hold
