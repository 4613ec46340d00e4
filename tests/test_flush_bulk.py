"""The flush through the drivers' bulk paths (db/bulk.py: sqlite3's executemany, PostgreSQL's COPY into
a temporary table), in-process through the real Sink and Database, on SQLite and PostgreSQL: the rows
go to the driver as read (no statement per row through SQLAlchemy), the written and already-stored
counts are right, a refused row among many is set aside and the others stored, a hash twice in one
batch is stored once, a job's table has its own columns, a column added later is filled, and the
staging CSV reads back (read_cells) exactly as the csv module reads it. PostgreSQL parses the staging
file itself (db/csv_load.py): what it stores is what the Python reader stores, and a batch it refuses
is read in Python (made safe, refused rows set aside, the others stored)."""
from __future__ import annotations

import csv
import json
import logging
import shutil
import time
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from db.store import Database
from parser.core.errors import RecordRefusedError, StorageError
from parser.core.record import RECORD_FIELDS
from parser.pipeline.batch_read import Cells, read_parts
from parser.pipeline.sink import Sink, SinkFiles, UniqueRule
from parser.pipeline.staging import StagingFile, read_rows
from tests.feeds import OLD_RECORD_FIELDS

# The batches written here by hand use 0.5's fields (a newer version loads what an older one staged).
OLD_FIELDS = OLD_RECORD_FIELDS


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db' / 'items.db'}"
    return request.getfixturevalue("pg_url").replace("postgresql://", "postgresql+psycopg://")


@pytest.fixture
def db(db_url):
    database = Database(db_url)
    yield database
    database.close()


def run_sql(db_url: str, *statements: str) -> None:
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))
    engine.dispose()


def select(db_url: str, query: str) -> list[tuple]:
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        rows = [tuple(row) for row in conn.execute(sa.text(query))]
    engine.dispose()
    return rows


def open_sink(staging: Path, table: str = "items", columns=RECORD_FIELDS, unique_fields="auto",
              updates: str = "update") -> Sink:
    return Sink(table=table, columns=columns, unique=UniqueRule(unique_fields, "hashfile", "sha224"),
                files=SinkFiles(staging), updates=updates)


def entry(n: int, title: str | None = None) -> dict:
    link = f"http://news.example/item/{n}"
    return {"source": "news", "guid": link, "link": link, "title": title or f"item {n}"}


def write_batch(staging: Path, header: tuple[str, ...], rows: list[tuple], n: int = 1) -> Path:
    """A batch file as a crash (or an older version) leaves it, for the next flush to load."""
    staging.mkdir(parents=True, exist_ok=True)
    path = staging / f"staging.flushing-{n}.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def quarantined(staging: Path) -> list[dict]:
    path = staging / "quarantine.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_rows_go_to_the_driver_in_bulk_not_a_statement_per_chunk_through_sqlalchemy(tmp_path, db, db_url):
    """The old flush sent an INSERT ... RETURNING through SQLAlchemy per 500 rows; the bulk path
    sends none: sqlite3's one executemany, PostgreSQL's COPY, on the driver's connection."""
    sink = open_sink(tmp_path / "staging")
    sink.stage([entry(n) for n in range(1200)])
    db.table("items", ("hash", *RECORD_FIELDS))  # made at start (the chain's rows are no flush's)
    sent: list[str] = []
    sa.event.listen(db.engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
    assert sink.flush(db) == (1200, 0, 0, 0)
    assert [s for s in sent if s.lstrip().upper().startswith("INSERT")] == []
    assert len(select(db_url, "SELECT hash FROM items")) == 1200
    sink.close()


def test_written_and_already_stored_counts_with_new_and_stored_rows_mixed(tmp_path, db, db_url):
    staging = tmp_path / "staging"
    sink = open_sink(staging)
    sink.stage([entry(n) for n in range(10)])
    assert sink.flush(db) == (10, 0, 0, 0)
    stored = select(db_url, f"SELECT {', '.join(('hash', *OLD_FIELDS))} FROM items ORDER BY id")
    # A crash between the commit and the batch's removal, then new rows: the batch comes again.
    again = [*stored[3:7], *[(f"{n:056x}", "news", f"g{n}", f"http://news.example/new/{n}", f"new {n}",
                              "", "", "", "", "") for n in range(5)]]
    write_batch(staging, ("hash", *OLD_FIELDS), again)
    assert sink.flush(db) == (5, 0, 4, 0)
    titles = [row[0] for row in select(db_url, "SELECT title FROM items ORDER BY id")]
    assert titles == [f"item {n}" for n in range(10)] + [f"new {n}" for n in range(5)]  # staging order
    assert sink.staging.batches() == []
    sink.close()


def test_a_refused_row_among_many_is_set_aside_and_the_others_stored(tmp_path, db, db_url):
    """A user's CHECK rule the records break: PostgreSQL refuses them in the INSERT ... SELECT from
    the temporary table (which has no such rule), SQLite in the executemany."""
    check = "CHECK (title NOT LIKE 'refused%')"
    key = "INTEGER PRIMARY KEY" if db_url.startswith("sqlite") else "SERIAL PRIMARY KEY"
    db.table("items", ("hash", *RECORD_FIELDS))  # made by the project, then given the user's rule
    run_sql(db_url, "DROP TABLE items", f"CREATE TABLE items (id {key}, hash VARCHAR(128) NOT NULL UNIQUE, "
            + ", ".join(f"{c} TEXT" for c in RECORD_FIELDS) + f", {check})")
    db.tables.clear()
    db.metadata.clear()
    staging = tmp_path / "staging"
    sink = open_sink(staging)
    refused = {5, 1500, 2999}
    sink.stage([entry(n, f"refused {n}" if n in refused else None) for n in range(3000)])
    assert sink.flush(db) == (2997, 0, 3, 0)
    titles = [row[0] for row in select(db_url, "SELECT title FROM items ORDER BY id")]
    assert len(titles) == 2997 and not [t for t in titles if t.startswith("refused")]
    assert titles[:6] == ["item 0", "item 1", "item 2", "item 3", "item 4", "item 6"]
    aside = quarantined(staging)
    assert sorted(q["record"]["title"] for q in aside) == ["refused 1500", "refused 2999", "refused 5"]
    assert all("refused a value" in q["error"] and q["record"]["link"] for q in aside)
    sink.close()


@pytest.mark.parametrize("value", ["nul \x00 byte", "lone \udc80 surrogate"])
def test_a_value_the_database_cannot_hold_is_refused_as_the_records_fault(db, db_url, value):
    """Given straight to insert_new (the flush makes text safe first): the driver's own error, raised
    beneath SQLAlchemy, still reads as the record's fault, so the halving sets the row aside. (SQLite
    holds a NUL as it is.)"""
    if "\x00" in value and db_url.startswith("sqlite"):
        pytest.skip("SQLite stores a NUL byte")
    with pytest.raises(RecordRefusedError, match="table items refused a value"):
        db.insert_new("items", ("hash", "title"), [("a", "good"), ("b", value)], fields=("hash", "title"))
    assert db.insert_new("items", ("hash", "title"), [("a", "good")], fields=("hash", "title")).inserted == 1


@pytest.mark.parametrize("updates", ["update", "ignore"])
def test_a_hash_twice_in_one_batch_is_stored_once(tmp_path, db, db_url, updates):
    """UPDATES "update": the later row is an edit, stored over the first at its place, counted as updated;
    "ignore": the first is kept."""
    staging = tmp_path / "staging"
    rows = [(f"{n:056x}", "news", f"g{n}", f"http://x.example/{n}", f"row {n}", "", "", "", "", "") for n in range(6)]
    rows.insert(4, (f"{2:056x}", "news", "g2", "http://x.example/2", "row 2 again", "", "", "", "", ""))
    write_batch(staging, ("hash", *OLD_FIELDS), rows)
    sink = open_sink(staging, updates=updates)
    titles = [f"row {n}" for n in range(6)]
    written, updated, already, _ = sink.flush(db)
    # SQLite inserts the first and updates it with the second; PostgreSQL inserts the last at the first's place.
    assert written == 6 and updated + already == 1
    if updates == "update":
        titles[2] = "row 2 again"
    else:
        assert already == 1
    assert [r[0] for r in select(db_url, "SELECT title FROM items ORDER BY id")] == titles
    sink.close()


def test_a_jobs_table_with_its_own_columns(tmp_path, db, db_url):
    columns = ("url", "fetched", "price", "name")
    sink = open_sink(tmp_path / "jobs" / "shop", table="shop", columns=columns, unique_fields=["url"])
    objects = [{"url": f"http://shop.example/p/{n}", "fetched": "2026-11-01T00:00:00Z", "price": f"{n}.99",
                "name": f'Product "{n}", new' if n % 2 else f"=SUM(A{n})"} for n in range(700)]
    sink.stage(objects)
    assert sink.flush(db) == (700, 0, 0, 0)
    stored = select(db_url, "SELECT url, fetched, price, name FROM shop ORDER BY id")
    # fetched is a time: timestamptz in PostgreSQL (a datetime comes back), ISO 8601 text in SQLite
    stored = [(url, f if isinstance(f, str) else f.strftime("%Y-%m-%dT%H:%M:%SZ"), *rest) for url, f, *rest in stored]
    assert stored == [tuple(o[c] for c in columns) for o in objects]
    sink.close()


def test_a_column_added_later_is_filled_and_one_the_table_lacks_left_out(tmp_path, db, db_url):
    """A table an older version made with fewer columns gets the new ones; a batch staged by a version
    with a column the records no longer have loads without it."""
    key = "INTEGER PRIMARY KEY" if db_url.startswith("sqlite") else "SERIAL PRIMARY KEY"
    run_sql(db_url, f"CREATE TABLE items (id {key}, hash VARCHAR(128) NOT NULL UNIQUE, source TEXT, link TEXT, "
            "title TEXT)", "INSERT INTO items (hash, source, link, title) VALUES ('old', 'news', 'http://o', 'old')")
    staging = tmp_path / "staging"
    write_batch(staging, ("hash", "title", "retired"), [("h-retired", "from an old file", "gone")], n=1)
    sink = open_sink(staging)
    sink.stage([{**entry(1), "author": "A. Writer", "summary": "'+quoted", "content": "<p>c</p>"}])
    assert sink.flush(db) == (2, 0, 0, 0)
    rows = select(db_url, "SELECT hash, title, author, summary, content FROM items ORDER BY id")
    assert rows[0] == ("old", "old", None, None, None)
    assert rows[1] == ("h-retired", "from an old file", None, None, None)
    assert rows[2][1:] == ("item 1", "A. Writer", "'+quoted", "<p>c</p>")
    sink.close()


def test_a_user_trigger_does_not_count_as_rows_written(tmp_path):
    """SQLite: the written count is the executemany's rowcount, which leaves out the rows a user's
    trigger writes elsewhere (connection.total_changes would count them)."""
    url = f"sqlite:///{tmp_path / 'db' / 'items.db'}"
    db = Database(url)
    try:
        db.table("items", ("hash", *RECORD_FIELDS))
        run_sql(url, "CREATE TABLE audit (hash TEXT)",
                "CREATE TRIGGER audit_items AFTER INSERT ON items BEGIN INSERT INTO audit VALUES (new.hash); END")
        sink = open_sink(tmp_path / "staging")
        sink.stage([entry(n) for n in range(4)])
        assert sink.flush(db) == (4, 0, 0, 0)
        assert select(url, "SELECT COUNT(*) FROM audit") == [(4,)]
        sink.close()
    finally:
        db.close()


# -- reading the staging CSV ------------------------------------------------------------------------
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)
CELLS = st.one_of(TEXT, st.sampled_from(['"', '","', '"\n"', "'", "'=x", "=1+1", "\r\n", "", " , "]))


def read_cells(path: Path) -> Cells:
    """The whole of `path` as one Cells, its parts (read_parts, as the flush reads it) joined."""
    header: tuple[str, ...] = ()
    rows: list[tuple[str | None, ...]] = []
    unsafe: list[int] = []
    for part in read_parts(path):
        header = part.header
        unsafe.extend(len(rows) + n for n in part.unsafe)
        rows.extend(part.rows)
    return Cells(header, rows, unsafe)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(CELLS, CELLS, CELLS), min_size=1, max_size=12))
def test_read_cells_gives_what_read_rows_gives(tmp_path_factory, rows):
    staging = StagingFile(tmp_path_factory.mktemp("s") / "staging.csv", ("hash", "title", "summary"))
    staging.append([dict(zip(("hash", "title", "summary"), row, strict=True)) for row in rows])
    cells = read_cells(staging.path)
    assert cells.header == ("hash", "title", "summary") and cells.unsafe == []
    assert [list(r) for r in cells.rows] == [list(r.values()) for r in read_rows(staging.path)] == [
        list(r) for r in rows]


def test_read_cells_of_a_hand_edited_file_and_of_bytes_not_utf8(tmp_path):
    path = tmp_path / "staging.csv"
    path.write_bytes(b'\xef\xbb\xbf"hash","title","summary"\r\n"h1","one"\r\n\r\n"h2","t\xff","s","extra"\r\n'
                     b'"h3","nul \x00","\'-x"')
    cells = read_cells(path)
    assert cells.header == ("hash", "title", "summary")
    assert cells.rows == [("h1", "one", None), ("h2", "t\udcff", "s"), ("h3", "nul \x00", "-x")]
    assert cells.unsafe == [0, 1, 2]  # bytes not UTF-8 in the file: every row made safe by the flush


def test_a_file_with_a_nul_marks_only_its_row_unsafe(tmp_path):
    path = tmp_path / "staging.csv"
    path.write_bytes(b'"hash","title"\n"h1","a"\n"h2","b \x00"\n"h3","c"\n')
    assert read_cells(path).unsafe == [1]


@pytest.mark.postgres
def test_postgresql_each_copy_is_bounded_and_the_temporary_table_is_gone_after(tmp_path, pg_url, monkeypatch):
    """Several COPY rounds in one transaction (each statement ends within STATEMENT_LIMIT); the
    temporary table leaves nothing behind, and the next flush makes it again. (The server's CSV load
    goes in parts of PART_BYTES; the rows' COPY, for a batch it refused, in COPY_ROWS.)"""
    monkeypatch.setattr("db.bulk.COPY_ROWS", 40)
    monkeypatch.setattr("db.csv_load.PART_BYTES", 2000)
    db = Database(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        sink = open_sink(tmp_path / "staging")
        sink.stage([entry(n) for n in range(130)])
        assert sink.flush(db) == (130, 0, 0, 0)
        sink.stage([entry(n) for n in range(130, 150)])
        assert sink.flush(db) == (20, 0, 0, 0)
        sink.close()
    finally:
        db.close()
    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT COUNT(*) FROM items").fetchone() == (150,)
        assert con.execute("SELECT COUNT(*) FROM pg_class WHERE relname IN ('parser_flush_rows', "
                           "'parser_flush_csv')").fetchone() == (0,)


@pytest.mark.postgres
def test_postgresql_a_users_column_of_another_type_is_loaded_as_typed(tmp_path, pg_url):
    """A user made `published` a timestamptz: the rows go through COPY's text format, read as typed
    (the binary format, for tables of text alone, would be refused)."""
    url = pg_url.replace("postgresql://", "postgresql+psycopg://")
    db = Database(url)
    try:
        db.table("items", ("hash", *RECORD_FIELDS))
        run_sql(url, "ALTER TABLE items ALTER COLUMN published TYPE timestamptz USING published::timestamptz")
        db.tables.clear()
        db.metadata.clear()
        sink = open_sink(tmp_path / "staging")
        sink.stage([{**entry(n), "published": f"2026-11-01T12:0{n}:00Z"} for n in range(3)])
        assert sink.flush(db) == (3, 0, 0, 0)
        sink.close()
    finally:
        db.close()
    with psycopg.connect(pg_url) as con:
        hours = con.execute("SELECT extract(minute FROM published) FROM items ORDER BY id").fetchall()
    assert [int(m) for (m,) in hours] == [0, 1, 2]


# -- PostgreSQL parses the staging file itself (db/csv_load.py) ----------------------------------------
AWKWARD = ['say "hi"', "a, b", "one\ntwo\r\nthree", "=SUM(A1)", "+1", "-1", "@home", "'quoted'", "\ttab",
           "\rcr", "'=already escaped", "''", "naïve €, 日本", "", "x\n\"\n", "' apostrophe then space"]


def watch_inserts(pg_url: str) -> None:
    """Record the text of every statement that stores rows in items (current_query(), in a trigger of
    the table's own): which path the flush took, seen from the server."""
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE TABLE IF NOT EXISTS inserts_seen (query text)")
        con.execute("CREATE OR REPLACE FUNCTION note_insert() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$BEGIN INSERT INTO inserts_seen VALUES (current_query()); RETURN NULL; END$$")
        con.execute("CREATE TRIGGER note_insert AFTER INSERT ON items FOR EACH STATEMENT "
                    "EXECUTE FUNCTION note_insert()")


def paths_taken(pg_url: str) -> list[str]:
    with psycopg.connect(pg_url) as con:
        queries = [q for (q,) in con.execute("SELECT query FROM inserts_seen")]
    return ["server's CSV" if "parser_flush_csv" in q else "rows" for q in queries]


def pg_items(pg_url: str) -> list[tuple]:
    with psycopg.connect(pg_url) as con:
        return con.execute(f"SELECT {', '.join(('hash', *OLD_FIELDS))} FROM items ORDER BY id").fetchall()


@pytest.fixture
def pg_db(pg_url):
    database = Database(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    database.table("items", ("hash", *RECORD_FIELDS))
    watch_inserts(pg_url)
    yield database
    database.close()


@pytest.mark.postgres
def test_postgresql_parses_the_staging_file_and_stores_what_the_python_reader_stores(tmp_path, pg_url, pg_db):
    """Awkward text (quotes, commas, line ends inside cells, the spreadsheet escape's characters and
    apostrophes, unicode, empty cells) through the server's CSV parser: stored exactly as the same
    staging file flushed the Python way (into SQLite) stores it, and as the records were."""
    records = [{**entry(n), "title": text, "summary": text[::-1], "content": f"<p>{text}</p>", "author": text[:1]}
               for n, text in enumerate(AWKWARD)]
    sink = open_sink(tmp_path / "staging")
    sink.stage(records)
    shutil.copytree(tmp_path / "staging", tmp_path / "copy")
    assert sink.flush(pg_db) == (len(AWKWARD), 0, 0, 0)
    assert paths_taken(pg_url) == ["server's CSV"]
    stored = pg_items(pg_url)
    assert [row[4] for row in stored] == [text or None for text in AWKWARD]  # an empty cell is NULL
    assert [(row[5], row[7], row[8]) for row in stored] == [(r["author"] or None, r["summary"] or None, r["content"])
                                                           for r in records]
    sqlite = Database(f"sqlite:///{tmp_path / 'db' / 'items.db'}")
    other = open_sink(tmp_path / "copy")
    assert other.flush(sqlite) == (len(AWKWARD), 0, 0, 0)
    assert select(str(sqlite.engine.url), f"SELECT {', '.join(('hash', *OLD_FIELDS))} FROM items ORDER BY id") \
        == stored
    sqlite.close()
    sink.close()
    other.close()


@pytest.mark.postgres
def test_postgresql_counts_stored_and_new_rows_and_a_hash_twice_across_parts(tmp_path, pg_url, pg_db, monkeypatch):
    """The file goes in parts (each its own COPY and INSERT, so each statement is bounded): parts cut
    at records' ends even inside cells with line ends and quotes; a hash twice is stored once, the
    last time (an update, as UPDATES "update" says), also when the two fall in different parts; already-stored
    rows are counted."""
    monkeypatch.setattr("db.csv_load.PART_BYTES", 300)
    monkeypatch.setattr("db.csv_load.BLOCK_BYTES", 64)
    staging = tmp_path / "staging"
    sink = open_sink(staging)
    sink.stage([{**entry(n), "content": f'line "{n}"\nnext, "line"\n'} for n in range(10)])
    assert sink.flush(pg_db) == (10, 0, 0, 0)
    stored = pg_items(pg_url)
    new = [(f"{n:056x}", "news", f"g{n}", f"http://x.example/{n}", f"new {n}", "", "", "", 'a\n"b"\n', "")
           for n in range(8)]
    twice = (f"{3:056x}", "news", "g3", "http://x.example/3", "new 3 again", "", "", "", "", "")
    write_batch(staging, ("hash", *OLD_FIELDS), [*new[:4], *stored[2:6], *new[4:], twice])
    assert sink.flush(pg_db) == (8, 1, 4, 0)
    rows = pg_items(pg_url)
    assert [r[4] for r in rows] == [f"item {n}" for n in range(10)] + [f"new {n}" if n != 3 else "new 3 again"
                                                                      for n in range(8)]
    assert rows[:10] == stored and [r[8] for r in rows[:3]] == ['line "0"\nnext, "line"\n', 'line "1"\nnext, '
                                                                '"line"\n', 'line "2"\nnext, "line"\n']
    assert set(paths_taken(pg_url)) == {"server's CSV"} and len(paths_taken(pg_url)) > 4
    sink.close()


@pytest.mark.postgres
@pytest.mark.parametrize("case", ["nul byte", "not utf-8", "refused value", "end-of-data line", "short record"])
def test_postgresql_reads_the_file_in_python_when_the_server_refuses_it(tmp_path, pg_url, pg_db, caplog, case):
    """Whatever the server's CSV load refuses, the batch goes the rows' way, which makes text safe,
    pads a short record, and finds a refused row by halving and sets it aside: the others stored."""
    staging = tmp_path / "staging"
    rows = [(f"{n:056x}", "news", f"g{n}", f"http://x.example/{n}", f"row {n}", "", "", "", "", "") for n in range(6)]
    if case == "refused value":
        with psycopg.connect(pg_url, autocommit=True) as con:
            con.execute("ALTER TABLE items ADD CONSTRAINT no_refused CHECK (title NOT LIKE 'refused%')")
        rows[3] = (*rows[3][:4], "refused 3", *rows[3][5:])
    path = write_batch(staging, ("hash", *OLD_FIELDS), rows)
    data = path.read_bytes()
    if case == "nul byte":
        path.write_bytes(data.replace(b"row 3", b"row \x003"))
    elif case == "not utf-8":
        path.write_bytes(data.replace(b"row 3", b"row \xff3"))
    elif case == "end-of-data line":
        path.write_bytes(data.replace(b'"row 3"', b'"row\n\\.\n3"'))
    elif case == "short record":
        path.write_bytes(data.replace(f'"{3:056x}","news"'.encode(), f'"{3:056x}"'.encode()))
    sink = open_sink(staging)
    with caplog.at_level(logging.INFO, logger="parser"):
        written = sink.flush(pg_db)
    assert "read in Python" in caplog.text
    titles = [r[4] for r in pg_items(pg_url)]
    expected = {"nul byte": "row 3", "not utf-8": "row \ufffd3", "end-of-data line": "row\n\\.\n3",
                "short record": None}
    if case == "refused value":
        assert written == (5, 0, 1, 0) and titles == ["row 0", "row 1", "row 2", "row 4", "row 5"]
        assert [q["record"]["title"] for q in quarantined(staging)] == ["refused 3"]
    elif case == "short record":
        assert written == (6, 0, 0, 0) and pg_items(pg_url)[3][1:3] == ("g3", "http://x.example/3")
        assert pg_items(pg_url)[3][-1] is None  # the cell the record lacks
    else:
        assert written == (6, 0, 0, 0) and titles[3] == expected[case] and quarantined(staging) == []
    assert set(paths_taken(pg_url)) == {"rows"}
    sink.close()


@pytest.mark.postgres
def test_postgresql_a_table_locked_elsewhere_is_waited_on_once_and_the_rows_stay_staged(tmp_path, pg_url):
    """Another connection holds the table: the server's load waits DB_TIMEOUT once and the batch stays
    for the next flush (it is not read again in Python to wait a second time)."""
    db = Database(pg_url.replace("postgresql://", "postgresql+psycopg://"), timeout=1.0)
    db.table("items", ("hash", *RECORD_FIELDS))
    sink = open_sink(tmp_path / "staging")
    sink.stage([entry(n) for n in range(5)])
    holder = psycopg.connect(pg_url)
    try:
        holder.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        with pytest.raises(StorageError, match="waited 1 s for a lock held by another connection"):
            sink.flush(db)
        assert time.monotonic() - started < 1.9
        holder.rollback()
        assert len(sink.staging.batches()) == 1
        assert sink.flush(db) == (5, 0, 0, 0)
    finally:
        holder.close()
        sink.close()
        db.close()
