"""The `runs` table: a row per poll of a source (when it started, how long it took, its outcome: "new",
"unchanged", "not modified" or "error", the HTTP status, the feed's entries, how many were new and
changed, the error's text, and in a group the daemon that polled), so that a query says what failed
this week: `select source, count(*) from runs where outcome = 'error' and started > now() - interval
'7 days' group by 1`. Made by the chain's step (db/migrations.py); written at each flush, all the
rows since the last one in one statement and one transaction, never a transaction per poll.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from parser.core.errors import StorageError

from .migrations import RUNS_COLUMNS
from .store import Database

NAME = "runs"


def write(db: Database, rows: Sequence[Mapping]) -> int:
    """Insert the rows (dicts of RUNS_COLUMNS; `started` ISO 8601 UTC text) in one transaction; return how
    many. Raise StorageError when the database refuses or is away (the caller keeps them)."""
    if not rows:
        return 0
    db.migrate()  # run at start; here when the database was away then (the table is the chain's)
    pg = db.engine.dialect.name == "postgresql"
    table = sa.table(NAME, *[sa.column(c) for c in RUNS_COLUMNS])
    params = [{c: row.get(c) for c in RUNS_COLUMNS} for row in rows]
    if pg:  # a timestamptz column takes a datetime from the driver
        for param in params:
            param["started"] = datetime.fromisoformat(str(param["started"]))
    try:
        with db.engine.begin() as conn:
            conn.execute(table.insert(), params)
    except SQLAlchemyError as exc:
        error = getattr(exc, "orig", None) or exc
        raise StorageError(f"cannot write table {NAME}: {(str(error).strip().splitlines() or ['?'])[0][:300]}") \
            from None
    return len(params)
