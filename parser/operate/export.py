"""`parser-daemon export`: a table's rows out again, as JSON lines, CSV or Atom, for other tools and cron.

The rows are read in the order of the table's key (`id`; `version` in a `_versions` table, where an id
repeats) in chunks of CHUNK_ROWS, each its own short read, and written as they come:
memory stays flat however many rows there are, and the export never holds a SQLite database for longer
than a chunk's read (a SQLite writer waits for every reader before it commits, so one long read would
make a running daemon's flush give up at DB_TIMEOUT). The columns are read from the table itself, so items, a
job's table and a table an older version made (every column TEXT, '' for a missing date) all export.
Only DB_URL is read from params.py: nothing else of the daemon's settings (or secrets) is needed.
`--cursor FILE` picks the rows a chain of runs has not written yet (parser/operate/export_cursor.py).
"""
from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, BinaryIO
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from db import search_index, sources_table
from db.schema import FEEDS_TABLE, KNOWN_KINDS, VERSIONS_TABLE
from db.store import DEFAULT_TIMEOUT, connect_args

from ..core.dates import format_utc
from ..core.errors import SettingsError, StorageError
from ..core.setting_values import duration_problem, duration_seconds
from ..settings.params import db_url_of
from ..settings.read import SettingsRead
from .export_cursor import advancing
from .export_formats import write_atom, write_csv, write_jsonl

FORMATS = ("jsonl", "csv", "atom")
CHUNK_ROWS = 500  # rows a read: a few MB of HTML bodies at most, and a hold on a SQLite file of milliseconds
SCAN_ROWS = 20_000  # --cursor: (key, changed) pairs a read, a few hundred KB
# New or changed: what a cron job taking only the new wants. `stored` (when a flush wrote the row) is what
# makes a chain of runs `--since` the previous run's start miss nothing: an entry polled before that start
# and flushed after it has an older `fetched`. `changed` and `fetched` stand in for rows stored before the
# column existed (NULL there).
SINCE_COLUMNS = ("stored", "changed", "fetched")
# A flush's rows carry the time its transaction began, and are seen when it commits: a run starting in
# between does not see them, so `stored` is compared from this much before `--since` (a flush's statements
# are bounded by store.STATEMENT_LIMIT each; a row may come twice in a chain, never not at all).
STORED_OVERLAP = timedelta(minutes=10)
SINCE_FORMS = ("an ISO 8601 time (2024-05-20, 2024-05-20T08:30:00Z, 2024-05-20T10:30:00+02:00; "
               "no zone is UTC) or a duration back from now (7d, 12h, 30m, 90s)")


@dataclass(frozen=True)
class ExportRequest:
    table: str = "items"
    sources: tuple[str, ...] = ()
    since: str | None = None       # as given: a time or a duration (since_time reads it)
    format: str = "jsonl"
    output: Path | None = None     # None: standard output
    bom: bool = False              # csv: a UTF-8 byte order mark first, for Excel
    cursor: Path | None = None     # only the rows new or changed since the run that last wrote this file


def run_export(params_path: Path, request: ExportRequest, stdout: BinaryIO, stderr: IO[str], *,
               now: datetime) -> int:
    """The command: 0 written, 1 the database could not be read or the file written, 2 a bad argument
    or params file (said on stderr in one line)."""
    try:
        since = since_time(request.since, now) if request.since is not None else None
        db_url = read_db_url(params_path)
    except SettingsError as exc:
        print(f"settings error: {exc}", file=stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=stderr)
        return 2
    try:
        count = export(db_url, request, stdout, since=since, now=now)
    except ValueError as exc:  # the table or a filter does not fit the database
        print(f"error: {exc}", file=stderr)
        return 2
    except StorageError as exc:
        print(f"error: {exc}", file=stderr)
        return 1
    if request.output is not None:
        print(f"{count} rows of {request.table} written to {request.output} ({request.format})", file=stderr)
    return 0


def since_time(text: str, now: datetime) -> datetime:
    """--since: an ISO 8601 time (no zone: UTC), or a duration ("7d") back from `now`."""
    seconds = duration_seconds(text)
    if seconds is not None:
        if problem := duration_problem(text):
            raise ValueError(f"--since {text!r}: {problem}")
        return now - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since {text!r} is no time; give {SINCE_FORMS}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def read_db_url(params_path: Path) -> str:
    """DB_URL from params.py (its default when unset), checked and resolved as the daemon does; the rest
    of the file is not checked, so an export needs no source's credentials to be valid."""
    read = SettingsRead(params_path, load=db_url_of)  # type: ignore[arg-type]  # within the daemon's time limit
    url = read.result(wait=read.limit)
    while url is None:
        url = read.result(wait=0.05)
    return url  # type: ignore[return-value]


def export(db_url: str, request: ExportRequest, stdout: BinaryIO, *, since: datetime | None,
           now: datetime) -> int:
    """Write the table's rows (those asked for) to -o's file or to `stdout`; the number written."""
    engine = read_only_engine(db_url)
    try:
        plan = _plan(engine, request, since)
        if request.cursor is not None:
            return _export_by_cursor(engine, plan, request, request.cursor, stdout, now)
        # closing(): a write that fails (a closed pipe) ends the read before the engine goes, not at the
        # garbage collector's leisure on a connection already closed
        with _output(request.output, stdout) as out, closing(_rows(engine, plan)) as rows:
            return _write(out, request, plan, rows, now)
    except SQLAlchemyError as exc:
        raise StorageError(f"cannot read table {request.table}: {_short(exc)}") from None
    finally:
        engine.dispose()


def read_only_engine(db_url: str) -> sa.Engine:
    """Read only: a SQLite file is opened with mode=ro (never created, never written), a PostgreSQL
    session is read-only."""
    url = sa.engine.make_url(db_url)
    try:
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
            path = Path(url.database)
            if not path.is_file():
                raise StorageError(f"no database at {path} (DB_URL): nothing is stored yet")
            uri = f"file:{quote(str(path.absolute()))}?mode=ro"
            return sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True,
                                                                                   timeout=DEFAULT_TIMEOUT))
        engine = sa.create_engine(url, connect_args=connect_args(db_url, DEFAULT_TIMEOUT))
        if engine.dialect.name == "postgresql":
            engine = engine.execution_options(postgresql_readonly=True)
        return engine
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise StorageError(f"cannot use DB_URL: {exc}") from None


@dataclass(frozen=True)
class _Plan:
    table: sa.TableClause
    columns: tuple[str, ...]
    convert: tuple[Callable[[Any], Any], ...]  # per column: the stored value -> the typed value
    where: tuple[sa.ColumnElement, ...]
    key: str | None  # the column the rows are paged by, unique and an integer; None: one read


def _plan(engine: sa.Engine, request: ExportRequest, since: datetime | None) -> _Plan:
    """What to read, from the table's own columns; ValueError when the table or a filter does not fit."""
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            names = inspector.get_table_names()
            if request.table not in names:
                there = ", ".join(sorted(n for n in names if _users(n))) or "none: nothing is stored yet"
                raise ValueError(f"--table {request.table!r}: no such table in the database (tables: {there})")
            reflected = inspector.get_columns(request.table)
            primary = inspector.get_pk_constraint(request.table).get("constrained_columns") or []
    except SQLAlchemyError as exc:
        raise StorageError(f"database unreachable: {_short(exc)}") from None
    types = {c["name"]: c["type"] for c in reflected
             if not (request.table == FEEDS_TABLE and c["name"] == search_index.COLUMN)}  # the index's, no field
    table = sa.table(request.table, *[sa.column(name) for name in types])  # untyped: the driver's values
    where: list[sa.ColumnElement[bool]] = []
    if request.sources:
        if "source" not in types:
            raise ValueError(f"--source picks rows of the items table; table {request.table!r} has no source column")
        where.append(table.c.source.in_(request.sources))
    if since is not None:
        where.append(_since_clause(table, types, since, request.table))
    # CSV writes a list as JSON text: the text SQLite holds goes out as it is, not read and written again.
    lists_as_text = request.format == "csv"
    by_name = sources_table.COLUMNS if request.table == sources_table.NAME else KNOWN_KINDS
    convert = tuple(_converter(kind, by_name.get(name, "text"), lists_as_text) for name, kind in types.items())
    key = primary[0] if len(primary) == 1 and isinstance(types[primary[0]], sa.Integer) else None
    return _Plan(table, tuple(types), convert, tuple(where), key)


def _users(table: str) -> bool:
    """A table a user's data lives in: not one of the parser's own (table versions, the coordination of
    SHARED daemons), which are all named parser_*."""
    return table != VERSIONS_TABLE and not table.startswith("parser_")


def _since_clause(table: sa.TableClause, types: dict, since: datetime, name: str) -> sa.ColumnElement:
    """`stored` (less STORED_OVERLAP), `changed` or `fetched` at or after `since`, those the table has.
    A timestamptz column is compared as a time, a text one as the ISO text that sorts as time does."""
    present = [c for c in SINCE_COLUMNS if c in types]
    if not present:
        raise ValueError(f"--since needs a changed or fetched column; table {name!r} has neither")
    tests = []
    for column in present:
        start = since - STORED_OVERLAP if column == "stored" else since
        if isinstance(types[column], sa.DateTime):
            tests.append(table.c[column] >= sa.literal(start, sa.DateTime(timezone=True)))
        else:
            tests.append(table.c[column] >= sa.literal(format_utc(start), sa.Text))
    return sa.or_(*tests)


def _rows(engine: sa.Engine, plan: _Plan) -> Generator[dict[str, Any], None, None]:
    """The rows in key order, CHUNK_ROWS a read, each read a connection of its own (see the docstring).
    Paged by the primary key, never by `id` alone: a `_versions` table holds an id once per version, and
    `id > last` would skip the versions of a chunk's last id that fell into the next chunk."""
    pairs = tuple(zip(plan.columns, plan.convert, strict=True))
    if plan.key is None:  # the sources table (a row a source: small), or a user's own: one read
        with engine.connect() as conn:
            query = sa.select(*plan.table.c).where(*plan.where)
            for stored in conn.execution_options(stream_results=True, yield_per=CHUNK_ROWS).execute(query):
                yield {name: convert(value) for (name, convert), value in zip(pairs, stored, strict=True)}
        return
    key = plan.table.c[plan.key]
    key_at = plan.columns.index(plan.key)
    last = None
    while True:
        query = sa.select(*plan.table.c).where(*plan.where)
        if last is not None:
            query = query.where(key > last)
        query = query.order_by(key).limit(CHUNK_ROWS)
        # The chunk is read whole before a row is written: a slow reader of the output (a pipe) must not
        # keep the database's read open meanwhile.
        with engine.connect() as conn:
            chunk = conn.execute(query).all()
        for stored in chunk:
            yield {name: convert(value) for (name, convert), value in zip(pairs, stored, strict=True)}
        if len(chunk) < CHUNK_ROWS:
            return
        last = chunk[-1][key_at]


def _export_by_cursor(engine: sa.Engine, plan: _Plan, request: ExportRequest, cursor: Path, stdout: BinaryIO,
                      now: datetime) -> int:
    """The rows the cursor file does not hold as they are now; the file is moved on once they are out."""
    if plan.key is None:
        raise ValueError(f"--cursor follows rows by their key; table {request.table!r} has no integer primary key")
    with advancing(cursor, request.table) as walk:
        keys = walk.keys(_scan(engine, plan))
        with _output(request.output, stdout) as out, closing(_rows_with_keys(engine, plan, keys)) as rows:
            return _write(out, request, plan, rows, now)


def _scan(engine: sa.Engine, plan: _Plan) -> Iterator[tuple[int, str]]:
    """(key, changed as ISO text, '' for none) of every row asked for, in key order, SCAN_ROWS a read."""
    assert plan.key is not None
    key = plan.table.c[plan.key]
    marker = _time_value
    if "changed" in plan.columns:
        columns: tuple[sa.ColumnElement, ...] = (key, plan.table.c.changed)
    else:  # a table made by 0.5.x: rows are only ever new
        columns = (key, sa.null())
    last = None
    while True:
        query = sa.select(*columns).where(*plan.where)
        if last is not None:
            query = query.where(key > last)
        with engine.connect() as conn:
            chunk = conn.execute(query.order_by(key).limit(SCAN_ROWS)).all()
        for found, changed in chunk:
            yield int(found), "" if changed is None else " ".join(str(marker(changed) or "").split())
        if len(chunk) < SCAN_ROWS:
            return
        last = chunk[-1][0]


def _rows_with_keys(engine: sa.Engine, plan: _Plan, keys: Sequence[int]) -> Generator[dict[str, Any], None, None]:
    """The rows of these keys (ascending), CHUNK_ROWS a read; a row deleted meanwhile is left out."""
    assert plan.key is not None
    pairs = tuple(zip(plan.columns, plan.convert, strict=True))
    key = plan.table.c[plan.key]
    for start in range(0, len(keys), CHUNK_ROWS):
        some = keys[start:start + CHUNK_ROWS]
        # New rows come in runs of keys (a first run: all of them): a range reads them at the plain export's
        # pace, three times the pace of a list of keys; edits spread over the table go by their list.
        whose = key.between(some[0], some[-1]) if some[-1] - some[0] == len(some) - 1 else key.in_(list(some))
        query = sa.select(*plan.table.c).where(whose).order_by(key)
        with engine.connect() as conn:
            chunk = conn.execute(query).all()
        for stored in chunk:
            yield {name: convert(value) for (name, convert), value in zip(pairs, stored, strict=True)}


def _write(out: BinaryIO, request: ExportRequest, plan: _Plan, rows: Iterator[dict], now: datetime) -> int:
    if request.format == "csv":
        return write_csv(out, plan.columns, rows, bom=request.bom)
    if request.format == "atom":
        return write_atom(out, rows, table=request.table, now=format_utc(now))
    return write_jsonl(out, rows)


@contextmanager
def _output(path: Path | None, stdout: BinaryIO) -> Iterator[BinaryIO]:
    """-o FILE is written whole or not at all: a temporary file beside it, renamed over it at the end,
    so a cron job reading FILE never sees half of one. Without -o: standard output as it comes."""
    if path is None:
        yield stdout
        stdout.flush()
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- the stored value -> the typed value, per column kind ------------------------------------------------

def _converter(sql_type: Any, named: str, lists_as_text: bool = False) -> Callable[[Any], Any]:
    """By the column's type where the database has one (timestamptz, jsonb, a number), else by the kind
    its name has in our tables (db/schema.py): SQLite and an older table keep times and lists as text."""
    if named in ("list", "json") or isinstance(sql_type, sa.JSON):
        return _empty_is_null if lists_as_text else _list_value
    if named == "time" or isinstance(sql_type, (sa.DateTime, sa.Date)):
        return _time_value
    return _plain_value


def _plain_value(value: Any) -> Any:
    if value is None or type(value) is str or type(value) is int:
        return value
    if isinstance(value, Decimal):  # PostgreSQL numeric
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None  # JSON has no NaN or Infinity
    if isinstance(value, datetime):
        return _time_value(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return value


def _time_value(value: Any) -> Any:
    """UTC ISO 8601 text; '' (an older table's missing date) is None, as the new tables store it."""
    if value == "":
        return None
    if isinstance(value, datetime):
        return format_utc(value if value.tzinfo else value.replace(tzinfo=UTC))
    return _plain_value(value)


def _empty_is_null(value: Any) -> Any:
    return None if value == "" else _plain_value(value)


def _list_value(value: Any) -> Any:
    """A list (jsonb arrives as one; SQLite's JSON text is read); '' is None."""
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return json.loads(value)
        except ValueError:
            return value  # not JSON after all: the text as stored
    return _plain_value(value)


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
