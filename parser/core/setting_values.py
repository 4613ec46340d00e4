"""The shapes a setting's value is checked against (seconds, whole numbers, paths), for params.py's
settings and a job's keys alike.

Each check returns what is wrong in the operator's words, or None. A value that passes is safe to
hand on: a number of seconds fits a timer and a timeout, a whole number a C integer, a folder a
path; so a value params.py may hold never turns into a TypeError or OverflowError deep in a run.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# Ten years: more than any interval or timeout means, and well inside what threading's timers and
# socket timeouts take (threading.TIMEOUT_MAX is about 292 years; a larger one raises OverflowError).
MAX_SECONDS = 10 * 365 * 86400
# A whole number must fit a C int (thread and connection counts, read sizes): 2 GiB as a byte count.
MAX_WHOLE = 2**31 - 1

SECONDS_ABOVE_0 = "must be a number of seconds above 0"


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
