"""The `runs` table's rows: one per poll of a source and one per pass of a job, kept in memory until the
next flush writes them in bulk (db/runs_table.py), never a transaction per poll. What they answer: "what
failed this week", "when did this source last give anything", "how long do its polls take".

A kill loses the rows of the polls since the last flush (the records of those polls are safe in
staging; these rows only describe them), as it loses the counters of daemon.json since its last save.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

# What a poll came to: a 200 with something new or edited, a 200 with nothing new, a 304, a failure.
OUTCOMES = ("new", "unchanged", "not modified", "error")
KEPT_AT_MOST = 100_000  # rows held while the database is away; the oldest go first past this


@dataclass(frozen=True)
class Run:
    source: str          # a source's name, or a job's
    started: str         # ISO 8601 UTC
    seconds: float
    outcome: str         # one of OUTCOMES
    status: int | None = None  # the HTTP status; None without an answer
    entries: int = 0     # records the answer held (a job's pass: objects fetched)
    new: int = 0
    changed: int = 0
    error: str | None = None
    daemon: str | None = None  # in a group (SHARED), the daemon that ran it


class RunLog:
    """The runs since the last flush. `add` from the main thread (polls and job passes end there); the
    flush takes them all and gives them back if the database refused them."""

    def __init__(self, daemon: str | None = None):
        self.daemon = daemon
        self._rows: list[Run] = []

    def add(self, run: Run) -> None:
        self._rows.append(run if run.daemon or not self.daemon else replace(run, daemon=self.daemon))
        self._bound()

    def take(self) -> list[Run]:
        rows, self._rows = self._rows, []
        return rows

    def give_back(self, rows: list[Run]) -> None:
        """A flush that failed: its rows wait for the next one, before the ones added since."""
        self._rows[:0] = rows
        self._bound()

    def _bound(self) -> None:
        """At most KEPT_AT_MOST rows while the database stays away: the oldest go first."""
        del self._rows[:-KEPT_AT_MOST]

    def __len__(self) -> int:
        return len(self._rows)

