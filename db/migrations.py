"""Every table the project owns is made and changed here, by one numbered chain of steps (STEPS), each run
once per database, in one transaction with the row of the record (`parser_migrations`) that says it ran.

A step is a function of a connection; it runs under the schema lock (schema_lock: PostgreSQL's advisory
lock, SQLite's write lock), after the record is read again, so several daemons starting at once on one
database run it once; a kill or a refusal inside it leaves neither its changes nor its record row, and the
next start runs it again. A database whose record holds a step this code does not know was changed by a
newer version: refused before anything is written (SchemaNewerError, exit 2 at start).

The tables made from the settings, a job's (its columns from params.py) and the `<table>_versions` of
UPDATES = "history", are made, or brought to their shape, by ensure_table, here too: at start (or at the
first flush when the database was away then). A table of this version's shape is left as it is, so a
role that may write rows but not create tables flushes once the tables exist. Each such table's shape
version is a row of `parser_schema` (db/migrate.py brings a 0.5.x table from version 1 to 2).

Projects made before the chain are taken up by it: each step is written to find its work done (a table
0.6.0 made, a group's tables made under their old digest) and then change nothing but the record. Why a
list in our code rather than Alembic: docs/design.md.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa

from parser import __version__
from parser.core.errors import SchemaRefusedError

from . import migrate, schema, search_index

log = logging.getLogger("parser")
RECORD = "parser_migrations"  # (step, what, applied_at): a row per step run on this database
# The advisory lock key every daemon of a project takes around CREATE/ALTER TABLE (any fixed number;
# this one spells "parser" in ASCII).
SCHEMA_LOCK_KEY = 0x706172736572

# The feeds' table as step 3 makes it (the record's fields, parser/core/record.py's Record, as of 0.6.0):
# a field added to the record later comes with a step that adds its column.
ITEMS_COLUMNS = ("source", "guid", "link", "title", "author", "published", "updated", "summary", "content",
                 "categories", "enclosures", "image", "comments", "language", "fetched")
# The `sources` table (db/sources_table.py writes it): column -> its kind (db/schema.py) or SQL type.
SOURCES_COLUMNS: Mapping[str, str] = {
    "name": "text", "url": "text", "address": "text", "protocol": "text",
    "title": "text", "site": "text", "description": "text", "language": "text", "tags": "list",
    "last_poll": "time", "last_success": "time", "last_new": "time", "last_status": "integer",
    "failures": "integer", "dead": "boolean",
}
_SQL_TYPES: Mapping[str, sa.types.TypeEngine] = {"integer": sa.Integer(), "boolean": sa.Boolean()}


class SchemaNewerError(SchemaRefusedError):
    """The database's record holds a step this version does not know: a newer version changed it."""


@dataclass(frozen=True)
class Step:
    number: int
    what: str  # one line, as the log and the record say it
    run: Callable[[sa.Connection], None]
    group: bool = False  # SHARED's tables (PostgreSQL): run by a daemon of a group only


def _record(conn: sa.Connection) -> None:
    sa.Table(RECORD, sa.MetaData(), sa.Column("step", sa.Integer, primary_key=True, autoincrement=False),
             sa.Column("what", sa.Text, nullable=False),
             sa.Column("applied_at", schema.column_type("time"), nullable=False)).create(conn)


def _table_versions(conn: sa.Connection) -> None:
    """0.6.0 made it at its first flush: kept, rows and all."""
    sa.Table(schema.VERSIONS_TABLE, sa.MetaData(), sa.Column("table_name", sa.String(128), primary_key=True),
             sa.Column("version", sa.Integer, nullable=False),
             sa.Column("migrated", schema.column_type("time"))).create(conn, checkfirst=True)


def _items(conn: sa.Connection) -> None:
    """Made typed; one 0.5.x made (TEXT, '' for what was missing) brought to the typed shape with its rows."""
    ensure_table(conn, schema.shape(schema.FEEDS_TABLE, ITEMS_COLUMNS))


def _sources(conn: sa.Connection) -> None:
    sa.Table("sources", sa.MetaData(), *[
        sa.Column(c, _SQL_TYPES.get(kind) or schema.column_type(kind), primary_key=c == "name")
        for c, kind in SOURCES_COLUMNS.items()]).create(conn, checkfirst=True)
    migrate.record_version(conn, "sources", migrated=False)


# The group's tables (SHARED = True, parser/group/): sources' schedule and leases, the daemons and what
# each lists, rate budgets, job links, pushed deliveries and WebSub subscriptions, host slots. Written so
# that a group made by 0.6.0 (the same tables, versioned by a digest of this text) is taken up unchanged.
GROUP_TABLES = """
CREATE TABLE IF NOT EXISTS parser_sources (
    name        text PRIMARY KEY,
    url         text NOT NULL,
    interval_s  double precision NOT NULL,
    enabled     boolean NOT NULL DEFAULT true,
    due_at      timestamptz NOT NULL DEFAULT now(),
    lease_owner text,
    lease_until timestamptz,
    polled_at   timestamptz,
    hold_until  timestamptz,              -- a server's Retry-After: no poll before, by any daemon
    state       jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS parser_sources_due ON parser_sources (due_at) WHERE enabled;

-- Which running daemon's params.py lists which source: a source is enabled while any daemon that
-- has been seen lately lists it enabled, so one machine's older file does not stop it for the group.
CREATE TABLE IF NOT EXISTS parser_daemons (
    owner   text PRIMARY KEY,
    seen_at timestamptz NOT NULL DEFAULT now(),
    digest  text NOT NULL DEFAULT ''     -- of the sources its file lists: the same file, the same digest
);
CREATE TABLE IF NOT EXISTS parser_listings (
    name    text NOT NULL,
    owner   text NOT NULL REFERENCES parser_daemons ON DELETE CASCADE,
    enabled boolean NOT NULL,
    PRIMARY KEY (name, owner)
);
CREATE INDEX IF NOT EXISTS parser_listings_owner ON parser_listings (owner);

-- A source's `rate` budget, a token bucket the group shares (tokens left at `stamp`).
CREATE TABLE IF NOT EXISTS parser_rates (
    source text PRIMARY KEY,
    tokens double precision NOT NULL,
    stamp  timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS parser_links (
    id          bigserial PRIMARY KEY,
    job         text NOT NULL,
    url         text NOT NULL,
    depth       integer,
    origin      text,
    status      text NOT NULL DEFAULT 'pending',
    attempts    integer NOT NULL DEFAULT 0,
    detail      text,
    marked_at   timestamptz,
    next_at     timestamptz,
    lease_owner text,
    lease_until timestamptz,
    UNIQUE (job, url)
);
CREATE INDEX IF NOT EXISTS parser_links_open ON parser_links (job, id)
    WHERE status IN ('pending', 'retry', 'refused');
-- When the daemon looks up its next wake-up: the first retry due, the first lease to end.
CREATE INDEX IF NOT EXISTS parser_links_retry ON parser_links (job, next_at) WHERE status = 'retry';
CREATE INDEX IF NOT EXISTS parser_links_leased ON parser_links (job, lease_until) WHERE lease_owner IS NOT NULL;

CREATE TABLE IF NOT EXISTS parser_jobs (
    job      text PRIMARY KEY,
    pass1_at timestamptz
);

CREATE TABLE IF NOT EXISTS parser_deliveries (
    source   text NOT NULL,
    delivery text NOT NULL,
    at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, delivery)
);
-- The newest delivery ids are kept (prune_deliveries), found by this.
CREATE INDEX IF NOT EXISTS parser_deliveries_at ON parser_deliveries (at);

CREATE TABLE IF NOT EXISTS parser_websub (
    source     text PRIMARY KEY,
    secret     text NOT NULL,
    hub        text,
    topic      text,
    owner      text,
    next_at    timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz
);
-- When a WebSub request was made and is not verified yet: any daemon answers the hub's verification then only.
ALTER TABLE parser_websub ADD COLUMN IF NOT EXISTS requested_at timestamptz;

CREATE TABLE IF NOT EXISTS parser_hosts (
    host       text PRIMARY KEY,
    next_at    timestamptz NOT NULL DEFAULT now(),
    held_until timestamptz
);
-- A source's Retry-After holds its host's crawl (the jobs' requests), not the host's other sources:
-- parser/fetch/host_slots.py.
ALTER TABLE parser_hosts ADD COLUMN IF NOT EXISTS crawl_held_until timestamptz;

-- PER_HOST for the group: a fetch holds one of its host's rows (slot < PER_HOST) while it runs. A
-- killed daemon's slot comes free with its connection (pid), a lost machine's when `until` passes.
CREATE TABLE IF NOT EXISTS parser_host_slots (
    host  text NOT NULL,
    slot  integer NOT NULL,
    owner text,
    pid   integer,      -- the holder's backend: its slot is free once that connection is gone
    until timestamptz,
    PRIMARY KEY (host, slot)
);
-- Workers waiting for a slot of a busy host, oldest first: a free slot goes to them before a newcomer
-- (the daemon that just freed one would otherwise win every time); `seen` older than a second: gone.
CREATE TABLE IF NOT EXISTS parser_host_waits (
    host  text NOT NULL,
    owner text NOT NULL,
    since timestamptz NOT NULL DEFAULT now(),
    seen  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, owner)
);
"""


def _group_tables(conn: sa.Connection) -> None:
    conn.exec_driver_sql(GROUP_TABLES)


# The `runs` table (db/runs_table.py writes it): a row per poll of a source. Column -> its kind or SQL type.
RUNS_COLUMNS: Mapping[str, str] = {
    "source": "text", "started": "time", "seconds": "number", "outcome": "text", "status": "integer",
    "entries": "integer", "new": "integer", "changed": "integer", "error": "text", "daemon": "text",
}


def _runs(conn: sa.Connection) -> None:
    """Read by time ("what failed this week") and by source and time."""
    runs = sa.Table("runs", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
                    *[sa.Column(c, _SQL_TYPES.get(kind) or schema.column_type(kind), nullable=c not in (
                        "source", "started", "outcome")) for c, kind in RUNS_COLUMNS.items()],
                    sa.Index("runs_started", "started"), sa.Index("runs_source_started", "source", "started"))
    runs.create(conn)


def _stored(conn: sa.Connection) -> None:
    """`stored` on items: when a flush last wrote the row (inserted it, or updated it for an edit), which
    `export --since` compares; rows stored before have NULL (their `changed` or `fetched` stands in). A job's
    table gets it from its shape at start (ensure_table)."""
    present = {c["name"] for c in sa.inspect(conn).get_columns(schema.FEEDS_TABLE)}
    if "stored" not in present:
        quote = conn.dialect.identifier_preparer.quote
        conn.execute(sa.text(f"ALTER TABLE {quote(schema.FEEDS_TABLE)} ADD COLUMN stored "
                             f"{schema.type_sql('time', conn.dialect)}"))


# The chain. A step, once released, is never changed: a change is a new step at the end.
STEPS: tuple[Step, ...] = (
    Step(1, f"the record of these steps ({RECORD})", _record),
    Step(2, f"each table's shape version ({schema.VERSIONS_TABLE}), as 0.6.0 made it", _table_versions),
    Step(3, "the feeds' entries (items): typed columns; a 0.5.x table brought to them with its rows", _items),
    Step(4, "a row per source (sources)", _sources),
    Step(5, "the group's tables (SHARED): schedule and leases, links, deliveries, WebSub, host slots",
         _group_tables, group=True),
    Step(6, "a row per poll of a source (runs): when, how long, its outcome, status and counts", _runs),
    Step(7, "when a flush last wrote each entry (items.stored), for export --since", _stored),
)
LATEST = STEPS[-1].number


def run(engine: sa.Engine, *, group: bool = False) -> list[int]:
    """Run the steps this database lacks (the group's with `group`), each in its own transaction under the
    schema lock; return the numbers run here. Raise SchemaNewerError before writing anything when a newer
    version changed the database; a step's own errors (SchemaRefusedError, StorageError, SQLAlchemyError)
    pass, its transaction undone."""
    with engine.connect() as conn:
        applied = _applied(conn)
    _refuse_newer(applied, engine)
    done = []
    for step in STEPS:
        if step.number in applied or (step.group and not group):
            continue
        with engine.begin() as conn:
            schema_lock(conn)
            applied = _applied(conn)  # another daemon may have run it while this one waited
            _refuse_newer(applied, engine)
            if step.number in applied:
                continue
            log.info("database: step %d of %d: %s", step.number, LATEST, step.what)
            if conn.dialect.name == "postgresql":
                # A big table's rewrite may take longer than a flush's statement may: bounded by the lock wait only.
                conn.execute(sa.text("SET LOCAL statement_timeout = 0"))
            try:
                step.run(conn)
                conn.execute(sa.text(f"INSERT INTO {RECORD} (step, what, applied_at) VALUES (:n, :what, :at)"),
                             {"n": step.number, "what": step.what, "at": now(conn)})
            except sa.exc.SQLAlchemyError as exc:
                raise _refused(step, exc) or exc from None
        done.append(step.number)
    return done


def _refused(step: Step, exc: sa.exc.SQLAlchemyError) -> SchemaRefusedError | None:
    """A step the database user may not run (no CREATE on the schema, a read-only SQLite file): exit 2 at
    start, saying what to do, rather than a flush failing for good. None for any other failure."""
    error = getattr(exc, "orig", None) or exc
    name = getattr(error, "sqlite_errorname", "") or ""
    if getattr(error, "sqlstate", None) != "42501" and not name.startswith("SQLITE_READONLY"):
        return None
    said = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    return SchemaRefusedError(
        f"the database refused schema step {step.number} ({step.what}): {said}; nothing of it was written. The "
        "database user of DB_URL may write rows but not make or change tables: start the daemon once as the "
        "tables' owner (a user that may create tables in the schema), then as before")


def _applied(conn: sa.Connection) -> set[int]:
    if not sa.inspect(conn).has_table(RECORD):
        return set()
    return set(conn.execute(sa.text(f"SELECT step FROM {RECORD}")).scalars())


def _refuse_newer(applied: set[int], engine: sa.Engine) -> None:
    newer = sorted(n for n in applied if n > LATEST)
    if newer:
        where = engine.url.render_as_string(hide_password=True)
        raise SchemaNewerError(
            f"the database ({where}) was changed by a newer version of the parser: its schema is at step "
            f"{newer[-1]}, this version ({__version__}) knows steps 1 to {LATEST}; nothing was written to it. "
            "Run the newer version (or restore a copy of the database made before it ran)")


def ensure_table(conn: sa.Connection, wanted: schema.Shape, *, history: bool = False) -> None:
    """A table made from the settings (a job's; the feeds' at step 3), in the caller's transaction: made
    when missing; one an older version made brought to this version's shape (db/migrate.py); one of this
    version given the columns its settings added and the unique index on hash when someone dropped it
    (every insert names it). With `history`, its `<table>_versions` too. A table of its shape is not
    changed (no DDL): a role without CREATE may run this."""
    schema_lock(conn)
    inspector = sa.inspect(conn)
    if not inspector.has_table(wanted.name):
        schema.sa_table(sa.MetaData(), wanted).create(conn)
        migrate.record_version(conn, wanted.name, migrated=False)
    else:
        _complete(conn, inspector, wanted)
    if history:
        # Less the search index's generated column (PostgreSQL, items): the index's, no field a version keeps.
        kept = [c["name"] for c in sa.inspect(conn).get_columns(wanted.name) if c["name"] != search_index.COLUMN]
        _versions(conn, sa.Table(wanted.name, sa.MetaData(), autoload_with=conn, include_columns=kept))


def _complete(conn: sa.Connection, inspector: sa.Inspector, wanted: schema.Shape) -> None:
    name, quote = wanted.name, conn.dialect.identifier_preparer.quote
    version = migrate.version_of(conn, name)
    if version is None or version < schema.SCHEMA_VERSION:
        migrate.upgrade(conn, inspector, wanted, version or migrate.FIRST_VERSION)
        inspector = sa.inspect(conn)  # what it cached is the table before
    elif version > schema.SCHEMA_VERSION:
        raise SchemaNewerError(f"table {name} was made by a newer version of the parser (shape {version}; this "
                               f"one knows {schema.SCHEMA_VERSION}): run the newer version")
    present = {c["name"] for c in inspector.get_columns(name)}
    for column in (c for c in wanted.columns if c not in present):
        spelled = schema.type_sql(wanted.kinds[column], conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE {quote(name)} ADD COLUMN {quote(column)} {spelled}"))
        log.info("added column %s to table %s", column, name)
    unique = [*inspector.get_unique_constraints(name), *(i for i in inspector.get_indexes(name) if i["unique"])]
    if not any(u["column_names"] == ["hash"] for u in unique):
        conn.execute(sa.text(f"CREATE UNIQUE INDEX {quote(name + '_hash_key')} ON {quote(name)} (hash)"))
        log.warning("table %s had no unique index on hash (dropped?): created it again", name)


def _versions(conn: sa.Connection, table: sa.Table) -> None:
    """UPDATES = "history": `<table>_versions` holds each row as it was before an update changed it (its
    `id` the row's own, `replaced` when the update came), with the table's columns and types; a column
    the table gained since is added."""
    name = versions_table(table.name)
    inspector = sa.inspect(conn)
    if not inspector.has_table(name):
        versions = sa.Table(name, sa.MetaData(), sa.Column("version", sa.Integer, primary_key=True, autoincrement=True),
                            *[sa.Column(c.name, c.type) for c in table.columns],
                            sa.Column("replaced", table.c.fetched.type if "fetched" in table.c else sa.Text))
        versions.create(conn)
        sa.Index(f"{name}_hash", versions.c.hash).create(conn)
        return
    present = {c["name"] for c in inspector.get_columns(name)}
    quote = conn.dialect.identifier_preparer.quote
    for column in table.columns:
        if column.name not in present:
            spelled = column.type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE {quote(name)} ADD COLUMN {quote(column.name)} {spelled}"))


def versions_table(table: str) -> str:
    return f"{table}_versions"


def schema_lock(conn: sa.Connection) -> None:
    """Hold the schema lock until this transaction ends. PostgreSQL: two daemons started at once both
    see a table missing and both run CREATE TABLE; without the lock one of them fails on pg_type's
    unique index. SQLite: its write lock, taken now."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
    elif conn.dialect.name == "sqlite" and (driver := conn.connection.driver_connection) is not None \
            and not driver.in_transaction:
        # sqlite3 (Python's default) opens a transaction before INSERT/UPDATE/DELETE only: a CREATE or
        # ALTER TABLE before them would be committed on its own, and a kill between two of them would
        # leave a table half changed. BEGIN IMMEDIATE makes them one transaction, and takes the write
        # lock before the table is looked at, as the advisory lock does in PostgreSQL.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def now(conn: sa.Connection) -> datetime | str:
    """This moment as a time column of `conn`'s database takes it (SQLite: ISO 8601 UTC text)."""
    moment = datetime.now(UTC)
    return moment if conn.dialect.name == "postgresql" else moment.strftime("%Y-%m-%dT%H:%M:%SZ")
