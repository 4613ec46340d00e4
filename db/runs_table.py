"""The `runs` table: a row per poll of a source and per pass of a job (parser/core/runs.py), written at
each flush in one statement, pruned by RETAIN's "runs". "What failed this week":

    select source, count(*) from runs where outcome = 'error' and started > now() - interval '7 days'
    group by 1
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from parser.core.errors import StorageError
from parser.core.runs import Run

from .schema import column_type
from .store import Database

NAME = "runs"
# Column -> its kind or SQL type, in the table's order (id first, apart).
COLUMNS: dict[str, str] = {
    "source": "text", "started": "time", "seconds": "number", "outcome": "text", "status": "integer",
    "entries": "integer", "new": "integer", "changed": "integer", "error": "text", "daemon": "text",
}
_SQL_TYPES: dict[str, sa.types.TypeEngine] = {"integer": sa.Integer()}


def table(metadata: sa.MetaData | None = None) -> sa.Table:
    """The table as this version makes it, with its index on (source, started): a source's last runs."""
    return sa.Table(NAME, metadata or sa.MetaData(),
                    sa.Column("id", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), primary_key=True,
                              autoincrement=True),
                    *[sa.Column(c, _SQL_TYPES.get(kind) or column_type(kind), nullable=c not in ("source", "started",
                                                                                                  "outcome"))
                      for c, kind in COLUMNS.items()],
                    sa.Index(f"{NAME}_source_started", "source", "started"),
                    sa.Index(f"{NAME}_started", "started"))


def create(conn: sa.Connection) -> None:
    """Make the table and its indexes (a step of the migration chain)."""
    table().create(conn, checkfirst=True)


def write(db: Database, runs: Sequence[Run]) -> int:
    """Insert `runs` in one transaction; return how many. Raise StorageError when the database refuses."""
    if not runs:
        return 0
    pg = db.engine.dialect.name == "postgresql"
    quote = db.engine.dialect.identifier_preparer.quote
    values = ", ".join(f"CAST(:{c} AS timestamptz)" if pg and kind == "time" else f":{c}"
                       for c, kind in COLUMNS.items())
    sql = f"INSERT INTO {NAME} ({', '.join(map(quote, COLUMNS))}) VALUES ({values})"
    try:
        with db.engine.begin() as conn:
            conn.execute(sa.text(sql), [asdict(run) for run in runs])
    except SQLAlchemyError as exc:
        error = getattr(exc, "orig", None) or exc
        raise StorageError(f"cannot write table {NAME}: {(str(error).strip().splitlines() or ['?'])[0][:300]}") \
            from None
    return len(runs)
