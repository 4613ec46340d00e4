"""The retention pass's SQL: rows older than their retention deleted, bodies emptied, versions and runs pruned,
in short transactions, so a flush running beside it (the daemon's own, another daemon's of a group) waits for
one of them at most.

A Task is one kind of pruning of one table: which rows (a time column older than a cutoff, of some sources),
and what is done to them. The pass walks the table by id, a window of SCAN_ROWS rows at a time: the ids due in
the window are read (a short read), then deleted or emptied in transactions of a size that adapts so each
takes about BATCH_SECONDS. So the whole pass reads the table once, whatever index it has, and never holds a
lock for longer than one batch.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from db.store import Database
from parser.core.errors import StorageError
from parser.core.setting_values import duration_text

BATCH_SECONDS = 0.25  # what a batch's transaction aims at; a flush beside it waits about this long
FIRST_BATCH = 500     # rows in the first batch; then halved or doubled towards BATCH_SECONDS
MAX_BATCH = 20_000
SCAN_ROWS = 20_000    # rows of the table looked at per read
VACUUM_PAGES = 2_000  # SQLite pages freed per PRAGMA incremental_vacuum step (8 MB of 4 KB pages)
DELETE, EMPTY = "delete", "empty"


@dataclass(frozen=True)
class Task:
    """Prune `table`: the rows whose `age_sql` (a time) is older than `age` seconds and for which `rows_sql` holds
    (their sources) are deleted, or (`action` EMPTY) get NULL in `emptied`. `key` is the table's primary key."""
    table: str
    age: float
    age_sql: str
    action: str = DELETE
    rows_sql: str = "TRUE"
    emptied: tuple[str, ...] = ()
    key: str = "id"
    whose: str = ""  # the sources or job the task is for, in the log's words ("" : the table's default)


@dataclass(frozen=True)
class Done:
    task: Task
    rows: int


def cutoff_value(db: Database, age: float, now: float) -> object:
    """The time `age` seconds before `now` as the table holds times: ISO 8601 text on SQLite (which sorts as the
    time does), a timestamp on PostgreSQL."""
    moment = datetime.fromtimestamp(now - age, UTC)
    return moment if db.engine.dialect.name == "postgresql" else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def existing(db: Database, tasks: Sequence[Task]) -> list[Task]:
    """The tasks whose table is there (a versions table only exists once a row kept a version; `runs` once made),
    with the columns the task reads."""
    try:
        with db.engine.connect() as conn:
            inspector = sa.inspect(conn)
            tables = set(inspector.get_table_names())
            wanted = {task.table for task in tasks} & tables
            columns = {t: {c["name"] for c in inspector.get_columns(t)} for t in wanted}
    except SQLAlchemyError as exc:
        raise StorageError(f"retain: cannot read the database: {_short(exc)}") from None
    kept = []
    for task in tasks:
        if task.table not in tables:
            continue
        needed = {task.key, *task.emptied} | ({"source"} if "source" in task.rows_sql else set())
        if needed <= columns[task.table]:
            kept.append(task)
    return kept


def prune(db: Database, task: Task, now: float, *, dry_run: bool = False, stop: threading.Event | None = None,
          spared: Callable[[], Sequence[str]] = tuple) -> int:
    """Run one task; return the rows deleted or emptied (with `dry_run`: that would be). Stops between two
    batches when `stop` is set. `spared`: hashes never deleted (the table's marks, parser/pipeline/history.py),
    read again before each batch."""
    quote = db.engine.dialect.identifier_preparer.quote
    table, key = quote(task.table), quote(task.key)
    due = f"{task.age_sql} < :cutoff AND ({task.rows_sql})"
    if task.action == EMPTY:
        due += " AND (" + " OR ".join(f"{quote(c)} IS NOT NULL" for c in task.emptied) + ")"
    cutoff = cutoff_value(db, task.age, now)
    done, size = 0, FIRST_BATCH
    try:
        for ids in _due_ids(db, table, key, due, cutoff):
            if dry_run:
                done += len(ids)
                continue
            while ids:
                if stop is not None and stop.is_set():
                    return done
                batch, ids = ids[:size], ids[size:]
                started = time.monotonic()
                done += _apply(db, task, table, key, batch, spared())
                size = _next_size(size, time.monotonic() - started)
    except SQLAlchemyError as exc:
        raise StorageError(f"retain: cannot prune table {task.table}: {_short(exc)}") from None
    return done


def _due_ids(db: Database, table: str, key: str, due: str, cutoff: object) -> Iterator[list[int]]:
    """The ids due, a window of SCAN_ROWS rows (by id) at a time; each read its own short transaction."""
    last = None
    while True:
        with db.engine.connect() as conn:
            after = "" if last is None else f"WHERE {key} > :last "
            high = conn.execute(sa.text(f"SELECT MAX({key}) FROM (SELECT {key} FROM {table} {after}"
                                        f"ORDER BY {key} LIMIT {SCAN_ROWS}) w"), {"last": last}).scalar()
            if high is None:
                return
            since = "" if last is None else f"{key} > :last AND "
            ids = list(conn.execute(sa.text(f"SELECT {key} FROM {table} WHERE {since}{key} <= :high AND {due}"),
                                    {"last": last, "high": high, "cutoff": cutoff}).scalars())
        if ids:
            yield ids
        last = high


def _apply(db: Database, task: Task, table: str, key: str, ids: Sequence[int], spared: Sequence[str]) -> int:
    quote = db.engine.dialect.identifier_preparer.quote
    keep = " AND hash NOT IN :spared" if spared and task.action == DELETE else ""
    if task.action == EMPTY:
        statement = f"UPDATE {table} SET {', '.join(f'{quote(c)} = NULL' for c in task.emptied)} WHERE {key} IN :ids"
    else:
        statement = f"DELETE FROM {table} WHERE {key} IN :ids{keep}"
    query = sa.text(statement).bindparams(sa.bindparam("ids", expanding=True))
    values: dict[str, object] = {"ids": list(ids)}
    if keep:
        query = query.bindparams(sa.bindparam("spared", expanding=True))
        values["spared"] = list(spared)
    with db.engine.begin() as conn:
        return int(conn.execute(query, values).rowcount or 0)


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _next_size(size: int, took: float) -> int:
    """The next batch's rows: halved when this one took over BATCH_SECONDS, doubled when it took under half."""
    if took > BATCH_SECONDS:
        return max(size // 2, 50)
    if took < BATCH_SECONDS / 2:
        return min(size * 2, MAX_BATCH)
    return size


def said(done: Sequence[Done], *, dry_run: bool = False) -> str:
    """parser.log's line after "retain: ": per table, what went ("items 1,204 rows deleted (older than 365d),
    8,311 bodies emptied (older than 30d)"); with `dry_run`, what would ("1,204 rows to delete")."""
    if not done:
        return "no table to prune (RETAIN, and each source's and job's retain, keep every row there is)"
    tables: dict[str, list[str]] = {}
    for d in done:
        if not d.rows:
            continue
        noun = ("body" if d.rows == 1 else "bodies") if d.task.action == EMPTY else ("row" if d.rows == 1 else "rows")
        verb = {(EMPTY, False): "emptied", (DELETE, False): "deleted", (EMPTY, True): "to empty",
                (DELETE, True): "to delete"}[d.task.action, dry_run]
        what = f"{noun} {verb}"
        whose = f", {d.task.whose}" if d.task.whose else ""
        tables.setdefault(d.task.table, []).append(f"{d.rows:,} {what} (older than {duration_text(d.task.age)}{whose})")
    if not tables:
        return "nothing older than its retention"
    return "; ".join(f"{table} {', '.join(parts)}" for table, parts in tables.items())


# -- the space the rows took ---------------------------------------------------------------------------

def release_space(db: Database, stop: threading.Event | None = None) -> int:
    """After rows were deleted: SQLite with auto_vacuum INCREMENTAL (db/schema.py's sqlite_incremental: every
    file made since this version) gives the free pages back to the file system, VACUUM_PAGES at a time (each
    step a short write); without it the free pages are reused by later rows, so the file stops growing.
    PostgreSQL: autovacuum makes the space reusable; nothing to do. Returns the pages freed."""
    if db.engine.dialect.name != "sqlite":
        return 0
    try:
        return _incremental_vacuum(db, stop)
    except SQLAlchemyError as exc:
        raise StorageError(f"retain: cannot free the deleted rows' pages: {_short(exc)}") from None


def _incremental_vacuum(db: Database, stop: threading.Event | None) -> int:
    freed = 0
    with db.engine.connect() as conn:
        driver = conn.connection.driver_connection  # sqlite3's own: it frees a page per row it steps over
        assert driver is not None, "a connection checked out is open"
        if driver.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
            return 0
        while not (stop is not None and stop.is_set()):
            free = driver.execute("PRAGMA freelist_count").fetchone()[0]
            if not free:
                break
            driver.execute(f"PRAGMA incremental_vacuum({VACUUM_PAGES})").fetchall()
            driver.commit()
            freed += min(free, VACUUM_PAGES)
    return freed


def vacuum(db: Database, tables: Sequence[str]) -> None:
    """`retain --vacuum`: the file (SQLite: VACUUM, which also turns on auto_vacuum INCREMENTAL for a file made
    before it) or the tables (PostgreSQL: VACUUM FULL) rewritten, their free space returned to the system. Both
    lock out writers while they run: flushes wait (and after DB_TIMEOUT keep their rows staged)."""
    quote = db.engine.dialect.identifier_preparer.quote
    try:
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if db.engine.dialect.name == "sqlite":
                conn.exec_driver_sql("PRAGMA auto_vacuum = INCREMENTAL")  # taken up by the VACUUM's rewrite
                conn.exec_driver_sql("VACUUM")
                return
            present = set(sa.inspect(conn).get_table_names())
            for table in tables:
                if table in present:
                    conn.exec_driver_sql(f"VACUUM FULL {quote(table)}")
    except SQLAlchemyError as exc:
        raise StorageError(f"retain: cannot vacuum: {_short(exc)}") from None
