"""The drivers' own bulk paths for a flush, on the connection of a transaction db/store.py holds.

SQLAlchemy's insert().on_conflict_do_nothing().returning() built a statement and a dict per row and
read a row back for each one stored: a flush of 200,000 rows took 3.6-6.5 times as long as sqlite3's
own executemany, and 2.1-2.4 times a psycopg COPY. Here the rows go as they are read (sequences of
cells in the order of `fields`) to the driver: sqlite3's executemany of one INSERT ... ON CONFLICT
(hash) DO NOTHING; PostgreSQL's COPY into a temporary table and one INSERT ... SELECT ... ON CONFLICT
(hash) from it, as db/upsert.py says for the UPDATES mode. Both count what was inserted and what
updated, turn an empty cell into NULL, and leave the commit to the caller.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice

from db.upsert import Target, on_conflict, stamped, versions_insert

# PostgreSQL: rows per COPY and INSERT ... SELECT, so that every statement ends well within
# store.STATEMENT_LIMIT (about 40 MB of 4 KB rows; docs/benchmarks.md).
COPY_ROWS = 10_000
_STAGED = "parser_flush_rows"  # the temporary table, dropped at the end of the transaction


@dataclass(frozen=True)
class Loaded:
    """What a load did: rows inserted (hashes new to the table), rows updated (an entry edited at its source),
    and, with UPDATES "history", the earlier versions it copied into `<table>_versions`."""
    inserted: int
    updated: int = 0
    versions: int = 0

    def __add__(self, other: Loaded) -> Loaded:
        return Loaded(self.inserted + other.inserted, self.updated + other.updated, self.versions + other.versions)


def sqlite_insert(connection, target: Target, fields: Sequence[str], rows: Sequence[Sequence],
                  quote: Callable) -> Loaded:
    """sqlite3: one executemany of an INSERT ... ON CONFLICT (hash) (db/upsert.py); an empty cell is
    NULL. Inserted rows are those with an id past the largest before; cursor.rowcount sums the rows each
    statement stored or updated (0 for an unchanged hash) and, unlike connection.total_changes, never
    counts a user's trigger's own rows. "history" goes through a temporary table (_sqlite_history), a
    round of each hash's versions at a time (versions_apart)."""
    table = quote(target.table)
    cursor = connection.cursor()
    try:
        before = cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0]
        touched = versions = 0
        if target.updates.widest == "history":
            for part in versions_apart(fields, rows):
                touched_part, versions_part = _sqlite_history(cursor, target, fields, part, quote)
                touched, versions = touched + touched_part, versions + versions_part
        else:  # one statement a row, in the file's order: of two versions the later applies last
            stamp, stamp_values = stamped(target, "sqlite")
            values = ", ".join(["?" if f == "hash" else "NULLIF(?, '')" for f in fields] + stamp_values)
            cursor.executemany(f"INSERT INTO {table} ({', '.join(map(quote, [*fields, *stamp]))}) VALUES ({values}) "
                               + on_conflict(target, fields, "sqlite", quote), rows)
            touched = cursor.rowcount
        inserted = cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE id > ?", (before,)).fetchone()[0]
        return Loaded(inserted, max(touched - inserted, 0), versions)
    finally:
        cursor.close()


def versions_apart(fields: Sequence[str], rows: Sequence[Sequence]) -> Sequence[Sequence[Sequence]]:
    """The rows in rounds where each hash comes once: an entry edited between two flushes has a version
    staged per poll, each to be kept in turn ("history"), so its versions go one a round in the order they
    were fetched (as staged when the times are equal); a round keeps the rows' order. Nearly every batch is
    one round, the rows as they are."""
    at = fields.index("hash")
    if len({row[at] for row in rows}) == len(rows):
        return [rows]
    fetched = fields.index("fetched") if "fetched" in fields else None
    versions: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        versions.setdefault(row[at], []).append(i)
    round_of = [0] * len(rows)
    for places in versions.values():
        for n, i in enumerate(sorted(places, key=lambda i: (rows[i][fetched] or "") if fetched is not None else "")):
            round_of[i] = n
    rounds: list[list[Sequence]] = [[] for _ in range(max(round_of) + 1)]
    for i, row in enumerate(rows):
        rounds[round_of[i]].append(row)
    return rounds


def _sqlite_history(cursor, target: Target, fields: Sequence[str], rows: Sequence[Sequence],
                    quote: Callable) -> tuple[int, int]:
    """The rows (each hash once) into a temporary table; the stored rows they edit copied into the versions
    table; then the upsert from the temporary table. Returns the rows the upsert stored or updated, and the
    versions copied."""
    names = ", ".join(map(quote, fields))
    columns = ", ".join(f"{quote(f)} TEXT" for f in fields)
    cursor.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGED}_h ({columns})")
    cursor.execute(f"DELETE FROM {_STAGED}_h")
    typed = ", ".join(quote(f) if f == "hash" else f"NULLIF({quote(f)}, '') AS {quote(f)}" for f in fields)
    cursor.executemany(f"INSERT INTO {_STAGED}_h ({names}) VALUES ({', '.join('?' * len(fields))})", rows)
    staged = f"(SELECT {typed} FROM {_STAGED}_h) s"
    cursor.execute(versions_insert(target, staged, fields, "sqlite", quote))
    versions = cursor.rowcount
    stamp, stamp_values = stamped(target, "sqlite")
    cursor.execute(f"INSERT INTO {quote(target.table)} ({', '.join(map(quote, [*fields, *stamp]))}) "
                   f"SELECT {', '.join([typed, *stamp_values])} FROM {_STAGED}_h WHERE true "
                   + on_conflict(target, fields, "sqlite", quote))
    touched = cursor.rowcount
    cursor.execute(f"DROP TABLE {_STAGED}_h")
    return touched, versions


def postgresql_copy(connection, target: Target, fields: Sequence[str], rows: Sequence[Sequence],
                    quote: Callable) -> Loaded:
    """psycopg 3: COPY each COPY_ROWS rows (binary: the server parses nothing) into a temporary table of
    text columns, then move them on, cast to the table's own types (move_staged)."""
    names = ", ".join(map(quote, fields))
    loaded = Loaded(0, 0)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {_STAGED} ({', '.join(f'{quote(f)} text' for f in fields)}) "
                       "ON COMMIT DROP")
        values = typed_values(cursor, quote(target.table), fields, quote)
        batches = iter(rows)
        while chunk := list(islice(batches, COPY_ROWS)):
            with cursor.copy(f"COPY {_STAGED} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["text"] * len(fields))
                for row in chunk:
                    copy.write_row(row)
            loaded += move_staged(cursor, _STAGED, target, fields, values, quote)
    return loaded


def typed_values(cursor, table: str, fields: Sequence[str], quote: Callable,
                 cell: Callable[[str], str] = str) -> list[str]:
    """Each field's value as the table stores it: `cell` of the text column (db/csv_load.py takes the
    spreadsheet escape off there), '' as NULL, cast to the column's type when it is not a string type (a
    string type is left to the INSERT's own assignment cast, which refuses a value too long for a
    varchar(n): an explicit cast would cut it)."""
    types = column_types(cursor, table)
    values = []
    for field in fields:
        value = cell(quote(field))
        if field == "hash":
            values.append(value)
            continue
        value = f"NULLIF({value}, '')"
        spelled, category = types.get(field, ("text", "S"))
        values.append(value if category == "S" else f"CAST({value} AS {spelled})")
    return values


def column_types(cursor, table: str) -> dict[str, tuple[str, str]]:
    """Each column's type as SQL spells it, and its category ('S': a string type)."""
    cursor.execute("SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typcategory FROM pg_attribute a "
                   "JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = %s::regclass AND a.attnum > 0 "
                   "AND NOT a.attisdropped", (table,))
    return {name: (spelled, category) for name, spelled, category in cursor.fetchall()}


def move_staged(cursor, staged: str, target: Target, fields: Sequence[str], values: Sequence[str],
                quote: Callable) -> Loaded:
    """PostgreSQL: INSERT the temporary table `staged`'s rows (`values`: each field's typed expression) into
    the target, as the UPDATES mode says (db/upsert.py); empty `staged`. A hash that comes n times (an entry
    edited between two polls of one batch) goes in n rounds, its versions in the order they were fetched
    (ON CONFLICT DO UPDATE may touch a row once per statement, and "history" keeps each version): the
    first at its place among the others, each later one an update."""
    names = ", ".join(map(quote, fields))
    table = quote(target.table)
    typed = ", ".join(f"{value} AS {quote(field)}" for field, value in zip(fields, values, strict=True))
    rounds = 1 if target.updates.widest == "ignore" else _most_versions(cursor, staged)  # DO NOTHING: any order
    fetched = f"{values[fields.index('fetched')]}, " if "fetched" in fields else ""
    clause = on_conflict(target, fields, "postgresql", quote)
    stamp, stamp_values = stamped(target, "postgresql")
    into = ", ".join(map(quote, [*fields, *stamp]))
    picked = ", ".join(["s.*", *stamp_values])
    loaded = Loaded(0, 0)
    for n in range(1, rounds + 1):
        if rounds == 1:  # nearly every part: each hash once
            source = f"SELECT {typed} FROM {staged}"
        else:
            source = (f"SELECT {names} FROM (SELECT {typed}, ctid AS parser_at, row_number() OVER (PARTITION BY "
                      f"hash ORDER BY {fetched}ctid) AS parser_round FROM {staged}) d WHERE parser_round = {n} "
                      "ORDER BY parser_at")
        versions = 0
        if target.updates.widest == "history":
            cursor.execute(versions_insert(target, f"({source}) s", fields, "postgresql", quote))
            versions = cursor.rowcount
        cursor.execute(f"WITH moved AS (INSERT INTO {table} ({into}) SELECT {picked} FROM ({source}) s {clause} "
                       "RETURNING (xmax = 0) AS fresh) "
                       "SELECT COUNT(*) FILTER (WHERE fresh), COUNT(*) FILTER (WHERE NOT fresh) FROM moved")
        inserted, updated = cursor.fetchone()
        loaded += Loaded(inserted, updated, versions)
    cursor.execute(f"TRUNCATE {staged}")
    return loaded


def _most_versions(cursor, staged: str) -> int:
    """How many times the hash that comes most often comes in `staged` (1: each once, nearly every part;
    0: empty). The window function that sorts a hash's versions sorts the whole part, rows and all; this
    looks at the hashes alone, so a part without a repeat goes in as it is."""
    cursor.execute(f"SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM {staged} GROUP BY hash) c")
    return int(cursor.fetchone()[0])
