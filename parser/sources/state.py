"""What the daemon remembers about each source between polls and across restarts:
validators for conditional GET, failures in a row, when it may poll next, and what an operator
reads back with `run_daemon.py status` (last poll, last success, last new entry, an hourly history).

Saved atomically (write a temp file, rename). It is saved only after the records of a poll are
staged, so a kill can lose an ETag (one unconditional fetch more) but never records. An operator may
edit it (while the daemon is stopped): a field of the wrong type is reset to its default and the rest
used, and a file that is no object is moved aside, each with an errors.log line (open_states).

Times are epoch seconds of the schedule clock (parser/core/clock.py). A wall clock set back between two
runs would leave them far ahead; pull_back, at start, brings a due time that is further ahead than
the delay that set it (the interval, the backoff, the Retry-After) back to now plus that delay.
"""
from __future__ import annotations

import json
import logging
import math
import os
import types
import typing
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..core import logs
from ..core.dates import iso
from ..core.errors import StorageError, cannot_write
from ..core.record import RECORD_LAYOUT
from ..core.urls import HIDDEN, redact_url, restore_secrets

log = logging.getLogger("parser")
SLACK = 2.0  # seconds: two runs' clocks read a moment apart are not a clock jump
HISTORY_HOURS = 7 * 24     # hourly buckets kept for the status page's plots
TOTALS = ("polls", "errors", "new", "duplicates", "not_modified", "bytes", "blocked")
MAX_BACKOFF = 24 * 3600.0  # seconds: a dead source's backoff doubles up to this (or its interval, if longer)
GONE_EVERY = MAX_BACKOFF / 4  # a 410 Gone before DEAD_AFTER: asked rarely, but still asked
RETRY_AFTER_MAX = 24 * 3600.0  # seconds: the longest Retry-After honoured
Redirect = typing.Literal["", "once", "moved"]


@dataclass
class _Saved:
    """A source's state as state.json holds it, one key a field: SourceState's, written by its methods."""
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
    # The address polled without a feed_url has served a feed: an HTML page from it later is a
    # maintenance page, never searched for feeds (one page must not move a feed for good).
    was_feed: bool = False
    # The record layout the validators were saved under (core/record.RECORD_LAYOUT); a state saved without
    # it was saved by 0.6.0 or older.
    layout: int = RECORD_LAYOUT
    # For the operator (parser/operate/status.py): ISO 8601 UTC times, None until it happened.
    last_poll: str | None = None
    last_success: str | None = None
    last_new: str | None = None     # the last poll that staged at least one new record
    last_status: int | None = None  # HTTP status of the last answer (304 included); None: no answer
    dead: bool = False              # DEAD_AFTER failures in a row; cleared by a success or `reset`
    # [hour "YYYY-MM-DDTHH", new records, errors], oldest first, at most HISTORY_HOURS of them
    hourly: list[list[typing.Any]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)  # counters since the state began (TOTALS)


T = typing.TypeVar("T")


class _Read(typing.Generic[T]):
    """A SourceState attribute that reads its _Saved field of the same name, and cannot be set: every change
    goes through a transition."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, state: SourceState, owner: type | None = None) -> T:
        value: T = getattr(state._saved, self.name)  # read on every poll: no call beyond the getattr
        return value

    def __set__(self, state: SourceState, value: object) -> None:
        raise AttributeError(f"SourceState.{self.name} changes only through a transition")


class SourceState:
    """What the daemon remembers of one source (its fields: _Saved). Anyone reads them; only the
    transitions below change them, each named for what happened, and, in this module, the reading of a
    saved state (load_state, for_source) and pull_back at start. A write from elsewhere is a mypy error."""
    __slots__ = ("_saved",)

    def __init__(self, **saved: typing.Any) -> None:
        """`saved`: fields by name (_Saved's), the rest at their defaults."""
        self._saved = _Saved(**saved)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SourceState) and self._saved == other._saved

    def __repr__(self) -> str:
        return f"SourceState({self._saved!r})"

    # -- read: each field of _Saved, read-only (_Read); a change is a transition below ---------------------
    etag = _Read[str | None]()
    last_modified = _Read[str | None]()
    failures = _Read[int]()
    next_due = _Read[float]()
    not_before = _Read[float]()
    last_outcome = _Read[str]()
    delay = _Read[float]()
    hold = _Read[float]()
    url = _Read[str]()
    moved_to = _Read[str]()
    redirect_seen = _Read[str]()
    feed_url = _Read[str]()
    was_feed = _Read[bool]()
    layout = _Read[int]()
    last_poll = _Read[str | None]()
    last_success = _Read[str | None]()
    last_new = _Read[str | None]()
    last_status = _Read[int | None]()
    dead = _Read[bool]()
    hourly = _Read[Sequence[Sequence[typing.Any]]]()
    totals = _Read[Mapping[str, int]]()

    def address(self) -> str:
        """Where the next poll goes."""
        s = self._saved
        return s.feed_url or s.moved_to or s.url

    def may_discover(self) -> bool:
        """Whether an HTML page from the next poll may be searched for the feed it links to: only when
        the address has never served a feed (a discovered feed_url has, by being found)."""
        return not (self._saved.was_feed or self._saved.feed_url)

    def hold_left(self, now: float) -> float:
        """Seconds until a Retry-After hold ends; 0 when none holds."""
        return max(self._saved.not_before - now, 0.0)

    # -- transitions: what a poll's outcome or an operator's request does; `now` is the schedule clock's
    def failed(self, now: float, *, interval: float, dead_after: int, error: str,
               status: int | None = None) -> str | None:
        """A failed poll (`status`: the HTTP status of the answer, None without one). Below
        `dead_after` failures in a row the next poll is due after the interval (after GONE_EVERY at
        least for a 410); from then on the source is dead and each failure doubles the wait, up to
        MAX_BACKOFF (or the interval when it is longer). Returns "dead" or "gone" (a 410) when this
        failure is the `dead_after`-th in a row, for the caller to say once; else None."""
        s = self._saved
        s.last_poll = iso(now)
        s.failures += 1
        s.last_status = status
        s.last_outcome = f"error: {error}"
        delay, marked = interval, None
        if s.failures >= dead_after:
            s.dead = True
            delay = min(interval * 2 ** (s.failures - dead_after + 1), max(MAX_BACKOFF, interval))
            if s.failures == dead_after:
                marked = "gone" if status == 410 else "dead"
        elif status == 410:
            delay = max(delay, GONE_EVERY)
        s.next_due, s.delay = now + delay, delay
        return marked

    def hold_for(self, now: float, retry_after: float) -> float:
        """A server's Retry-After: no poll before `now` plus it (at most RETRY_AFTER_MAX), even by
        --once or an operator's `poll`; the next poll is due no earlier. Returns the seconds held."""
        s = self._saved
        wait = min(retry_after, RETRY_AFTER_MAX)
        s.not_before, s.hold = now + wait, wait
        s.next_due, s.delay = max(s.next_due, now + wait), max(s.delay, wait)
        return wait

    def held(self, now: float, seconds: float, *, error: str) -> float:
        """A poll not sent, its host held (`error`: a job's 429): no failure; it waits as for a Retry-After."""
        self._saved.last_outcome = f"held: {error}"
        return self.hold_for(now, seconds)

    def succeeded(self, now: float, *, interval: float, status: int) -> int:
        """An answer (new entries, none, or a 304 to the validators): the failures in a row and the
        dead flag are cleared and the next poll is due after the interval. An answer from the
        source's own address (no discovered feed_url) shows that it serves a feed (was_feed).
        Returns the failures in a row this success ended."""
        s = self._saved
        s.last_poll = s.last_success = iso(now)
        s.last_status = status
        if not s.feed_url:
            s.was_feed = True
        ended, s.failures, s.dead = s.failures, 0, False
        s.next_due, s.delay = now + interval, interval
        return ended

    def answered(self, etag: str | None, last_modified: str | None, *, new: int) -> None:
        """A body's records staged (`new` of them new): its validators kept for the next conditional GET."""
        s = self._saved
        s.etag, s.last_modified = etag, last_modified
        s.last_outcome = f"new {new}"

    def not_modified(self) -> None:
        """A 304 to the validators: they still hold."""
        self._saved.last_outcome = "304"

    def staged(self, now: float, *, new: int, duplicates: int, blocked: int = 0) -> None:
        """Entries of a poll or a push went through the uniqueness check: counted, and `new` of them
        staged (the time of the last new entry is kept for `status`); `blocked` more were dropped before
        it by the source's keep/block rules (counted when there were any)."""
        self.count(now, new=new, duplicates=duplicates, **({"blocked": blocked} if blocked else {}))
        if new:
            self._saved.last_new = iso(now)

    def received(self, now: float, *, new: int, duplicates: int, blocked: int = 0) -> None:
        """Pushed entries (webhook, WebSub) staged: heard from, as by an answer, and counted; its next poll unmoved."""
        s = self._saved
        s.last_success = s.last_poll = iso(now)
        self.staged(now, new=new, duplicates=duplicates, blocked=blocked)

    def discovered(self, feed_url: str) -> None:
        """A feed found on the source's HTML page (its <link rel="alternate">): polled from now on."""
        self._saved.feed_url = feed_url

    def redirected(self, target: str) -> Redirect:
        """This poll's permanent redirect (301/308), "" for none. One may be a server's mistake: the
        source moves for good only when two polls in a row are sent to the same `target` (its
        discovered feed moves when it has one, else `moved_to` is set). Returns "" (no redirect),
        "once" (noted, not followed yet) or "moved"."""
        s = self._saved
        if not target:
            s.redirect_seen = ""
            return ""
        if s.redirect_seen != target:
            s.redirect_seen = target
            return "once"
        s.redirect_seen = ""
        if s.feed_url:  # the redirect was the discovered feed's, not the page's
            s.feed_url = target
        else:
            s.moved_to = target
        return "moved"

    def spread(self, now: float, offset: float) -> None:
        """At start: due `offset` seconds on, so that the many sources of one interval do not come due at once."""
        self._saved.next_due = now + offset

    def rescheduled(self, now: float, interval: float) -> None:
        """The source's interval changed (SIGHUP): a shorter one counts from now, not from the poll
        the old one planned."""
        self._saved.next_due = min(self._saved.next_due, now + interval)

    def scheduled_by_group(self, now: float, *, due_in: float, hold_left: float) -> None:
        """SHARED: due `due_in`, held `hold_left` seconds from `now` (the group's table keeps its times relative)."""
        s = self._saved
        s.next_due = now + due_in
        s.not_before = now + hold_left if hold_left > 0 else 0.0

    def requested(self, now: float) -> None:
        """An operator's `poll`: due now (a Retry-After hold, hold_left(), is the caller's to refuse)."""
        self._saved.next_due = now

    def reset(self, now: float) -> None:
        """An operator's `reset`: failures, the dead flag and a Retry-After hold cleared, the feed
        found on the page forgotten (forget_discovery), and the next poll due now."""
        s = self._saved
        s.failures, s.dead, s.not_before = 0, False, 0.0
        self.forget_discovery()
        s.next_due = now

    def forget_discovery(self) -> None:
        """An operator's `reset`: the configured address is asked again and may be searched anew. The
        feed found on its page goes, with the validators that were that feed's."""
        s = self._saved
        if s.feed_url:
            s.feed_url, s.etag, s.last_modified = "", None, None
        s.was_feed = False

    def count(self, now: float, **amounts: int) -> None:
        """Add to the lifetime totals and to the hour of `now` (new and errors go to the history)."""
        totals, hourly = self._saved.totals, self._saved.hourly
        for name, amount in amounts.items():
            totals[name] = totals.get(name, 0) + amount
        new, errors = amounts.get("new", 0), amounts.get("errors", 0)
        if not (new or errors):
            return
        hour = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H")
        if hourly and hourly[-1][0] == hour:
            hourly[-1][1] += new
            hourly[-1][2] += errors
        else:
            hourly.append([hour, new, errors])
            del hourly[:-HISTORY_HOURS]


def open_states(path: Path) -> dict[str, SourceState]:
    """The daemon's read of state.json: read_states, with an errors.log line for each damaged source or
    field (reset to its default, the rest used). A file that is not an object of sources at all (`[]`,
    a syntax error) is moved aside to state.json.bad before the daemon's first save replaces it, so
    nothing an operator wrote goes unsaid, and every source starts afresh."""
    states, damage = read_states(path)
    for name, what in damage:
        if name is not None:
            logs.error_line(name, states[name].url if name in states else "",
                            f"state.json: {what} (edit state.json only while the daemon is stopped)")
            continue
        bad = path.with_name(path.name + ".bad")
        os.replace(path, bad)
        logs.error_line("state.json", str(path), f"{path} {what}: moved aside to {bad.name}, and every "
                        "source starts afresh (validators, failures, history); to keep what it held, "
                        "stop the daemon, mend the file and move it back")
    return states


def read_states(path: Path) -> tuple[dict[str, SourceState], list[tuple[str | None, str]]]:
    """The states saved in `path` ({} when absent) and what a hand edit damaged: (source, what) for an
    entry or field reset, (None, what) for a file that is no JSON object, read as empty."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, []
    except ValueError as exc:
        return {}, [(None, f"is not valid JSON ({exc})")]
    if not isinstance(raw, dict):
        return {}, [(None, f"holds {_shown(raw)}, not an object of sources")]
    states: dict[str, SourceState] = {}
    damage: list[tuple[str | None, str]] = []
    for name, data in raw.items():
        if not isinstance(data, dict):
            damage.append((name, f"its state is {_shown(data)}, not an object: the source starts afresh"))
            continue
        fixed: list[str] = []
        states[name] = load_state(data, fixed=fixed)
        damage += [(name, what) for what in fixed]
    return states, damage


def load_state(data: dict[str, typing.Any], url: str = "", fixed: list[str] | None = None) -> SourceState:
    """One source's state as saved (state.json, or the shared table with SHARED = True); `url` for a
    state saved before its source had one. A field of the wrong type (a hand edit: `null` for a
    number) is reset to its default, and described in `fixed` when given."""
    fields = _Saved.__dataclass_fields__
    kept = {}
    for key, value in data.items():
        if key not in fields:
            continue
        if _fits(value, key) and _inner_fits(key, value):
            kept[key] = value
        elif fixed is not None:
            fixed.append(f"{key} is {_shown(value)}, not {_kind(key)}: reset to "
                         f"{_shown(getattr(SourceState(), key))}, the rest of its state kept")
    state = SourceState(**kept)
    saved = state._saved
    saved.url = saved.url or url
    if kept.get("layout", 1) < RECORD_LAYOUT:
        # Saved by a version whose records had fewer columns: a 304 to its validators would leave the new
        # ones empty, so the first poll after the upgrade is unconditional (and restages what it stored).
        saved.etag = saved.last_modified = None
        saved.layout = RECORD_LAYOUT
    if "was_feed" not in kept:  # saved without it (an older version, or a hand edit reset it): a success
        # at its own address was a feed
        saved.was_feed = bool(saved.last_success) and not saved.feed_url
    return state


def _types_of(hint: object) -> tuple[type, ...]:
    """The JSON value types a SourceState field holds, from its annotation (`str | None`, `list[list]`)."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return tuple(typing.get_origin(o) or o for o in options)


_TYPES = {name: _types_of(hint) for name, hint in typing.get_type_hints(_Saved).items()}
_KINDS = {float: "a number", int: "a whole number", str: "text", bool: "true or false", type(None): "null",
          list: "a list", dict: "an object"}
_KIND_OF = {"hourly": "a list of [hour, new, errors]", "totals": "an object of counts"}


def _fits(value: object, key: str) -> bool:
    """Does a value read from JSON fit field `key`? By exact type, so that JSON's true is no number;
    a whole number is a number too, an infinite one is not."""
    allowed, kind = _TYPES[key], type(value)
    if float in allowed and kind in (int, float) and isinstance(value, (int, float)):
        return math.isfinite(value)
    return kind in allowed


def _inner_fits(key: str, value: object) -> bool:
    """The history and totals inside: what count() adds to must be numbers (a hand edit must not stop
    the loop at its first count())."""
    # type() is, not isinstance: a bool is no count; and a week of hours for 20,000 sources is 3 million
    if key == "hourly" and isinstance(value, list):  # a list and a dict, as _fits found them
        return all(type(h) is list and len(h) == 3 and type(h[0]) is str and type(h[1]) is int
                   and type(h[2]) is int for h in value)
    if key == "totals" and isinstance(value, dict):
        return all(type(n) is int for n in value.values())
    return True


def _kind(key: str) -> str:
    return _KIND_OF.get(key) or " or ".join(_KINDS.get(t, t.__name__) for t in _TYPES[key])


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def save_states(path: Path, states: dict[str, SourceState]) -> None:
    tmp = path.with_suffix(".tmp")
    # One line per source: readable with grep or jq, and small with a week of hourly history each.
    lines = [f"{json.dumps(name)}: {json.dumps(on_disk(state), sort_keys=True)}"
             for name, state in sorted(states.items())]
    try:
        tmp.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # a full disk: the previous file stays whole, and the operator reads why
        tmp.unlink(missing_ok=True)
        raise StorageError(cannot_write(path, exc)) from None


def pull_back(states: dict[str, SourceState], now: float, longest_delay: Mapping[str, float]) -> None:
    """Due times further ahead of `now` than the delay that set them (the wall clock was set back
    since they were saved) are pulled back to now plus that delay, with a parser.log line each.
    `longest_delay` per source stands in for a state saved without its delay."""
    for name, state in states.items():
        delay = state.delay or longest_delay.get(name, 0.0)
        if delay and state.next_due > now + delay + SLACK:
            log.info("%s  next poll was due in %.0f s, beyond its %.0f s delay (the clock was set back):"
                     " pulled back", name, state.next_due - now, delay)
            state._saved.next_due = now + delay
        hold = state.hold or longest_delay.get(name, 0.0)
        if hold and state.not_before > now + hold + SLACK:
            log.info("%s  Retry-After hold ends in %.0f s, beyond its %.0f s (the clock was set back):"
                     " pulled back", name, state.not_before - now, hold)
            state._saved.not_before = now + hold


def state_of(states: MutableMapping[str, SourceState], name: str, url: str) -> SourceState:
    """The state kept for source `name`, made afresh when there is none or it belonged to another
    url (validators, redirects and failures are the old address's)."""
    state = for_source(states.get(name), url)
    if state is None:
        state = states[name] = SourceState(url=url)
    return state


# -- secrets: a source's address may hold a password or a token; none is written to disk ----------
_ADDRESSES = ("url", "moved_to", "redirect_seen", "feed_url")


def _hidden(url: str) -> str:
    return redact_url(url) if "@" in url or "?" in url else url  # nothing to hide in most addresses


def on_disk(state: SourceState) -> dict[str, typing.Any]:
    """The state as state.json and the group's table hold it: its addresses with userinfo and
    secret-looking query values hidden, by the logs' rule (redact_url); for_source puts them back."""
    saved = vars(state._saved).copy()  # vars: asdict deep-copies
    for name in _ADDRESSES:
        saved[name] = _hidden(saved[name])
    return saved


def for_source(state: SourceState | None, url: str) -> SourceState | None:
    """`state` when it is the state of the source at `url`, else None. A state read from disk with
    its secrets hidden (on_disk) gets them back from `url`; an address whose hidden part `url` does
    not hold (an `auth` param read from the environment) is dropped: the source's own address is
    polled, and its redirect learnt again."""
    if state is None or state.url == url:
        return state
    if not url or state.url != _hidden(url):
        return None
    saved = state._saved
    saved.url = url
    for name in _ADDRESSES[1:]:
        value = getattr(saved, name)
        if HIDDEN in value:
            setattr(saved, name, restore_secrets(value, url) or "")
    return state
