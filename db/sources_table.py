"""The `sources` table: a row per source, with what the daemon knows of it and of its feed, written at
each flush, so that a query joins an entry to its feed: `select i.title, s.title from items i join
sources s on s.name = i.source`. The daemon never reads it back (state.json stays its own memory).

Written as an upsert of the rows that changed since this run last wrote them. What the daemon does not
know (a feed's title before its first answer after a restart: the feed said it, but state.json does not
keep it; a source this daemon never polled) is NULL in the row it hands here, and never overwrites a
value the table holds.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from parser.core.errors import StorageError

from .migrations import SOURCES_COLUMNS
from .store import Database

NAME = "sources"
# Column -> its kind or SQL type, in the table's order, as the chain's step made it (db/migrations.py).
# `address`: where the source is polled now when that is not `url` (a permanent redirect followed, a feed
# found on the page `url` is).
COLUMNS = SOURCES_COLUMNS
# Set from what the run knows, or left as they are when it knows nothing (NULL in the row written).
_KEPT_WHEN_UNKNOWN = ("title", "site", "description", "language", "last_poll", "last_success", "last_new",
                      "failures", "dead")


class SourcesTable:
    def __init__(self) -> None:
        self.written: dict[str, dict] = {}  # name -> the row as this run last wrote it

    def write(self, db: Database, rows: Sequence[Mapping]) -> int:
        """Upsert the rows (dicts of COLUMNS; `tags` a list) that differ from what this run last wrote;
        return how many. Raise StorageError when the database refuses or is away."""
        changed = [dict(row) for row in rows if self.written.get(row["name"]) != row]
        if not changed:
            return 0
        db.migrate()  # run at start; here when the database was away then (the table is the chain's)
        try:
            with db.engine.begin() as conn:
                conn.execute(sa.text(_upsert(conn.dialect)), [_params(row) for row in changed])
        except SQLAlchemyError as exc:
            error = getattr(exc, "orig", None) or exc
            raise StorageError(f"cannot write table {NAME}: {(str(error).strip().splitlines() or ['?'])[0][:300]}") \
                from None
        self.written.update((row["name"], row) for row in changed)
        return len(changed)


def _upsert(dialect: sa.Dialect) -> str:
    quote = dialect.identifier_preparer.quote
    pg = dialect.name == "postgresql"
    casts = {"time": "timestamptz", "list": "jsonb"} if pg else {}
    values = [f"CAST(:{c} AS {casts[k]})" if k in casts else f":{c}" for c, k in COLUMNS.items()]
    sets = []
    for column in list(COLUMNS)[1:]:
        new = f"excluded.{quote(column)}"
        if column in _KEPT_WHEN_UNKNOWN:
            new = f"COALESCE({new}, {NAME}.{quote(column)})"
        elif column == "last_status":  # NULL is a poll without an answer; unknown when the poll is
            new = f"CASE WHEN excluded.last_poll IS NULL THEN {NAME}.last_status ELSE {new} END"
        sets.append(f"{quote(column)} = {new}")
    return (f"INSERT INTO {NAME} ({', '.join(map(quote, COLUMNS))}) VALUES ({', '.join(values)}) "
            f"ON CONFLICT (name) DO UPDATE SET {', '.join(sets)}")


def _params(row: Mapping) -> dict:
    """A row as bound parameters: tags as JSON text; "" as NULL (unknown, or said to be nothing)."""
    params = {c: (None if row.get(c) == "" else row.get(c)) for c in COLUMNS}
    tags = row.get("tags")
    # No tags is NULL, as an entry's empty list is in `items`.
    params["tags"] = json.dumps(list(tags), ensure_ascii=False) if tags else None
    return params
