"""The `runs` table: a row per poll of a source and per pass 2 of a job (parser/core/runs.py): when it
started, how long it took, its outcome ("new", "unchanged", "not modified" or "error"), the HTTP status,
the entries, how many were new and changed, the error's text, and in a group the daemon that ran it; so
that a query says what failed this week: `select source, count(*) from runs where outcome = 'error' and
started > now() - interval '7 days' group by 1`. Made by the chain's step 6 (db/migrations.py); written at
each flush, all the rows since the last one in one statement and one transaction, never a transaction
per poll; pruned by RETAIN's "runs" (db/retention.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from parser.core.errors import StorageError
from parser.core.runs import Run

from .migrations import RUNS_COLUMNS
from .store import Database

NAME = "runs"


def write(db: Database, runs: Sequence[Run]) -> int:
    """Insert `runs` in one transaction; return how many. Raise StorageError when the database refuses or is
    away (the caller keeps them)."""
    if not runs:
        return 0
    db.migrate()  # run at start; here when the database was away then (the table is the chain's)
    pg = db.engine.dialect.name == "postgresql"
    quote = db.engine.dialect.identifier_preparer.quote
    values = ", ".join(f"CAST(:{c} AS timestamptz)" if pg and kind == "time" else f":{c}"
                       for c, kind in RUNS_COLUMNS.items())
    sql = f"INSERT INTO {NAME} ({', '.join(map(quote, RUNS_COLUMNS))}) VALUES ({values})"
    try:
        with db.engine.begin() as conn:
            conn.execute(sa.text(sql), [asdict(run) for run in runs])
    except SQLAlchemyError as exc:
        error = getattr(exc, "orig", None) or exc
        raise StorageError(f"cannot write table {NAME}: {(str(error).strip().splitlines() or ['?'])[0][:300]}") \
            from None
    return len(runs)
