"""What the daemon remembers about each source between polls and across restarts:
validators for conditional GET, failures in a row, when it may poll next, and what an operator
reads back with `run_daemon.py status` (last poll, last success, last new entry, an hourly history).

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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger("parser")
SLACK = 2.0  # seconds: two runs' clocks read a moment apart are not a clock jump
HISTORY_HOURS = 7 * 24     # hourly buckets kept for the status page's plots
TOTALS = ("polls", "errors", "new", "duplicates", "not_modified", "bytes")


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
    # Where the source is polled instead of `url` (address(), below): a permanent redirect (301/308)
    # seen on two polls in a row, and a feed found on the HTML page that `url` is.
    moved_to: str = ""
    redirect_seen: str = ""    # the last poll's permanent redirect, not yet seen twice
    feed_url: str = ""         # found in the page's <link rel="alternate">; polled from then on
    # For the operator (parser/status.py): ISO 8601 UTC times, None until it happened.
    last_poll: str | None = None
    last_success: str | None = None
    last_new: str | None = None     # the last poll that staged at least one new record
    last_status: int | None = None  # HTTP status of the last answer (304 included); None: no answer
    dead: bool = False              # DEAD_AFTER failures in a row; cleared by a success or `reset`
    # [hour "YYYY-MM-DDTHH", new records, errors], oldest first, at most HISTORY_HOURS of them
    hourly: list[list] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)  # counters since the state began (TOTALS)

    def address(self) -> str:
        """Where the next poll goes."""
        return self.feed_url or self.moved_to or self.url

    def count(self, now: float, **amounts: int) -> None:
        """Add to the lifetime totals and to the hour of `now` (new and errors go to the history)."""
        for name, amount in amounts.items():
            self.totals[name] = self.totals.get(name, 0) + amount
        new, errors = amounts.get("new", 0), amounts.get("errors", 0)
        if not (new or errors):
            return
        hour = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H")
        if self.hourly and self.hourly[-1][0] == hour:
            self.hourly[-1][1] += new
            self.hourly[-1][2] += errors
        else:
            self.hourly.append([hour, new, errors])
            del self.hourly[:-HISTORY_HOURS]


def iso(epoch: float) -> str:
    """Epoch seconds as the ISO 8601 UTC time every status file uses."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_states(path: Path) -> dict[str, SourceState]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError:
        return {}  # a damaged state file costs one unconditional poll per source, nothing more
    return {name: load_state(data) for name, data in raw.items() if isinstance(data, dict)}


def load_state(data: dict, url: str = "") -> SourceState:
    """One source's state as saved (state.json, or the shared table with SHARED = True); `url` for a
    state saved before its source had one."""
    fields = SourceState.__dataclass_fields__
    state = SourceState(**{k: v for k, v in data.items() if k in fields})
    state.url = state.url or url
    # A hand-edited file must not stop the loop at the first count().
    if not isinstance(state.hourly, list) or not all(isinstance(h, list) and len(h) == 3 for h in state.hourly):
        state.hourly = []
    if not isinstance(state.totals, dict):
        state.totals = {}
    return state


def save_states(path: Path, states: dict[str, SourceState]) -> None:
    tmp = path.with_suffix(".tmp")
    # One line per source: readable with grep or jq, and small with a week of hourly history each.
    lines = [f"{json.dumps(name)}: {json.dumps(vars(state), sort_keys=True)}"  # vars: asdict deep-copies
             for name, state in sorted(states.items())]
    tmp.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
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


def state_of(states: dict[str, SourceState], name: str, url: str) -> SourceState:
    """The state kept for source `name`, made afresh when there is none or it belonged to another
    url (validators, redirects and failures are the old address's)."""
    state = states.get(name)
    if state is None or state.url != url:
        state = states[name] = SourceState(url=url)
    return state
