"""A row of the `runs` table per poll of a source (db/runs_table.py), made in the main thread as the poll's
outcome is taken and kept until a flush writes them all together. A flush that fails keeps them for the
next; while the database stays away, no more than MAX_KEPT are kept (the oldest go first): the staged
records are what must not be lost, these only say how the polls went.
"""
from __future__ import annotations

from ..core.dates import iso
from ..fetch.host_slots import HostHeldError
from ..pipeline.sink import Staged
from .poll_outcome import PollOutcome

MAX_KEPT = 100_000


class PollRuns:
    def __init__(self, daemon: str | None):
        """`daemon`: who polled, in a group (host:pid); None alone."""
        self.daemon = daemon
        self.rows: list[dict] = []

    def add(self, outcome: PollOutcome, staged: Staged | None, ended: float) -> None:
        """The poll's row; `ended`: the wall clock's time now (the poll began outcome.seconds before). A poll
        held back by its host's Retry-After sent no request: no row."""
        error = outcome.fetch_error
        if isinstance(error, HostHeldError):
            return
        row: dict = {"source": outcome.source.name, "started": iso(ended - outcome.seconds),
                     "seconds": round(outcome.seconds, 3), "daemon": self.daemon}
        if outcome.error is not None:
            row.update(outcome="error", status=error.status if error is not None else None, error=outcome.error)
        elif outcome.answer.not_modified:
            row.update(outcome="not modified", status=outcome.answer.status)
        elif staged is not None:
            new, changed = len(staged.new), staged.changed
            row.update(outcome="new" if new or changed else "unchanged", status=outcome.answer.status, new=new,
                       changed=changed, entries=new + changed + staged.duplicates + outcome.blocked)
        self.rows.append(row)
        if len(self.rows) > MAX_KEPT:
            del self.rows[:len(self.rows) - MAX_KEPT]

    def written(self, count: int) -> None:
        """The first `count` rows are in the table."""
        del self.rows[:count]
