"""A sink's second half: the staging CSV's batches loaded into the table (db/bulk.py; a value the database
refuses found by halving and set aside, parser/pipeline/quarantine.py), and the mark of the database its
hashes went into (parser/pipeline/history.py).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from db.bulk import Loaded
from db.store import Database
from db.upsert import Updates

from ..core.errors import RecordRefusedError
from ..core.record import safe_record
from .batch_read import read_parts
from .history import History
from .quarantine import set_aside
from .staging import ESCAPED_START, StagingFile, read_header


class FlushCount(NamedTuple):
    written: int  # rows inserted
    updated: int  # rows an update changed (an entry edited at its source)
    already: int  # rows the table held as they were (a batch loaded again, an unchanged entry rechecked)
    versions: int = 0  # earlier versions of updated rows copied into `<table>_versions` (UPDATES "history")


class Flusher:
    """One table's flush: `columns` (hash first) from `staging`, as `updates` says (db/upsert.py)."""

    def __init__(self, table: str, columns: tuple[str, ...], staging: StagingFile, history: History, *,
                 folder: Path, updates: str | Updates = "update"):
        self.table, self.columns, self.staging, self.history = table, columns, staging, history
        self.folder, self.updates = folder, updates

    def flush(self, db: Database) -> FlushCount:
        """Load every pending batch into the table; return what was written, updated, already stored.

        Rotate, insert (or update, as `updates` says: db/upsert.py) by hash, commit, then delete the batch:
        a crash anywhere in between is repaired by doing it again, and a row updated already is left as it
        is the second time. A batch read here goes in parts of batch_read.PART_CHARS, each committed: after
        a crash or a failed part, the parts already in are counted as already stored when loaded again.
        """
        self.staging.rotate()
        written = updated = already = versions = 0
        for batch in self.staging.batches():
            loaded, rows = self._load(db, batch)
            os.remove(batch)
            written, updated = written + loaded.inserted, updated + loaded.updated
            already += rows - loaded.inserted - loaded.updated
            versions += loaded.versions
        if written or already or updated:  # the mark of the database these hashes went into (pipeline/history.py)
            self.history.flushed(db, self.table)
        return FlushCount(written, updated, already, versions)

    def _load(self, db: Database, batch: Path) -> tuple[Loaded, int]:
        """Load one batch file; return (what was loaded, rows in it). PostgreSQL parses the file itself;
        when it cannot or refuses something, the file is read here and inserted as rows, a part at a
        time: the memory a flush takes follows the part, not the file."""
        loaded = db.insert_file(self.table, self.columns, batch, read_header(batch) or (),
                                escaped_start=ESCAPED_START, mode=self.updates)
        if loaded is not None:
            return loaded
        done, rows = Loaded(0, 0), 0
        for cells in read_parts(batch):  # each part inserted (its own transaction) and let go before the next
            for unsafe in cells.unsafe:  # a file staged by an older version: text made safe as intake.decide does
                numbered = {str(i): cell for i, cell in enumerate(cells.rows[unsafe])}
                cells.rows[unsafe] = tuple(safe_record(numbered).values())
            if cells.rows:
                done += self._insert(db, cells.header, cells.rows)
            rows += len(cells.rows)
        return done, rows

    def _insert(self, db: Database, fields: Sequence[str], rows: Sequence[Sequence[str | None]]) -> Loaded:
        """Insert rows (cells in the order of `fields`); when the database refuses a value, find the
        refused rows by halving (a few transactions for a few bad rows among thousands), set them aside
        and insert the others."""
        try:
            return db.insert_new(self.table, self.columns, rows, fields=fields, mode=self.updates)
        except RecordRefusedError as exc:
            if len(rows) == 1:
                set_aside(self.folder, self.table, dict(zip(fields, rows[0], strict=True)), str(exc))
                return Loaded(0, 0)
        middle = len(rows) // 2
        return self._insert(db, fields, rows[:middle]) + self._insert(db, fields, rows[middle:])
