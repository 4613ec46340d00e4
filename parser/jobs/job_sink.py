"""A two-pass job's sink: the feeds' Sink (parser/pipeline/sink.py) with what a job's table has besides, its
fields' declared kinds (typed columns, db/schema.py) and `gone`, the time an object was found gone at its
address (a 404/410 at two revisits in a row, parser/jobs/pass2.py). The row is never deleted.

Under --dry-run a JobPrintSink takes its place: the PrintSink, noting no gone object (it writes nothing).

A gone object is noted in gone.txt (`time <tab> URL`, appended and fsynced before its link's status says
gone, so a kill loses none) and written at the flush, after the staged records, by
`UPDATE <job> SET gone = time WHERE url = URL AND gone IS NULL`: doing it twice changes nothing, so the
file is renamed to gone.flushing.txt first and removed once the update is committed; a crash in between
redoes it at the next flush.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from db.schema import TableSpec
from db.store import Database

from ..core import durable
from ..core.dates import iso
from ..core.errors import StorageError
from ..pipeline.sink import FlushCount, PrintSink, RecordSink, Sink

log = logging.getLogger("parser")
GONE_FILE = "gone.txt"
GONE_FLUSHING = "gone.flushing.txt"


class JobRecordSink(RecordSink, Protocol):
    """Where pass 2 stages a job's records: its JobSink, or --dry-run's JobPrintSink in its place."""

    def gone(self, url: str, at: float) -> None:
        """The object at `url` was found gone at `at` (epoch)."""
        ...


class JobSink(Sink):
    def __init__(self, *, kinds: Mapping[str, str], **kwargs: Any):
        super().__init__(**kwargs)
        self.kinds = dict(kinds)  # its table's typed columns, made at start (flush_all.prepare_tables)

    def table_spec(self) -> TableSpec:
        return replace(super().table_spec(), kinds=self.kinds)

    def gone(self, url: str, at: float) -> None:
        """The object at `url` was found gone at `at` (epoch): kept for the flush (durably, before the link's
        status says so)."""
        stamp = iso(at)
        durable.append(self.folder / GONE_FILE, f"{stamp}\t{' '.join(url.split())}\n".encode())

    def flush(self, db: Database | None) -> FlushCount:
        assert db is not None, "only --dry-run runs without a database, and its sink is a PrintSink"
        # Typed, should the start not have made it (the database away then); else only looked up.
        db.make_table(self.table_spec())  # as the start made it (flush_all.prepare_tables)
        count = super().flush(db)
        self._flush_gone(db)
        return count

    def _flush_gone(self, db: Database) -> None:
        pending, flushing = self.folder / GONE_FILE, self.folder / GONE_FLUSHING
        if not flushing.exists():
            if not pending.exists():
                return
            os.replace(pending, flushing)
        marks = _read_gone(flushing)
        if marks:
            table = db.table(self.table, self.columns[1:], self.kinds)
            postgres = db.engine.dialect.name == "postgresql"
            update = (sa.update(table).where(table.c.url == sa.bindparam("u"), table.c.gone.is_(None))
                      .values(gone=sa.bindparam("g")))
            rows = [{"u": url, "g": datetime.fromisoformat(stamp) if postgres else stamp} for stamp, url in marks]
            try:
                with db.engine.begin() as conn:
                    done = conn.execute(update, rows).rowcount
            except SQLAlchemyError as exc:
                raise StorageError(f"cannot mark gone objects in table {self.table}: "
                                   f"{' '.join(str(exc.orig if hasattr(exc, 'orig') else exc).split())[:300]}") \
                    from None
            log.info("flush: %d rows of %s marked gone (their page answered 404/410 twice)", max(done, 0), self.table)
        os.remove(flushing)


class JobPrintSink(PrintSink):
    """--dry-run's sink of a job: a PrintSink, which writes nothing, a gone object's mark included."""

    def gone(self, url: str, at: float) -> None:
        pass


def _read_gone(path: Path) -> list[tuple[str, str]]:
    """(time, URL) of each whole line of a gone file; a line torn by a crash is left out."""
    marks = []
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            stamp, _, url = raw.decode("utf-8", "replace").rstrip("\n").partition("\t")
            if url:
                marks.append((stamp, url))
    return marks
