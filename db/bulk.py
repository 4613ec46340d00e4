"""The drivers' own bulk paths for a flush, on the connection of a transaction db/store.py holds.

SQLAlchemy's insert().on_conflict_do_nothing().returning() built a statement and a dict per row and
read a row back for each one stored: a flush of 200,000 rows took 3.6-6.5 times as long as sqlite3's
own executemany, and 2.1-2.4 times a psycopg COPY. Here the rows go as they are read (sequences of
cells in the order of `fields`) to the driver: sqlite3's executemany of one INSERT ... ON CONFLICT
(hash) DO NOTHING; PostgreSQL's COPY into a temporary table and one INSERT ... SELECT ... ON CONFLICT
(hash) DO NOTHING from it. Both count what was stored (a hash already there, or twice in the rows, is
stored once, the first time) and leave the commit to the caller.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import islice

# PostgreSQL: rows per COPY and INSERT ... SELECT, so that every statement ends well within
# store.STATEMENT_LIMIT (about 40 MB of 4 KB rows; 200,000 rows took 20 s in all on a 2-core machine).
COPY_ROWS = 10_000
_STAGED = "parser_flush_rows"  # the temporary table, dropped at the end of the transaction


def sqlite_insert(connection, table: str, fields: Sequence[str], rows: Sequence[Sequence], quote: Callable) -> int:
    """sqlite3: one executemany; cursor.rowcount sums the rows each INSERT stored (0 for a skipped
    hash), and, unlike connection.total_changes, never counts a user's trigger's own rows."""
    names = ", ".join(map(quote, fields))
    cursor = connection.cursor()
    try:
        cursor.executemany(f"INSERT INTO {quote(table)} ({names}) VALUES ({', '.join('?' * len(fields))}) "
                           "ON CONFLICT (hash) DO NOTHING", rows)
        return cursor.rowcount
    finally:
        cursor.close()


def postgresql_copy(connection, table: str, fields: Sequence[str], rows: Sequence[Sequence], quote: Callable) -> int:
    """psycopg 3: COPY each COPY_ROWS rows into a temporary table of the target's own column types (a
    hash over varchar(128) is refused there, as the table would refuse it), then move them on."""
    names = ", ".join(map(quote, fields))
    stored = 0
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {_STAGED} ON COMMIT DROP AS SELECT {names} FROM {quote(table)} "
                       "WITH NO DATA")
        types = _text_types(cursor)
        batches = iter(rows)
        while chunk := list(islice(batches, COPY_ROWS)):
            with cursor.copy(f"COPY {_STAGED} ({names}) FROM STDIN" + (" (FORMAT BINARY)" if types else "")) as copy:
                if types:
                    copy.set_types(types)
                for row in chunk:
                    copy.write_row(row)
            stored += move_staged(cursor, _STAGED, quote(table), names, names)
    return stored


def move_staged(cursor, staged: str, table: str, names: str, values: str) -> int:
    """PostgreSQL: INSERT the temporary table `staged`'s rows (`values`, in the order of the columns
    `names`) into `table` (quoted), skipping hashes it holds; empty `staged`; return the rows stored."""
    cursor.execute(f"INSERT INTO {table} ({names}) SELECT {values} FROM {staged} ON CONFLICT (hash) DO NOTHING")
    stored = cursor.rowcount
    cursor.execute(f"TRUNCATE {staged}")
    return stored


def _text_types(cursor) -> list[str] | None:
    """The temporary table's column types when every one is text or varchar: the rows then go in
    COPY's binary format, which the server need not parse (a fifth less time for the COPY). A user's
    own column of another type (a number, jsonb) is read from COPY's text format, as it is typed."""
    cursor.execute("SELECT atttypid::regtype::text FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                   "AND NOT attisdropped ORDER BY attnum", (_STAGED,))
    types = [name for (name,) in cursor.fetchall()]
    return types if set(types) <= {"text", "character varying"} else None
