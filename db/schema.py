"""What each column of our tables holds (its kind), the SQL type a kind gets in each database, and the
shape a table of this version has: the columns every table gets, its indexes, its schema version.

A kind is one of KINDS. PostgreSQL gets real types (timestamptz, jsonb, double precision); SQLite keeps
a time as ISO 8601 UTC text ('2024-05-20T08:30:00Z', which sorts as the time does) and a list as JSON
text, so a query reads the same on both: `where published > '2024-05-01'` and `order by published`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

KINDS = ("text", "time", "number", "list", "json")
FEEDS_TABLE = "items"
VERSIONS_TABLE = "parser_schema"  # (table_name, version, migrated): each table's shape, by version
# 1: 0.5.x (every column TEXT, '' for what an entry lacked, no `changed`/`gone`, no indexes but hash's);
# 2: typed columns, NULL for what is missing, `changed` (and `gone` on a job's table), the items indexes.
SCHEMA_VERSION = 2
# The kind of a column known by name: the feeds' record fields, and the columns the parser fills in
# every table (OWN_KINDS). A job's table knows only these last: its fields are its user's, named as he
# likes (a `published` that reads "Published on 1 March 2024"), text unless the job declares a type
# (Database.table's `kinds`).
OWN_KINDS: Mapping[str, str] = {"fetched": "time", "changed": "time", "gone": "time", "stored": "time"}
KNOWN_KINDS: Mapping[str, str] = {
    **OWN_KINDS, "published": "time", "updated": "time", "categories": "list", "enclosures": "list",
}

_TYPES: Mapping[str, sa.types.TypeEngine] = {
    "text": sa.Text(),
    "time": sa.Text().with_variant(postgresql.TIMESTAMP(timezone=True), "postgresql"),
    "number": sa.REAL().with_variant(postgresql.DOUBLE_PRECISION(), "postgresql"),
    "list": sa.Text().with_variant(postgresql.JSONB(), "postgresql"),
    "json": sa.Text().with_variant(postgresql.JSONB(), "postgresql"),
}
# PostgreSQL: how a 0.5.x TEXT cell becomes the kind's type ('' and blanks become NULL).
_PG_CASTS = {"time": "timestamptz", "number": "double precision", "list": "jsonb", "json": "jsonb"}


def added_columns(table: str) -> tuple[str, ...]:
    """The columns the parser fills itself besides the record's: `changed` (when an update last changed the
    row) and `stored` (when a flush last wrote it: what `export --since` compares) everywhere, and `gone`
    (when a job's object was found gone at its address) on a job's table."""
    return ("changed", "stored") if table == FEEDS_TABLE else ("changed", "gone", "stored")


@dataclass(frozen=True)
class TableSpec:
    """What a sink asks of its table (Database.make_table): its name and columns (hash among them or not),
    the kinds a job's fields declare, and whether it keeps `<name>_versions` (UPDATES "history")."""
    name: str
    columns: Sequence[str]
    kinds: Mapping[str, str] | None = None
    history: bool = False


@dataclass(frozen=True)
class Shape:
    """A table as this version makes it: `columns` in order (hash first, id apart), each with its kind."""
    name: str
    columns: tuple[str, ...]
    kinds: Mapping[str, str]

    def indexes(self) -> list[tuple[str, tuple[str, ...]]]:
        """(name, columns) of each index besides hash's: the feeds' table is read by source and by date."""
        if self.name != FEEDS_TABLE:
            return []
        wanted = [(f"{self.name}_source_published", ("source", "published")),
                  (f"{self.name}_published", ("published",))]
        return [(index, columns) for index, columns in wanted if set(columns) <= set(self.columns)]


def shape(name: str, columns: Sequence[str], kinds: Mapping[str, str] | None = None) -> Shape:
    """The shape of table `name` holding `columns` (a sink's, hash among them or not); `kinds` per column
    overrides the known kinds (a job's field declared with a type), which are the feeds' on the feeds'
    table and the parser's own columns' on any other."""
    wanted = tuple(dict.fromkeys(["hash", *columns, *added_columns(name)]))
    given = dict(kinds or {})
    unknown = {k for k in given.values() if k not in KINDS}
    if unknown:
        raise ValueError(f"unknown column kind {sorted(unknown)[0]!r}: one of {', '.join(KINDS)}")
    known = KNOWN_KINDS if name == FEEDS_TABLE else OWN_KINDS
    return Shape(name, wanted, {c: given.get(c) or known.get(c, "text") for c in wanted if c != "hash"})


def column_type(kind: str) -> sa.types.TypeEngine:
    return _TYPES[kind]


def type_sql(kind: str, dialect: sa.Dialect) -> str:
    """The kind's type as `dialect` spells it in DDL (ALTER TABLE ... ADD COLUMN)."""
    return _TYPES[kind].compile(dialect=dialect)


def pg_cast(column_sql: str, kind: str) -> str:
    """PostgreSQL: the expression that turns a TEXT cell into the kind's type; '' becomes NULL."""
    return f"CAST(NULLIF(btrim({column_sql}), '') AS {_PG_CASTS[kind]})"


def sa_table(conn_metadata: sa.MetaData, table: Shape) -> sa.Table:
    """The SQLAlchemy table of a new table of this shape: id primary key, hash unique, typed columns, indexes."""
    made = sa.Table(
        table.name, conn_metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("hash", sa.String(128), nullable=False, unique=True),
        *[sa.Column(c, column_type(table.kinds[c])) for c in table.columns[1:]],
    )
    for index, names in table.indexes():
        sa.Index(index, *[made.c[n] for n in names])
    return made


def sqlite_incremental(dbapi_connection, _record=None) -> None:
    """SQLite, on each connection: a new database file gives the pages of deleted rows back to the file system
    (db/retention.py's release_space runs PRAGMA incremental_vacuum after a retention pass). auto_vacuum takes
    effect only when set before the file's first table; on a file that has tables it waits for a VACUUM
    (`parser-daemon retain --vacuum`), which rebuilds the file with it."""
    # Set only where it takes effect: setting it again on a file that has it is a write (the file's change
    # counter moves), which a start refused before it writes anything must not make.
    if dbapi_connection.execute("PRAGMA auto_vacuum").fetchone()[0] != 2 and \
            dbapi_connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
        dbapi_connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
