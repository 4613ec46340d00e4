"""What the running daemon tells an operator about itself, in STAGING_DIR/daemon.json: its pid,
when it started, counters since then (the run's stats object, core/stats.py: its plain keys as `totals`,
each field's coverage as `coverage`), and the last flushes (size, duration, outcome).

The main thread owns a RunInfo and saves it at the points where state.json is saved (after a
cycle, after a flush), never per poll. Readers (`run_daemon.py status`, the status page) only
read the file; it is replaced atomically, so they never see half of it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from .coverage import Coverage
from .jsonfile import read_object, write_text_whole
from .runs import RunLog
from .stats import Stats

FLUSHES_KEPT = 200
COUNTERS = ("polls", "errors", "new", "duplicates", "not_modified", "fetch_bytes", "flushes",
            "flush_failures", "flush_seconds", "rows_written", "rows_updated", "versions_written", "control_requests")


def daemon_status_path(staging_dir: Path) -> Path:
    return staging_dir / "daemon.json"


@dataclass(frozen=True)
class Flushed:
    """What one flush did (parser/flush_all.py)."""
    ok: bool
    rows: int              # written by this flush
    updated: int           # rows it updated (entries edited at their source)
    already: int           # staged rows the table held already (a batch loaded again after a crash)
    error: str | None      # the failed tables' errors, "; "-joined
    versions: int = 0      # earlier versions of updated rows it kept (UPDATES "history")


@dataclass
class RunInfo:
    pid: int
    started: str                      # ISO 8601 UTC
    params: str = ""
    status_listen: str | None = None  # "http://host:port/" of the status page, when it is on
    running: bool = True              # False once the daemon has stopped (its last save)
    updated: str = ""
    # {"at", "why", "ok", "rows", "already", "seconds", "error"} of the last flush
    last_flush: dict | None = None
    flushes: list[list] = field(default_factory=list)  # [at, rows, seconds, ok], oldest first
    # What every component counts into (core/stats.py): daemon.json's `totals` and `coverage` are read from it.
    stats: Stats = field(default_factory=Stats, repr=False, compare=False)
    # The polls and job passes since the last flush, for the `runs` table (core/runs.py): not in daemon.json.
    runs: RunLog = field(default_factory=RunLog, repr=False, compare=False)

    @property
    def totals(self) -> dict[str, float]:
        """The run's own counters: the stats' plain keys (those of a source or job are namespaced "kind/name/...")."""
        values = self.stats.snapshot()
        return {**dict.fromkeys(COUNTERS, 0), **{k: v for k, v in values.items() if "/" not in k}}

    def flushed(self, done: Flushed, *, at: str, why: str, seconds: float) -> None:
        """A flush's outcome counted and kept as the last (daemon.json's `last_flush`), `at` the time it ended."""
        ok, rows, already = done.ok, done.rows, done.already
        counted = {"flushes": 1, "flush_failures": 0 if ok else 1, "flush_seconds": seconds, "rows_written": rows,
                   "rows_updated": done.updated, "versions_written": done.versions}
        for name, amount in counted.items():
            self.stats.inc_value(name, amount)
        self.last_flush = {"at": at, "why": why, "ok": ok, "rows": rows, "already": already,
                           "seconds": round(seconds, 3), "error": done.error}
        if ok and not rows and not already:
            return  # the history (the flush-size plot) keeps the flushes that had work, and failures
        self.flushes.append([at, rows, round(seconds, 3), ok])
        del self.flushes[:-FLUSHES_KEPT]

    def save(self, path: Path, now_iso: str) -> None:
        self.updated = now_iso
        # The fields as they are (json reads them; no copy): not the runs waiting for the flush, nor the stats,
        # whose totals and coverage follow.
        saved = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("runs", "stats")}
        saved["totals"] = self.totals
        # The coverage a line per source or job (as state.json's sources), each made once per pass: json's
        # indented encoder is pure Python, and this file is written at every batch of saves and flush.
        text = json.dumps(saved, indent=1)
        coverage = ",\n".join(f"  {json.dumps(key)}: {entry}" for key, entry in self.stats.coverage.json_lines())
        write_text_whole(path, text[:-2] + ',\n "coverage": {' + (f"\n{coverage}\n " if coverage else "") + "}\n}\n")


def kept_coverage(path: Path) -> Coverage:
    """The coverage the last run left in daemon.json: a restart keeps each field's history."""
    saved = read_object(path) or {}
    coverage = saved.get("coverage")
    return Coverage(coverage if isinstance(coverage, dict) else None)


def load_run_info(path: Path) -> dict | None:
    """The last daemon.json as a dict; None when there is none (or it is damaged)."""
    return read_object(path)


@dataclass(frozen=True)
class Health:
    """What /healthz answers from: replaced whole by the main thread, read by the page's threads."""
    tick: float        # time.monotonic() when the main loop last went round (or waited)
    flush_ok: bool     # the last flush committed everything
    reason: str = ""
