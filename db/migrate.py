"""Brings a table made by an older version (0.5.x: every column TEXT, '' for what was missing) to this
version's shape (db/schema.py), with its rows, inside the one transaction of the step or the
ensure_table that holds it (db/migrations.py): both PostgreSQL and SQLite change tables
transactionally, so a kill or a refusal at any step leaves the table as it was, and a table is at one
version or the next, never between. Each table's shape version is a row of `parser_schema` (written in
the same transaction), as a job's table is made, and changed, on its own.
"""
from __future__ import annotations

import logging
import sqlite3
from datetime import UTC, datetime

import sqlalchemy as sa

from parser.core.errors import SchemaRefusedError, StorageError

from .schema import FEEDS_TABLE, SCHEMA_VERSION, VERSIONS_TABLE, Shape, pg_cast, type_sql

log = logging.getLogger("parser")
FIRST_VERSION = 1  # a table with no row in parser_schema was made by 0.5.x
# PostgreSQL SQLSTATE classes that pass (connection, resources, operator, rollback, a lock waited on):
# tried again later. Any other answer (a value that does not cast, no privilege) is a refusal.
_PASSING_CLASSES = ("08", "40", "53", "55", "57")
_EMPTY = "''"


def version_of(conn: sa.Connection, table: str) -> int | None:
    """The table's recorded version; None when none is recorded. parser_schema is made by the chain's step 2
    (db/migrations.py), before any table that has a row in it: nothing is created here."""
    quote = conn.dialect.identifier_preparer.quote
    return conn.execute(sa.text(f"SELECT version FROM {quote(VERSIONS_TABLE)} WHERE table_name = :t"),
                        {"t": table}).scalar()


def record_version(conn: sa.Connection, table: str, *, migrated: bool) -> None:
    """Write the table's version; `migrated` (an older table brought up): when, else NULL (made so)."""
    quote = conn.dialect.identifier_preparer.quote
    now = datetime.now(UTC) if migrated else None
    when: datetime | str | None = now
    if now is not None and conn.dialect.name != "postgresql":
        when = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    conn.execute(sa.text(f"INSERT INTO {quote(VERSIONS_TABLE)} (table_name, version, migrated) "
                         "VALUES (:t, :v, :m) ON CONFLICT (table_name) DO UPDATE SET version = excluded.version, "
                         "migrated = excluded.migrated"), {"t": table, "v": SCHEMA_VERSION, "m": when})


def upgrade(conn: sa.Connection, inspector: sa.Inspector, table: Shape, version: int) -> None:
    """Bring `table` from `version` to SCHEMA_VERSION in the caller's transaction; raise
    SchemaRefusedError when the database refuses a step (nothing is changed then), StorageError when
    it is away or a lock was waited on too long (tried again at the next flush)."""
    if version > SCHEMA_VERSION:
        raise SchemaRefusedError(f"table {table.name} was made by a newer version of the parser (schema "
                                 f"{version}; this one knows {SCHEMA_VERSION}): run the newer version")
    present = {c["name"]: c["type"] for c in inspector.get_columns(table.name)}
    log.info("table %s: bringing it from schema %d (0.5.x) to %d: typed columns, NULL for '', %s", table.name,
             version, SCHEMA_VERSION, "its indexes" if table.indexes() else "the new columns")
    try:
        if conn.dialect.name == "postgresql":
            # A big table's rewrite may take longer than a flush's statement may: bounded by the lock wait only.
            conn.execute(sa.text("SET LOCAL statement_timeout = 0"))
        emptied = _emptied_rows(conn, table, present)  # counted before a cast makes them NULL
        retyped = _columns(conn, table, present)
        _nulls(conn, table, present, retyped)
        for index, columns in table.indexes():
            quote = conn.dialect.identifier_preparer.quote
            conn.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {quote(index)} ON {quote(table.name)} "
                                 f"({', '.join(map(quote, columns))})"))
        record_version(conn, table.name, migrated=True)
    except sa.exc.SQLAlchemyError as exc:
        raise refusal(exc, table, retyped_hint(conn, table, present)) from None
    log.info("table %s: now schema %d (%d rows had '' made NULL)", table.name, SCHEMA_VERSION, emptied)


def _emptied_rows(conn: sa.Connection, table: Shape, present: dict[str, sa.types.TypeEngine]) -> int:
    """The rows holding '' in a text column of ours: each is made NULL, by _nulls or (PostgreSQL's times and
    lists) by the cast, which takes a blank for '' too (pg_cast). One count before either, so that the log
    says the same figure on both databases for the same rows (the cast's NULLs went uncounted before)."""
    quote = conn.dialect.identifier_preparer.quote
    cast = conn.dialect.name == "postgresql"
    tests = [f"btrim({quote(c)}) = {_EMPTY}" if cast and table.kinds[c] != "text" else f"{quote(c)} = {_EMPTY}"
             for c in table.columns[1:] if c in present and isinstance(present[c], sa.String)]
    if not tests:
        return 0
    return conn.execute(sa.text(f"SELECT count(*) FROM {quote(table.name)} WHERE {' OR '.join(tests)}")).scalar_one()


def _columns(conn: sa.Connection, table: Shape, present: dict[str, sa.types.TypeEngine]) -> list[str]:
    """Add the columns the table lacks, typed; PostgreSQL: TEXT columns of another kind cast to it, in one
    ALTER TABLE (one rewrite of the table). Return the columns cast."""
    quote = conn.dialect.identifier_preparer.quote
    added = [f"ADD COLUMN {quote(c)} {type_sql(table.kinds[c], conn.dialect)}" for c in table.columns
             if c not in present]
    if conn.dialect.name != "postgresql":  # SQLite: one column per ALTER; a time and a list stay TEXT
        for clause in added:
            conn.execute(sa.text(f"ALTER TABLE {quote(table.name)} {clause}"))
        return []
    retyped = [c for c in table.columns[1:] if c in present and table.kinds[c] != "text"
               and isinstance(present[c], sa.String)]
    clauses = [*added, *(f"ALTER COLUMN {quote(c)} TYPE {type_sql(table.kinds[c], conn.dialect)} "
                         f"USING {pg_cast(quote(c), table.kinds[c])}" for c in retyped)]
    if clauses:
        conn.execute(sa.text(f"ALTER TABLE {quote(table.name)} {', '.join(clauses)}"))
    return retyped


def _nulls(conn: sa.Connection, table: Shape, present: dict[str, sa.types.TypeEngine], retyped: list[str]) -> int:
    """'' becomes NULL in every text column of ours (a user's own column is left as it is), in one
    UPDATE of the rows that hold one; return how many rows."""
    quote = conn.dialect.identifier_preparer.quote
    emptied = [quote(c) for c in table.columns[1:] if c in present and c not in retyped
               and isinstance(present[c], sa.String)]
    if not emptied:
        return 0
    sets = ", ".join(f"{c} = NULLIF({c}, '')" for c in emptied)
    result = conn.execute(sa.text(f"UPDATE {quote(table.name)} SET {sets} "
                                  f"WHERE {' OR '.join(f'{c} = {_EMPTY}' for c in emptied)}"))
    return result.rowcount


def retyped_hint(conn: sa.Connection, table: Shape, present: dict[str, sa.types.TypeEngine]) -> list[str]:
    """The columns a cast may have refused (PostgreSQL), for the message."""
    if conn.dialect.name != "postgresql":
        return []
    return [c for c in table.columns[1:] if c in present and table.kinds[c] != "text"]


def refusal(exc: sa.exc.SQLAlchemyError, table: Shape, cast: list[str]) -> StorageError:
    """The error to raise for a failed step: a passing one (StorageError: tried again at the next flush)
    or a refusal (SchemaRefusedError: exit 2 at start), in words that say what to do."""
    error = getattr(exc, "orig", None) or exc
    said = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    head = (f"table {table.name} (made by parser 0.5.x) cannot be brought to this version's shape: the "
            f"database refused ({said}); nothing was changed (it is as 0.5.x left it). ")
    sqlstate = getattr(error, "sqlstate", None) or ""
    name = getattr(error, "sqlite_errorname", "") or ""
    if sqlstate[:2] in _PASSING_CLASSES or name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL")) or (
            not sqlstate and not isinstance(error, sqlite3.Error)):
        return StorageError(f"table {table.name}: cannot bring it to this version's shape now ({said}): "
                            "nothing was changed; tried again at the next flush")
    if sqlstate[:2] == "22":
        where = " OR ".join(f"{c}::text = '...'" for c in cast) or "..."
        return SchemaRefusedError(head + f"A value of {', '.join(cast) or 'a column'} is not of its new type "
                                  f"(the value is in the message): find it (SELECT id FROM {table.name} WHERE "
                                  f"{where}), set it to NULL or mend it, and start the daemon again")
    if sqlstate == "42501" or name.startswith("SQLITE_READONLY") or name == "SQLITE_CANTOPEN":
        return SchemaRefusedError(head + "The database user of DB_URL may not change it: start the daemon once "
                                  f"as the table's owner (or ALTER TABLE {table.name} OWNER TO this user; SQLite: make "
                                  "the file and its folder writable), then as before")
    what = "its feeds' entries" if table.name == FEEDS_TABLE else "the job's objects"
    return SchemaRefusedError(head + f"Mend what the message names (a trigger or a constraint of yours on "
                              f"{table.name}), then start the daemon again; 0.5.x still reads the table and "
                              f"{what} stay staged until then")
