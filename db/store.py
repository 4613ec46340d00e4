"""Loads staged records into SQL tables, idempotently: tables made and mended through SQLAlchemy Core,
rows loaded through the driver's bulk path (db/bulk.py).

Every table has a unique `hash` column; inserts skip hashes the table already holds, so loading
the same batch twice (after a crash between commit and cleanup) stores nothing twice.

Every statement is bounded (DB_TIMEOUT for a lock, STATEMENT_LIMIT in all), so a table
another connection holds never holds the daemon's loop. A failure is read for what it means
(db/faults.py): a record's bad value is handed back for the caller to set aside; a table dropped or a
file replaced underneath, or an id sequence left behind, is mended once and the rows loaded again;
anything else keeps the rows staged for the next flush.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from db import migrations, schema, search_index
from db.bulk import Loaded, postgresql_copy, sqlite_insert
from db.csv_load import UnsafeForCopyError, postgresql_copy_csv
from db.faults import Fault, classify
from db.upsert import Target, Updates
from parser.core import logs
from parser.core.errors import RecordRefusedError, SchemaRefusedError, StorageError
from parser.core.urls import redact_url

log = logging.getLogger("parser")
CHUNK_ROWS = 500  # rows per statement of a database other than SQLite and PostgreSQL
# The bulk path of each driver (db/bulk.py), by SQLAlchemy's name for it; any other goes the generic way.
_BULK = {"pysqlite": sqlite_insert, "psycopg": postgresql_copy}
DEFAULT_TIMEOUT = 5.0  # DB_TIMEOUT's default: seconds to connect, and to wait for a lock
# PostgreSQL: any one statement (a COPY or an INSERT of bulk.COPY_ROWS rows) ends after this long even
# when it waits on no lock (a stalled disk, a user's slow trigger), so nothing holds the loop for longer.
STATEMENT_LIMIT = 60.0


class Database:
    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT, search: bool = False):
        self.url = url
        self.timeout = timeout
        self.search = search  # SEARCH: the items table's full-text index made (db/search_index.py), or dropped
        try:
            database = sa.engine.make_url(url).database
            if url.startswith("sqlite") and database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)  # the default lives in db/
            self.engine = sa.create_engine(url, pool_pre_ping=True, future=True,
                                           connect_args=connect_args(url, timeout))
            if self.engine.dialect.name == "postgresql":
                sa.event.listen(self.engine, "connect", self._bound_session)
            elif self.engine.dialect.name == "sqlite":  # a new file gives deleted rows' pages back (RETAIN)
                sa.event.listen(self.engine, "connect", schema.sqlite_incremental)
        except (SQLAlchemyError, ImportError, ValueError, OSError) as exc:
            raise StorageError(f"cannot use DB_URL: {exc}") from None
        self.metadata = sa.MetaData()
        self.tables: dict[str, sa.Table] = {}
        self.key_names: dict[str, str | None] = {}  # table -> its primary key constraint's name
        self.histories: set[str] = set()  # the tables whose `<table>_versions` is known to be made
        self.migrated = False  # the chain of schema steps run (Database.migrate)
        # The driver's own errors: db/bulk.py works on its connection, beneath SQLAlchemy.
        self._driver_errors: tuple[type[Exception], ...] = (self.engine.dialect.loaded_dbapi.Error,)

    def close(self) -> None:
        self.engine.dispose()

    def check(self) -> None:
        """Connect once, so an unreachable database is reported at start."""
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        except SQLAlchemyError as exc:
            raise StorageError(f"database unreachable: {_short(exc)}") from None

    def migrate(self) -> None:
        """Run the chain of schema steps this database lacks (db/migrations.py), once per run: at start,
        or at the first flush when the database was away then. Raise SchemaRefusedError (a newer
        version's database, or a step refused: nothing written by it), StorageError when it cannot be
        reached or a lock was waited on too long."""
        if self.migrated:
            return
        try:
            migrations.run(self.engine)
        except SchemaRefusedError:
            raise
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot prepare the database: {self._explain(classify(exc), exc)}") from None
        self.migrated = True

    def make_table(self, spec: schema.TableSpec) -> sa.Table:
        """The table a sink asks for (its TableSpec), made or brought to this version's shape: table()."""
        return self.table(spec.name, spec.columns, spec.kinds, history=spec.history)

    def table(self, name: str, columns: Sequence[str], kinds: Mapping[str, str] | None = None, *,
              history: bool = False) -> sa.Table:
        """The table `name` with a unique hash column and a column per name, typed by its kind (db/schema.py:
        `kinds` per column, else the kind known for its name, else text), as db/migrations.py's
        ensure_table makes it or brings it to this version's shape (after the chain, once per run), with
        its `<name>_versions` when `history`; a table of that shape is not changed. Looked up once per
        run: a flush's own calls change nothing.

        Raise SchemaRefusedError when the database refuses to change it, StorageError when it cannot be
        reached or a lock was waited on too long."""
        if name in self.tables and (not history or name in self.histories):
            return self.tables[name]
        self.migrate()
        wanted = schema.shape(name, columns, kinds)
        try:
            with self.engine.begin() as conn:
                migrations.ensure_table(conn, wanted, history=history)
                if name == schema.FEEDS_TABLE and self.search:  # built from the rows stored, in this transaction
                    search_index.create(conn)
                elif name == schema.FEEDS_TABLE:
                    search_index.drop(conn)
                table = self._reflect(conn, name)
                self.key_names[name] = sa.inspect(conn).get_pk_constraint(name).get("name")
        except SchemaRefusedError:
            raise
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot prepare table {name}: {self._explain(classify(exc), exc)}") from None
        self.tables[name] = table
        if history:
            self.histories.add(name)
        return table

    def _reflect(self, conn: sa.Connection, name: str) -> sa.Table:
        """The table as it is, less the search index's generated column (PostgreSQL), which no load writes
        and no versions table copies."""
        present = [c["name"] for c in sa.inspect(conn).get_columns(name)]
        kept = [c for c in present if not (name == schema.FEEDS_TABLE and c == search_index.COLUMN)]
        return sa.Table(name, self.metadata, autoload_with=conn, extend_existing=True, include_columns=kept)

    def insert_new(self, name: str, columns: Sequence[str], rows: Sequence[Mapping] | Sequence[Sequence], *,
                   fields: Sequence[str] | None = None, mend: bool = True, mode: str | Updates = "update") -> Loaded:
        """Insert rows whose hash the table lacks, and update those it holds as the UPDATES `mode` says
        (db/upsert.py: one mode, or the table's with its sources' own), in one transaction; return what was
        inserted and updated. `rows` are dicts, or (with `fields`, the names of their cells in order, as a
        staging file's header) sequences of cells: the flush's, handed to the driver as they are
        (db/bulk.py). An empty cell is stored as NULL.

        Raise RecordRefusedError when a value of a row is refused (the caller finds the row and sets
        it aside), StorageError when the rows must stay staged. With `mend`, a table changed
        underneath or an id sequence left behind is mended first, once, and the rows inserted again."""
        cells: Sequence[Sequence[Any]]
        if fields is None:  # the rows are dicts (this docstring's contract; nothing checks a Sequence's rows)
            dicts = cast("Sequence[Mapping[str, Any]]", rows)
            fields = list(dict.fromkeys(key for row in dicts for key in row))
            cells = [[row.get(field) for field in fields] for row in dicts]
        else:
            cells = cast("Sequence[Sequence[Any]]", rows)
        refused: tuple[type[Exception], ...] = (SQLAlchemyError, *self._driver_errors)
        try:
            return self._insert_rows(name, columns, fields, cells, mode)
        except ValueError as exc:  # the driver cannot encode a value (a lone surrogate)
            raise RecordRefusedError(f"table {name} refused a value: {exc}") from None
        except refused as exc:
            failure, fault = exc, classify(exc, self.key_names.get(name))
        if fault is Fault.RECORD:  # a NUL byte, a NULL hash, a link over a user's index's limit
            raise RecordRefusedError(f"table {name} refused a value: {_short(failure)}")
        if not mend or fault not in (Fault.CHANGED, Fault.ID_SEQUENCE):
            raise StorageError(f"cannot write to table {name}: {self._explain(fault, failure)}")
        self._mend(name, columns, fault, _short(failure))
        return self.insert_new(name, columns, cells, fields=fields, mend=False, mode=mode)

    def insert_file(self, name: str, columns: Sequence[str], path: Path, fields: Sequence[str], *,
                    escaped_start: Collection[str], mode: str | Updates = "update") -> tuple[Loaded, int] | None:
        """PostgreSQL: load the staging file `path` (its header: `fields`) through the server's own CSV
        parser (db/csv_load.py), in one transaction, as insert_new would; return (what it did, rows in the
        file). None when the file is to be read in Python and given to insert_new: another database, a header naming a
        column the table lacks, or anything the server refused (bytes not UTF-8, a NUL, a short record,
        a value): insert_new finds and sets aside what must be, and says why rows stay staged. A table
        changed underneath or an id sequence behind is mended here first; a lock waited on for
        DB_TIMEOUT raises StorageError at once, not waited on twice."""
        if self.engine.dialect.driver != "psycopg":
            return None
        table = self.table(name, columns, history=mode == "history")
        known = {c.name for c in table.columns} - {"id"}
        if "hash" not in fields or len(set(fields)) != len(fields) or not known.issuperset(fields):
            return None  # a file staged by another version: insert_new leaves out what the table lacks
        quote = self.engine.dialect.identifier_preparer.quote
        refused: tuple[type[Exception], ...] = (SQLAlchemyError, *self._driver_errors, UnsafeForCopyError)
        try:
            with self.engine.begin() as conn:
                return postgresql_copy_csv(conn.connection.driver_connection, self._target(table, mode), fields,
                                           path, quote, escaped_start)
        except refused as exc:
            failure, fault = exc, classify(exc, self.key_names.get(name))
        if fault is Fault.LOCKED:
            raise StorageError(f"cannot write to table {name}: {self._explain(fault, failure)}") from None
        if fault in (Fault.CHANGED, Fault.ID_SEQUENCE):
            # Mended here, where it was met: the failed INSERT took ids from the sequence all the same,
            # so insert_new might not meet it again, and would not say what was found.
            self._mend(name, columns, fault, _short(failure))
        log.info("flush: table %s: %s read in Python: %s", name, path.name, _short(failure))
        return None

    def _insert_rows(self, name: str, columns: Sequence[str], fields: Sequence[str], rows: Sequence[Sequence],
                     mode: str | Updates) -> Loaded:
        updates = mode if isinstance(mode, Updates) else Updates(mode)
        table = self.table(name, columns, history=updates.widest == "history")
        known = {c.name for c in table.columns} - {"id"}
        if not known.issuperset(fields):  # a file staged by a version with a column this table lacks
            kept = [i for i, field in enumerate(fields) if field in known]
            fields, rows = [fields[i] for i in kept], [[row[i] for i in kept] for row in rows]
        quote = self.engine.dialect.identifier_preparer.quote
        with self.engine.begin() as conn:
            load = _BULK.get(self.engine.dialect.driver)
            if load:
                return load(conn.connection.driver_connection, self._target(table, mode), fields, rows, quote)
            return self._insert_generic(conn, table, fields, rows)

    def _target(self, table: sa.Table, mode: str | Updates) -> Target:
        """Where a load goes; when a row may keep its versions ("history"), also the `<table>_versions` table
        (made at start: Database.table)."""
        columns = [c.name for c in table.columns]
        changed_type = table.c.changed.type.compile(dialect=self.engine.dialect) \
            if "changed" in table.c and self.engine.dialect.name == "postgresql" else ""
        updates = mode if isinstance(mode, Updates) else Updates(mode)
        versions = [*columns, "replaced"] if updates.widest == "history" else []
        return Target(table.name, columns, updates, versions, changed_type)

    def _bound_session(self, connection, _record) -> None:
        """PostgreSQL, each new connection: wait DB_TIMEOUT at most for a lock, run a statement
        STATEMENT_LIMIT at most, whoever uses the engine. Set by SQL once connected rather than as
        startup options, which a pooler (PgBouncer) refuses; SQLite's bound is its busy timeout."""
        autocommit = connection.autocommit
        connection.autocommit = True  # a SET inside a transaction the pool rolls back would be undone
        with connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = '{math.ceil(self.timeout * 1000)}ms'")
            cursor.execute(f"SET statement_timeout = '{math.ceil(STATEMENT_LIMIT * 1000)}ms'")
        connection.autocommit = autocommit

    def _explain(self, fault: Fault, exc: BaseException) -> str:
        if fault is Fault.LOCKED:
            # The driver's words first, so a line cut to a terminal's width still says what happened.
            return f"{_short(exc)}: waited {self.timeout:g} s for a lock held by another connection"
        return _short(exc)

    def _mend(self, name: str, columns: Sequence[str], fault: Fault, error: str) -> None:
        """Mend what is not the records' fault, and say in one line what was found and done."""
        try:
            done = self._move_sequence(name) if fault is Fault.ID_SEQUENCE else self._reconnect(name, columns)
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot write to table {name}: {error}; mending it failed: {_short(exc)}") from None
        message = f"table {name}: {error}: {done}"
        logs.error_line("flush", redact_url(self.url), message)
        log.warning("flush: %s", message, extra=logs.ALSO_IN_ERRORS)

    def _reconnect(self, name: str, columns: Sequence[str]) -> str:
        """The table dropped, a column dropped, or the SQLite file replaced while the daemon ran: new
        connections (the pooled ones may hold the old file), and the table made again if missing."""
        self.engine.dispose()
        table = self.tables.pop(name, None)
        if table is not None:
            self.metadata.remove(table)
        self.histories.discard(name)
        self.migrated = False  # a file replaced may lack the record too: the chain looks again
        with self.engine.connect() as conn:
            missing = not sa.inspect(conn).has_table(name)
        self.table(name, columns)
        if missing:
            return ("the table was gone (dropped, or the database file replaced, while the daemon ran; the rows "
                    "it held are gone with it); created it again and loading the staged rows into it. The hash "
                    "file still keeps the entries it held out: to store the feeds' current entries again, stop "
                    "the daemon and move the staging folder's hashes.* away")
        return ("the table changed while the daemon ran (a column or an index dropped, or the database file "
                "restored over it); connected again, made what was missing, and loading the staged rows")

    def _move_sequence(self, name: str) -> str:
        """PostgreSQL: the id sequence is behind the table's ids (a restore, rows inserted with
        explicit ids): move it past the largest id, as pg_dump's own setval does."""
        quoted = self.engine.dialect.identifier_preparer.quote(name)
        with self.engine.begin() as conn:
            next_id = conn.execute(sa.text(f"SELECT setval(pg_get_serial_sequence(:table, 'id'), "
                                           f"COALESCE(MAX(id), 0) + 1, false) FROM {quoted}"),
                                   {"table": quoted}).scalar_one()
        if next_id is None:
            raise StorageError(f"cannot write to table {name}: its id column has no sequence to move past "
                               "the ids it holds; give it one, or make its default the next free id")
        return (f"its id sequence was behind the ids the table holds (a restore, or rows inserted with "
                f"explicit ids); moved it on to {next_id} and loading the staged rows")

    def _insert_generic(self, conn: sa.Connection, table: sa.Table, fields: Sequence[str],
                        rows: Sequence[Sequence]) -> Loaded:
        """Any other database: ask which hashes of each chunk exist, insert the others (empty cells as
        NULL). Updates are left out here: the bulk paths (SQLite, PostgreSQL) make them."""
        inserted = 0
        for start in range(0, len(rows), CHUNK_ROWS):
            chunk: dict[str, dict] = {}
            for row in rows[start:start + CHUNK_ROWS]:
                record: dict[str, Any] = {f: (None if v == "" and f != "hash" else v)
                                          for f, v in zip(fields, row, strict=True)}
                chunk.setdefault(record["hash"], record)
            existing = set(conn.execute(sa.select(table.c.hash).where(table.c.hash.in_(list(chunk)))).scalars())
            fresh = [record for digest, record in chunk.items() if digest not in existing]
            if fresh:
                conn.execute(table.insert(), fresh)
            inserted += len(fresh)
        return Loaded(inserted, 0)

    def newest_hashes(self, name: str, count: int) -> list[str]:
        """The hashes of the table's `count` newest rows (by id): a mark of what this database holds."""
        quote = self.engine.dialect.identifier_preparer.quote
        try:
            with self.engine.connect() as conn:
                query = sa.text(f"SELECT hash FROM {quote(name)} ORDER BY id DESC LIMIT :n")
                return list(conn.execute(query, {"n": count}).scalars())
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot read table {name}: {_short(exc)}") from None

    def holds_any(self, name: str, hashes: Sequence[str]) -> bool:
        """Whether the table holds a row with one of `hashes`; False when there is no such table."""
        quote = self.engine.dialect.identifier_preparer.quote
        try:
            with self.engine.connect() as conn:
                if not sa.inspect(conn).has_table(name):
                    return False
                query = sa.text(f"SELECT 1 FROM {quote(name)} WHERE hash IN :hashes LIMIT 1").bindparams(
                    sa.bindparam("hashes", expanding=True))
                return conn.execute(query, {"hashes": list(hashes)}).first() is not None
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot read table {name}: {_short(exc)}") from None


def connect_args(url: str, timeout: float) -> dict:
    """Bound the wait for a connection (PostgreSQL) and for SQLite's lock (its busy timeout)."""
    backend = sa.engine.make_url(url).get_backend_name()
    if backend == "postgresql":
        return {"connect_timeout": max(2, math.ceil(timeout))}  # libpq counts whole seconds, 2 at least
    if backend == "sqlite":
        return {"timeout": timeout}
    return {}


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
