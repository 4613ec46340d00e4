"""`parser-daemon export` (issue 26, point 7): a table's rows out again as JSON lines, CSV or Atom.

Each test makes the table itself, in the shape the daemon gives it now (SQLite: times as ISO text, lists as
JSON text; PostgreSQL: timestamptz and jsonb), in the all-TEXT shape 0.5.x made, or as a job's table, then
runs the real command and reads what a user reads: the lines, the cells, the feed feedparser makes of it.
"""
from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta

import feedparser
import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tests.conftest import Project
from tests.feeds import OLD_RECORD_FIELDS, numbered_items, rss
from tests.process import wait_for

LIST_COLUMNS = ("categories", "enclosures")
TIME_COLUMNS = ("published", "updated", "fetched", "changed")
ITEM_COLUMNS = ("hash", "source", "guid", "link", "title", "author", "published", "updated", "summary", "content",
                "categories", "enclosures", "image", "comments", "language", "fetched", "changed")
OLD_COLUMNS = ("hash", *OLD_RECORD_FIELDS)

ROWS = [
    {"hash": "a1", "source": "news", "guid": "https://example.org/1", "link": "https://example.org/1",
     "title": "First & foremost", "author": "Ann Author", "published": "2024-05-20T08:30:00Z",
     "updated": "2024-05-21T09:00:00Z", "summary": "Plain text, with <angle> brackets.",
     "content": '<p>Hello <a href="https://example.org/x">world</a> <img src="https://example.org/i.png"></p>',
     "categories": ["news", "tech"],
     "enclosures": [{"url": "https://example.org/a.mp3", "type": "audio/mpeg", "length": 12345}],
     "image": "https://example.org/i.png", "comments": "https://example.org/1#comments", "language": "en",
     "fetched": "2024-05-21T10:00:00Z", "changed": None},
    {"hash": "b2", "source": "blog", "guid": "post-2", "link": "https://example.org/2",
     "title": '=HYPERLINK("http://evil.example/","click")', "author": None, "published": None, "updated": None,
     "summary": "-5 below zero", "content": None, "categories": None, "enclosures": None, "image": None,
     "comments": None, "language": None, "fetched": "2024-06-01T00:00:00Z", "changed": "2024-06-10T12:00:00Z"},
    {"hash": "c3", "source": "shop", "guid": None, "link": None, "title": "Ünïcødé @home\tand a tab",
     "author": "Bob", "published": "2024-06-05T00:00:00Z", "updated": None, "summary": None,
     "content": "<p>Body only</p>", "categories": ["one"], "enclosures": None, "image": None, "comments": None,
     "language": "de", "fetched": "2024-06-05T01:00:00Z", "changed": None},
]


# -- tables as each version makes them --------------------------------------------------------------

def _time(value: str | None):
    return datetime.fromisoformat(value) if value else None


def make_items(url: str, rows: list[dict] = ROWS, *, table: str = "items") -> None:
    """The new shape: typed columns in PostgreSQL (timestamptz, jsonb), ISO and JSON text in SQLite."""
    engine = sa.create_engine(url)
    pg = engine.dialect.name == "postgresql"
    time_type = postgresql.TIMESTAMP(timezone=True) if pg else sa.Text()
    list_type = postgresql.JSONB() if pg else sa.Text()
    columns = [sa.Column(c, time_type if c in TIME_COLUMNS else list_type if c in LIST_COLUMNS else sa.Text())
               for c in ITEM_COLUMNS if c != "hash"]
    made = sa.Table(table, sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("hash", sa.String(128), nullable=False, unique=True), *columns)
    stored = []
    for row in rows:
        cell = dict(row)
        for c in LIST_COLUMNS:
            if not pg and cell[c] is not None:
                cell[c] = json.dumps(cell[c], ensure_ascii=False, separators=(",", ":"))
        for c in TIME_COLUMNS:
            if pg:
                cell[c] = _time(cell[c])
        stored.append(cell)
    with engine.begin() as conn:
        made.create(conn)
        conn.execute(made.insert(), stored)
    engine.dispose()


def make_old_items(url: str) -> None:
    """0.5.x's shape: every column TEXT, '' for what the entry lacked, no `changed`, no lists."""
    engine = sa.create_engine(url)
    made = sa.Table("items", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("hash", sa.String(128), nullable=False, unique=True),
                    *[sa.Column(c, sa.Text) for c in OLD_COLUMNS[1:]])
    with engine.begin() as conn:
        made.create(conn)
        conn.execute(made.insert(), [{c: row[c] or "" for c in OLD_COLUMNS} for row in ROWS])
    engine.dispose()


def sqlite_project(project: Project, params: str = "") -> str:
    project.write_params(params)
    project.db_path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{project.db_path}"


def jsonl(proc: subprocess.CompletedProcess) -> list[dict]:
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def expected(row: dict, id_: int) -> dict:
    return {"id": id_, **row}


# -- jsonl ------------------------------------------------------------------------------------------

def test_jsonl_is_the_default_with_typed_values(project):
    make_items(sqlite_project(project))
    got = jsonl(project.run("export"))
    assert got == [expected(row, n) for n, row in enumerate(ROWS, 1)]
    # the table's own column order, every column present, NULL as null, lists as lists
    assert list(got[0]) == ["id", *ITEM_COLUMNS]
    assert got[0]["categories"] == ["news", "tech"] and got[1]["enclosures"] is None


def test_jsonl_from_postgresql_timestamptz_and_jsonb(project, pg_url):
    make_items(pg_url)
    project.write_params(DB_URL=pg_url)
    got = jsonl(project.run("export"))
    assert got == [expected(row, n) for n, row in enumerate(ROWS, 1)]


def test_old_all_text_table_exports_with_empty_dates_as_null(project):
    make_old_items(sqlite_project(project))
    got = jsonl(project.run("export"))
    assert list(got[1]) == ["id", *OLD_COLUMNS]
    assert got[1]["published"] is None  # '' in the old table: no date, as the new tables say it
    assert got[1]["author"] == ""       # text stays as stored
    assert [r["fetched"] for r in got] == [r["fetched"] for r in ROWS]


def test_a_jobs_table_exports_its_own_fields(project):
    url = sqlite_project(project)
    engine = sa.create_engine(url)
    shop = sa.Table("shop", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("hash", sa.String(128), unique=True), sa.Column("url", sa.Text),
                    sa.Column("name", sa.Text), sa.Column("price", sa.REAL), sa.Column("fetched", sa.Text),
                    sa.Column("changed", sa.Text), sa.Column("gone", sa.Text))
    with engine.begin() as conn:
        shop.create(conn)
        conn.execute(shop.insert(), [
            {"hash": "x", "url": "https://shop.example/p/1", "name": "Kettle", "price": 19.5,
             "fetched": "2024-06-01T00:00:00Z", "changed": None, "gone": ""},
            {"hash": "y", "url": "https://shop.example/p/2", "name": "Mug", "price": None,
             "fetched": "2024-06-02T00:00:00Z", "changed": "2024-06-03T00:00:00Z", "gone": None}])
    engine.dispose()
    got = jsonl(project.run("export", "--table", "shop"))
    assert got == [
        {"id": 1, "hash": "x", "url": "https://shop.example/p/1", "name": "Kettle", "price": 19.5,
         "fetched": "2024-06-01T00:00:00Z", "changed": None, "gone": None},
        {"id": 2, "hash": "y", "url": "https://shop.example/p/2", "name": "Mug", "price": None,
         "fetched": "2024-06-02T00:00:00Z", "changed": "2024-06-03T00:00:00Z", "gone": None}]
    feed = feedparser.parse(project.run("export", "--table", "shop", "--format", "atom", check=True).stdout)
    assert [(e.link, e.title, e.updated) for e in feed.entries] == [
        ("https://shop.example/p/1", "", "2024-06-01T00:00:00Z"),
        ("https://shop.example/p/2", "", "2024-06-03T00:00:00Z")]
    refused = project.run("export", "--table", "shop", "--source", "news")
    assert refused.returncode == 2 and "no source column" in refused.stderr


# -- csv --------------------------------------------------------------------------------------------

def test_csv_has_a_header_json_lists_and_spreadsheet_safe_cells(project):
    make_items(sqlite_project(project))
    proc = project.run("export", "--format", "csv", check=True)
    assert not proc.stdout.startswith("\ufeff")
    table = list(csv.reader(io.StringIO(proc.stdout, newline="")))
    assert table[0] == ["id", *ITEM_COLUMNS]
    cells = [dict(zip(table[0], line, strict=True)) for line in table[1:]]
    assert cells[0]["categories"] == '["news","tech"]'
    assert json.loads(cells[0]["enclosures"]) == ROWS[0]["enclosures"]
    assert cells[0]["content"] == ROWS[0]["content"] and cells[0]["published"] == "2024-05-20T08:30:00Z"
    assert cells[1]["title"] == "'" + ROWS[1]["title"]       # a formula shows as text
    assert cells[1]["summary"] == "'-5 below zero"
    assert cells[2]["title"] == ROWS[2]["title"]             # @ and tab inside a cell are no formula start
    assert cells[1]["author"] == "" and cells[2]["enclosures"] == ""  # NULL and the empty list: empty


def test_csv_bom_and_numbers_unescaped(project, pg_url):
    make_items(pg_url)
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE shop (id serial PRIMARY KEY, hash text, price double precision, "
                             "fetched timestamptz)"))
        conn.execute(sa.text("INSERT INTO shop (hash, price, fetched) VALUES ('x', -4.25, now())"))
    engine.dispose()
    project.write_params(DB_URL=pg_url)
    out = project.folder / "shop.csv"
    proc = project.run("export", "--table", "shop", "--format", "csv", "--bom", "-o", str(out), check=True)
    assert "1 rows of shop written" in proc.stderr
    data = out.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    table = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert table[0] == ["id", "hash", "price", "fetched"] and table[1][2] == "-4.25"  # a number is no formula
    items = list(csv.reader(io.StringIO(project.run("export", "--format", "csv", check=True).stdout, newline="")))
    assert items[1][ITEM_COLUMNS.index("categories") + 1] == '["news","tech"]'  # jsonb as the same JSON text


# -- atom -------------------------------------------------------------------------------------------

def check_feed(text: str, rows: list[dict]) -> None:
    """feedparser reads the Atom back entry for entry."""
    feed = feedparser.parse(text)
    assert not feed.bozo, feed.get("bozo_exception")
    # declared once, on <feed>: not again on each entry and each element of the head, as a reader sees it
    assert text.count('xmlns="http://www.w3.org/2005/Atom"') == 1, text[:600]
    assert feed.version == "atom10" and feed.feed.title == "parser-daemon: items"
    assert len(feed.entries) == len(rows)
    for entry, row in zip(feed.entries, rows, strict=True):
        link = row["link"]
        tag = f"tag:parser-daemon,2026:items/{row['hash']}"
        assert entry.id == (row["guid"] if (row["guid"] or "").startswith("https:") else link or tag)
        assert entry.title == row["title"]
        # (feedparser gives an entry without a link its id as `link`: the links themselves are compared)
        assert [x.href for x in entry.get("links", []) if x.rel == "alternate"] == ([link] if link else [])
        assert entry.updated == (row["changed"] or row["updated"] or row["published"] or row["fetched"])
        assert entry.get("published") == row["published"]
        assert entry.get("author") == row["author"]
        if row["summary"]:
            assert entry.summary == row["summary"]
        if row["content"]:
            # feedparser writes HTML's void elements back as <img ... />: the same markup
            assert entry.content[0].type == "text/html"
            assert entry.content[0].value.replace(" />", ">") == row["content"]
        else:
            assert "content" not in entry
        assert [t.term for t in entry.get("tags", [])] == (row["categories"] or [])
        assert [dict(e) for e in entry.get("enclosures", [])] == [
            {"href": e["url"], "type": e["type"], "length": str(e["length"])} for e in row["enclosures"] or []]


def test_atom_reads_back_entry_for_entry(project):
    make_items(sqlite_project(project))
    check_feed(project.run("export", "--format", "atom", check=True).stdout, ROWS)


def test_atom_from_postgresql(project, pg_url):
    make_items(pg_url)
    project.write_params(DB_URL=pg_url)
    check_feed(project.run("export", "--format", "atom", check=True).stdout, ROWS)


def test_atom_from_an_old_table(project):
    make_old_items(sqlite_project(project))
    old = [{**{c: r[c] for c in OLD_COLUMNS}, "updated": None, "changed": None, "categories": None,
            "enclosures": None} for r in ROWS]
    check_feed(project.run("export", "--format", "atom", check=True).stdout,
               [{k: (v if v != "" else None) for k, v in r.items()} for r in old])


# -- choosing rows ----------------------------------------------------------------------------------

def test_since_takes_rows_new_or_changed(project, pg_url):
    for url in (sqlite_project(project), pg_url):
        make_items(url)
        project.write_params(DB_URL=url)
        # b2 was fetched 2024-06-01 and changed 2024-06-10; c3 fetched 2024-06-05; a1 before both
        assert [r["hash"] for r in jsonl(project.run("export", "--since", "2024-06-05T01:00:00Z"))] == ["b2", "c3"]
        assert [r["hash"] for r in jsonl(project.run("export", "--since", "2024-06-06"))] == ["b2"]
        assert [r["hash"] for r in jsonl(project.run("export", "--since", "2024-06-10T14:00:00+02:00"))] == ["b2"]
        assert jsonl(project.run("export", "--since", "2024-06-10T12:00:01Z")) == []
        assert [r["hash"] for r in jsonl(project.run("export", "--source", "news", "--source", "shop"))] == ["a1", "c3"]


def test_since_a_duration_back_from_now(project):
    now = datetime.now(UTC)
    stamp = lambda ago: (now - ago).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    rows = [{**ROWS[0], "hash": "old", "fetched": stamp(timedelta(days=9)), "changed": None},
            {**ROWS[0], "hash": "changed", "fetched": stamp(timedelta(days=9)), "changed": stamp(timedelta(hours=2))},
            {**ROWS[0], "hash": "new", "fetched": stamp(timedelta(minutes=20)), "changed": None}]
    make_items(sqlite_project(project), rows)
    hashes = lambda *args: [r["hash"] for r in jsonl(project.run("export", *args))]  # noqa: E731
    assert hashes("--since", "7d") == ["changed", "new"]
    assert hashes("--since", "3h") == ["changed", "new"]
    assert hashes("--since", "30m") == ["new"]


def test_since_on_an_old_table_goes_by_fetched(project):
    make_old_items(sqlite_project(project))
    assert [r["hash"] for r in jsonl(project.run("export", "--since", "2024-06-01"))] == ["b2", "c3"]


# -- errors, files, pipes ---------------------------------------------------------------------------

def test_unknown_table_and_bad_since_are_exit_2(project):
    make_items(sqlite_project(project))
    proc = project.run("export", "--table", "shop")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "error: --table 'shop': no such table in the database (tables: items)" in proc.stderr
    for bad in ("yesterday", "7", "2024-13-01", "0d"):
        proc = project.run("export", "--since", bad)
        assert proc.returncode == 2 and proc.stdout == "", bad
        assert f"--since {bad!r}" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "7d, 12h, 30m" in project.run("export", "--since", "yesterday").stderr


def test_needs_only_db_url(project):
    """A params.py whose sources would stop the daemon (a bad source, a missing credential) still exports."""
    sqlite_project(project, 'import os\nSOURCES = [{"name": "x", "url": "ftp://nowhere", "protocol": "nope"}]\n'
                            'TOKEN = os.environ.get("NO_SUCH_SECRET_FOR_TEST")')
    make_items(f"sqlite:///{project.db_path}")
    assert project.run("check").returncode == 2  # the daemon would refuse this file
    assert len(jsonl(project.run("export"))) == 3


def test_output_file_is_replaced_whole(project):
    make_items(sqlite_project(project))
    out = project.folder / "items.jsonl"
    out.write_text("the previous export\n", encoding="utf-8")
    failed = project.run("export", "--table", "nope", "-o", str(out))
    assert failed.returncode == 2 and out.read_text(encoding="utf-8") == "the previous export\n"
    proc = project.run("export", "-o", str(out), check=True)
    assert proc.stdout == "" and "3 rows of items written to" in proc.stderr
    assert [json.loads(line)["hash"] for line in out.read_text(encoding="utf-8").splitlines()] == ["a1", "b2", "c3"]
    assert sorted(p.name for p in project.folder.iterdir() if p.name.startswith(".")) == []  # no temp file left


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "atom"])
def test_closed_stdout_ends_quietly(project, fmt):
    rows = [{**ROWS[0], "hash": f"h{n}", "content": "<p>" + "x" * 2000 + "</p>"} for n in range(3000)]
    make_items(sqlite_project(project), rows)
    proc = subprocess.Popen(project.command("export", "--format", fmt), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=project.folder)
    try:
        assert proc.stdout.readline()  # `| head -1`: one line, then the reader goes away
        proc.stdout.close()
        assert proc.wait(timeout=60) == 0
        assert proc.stderr.read() == b""
    finally:
        proc.kill()
        proc.wait()


def test_a_stalled_export_does_not_hold_the_sqlite_file(project):
    """A daemon flushing into the same SQLite file commits while an export waits on a reader that has
    stopped reading (a slow pipe): the export holds the file only while it reads a chunk."""
    rows = [{**ROWS[0], "hash": f"h{n}", "content": "<p>" + "x" * 2000 + "</p>"} for n in range(3000)]
    make_items(sqlite_project(project), rows)
    proc = subprocess.Popen(project.command("export"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=project.folder)
    try:
        assert proc.stdout.readline()  # the export is under way, and the pipe is left full from here on
        writer = sqlite3.connect(project.db_path, timeout=2)  # as the daemon's flush: DB_TIMEOUT-bounded
        try:
            writer.execute("INSERT INTO items (hash, source, fetched) VALUES ('new', 'news', '2024-07-01T00:00:00Z')")
            writer.commit()
        finally:
            writer.close()
        assert proc.poll() is None  # still stalled on the pipe while the write went in
    finally:
        proc.kill()
        proc.wait()


def test_the_sources_table_exports_too(project):
    """`sources` (a row a source, no id): tags, JSON text in SQLite, come out as a list."""
    url = sqlite_project(project)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE sources (name TEXT PRIMARY KEY, url TEXT, tags TEXT, last_poll TEXT, "
                             "dead BOOLEAN)"))
        conn.execute(sa.text("INSERT INTO sources VALUES ('news', 'https://example.org/feed', '[\"news\",\"daily\"]', "
                             "'2024-06-01T00:00:00Z', 0)"))
    engine.dispose()
    assert jsonl(project.run("export", "--table", "sources")) == [
        {"name": "news", "url": "https://example.org/feed", "tags": ["news", "daily"],
         "last_poll": "2024-06-01T00:00:00Z", "dead": 0}]


def make_versions(url: str, ids: int, each: int) -> None:
    """items and items_versions as UPDATES = "history" makes them (db/store.py): `each` versions of each
    of `ids` rows, stored in turn (a row's versions apart, as edits come), `version` the table's key."""
    make_items(url)
    engine = sa.create_engine(url)
    items = sa.Table("items", sa.MetaData(), autoload_with=engine)
    versions = sa.Table("items_versions", sa.MetaData(),
                        sa.Column("version", sa.Integer, primary_key=True, autoincrement=True),
                        *[sa.Column(c.name, c.type) for c in items.columns],
                        sa.Column("replaced", items.c.fetched.type))
    with engine.begin() as conn:
        versions.create(conn)
        conn.execute(versions.insert(), [{"id": i % ids, "hash": f"h{i % ids}", "title": f"v{i // ids}"}
                                         for i in range(ids * each)])
    engine.dispose()


def test_every_version_of_a_versions_table_is_exported(project, pg_url):
    # Before: paged by `id > last`, and an id repeats in items_versions: the versions of a chunk's last id
    # that fell into the next chunk were skipped (899 of 900 here).
    for url in (sqlite_project(project), pg_url):
        make_versions(url, ids=300, each=3)  # 500 rows a chunk: the first ends within id 166's three
        project.write_params(DB_URL=url)
        rows = jsonl(project.run("export", "--table", "items_versions"))
        assert sorted((r["id"], r["title"]) for r in rows) == [(i, f"v{v}") for i in range(300) for v in range(3)]


def test_unknown_table_lists_only_the_tables_of_a_users_data(project):
    # Before: parser_schema (the parser's own record of table versions) was offered among them.
    url = sqlite_project(project)
    make_versions(url, ids=2, each=1)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE parser_schema (table_name TEXT PRIMARY KEY, version INTEGER)"))
        conn.execute(sa.text("CREATE TABLE parser_daemons (daemon TEXT PRIMARY KEY)"))  # SHARED daemons' own
        conn.execute(sa.text("CREATE TABLE shop (id INTEGER PRIMARY KEY, hash TEXT, url TEXT)"))
    engine.dispose()
    proc = project.run("export", "--table", "nosuch")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "(tables: items, items_versions, shop)" in proc.stderr, proc.stderr


def late_flush(url: str, polled: str) -> None:
    """What a flush after an export run brings, polled before that run: a new entry (d4) and an edit of b2."""
    engine = sa.create_engine(url)
    pg = engine.dialect.name == "postgresql"
    when = _time(polled) if pg else polled
    items = sa.Table("items", sa.MetaData(), autoload_with=engine)
    with engine.begin() as conn:
        conn.execute(items.insert(), [{"hash": "d4", "source": "news", "title": "Late", "fetched": when}])
        conn.execute(items.update().where(items.c.hash == "b2").values(title="Edited", changed=when))
    engine.dispose()


def test_a_chain_of_runs_by_cursor_writes_every_row_stored_between_them(project, pg_url, tmp_path):
    # A row polled before a run and stored after it: a chain `--since <the previous run's start>` never
    # writes it (its fetched, or changed, is the poll's time, before that start). Before: no --cursor.
    for url in (sqlite_project(project), pg_url):
        make_items(url)
        project.write_params(DB_URL=url)
        cursor = tmp_path / f"{url.split(':')[0]}.cursor"
        assert [r["hash"] for r in jsonl(project.run("export", "--cursor", str(cursor)))] == ["a1", "b2", "c3"]
        start = datetime.now(UTC)
        late_flush(url, polled=(start - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ"))
        assert jsonl(project.run("export", "--since", start.isoformat())) == []  # what --since misses
        failed = project.run("export", "--cursor", str(cursor), "-o", str(tmp_path / "no" / "such" / "dir"))
        assert failed.returncode == 1  # nothing written: the cursor stays where it was
        rows = jsonl(project.run("export", "--cursor", str(cursor)))
        assert [(r["hash"], r["title"]) for r in rows] == [("b2", "Edited"), ("d4", "Late")]
        assert jsonl(project.run("export", "--cursor", str(cursor))) == []  # nothing new or changed since
        not_a_cursor = project.run("export", "--cursor", str(project.folder / "params.py"))
        assert not_a_cursor.returncode == 2 and "is no export cursor" in not_a_cursor.stderr


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_chain_of_runs_since_the_previous_start_writes_an_entry_flushed_late(project, server, database, request):
    """An entry polled before one run of a cron chain and flushed after it (the database was locked): the
    next run, `--since` that run's start, writes it: --since compares when the row was stored."""
    if database == "sqlite":
        url = f"sqlite:///{project.folder / 'db' / 'items.db'}"
    else:
        url = "postgresql+psycopg://" + request.getfixturevalue("pg_url").split("://", 1)[1]
    server.route("/feed.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "news", "url": server.url("/feed.xml")}], DB_URL=url, DB_TIMEOUT=1)
    project.run("--once", check=True)
    server.route("/feed.xml", body=rss(numbered_items(1, 4)))
    if database == "sqlite":
        holder = sqlite3.connect(project.folder / "db" / "items.db", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
    else:
        holder = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
        holder.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
    try:
        assert project.run("--once").returncode == 1  # polled, staged, not flushed
    finally:
        holder.rollback() if database == "postgresql" else holder.execute("ROLLBACK")
        holder.close()
    polled = datetime.now(UTC).replace(microsecond=0)
    wait_for(lambda: datetime.now(UTC) >= polled + timedelta(seconds=1), "a second after the poll")
    start = datetime.now(UTC)  # a run of the chain: the entry is not stored yet
    assert "Item 4" not in project.run("export", check=True).stdout
    project.run("--once", check=True)  # the entry flushed now, fetched before that run's start
    rows = jsonl(project.run("export", "--since", start.isoformat(), check=True))
    assert "Item 4" in [r["title"] for r in rows]  # at least once (rows stored shortly before may come again)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        stored = conn.execute(sa.text("select stored from items where title = 'Item 4'")).scalar_one()
    engine.dispose()
    if not isinstance(stored, datetime):
        stored = datetime.fromisoformat(stored.replace("Z", "+00:00"))
    assert stored >= start.replace(microsecond=0)  # when the flush wrote it, not when it was polled
