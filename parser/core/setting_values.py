"""The shapes a setting's value is checked against (seconds, whole numbers, paths), for params.py's
settings and a job's keys alike.

Each check returns what is wrong in the operator's words, or None. A value that passes is safe to
hand on: a number of seconds fits a timer and a timeout, a whole number a C integer, a folder a
path; so a value params.py may hold never turns into a TypeError or OverflowError deep in a run.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# Ten years: more than any interval or timeout means, and well inside what threading's timers and
# socket timeouts take (threading.TIMEOUT_MAX is about 292 years; a larger one raises OverflowError).
MAX_SECONDS = 10 * 365 * 86400
# A whole number must fit a C int (thread and connection counts, read sizes): 2 GiB as a byte count.
MAX_WHOLE = 2**31 - 1

SECONDS_ABOVE_0 = "must be a number of seconds above 0"
# Units of time as an operator writes them: a rate's period ("30/min") and a duration ("400d").
TIME_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
              "d": 86400, "day": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*$", re.IGNORECASE)


def is_number(x: Any) -> bool:
    """An int or a float (not True/False, which Python counts as 1 and 0)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def seconds_problem(x: Any, *, zero: bool = False) -> str | None:
    """A number of seconds above 0 (or 0 and more with `zero`), finite, at most MAX_SECONDS."""
    if not is_number(x) or x != x or x < 0 or (x == 0 and not zero):  # x != x: NaN
        return "must be a number of seconds, 0 or more" if zero else SECONDS_ABOVE_0
    if x > MAX_SECONDS:  # inf too; an int too large for a float compares without converting
        return f"must be at most {MAX_SECONDS:,} seconds (ten years)"
    return None


def duration_seconds(text: Any) -> float | None:
    """'400d', '12h', '30m', '90s' (or '2 days', '1.5 hours') in seconds; None when it is no such text.
    A bare number is refused: "400" could mean seconds or days."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    unit = TIME_UNITS.get(match.group(2).lower())
    return float(match.group(1)) * unit if unit else None


def as_seconds(x: Any) -> Any:
    """A time setting as seconds: a number as it is, a text with its unit ("10m", "2 days") read by
    duration_seconds, so every setting of seconds takes what UNIQUE_WINDOW takes. Anything else is
    handed back unchanged, for the setting's own check to refuse in its words."""
    seconds = duration_seconds(x)
    return x if seconds is None else seconds


def duration_text(seconds: float) -> str:
    """A duration as an operator writes it, in its largest whole unit: 34560000 -> "400d", 5400 -> "90m"."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def duration_problem(x: Any) -> str | None:
    """A duration as duration_seconds reads it, above 0 and at most MAX_SECONDS."""
    seconds = duration_seconds(x)
    if seconds is None:
        return 'must be a time with its unit, such as "400d", "12h", "30m" or "90s"'
    if seconds <= 0:
        return "must be a time above 0"
    return seconds_problem(seconds)


def whole_problem(x: Any, low: int = 1) -> str | None:
    """A whole number from `low` up to MAX_WHOLE."""
    if not (isinstance(x, int) and not isinstance(x, bool)) or x < low:
        return "must be a whole number above 0" if low == 1 else f"must be a whole number, {low} or more"
    if x > MAX_WHOLE:
        return f"must be at most {MAX_WHOLE:,}"
    return None


def http_url(value: Any) -> bool:
    """An http(s) URL with a host; urlsplit's ValueError ("Invalid IPv6 URL": http://[x) is a no."""
    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


def resolve_path(value: Any, base: Path) -> Path | None:
    """`value` (a str or os.PathLike, relative to `base`) as an absolute path, or None when it cannot
    name a file or folder (not a string, empty, a NUL byte)."""
    if not isinstance(value, (str, os.PathLike)):
        return None
    try:
        text = os.fspath(value)
        if not isinstance(text, str) or text == "":
            return None
        return (base / Path(text).expanduser()).resolve()
    except (ValueError, TypeError, OSError):  # "embedded null byte", a path no system call takes
        return None
