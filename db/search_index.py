"""Full-text search over the `items` table: the whole of its schema (made, mended, dropped) and its query,
for both databases, in this one module.

SQLite: an FTS5 table `items_search` over `items` (external content: the text is read from `items`,
not stored twice), kept by three triggers. PostgreSQL: a generated column `search`, each row's tsvector
built with the text search configuration of its `language` (german for 'de-DE', 'simple' where none
fits), and a GIN index `items_search` on it, so `Haus` finds `Die Häuser am Hafen` in a German entry.
Either way the index changes in the transaction that changes a row (every insert, update and delete,
whoever makes it), and the flush's code knows nothing of it. Indexed: `title` (weighted above the
rest) and `summary`, the entry's plain text; `content` is HTML and is left out.

PostgreSQL's tsvector is stored, not an index on an expression: ranking and a phrase's check read it rather
than parse every matching row's text again (seconds over a few thousand rows). COLUMN is no record field:
Database.table leaves it out of the table it loads into, and export leaves it out. The configurations a
server has are written in the column's comment, so a query builds the row's configuration as the column did.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from parser.core.dates import format_utc

log = logging.getLogger("parser")
TABLE = "items"
INDEX = "items_search"  # SQLite: the FTS5 table; PostgreSQL: the GIN index
COLUMN = "search"       # PostgreSQL: the generated tsvector column the index is on
TRIGGERS = ("items_search_insert", "items_search_delete", "items_search_update")
START, STOP = "\x02", "\x03"  # around a matched word in a snippet (no feed text holds these: control characters)
# ISO 639-1 code (the part of `language` before '-' or '_') -> PostgreSQL's text search configuration.
LANGUAGES = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "da": "danish", "nl": "dutch",
    "en": "english", "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian", "ne": "nepali",
    "no": "norwegian", "nb": "norwegian", "nn": "norwegian", "pt": "portuguese", "ro": "romanian",
    "ru": "russian", "sr": "serbian", "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish",
    "yi": "yiddish",
}
_COMMENT = "parser search 1 "  # then the JSON of the code -> configuration pairs the index was made with
# SQLite: words folded to their letters without accents, English words stemmed (the one stemmer FTS5 has);
# a query's word also matches as a prefix (_search_sqlite), so Haus finds Häuser there too.
_FTS5 = (f"CREATE VIRTUAL TABLE {INDEX} USING fts5(title, summary, content='{TABLE}', content_rowid='id', "
         "tokenize='porter unicode61 remove_diacritics 2')")
_FTS5_TRIGGERS = (
    f"CREATE TRIGGER {TRIGGERS[0]} AFTER INSERT ON {TABLE} BEGIN "
    f"INSERT INTO {INDEX}(rowid, title, summary) VALUES (new.id, new.title, new.summary); END",
    f"CREATE TRIGGER {TRIGGERS[1]} AFTER DELETE ON {TABLE} BEGIN "
    f"INSERT INTO {INDEX}({INDEX}, rowid, title, summary) VALUES ('delete', old.id, old.title, old.summary); END",
    f"CREATE TRIGGER {TRIGGERS[2]} AFTER UPDATE OF title, summary ON {TABLE} BEGIN "
    f"INSERT INTO {INDEX}({INDEX}, rowid, title, summary) VALUES ('delete', old.id, old.title, old.summary); "
    f"INSERT INTO {INDEX}(rowid, title, summary) VALUES (new.id, new.title, new.summary); END",
)


class SearchUnavailableError(Exception):
    """The database holds no search index (SEARCH = False at the last start, or no start since the upgrade)."""


@dataclass(frozen=True)
class Found:
    """One row found: its columns, and a piece of its text with each matched word between START and STOP."""
    source: str | None
    title: str | None
    link: str | None
    published: str | None  # ISO 8601 UTC
    marked: str

    @property
    def snippet(self) -> str:
        return self.marked.replace(START, "").replace(STOP, "")

    def pieces(self) -> list[tuple[str, bool]]:
        """The snippet as (text, matched) pieces, for a page to mark the matched words."""
        found = re.split(f"{START}(.*?){STOP}", self.marked, flags=re.S)
        return [(text.replace(START, "").replace(STOP, ""), i % 2 == 1) for i, text in enumerate(found) if text]

    def as_json(self) -> dict:
        return {"source": self.source, "title": self.title, "link": self.link, "published": self.published,
                "snippet": self.snippet}


# -- the schema ---------------------------------------------------------------------------------------

NEEDED = ("id", "title", "summary", "language")  # the columns the index reads


def create(conn: sa.Connection) -> bool:
    """Make the index in the caller's transaction when it is missing or incomplete, built from the rows the
    table holds; True when made. A table without the columns it reads (a person's own `items`) gets none."""
    if not set(NEEDED) <= {c["name"] for c in sa.inspect(conn).get_columns(TABLE)}:
        return False
    if conn.dialect.name == "sqlite":
        return _create_sqlite(conn)
    if conn.dialect.name == "postgresql":
        return _create_postgresql(conn)
    return False  # another database: no search


def drop(conn: sa.Connection) -> bool:
    """SEARCH = False: remove every object of the index, in the caller's transaction; True when any was there.
    Nothing is done when none is (PostgreSQL's DROP COLUMN takes the table's strongest lock, even for none)."""
    if conn.dialect.name == "sqlite":
        if not _sqlite_objects(conn):
            return False
        for trigger in TRIGGERS:
            conn.execute(sa.text(f"DROP TRIGGER IF EXISTS {trigger}"))
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {INDEX}"))
    elif conn.dialect.name == "postgresql":
        if not conn.execute(sa.text("SELECT to_regclass(:i) IS NOT NULL OR EXISTS (SELECT 1 FROM pg_attribute "
                                    "WHERE attrelid = to_regclass(:t) AND attname = :c AND NOT attisdropped)"),
                            {"i": INDEX, "t": TABLE, "c": COLUMN}).scalar_one():
            return False
        conn.execute(sa.text(f"DROP INDEX IF EXISTS {INDEX}"))
        conn.execute(sa.text(f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS {COLUMN}"))
    else:
        return False
    log.info("table %s: search index dropped (SEARCH = False)", TABLE)
    return True


def _sqlite_objects(conn: sa.Connection) -> set[str]:
    names = conn.execute(sa.text("SELECT name FROM sqlite_master WHERE name IN :names").bindparams(
        sa.bindparam("names", expanding=True)), {"names": [INDEX, *TRIGGERS]}).scalars()
    return set(names)


def _create_sqlite(conn: sa.Connection) -> bool:
    present = _sqlite_objects(conn)
    if present == {INDEX, *TRIGGERS}:
        return False
    # Some are missing: the table was dropped (its triggers with it) or a person removed one. What the FTS5
    # table holds no longer follows the rows, so it is made again whole.
    for trigger in TRIGGERS:
        conn.execute(sa.text(f"DROP TRIGGER IF EXISTS {trigger}"))
    conn.execute(sa.text(f"DROP TABLE IF EXISTS {INDEX}"))
    started = time.monotonic()
    conn.execute(sa.text(_FTS5))
    for trigger in _FTS5_TRIGGERS:
        conn.execute(sa.text(trigger))
    rows = conn.execute(sa.text(f"SELECT COUNT(*) FROM {TABLE}")).scalar_one()
    if rows:  # stored by an older version, or with SEARCH = False (a new table's needs no statement)
        conn.execute(sa.text(f"INSERT INTO {INDEX}({INDEX}) VALUES ('rebuild')"))
    _said_built(rows, started)
    return True


def _create_postgresql(conn: sa.Connection) -> bool:
    languages = _pg_languages(conn)
    wanted = _COMMENT + json.dumps(languages, sort_keys=True)
    indexed = conn.execute(sa.text("SELECT to_regclass(:i) IS NOT NULL"), {"i": INDEX}).scalar_one()
    if _pg_comment(conn) == wanted and indexed:
        return False
    # Missing, or made with other configurations (a server that has more since): made again with these. The
    # column is computed for every row as it is added (a rewrite of the table), and the index built on it.
    started = time.monotonic()
    conn.execute(sa.text("SET LOCAL statement_timeout = 0"))  # a big table's takes more than a flush may
    conn.execute(sa.text(f"DROP INDEX IF EXISTS {INDEX}"))
    conn.execute(sa.text(f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS {COLUMN}"))
    conn.execute(sa.text(f"ALTER TABLE {TABLE} ADD COLUMN {COLUMN} tsvector GENERATED ALWAYS AS "
                         f"({_pg_vector(languages)}) STORED"))
    conn.execute(sa.text(f"COMMENT ON COLUMN {TABLE}.{COLUMN} IS {_literal(wanted)}"))
    conn.execute(sa.text(f"CREATE INDEX {INDEX} ON {TABLE} USING gin ({COLUMN})"))
    _said_built(conn.execute(sa.text(f"SELECT COUNT(*) FROM {TABLE}")).scalar_one(), started)
    return True


def _said_built(rows: int, started: float) -> None:
    """Say in the log how many rows an index was made over, if any (a new table's is not worth a line)."""
    if rows:
        log.info("table %s: search index made over %d rows in %.1f s", TABLE, rows, time.monotonic() - started)


def _pg_languages(conn: sa.Connection) -> dict[str, str]:
    """The pairs of LANGUAGES whose configuration this server has (the list grew with its versions)."""
    have = set(conn.execute(sa.text("SELECT cfgname FROM pg_ts_config")).scalars())
    return {code: config for code, config in LANGUAGES.items() if config in have}


def _pg_comment(conn: sa.Connection) -> str | None:
    """The comment on the column `search`; None when there is no such column."""
    return conn.execute(sa.text("SELECT col_description(a.attrelid, a.attnum) FROM pg_attribute AS a "
                                "WHERE a.attrelid = to_regclass(:t) AND a.attname = :c AND NOT a.attisdropped"),
                        {"t": TABLE, "c": COLUMN}).scalar()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _pg_config(languages: dict[str, str]) -> str:
    """The row's configuration, from its language's code; IMMUTABLE (literals only), as an index needs."""
    cases = " ".join(f"WHEN {_literal(code)} THEN {_literal(config)}::regconfig"
                     for code, config in sorted(languages.items()))
    return f"(CASE split_part(lower(replace(language, '_', '-')), '-', 1) {cases} ELSE 'simple'::regconfig END)"


def _pg_vector(languages: dict[str, str]) -> str:
    config = _pg_config(languages)
    return (f"setweight(to_tsvector({config}, coalesce(title, '')), 'A') || "
            f"setweight(to_tsvector({config}, coalesce(summary, '')), 'B')")


# -- the query ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Query:
    words: str                       # as a person types them: words, "a phrase", or, -word
    sources: tuple[str, ...] = ()
    since: datetime | None = None    # published at or after (fetched, for an entry without a date)
    limit: int = 20


def terms(words: str) -> list[tuple[str, bool]]:
    """The query's terms, as websearch_to_tsquery reads them: (a word or a "quoted phrase", negated); `or`
    is kept as the word 'or' unnegated. A word is letters and digits; what else it holds separates words."""
    found = []
    for negated, phrase, word in re.findall(r'(-?)(?:"([^"]*)"?|([^\s"]+))', words):
        text = " ".join(re.findall(r"\w+", word or phrase))
        if text:
            found.append((text, negated == "-"))
    return found


def check(query: Query) -> None:
    """ValueError when the query cannot be run: nothing to look for (no words, or only words to leave out)."""
    looked_for = [text for text, negated in terms(query.words) if not negated and text.lower() != "or"]
    if not looked_for:
        raise ValueError(f"nothing to look for in {query.words!r}: give a word (a -word only leaves out)")
    if query.limit < 1:
        raise ValueError(f"--limit must be 1 or more, got {query.limit}")


def search(conn: sa.Connection, query: Query) -> list[Found]:
    """The rows that match, best first; SearchUnavailableError when the database has no index, ValueError
    when the query has nothing to look for."""
    check(query)
    if conn.dialect.name == "sqlite":
        if _sqlite_objects(conn) != {INDEX, *TRIGGERS}:
            raise SearchUnavailableError("the database has no search index")
        return _search_sqlite(conn, query)
    if conn.dialect.name == "postgresql":
        comment = _pg_comment(conn)
        indexed = conn.execute(sa.text("SELECT to_regclass(:i) IS NOT NULL"), {"i": INDEX}).scalar_one()
        if not comment or not comment.startswith(_COMMENT) or not indexed:
            raise SearchUnavailableError("the database has no search index")
        return _search_postgresql(conn, query, json.loads(comment[len(_COMMENT):]))
    raise SearchUnavailableError(f"search needs SQLite or PostgreSQL, not {conn.dialect.name}")


def fts5_query(words: str) -> str:
    """The query in FTS5's syntax: every term quoted (so no character of it is an operator), a word also
    matching as a prefix (3 letters at least), terms ANDed, `or` between two terms ORs them, -term leaves
    out."""
    wanted: list[str] = []
    left_out: list[str] = []
    pending_or = False
    for text, negated in terms(words):
        if text.lower() == "or" and not negated:
            pending_or = bool(wanted)
            continue
        quoted = '"' + text.replace('"', '""') + '"' + ("*" if len(text) >= 3 and " " not in text else "")
        if negated:
            left_out.append(quoted)
        elif pending_or:
            wanted[-1] = f"{wanted[-1]} OR {quoted}"
            pending_or = False
        else:
            wanted.append(quoted)
    expression = " AND ".join(f"({term})" for term in wanted)
    return expression + "".join(f" NOT {term}" for term in left_out)


def _search_sqlite(conn: sa.Connection, query: Query) -> list[Found]:
    where, values = _filters(query, sqlite=True)
    rows = conn.execute(sa.text(
        f"SELECT i.source, i.title, i.link, i.published, "
        f"snippet({INDEX}, 1, '{START}', '{STOP}', '…', 30), snippet({INDEX}, 0, '{START}', '{STOP}', '…', 30) "
        f"FROM {INDEX} JOIN {TABLE} AS i ON i.id = {INDEX}.rowid WHERE {INDEX} MATCH :q{where} "
        f"ORDER BY bm25({INDEX}, 4.0, 1.0), i.id DESC LIMIT :n"),
        {"q": fts5_query(query.words), "n": query.limit, **values})
    return [Found(source, title, link, published, summary or title_marked or "")
            for source, title, link, published, summary, title_marked in rows]


def _search_postgresql(conn: sa.Connection, query: Query, languages: dict[str, str]) -> list[Found]:
    """A query has no language: it is read with each configuration, and a row matches the reading of its
    own. Configurations that read it alike are one group, `row's configuration IN (...)`, so the GIN index
    is asked once a group (a proper name: once in all)."""
    configs = sorted({*languages.values(), "simple"})
    read = conn.execute(sa.text("SELECT c, websearch_to_tsquery(c::regconfig, :q)::text "
                                "FROM unnest(CAST(:cs AS text[])) AS c"), {"q": query.words, "cs": configs}).all()
    groups: dict[str, list[str]] = {}
    for config, tsquery in read:
        if tsquery:  # '' when the configuration reads only stop words: nothing of such a row matches
            groups.setdefault(tsquery, []).append(config)
    if not groups:
        return []
    config, vector = _pg_config(languages), COLUMN
    values: dict[str, object] = {}
    arms, per_row = [], []
    for n, (tsquery, members) in enumerate(groups.items()):
        values[f"q{n}"] = tsquery
        inside = ", ".join(f"{_literal(c)}::regconfig" for c in members)
        arms.append(f"({vector} @@ CAST(:q{n} AS tsquery) AND {config} IN ({inside}))")
        per_row.append(f"WHEN {config} IN ({inside}) THEN CAST(:q{n} AS tsquery)")
    row_query = f"(CASE {' '.join(per_row)} END)"
    where, filters = _filters(query, sqlite=False)
    options = f"StartSel={START}, StopSel={STOP}, MaxWords=30, MinWords=15"
    rows = conn.execute(sa.text(
        f"SELECT source, title, link, published, "
        f"CASE WHEN summary IS NOT NULL THEN ts_headline({config}, summary, {row_query}, :o) "
        f"ELSE ts_headline({config}, coalesce(title, ''), {row_query}, :o) END "
        f"FROM (SELECT i.id, i.source, i.title, i.link, i.published, i.summary, i.language, "
        f"ts_rank({vector}, {row_query}) AS rank FROM {TABLE} AS i "
        f"WHERE ({' OR '.join(arms)}){where} ORDER BY rank DESC, id DESC LIMIT :n) AS best "
        f"ORDER BY rank DESC, id DESC"),
        {**values, **filters, "n": query.limit, "o": options})
    return [Found(source, title, link, published if not isinstance(published, datetime) else format_utc(published),
                  marked or "") for source, title, link, published, marked in rows]


def _filters(query: Query, *, sqlite: bool) -> tuple[str, dict[str, object]]:
    """--source and --since as SQL (on the alias `i`) and its values."""
    where = ""
    values: dict[str, object] = {}
    if query.sources:
        names = ", ".join(f":s{n}" for n in range(len(query.sources)))
        where += f" AND i.source IN ({names})"
        values.update({f"s{n}": name for n, name in enumerate(query.sources)})
    if query.since is not None:
        where += " AND coalesce(i.published, i.fetched) >= :since"
        values["since"] = format_utc(query.since) if sqlite else query.since
    return where, values

