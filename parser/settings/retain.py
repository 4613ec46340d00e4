"""RETAIN, and a source's or a job's own `retain`: how long the database keeps what (db/retention.py prunes).

Each key is optional and takes a duration ("365d", "12h") or None (kept for ever): `items` deletes the rows
older than it, `content` empties their bodies (content and summary), `versions` prunes `<table>_versions`,
`runs` the `runs` table. What a source or a job leaves out is RETAIN's.
"""
from __future__ import annotations

import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..core.problems import Problems, unknown_key
from ..core.setting_values import duration_problem, duration_seconds

DAY = 86400.0
RETAIN_KEYS = ("items", "content", "versions", "runs")
SOURCE_RETAIN_KEYS = ("items", "content", "versions")  # a source's rows; `runs` is the daemon's
JOB_RETAIN_KEYS = ("items", "versions")  # a job's table has no content nor summary of its own


@dataclass(frozen=True)
class Retain:
    """Seconds each kind of row is kept; None: for ever. The default keeps everything but runs (30 days)."""
    items: float | None = None
    content: float | None = None
    versions: float | None = None
    runs: float | None = 30 * DAY


def check_retain(raw: Any, where: str, keys: tuple[str, ...], base: Retain, problems: Problems, *,
                 prefix: str = "") -> Retain:
    """A `retain` dict ({"items": "365d", "content": None}) over `base` (RETAIN's, or the default); each
    problem added under `where` (RETAIN, or a source or job, `prefix` then being "retain: ")."""
    if not isinstance(raw, Mapping):
        problems.add(where, f"{prefix}must be a dict of {', '.join(keys)} -> a time such as \"365d\" (or None: kept "
                            f"for ever), got {reprlib.repr(raw)}")
        return base
    changes: dict[str, float | None] = {}
    for key, value in raw.items():
        if key not in keys:
            problems.add(where, prefix + unknown_key(key, keys))
        elif value is None:
            changes[key] = None
        elif what := duration_problem(value):
            problems.add(where, f"{prefix}{key} {what} (or None: kept for ever), got {reprlib.repr(value)}")
        else:
            changes[key] = duration_seconds(value)
    return replace(base, **changes)
