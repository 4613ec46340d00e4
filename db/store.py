"""Loads staged records into SQL tables through SQLAlchemy Core, idempotently.

Every table has a unique `hash` column; inserts skip hashes the table already holds, so loading
the same batch twice (after a crash between commit and cleanup) stores nothing twice.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError

from parser.errors import RecordRefusedError, StorageError

log = logging.getLogger("parser")
CHUNK_ROWS = 500
# The advisory lock key every daemon of a project takes around CREATE/ALTER TABLE (any fixed number;
# this one spells "parser" in ASCII).
SCHEMA_LOCK_KEY = 0x706172736572


class Database:
    def __init__(self, url: str):
        self.url = url
        try:
            database = sa.engine.make_url(url).database
            if url.startswith("sqlite") and database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)  # the default lives in db/
            self.engine = sa.create_engine(url, pool_pre_ping=True, future=True)
        except (SQLAlchemyError, ImportError, ValueError, OSError) as exc:
            raise StorageError(f"cannot use DB_URL: {exc}") from None
        self.metadata = sa.MetaData()
        self.tables: dict[str, sa.Table] = {}

    def close(self) -> None:
        self.engine.dispose()

    def check(self) -> None:
        """Connect once, so an unreachable database is reported at start."""
        try:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        except SQLAlchemyError as exc:
            raise StorageError(f"database unreachable: {_short(exc)}") from None

    def table(self, name: str, columns: Sequence[str]) -> sa.Table:
        """The table `name` with a unique hash column and a text column per name; created when
        missing, and columns a newer version added are added to an existing table."""
        if name in self.tables:
            return self.tables[name]
        wanted = ["hash", *[c for c in columns if c != "hash"]]
        try:
            with self.engine.begin() as conn:
                schema_lock(conn)
                inspector = sa.inspect(conn)
                if not inspector.has_table(name):
                    table = sa.Table(
                        name, self.metadata,
                        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
                        sa.Column("hash", sa.String(128), nullable=False, unique=True),
                        *[sa.Column(c, sa.Text) for c in wanted[1:]],
                    )
                    table.create(conn, checkfirst=True)
                else:
                    present = {c["name"] for c in inspector.get_columns(name)}
                    quote = self.engine.dialect.identifier_preparer.quote
                    for column in (c for c in wanted if c not in present):
                        conn.execute(sa.text(f"ALTER TABLE {quote(name)} ADD COLUMN {quote(column)} TEXT"))
                        log.info("added column %s to table %s", column, name)
                    table = sa.Table(name, self.metadata, autoload_with=conn)
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot prepare table {name}: {_short(exc)}") from None
        self.tables[name] = table
        return table

    def insert_new(self, name: str, columns: Sequence[str], rows: Iterable[dict]) -> int:
        """Insert rows whose hash the table lacks, in one transaction; return how many were new."""
        table = self.table(name, columns)
        known = {c.name for c in table.columns} - {"id"}
        inserted = 0
        try:
            with self.engine.begin() as conn:
                chunk: dict[str, dict] = {}
                for row in rows:
                    chunk[row["hash"]] = {k: v for k, v in row.items() if k in known}
                    if len(chunk) >= CHUNK_ROWS:
                        inserted += self._insert_chunk(conn, table, list(chunk.values()))
                        chunk = {}
                if chunk:
                    inserted += self._insert_chunk(conn, table, list(chunk.values()))
        except (DataError, IntegrityError) as exc:
            # A value the database will not hold (a NUL byte in PostgreSQL, a NULL hash): the data's
            # fault, not the connection's, so the caller can find the record and set it aside.
            raise RecordRefusedError(f"table {name} refused a value: {_short(exc)}") from None
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot write to table {name}: {_short(exc)}") from None
        except ValueError as exc:  # the driver cannot encode a value (a lone surrogate)
            raise RecordRefusedError(f"table {name} refused a value: {exc}") from None
        return inserted

    def _insert_chunk(self, conn: sa.Connection, table: sa.Table, rows: list[dict]) -> int:
        dialect = self.engine.dialect.name
        if dialect in ("sqlite", "postgresql"):
            insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
            statement = insert(table).on_conflict_do_nothing(index_elements=["hash"]).returning(table.c.hash)
            return len(conn.execute(statement, rows).all())
        # Any other database: ask which hashes exist, insert the others.
        hashes = [r["hash"] for r in rows]
        existing = set(conn.execute(sa.select(table.c.hash).where(table.c.hash.in_(hashes))).scalars())
        fresh = [r for r in rows if r["hash"] not in existing]
        if fresh:
            conn.execute(table.insert(), fresh)
        return len(fresh)

    def count(self, name: str) -> int:
        with self.engine.connect() as conn:
            return conn.execute(sa.text(f"SELECT COUNT(*) FROM {name}")).scalar_one()


def schema_lock(conn: sa.Connection) -> None:
    """PostgreSQL: hold the schema lock until this transaction ends. Two daemons started at once
    both see a table missing and both run CREATE TABLE; without the lock one of them fails on
    pg_type's unique index. SQLite's own write lock already serialises this."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
