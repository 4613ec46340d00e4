"""Rows spread over a table, as marks of what a database held: hashes.json keeps them beside the
newest rows (parser/pipeline/history.py), so a table whose newest rows were deleted is told from
another database. Read-only; a handful of index lookups by id."""
from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from db.store import Database
from parser.core.errors import StorageError


def spread_hashes(db: Database, table: str, count: int) -> list[str]:
    """The hashes of up to `count` rows at evenly spaced ids, from the oldest on (the newest left
    out: they are the other mark)."""
    quote = db.engine.dialect.identifier_preparer.quote
    try:
        with db.engine.connect() as conn:
            low, high = conn.execute(sa.text(f"SELECT min(id), max(id) FROM {quote(table)}")).one()
            if low is None:
                return []
            steps = sorted({low + (high - low) * i // (count + 1) for i in range(count)})
            picks = " UNION ALL ".join(
                f"SELECT (SELECT hash FROM {quote(table)} WHERE id >= :at{i} ORDER BY id LIMIT 1)"
                for i in range(len(steps)))
            found = conn.execute(sa.text(picks), {f"at{i}": at for i, at in enumerate(steps)}).scalars()
            return list(dict.fromkeys(h for h in found if h))
    except SQLAlchemyError as exc:
        raise StorageError(f"cannot read table {table}: {str(exc).splitlines()[0][:300]}") from None
