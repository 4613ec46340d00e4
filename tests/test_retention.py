"""RETAIN (parser/retention.py, db/retention.py): the pass in-process on SQLite and PostgreSQL (rows older
than `items` deleted, by `published` else `fetched`; bodies older than `content` emptied, metadata kept; a
source's own `retain` for its rows alone; versions and runs pruned; the marks of the database spared; a
dry run changes nothing); through the real daemon on loopback, a deleted entry its feed still lists stays
deleted, edited or with its hash gone, and one older than the retention when first seen is never stored;
the `retain` command; SQLite's file gives the space back; bad settings exit 2 naming RETAIN."""
from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from db import schema
from db.retention import DELETE, Done, Task, said
from db.store import Database
from parser.core.record import RECORD_FIELDS
from parser.retention import run_pass
from parser.settings.params import settings_from_dict
from tests.feeds import rss
from tests.process import wait_for
from tests.test_flush_bulk import db, db_url, select  # noqa: F401 (fixtures)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
DAY = 86400


def ago(days: float, now: datetime = NOW) -> str:
    return (now - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def row(name: str, source: str = "news", published: float | None = None, fetched: float = 0, **fields) -> dict:
    link = f"http://news.example/{name}"
    return {"source": source, "guid": link, "link": link, "title": name, "summary": f"summary of {name}",
            "content": f"<p>{name}</p>", "categories": '["a"]', "hash": name,
            "published": None if published is None else ago(published), "fetched": ago(fetched), **fields}


def settings(tmp_path, **values):
    return settings_from_dict({"DB_URL": "sqlite:///unused.db", **values}, tmp_path / "params.py")


def titles(db_url: str, table: str = "items") -> list[str]:  # noqa: F811
    return [r[0] for r in select(db_url, f"SELECT title FROM {table} ORDER BY id")]


def test_a_pass_deletes_old_rows_empties_old_bodies_and_keeps_each_sources_own_age(tmp_path, db, db_url):  # noqa: F811
    db.insert_new("items", RECORD_FIELDS, [
        row("old", published=400, fetched=1), row("undated-old", fetched=400), row("middle", published=40),
        row("new", published=1), row("short-old", source="short", published=20),
        row("short-new", source="short", published=5), row("removed-source-old", source="gone", published=400),
        row("kept-for-ever", source="forever", published=4000), row("marked-old", published=500)])
    s = settings(tmp_path, RETAIN={"items": "365d", "content": "30d"}, SOURCES=[
        {"name": "news", "url": "http://news.example/feed"},
        {"name": "short", "url": "http://news.example/short", "retain": {"items": "10d"}},
        {"name": "forever", "url": "http://news.example/forever", "retain": {"items": None, "content": None}}])
    marks = {"items": ["marked-old"]}
    dry = run_pass(db, s, NOW.timestamp(), dry_run=True, marks=lambda t: marks.get(t, []))
    assert len(titles(db_url)) == 9  # a dry run counts, changes nothing
    done = run_pass(db, s, NOW.timestamp(), marks=lambda t: marks.get(t, []))
    assert titles(db_url) == ["middle", "new", "short-new", "kept-for-ever", "marked-old"]
    bodies = select(db_url, "SELECT title, content, summary, link, published IS NOT NULL, categories IS NOT NULL "
                            "FROM items ORDER BY id")
    assert [b[:3] for b in bodies] == [("middle", None, None), ("new", "<p>new</p>", "summary of new"),
                                       ("short-new", "<p>short-new</p>", "summary of short-new"),
                                       ("kept-for-ever", "<p>kept-for-ever</p>", "summary of kept-for-ever"),
                                       ("marked-old", None, None)]
    assert all(b[3] and b[4] and b[5] for b in bodies)  # metadata kept
    assert said(done) == ("items 3 rows deleted (older than 365d), 1 row deleted (older than 10d, source short), "
                          "2 bodies emptied (older than 30d)")
    assert said(dry, dry_run=True).startswith("items 4 rows to delete (older than 365d)")  # the mark counted
    assert said(run_pass(db, s, NOW.timestamp())) == "items 1 row deleted (older than 365d)"  # the mark moved on


def _side_table(db: Database, name: str, time_column: str, key: str, rows: list[dict]) -> None:  # noqa: F811
    table = sa.Table(name, sa.MetaData(), sa.Column(key, sa.Integer, primary_key=True, autoincrement=True),
                     sa.Column("hash", sa.Text), sa.Column("source", sa.Text),
                     sa.Column(time_column, schema.column_type("time")))
    with db.engine.begin() as conn:
        table.create(conn)
        conn.execute(table.insert(), rows)


def test_versions_and_runs_are_pruned_when_their_tables_exist(tmp_path, db, db_url):  # noqa: F811
    db.insert_new("items", RECORD_FIELDS, [row("a", published=1)])
    s = settings(tmp_path, RETAIN={"versions": "90d", "runs": "7d"})
    # No items_versions (no source keeps history): passed over; runs (made by the schema chain) is empty.
    assert [(d.task.table, d.rows) for d in run_pass(db, s, NOW.timestamp())] == [("runs", 0)]
    pg = db.engine.dialect.name == "postgresql"
    value = (lambda days: NOW - timedelta(days=days)) if pg else ago
    _side_table(db, "items_versions", "replaced", "version",
                [{"hash": "a", "source": "news", "replaced": value(100)}, {"hash": "a", "source": "news",
                                                                           "replaced": value(10)}])
    with db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO runs (source, started, seconds, outcome) VALUES (:s, :t, 0.1, 'new')"),
                     [{"s": "news", "t": value(8)}, {"s": "news", "t": value(1)}])
    done = run_pass(db, s, NOW.timestamp())
    assert said(done) == ("items_versions 1 row deleted (older than 90d); runs 1 row deleted (older than 7d)")
    assert len(select(db_url, "SELECT * FROM items_versions")) == 1 and len(select(db_url, "SELECT * FROM runs")) == 1


def test_a_jobs_rows_are_aged_by_fetched_under_its_own_retain(tmp_path, db, db_url):  # noqa: F811
    job = {"name": "shop", "template": "http://shop.example/item/{id}", "values": {"id": [1, 2]},
           "fields": {"price": "//p"}, "retain": {"items": "30d"}}
    s = settings(tmp_path, RETAIN={"items": "365d"}, LINK_JOBS=[job])
    db.insert_new("shop", ("url", "price", "fetched"), [
        {"hash": "old", "url": "http://shop.example/item/1", "price": "1", "fetched": ago(40)},
        {"hash": "new", "url": "http://shop.example/item/2", "price": "2", "fetched": ago(20)}])
    assert said(run_pass(db, s, NOW.timestamp())) == "shop 1 row deleted (older than 30d)"
    assert [r[0] for r in select(db_url, "SELECT url FROM shop")] == ["http://shop.example/item/2"]


def test_a_pass_goes_in_batches_each_a_short_transaction(tmp_path, db, db_url):  # noqa: F811
    from db import retention
    db.insert_new("items", RECORD_FIELDS, [row(f"r{n}", published=400 if n % 2 else 1) for n in range(3000)])
    batches: list[int] = []
    listen = sa.event.listen
    listen(db.engine, "commit", lambda conn: batches.append(1))
    task = Task("items", 365 * DAY, "COALESCE(published, fetched)", DELETE)
    assert retention.prune(db, task, NOW.timestamp()) == 1500
    assert len(batches) >= 2  # FIRST_BATCH (500) rows at first: never the whole table in one transaction
    assert len(titles(db_url)) == 1500


# -- through the daemon -------------------------------------------------------------------------------

def _items(now: datetime, old_title: str = "Old entry") -> list[dict]:
    """The feed: an entry published 10 days ago (first, so it is not among the newest rows that mark the
    database) and nine of today."""
    old = {"title": old_title, "link": "http://example.com/old", "date": now - timedelta(days=10),
           "description": "old body"}
    return [old] + [{"title": f"Fresh {n}", "link": f"http://example.com/fresh/{n}",
                     "date": now - timedelta(hours=n), "description": f"body {n}"} for n in range(9)]


def _links(project) -> list[str]:
    return sorted(r["link"] for r in project.rows())


@pytest.mark.parametrize("window", [None, "30d"])
def test_a_deleted_entry_stays_deleted_while_its_feed_lists_it_edited_or_not(server, project, window):
    now = datetime.now(UTC)
    server.route("/feed.xml", body=rss(_items(now)))
    params = {"SOURCES": [{"name": "blog", "url": server.url("/feed.xml")}]}
    if window:
        params["UNIQUE_WINDOW"] = window
    project.write_params(**params)
    project.run("--once", check=True)
    assert "http://example.com/old" in _links(project) and len(_links(project)) == 10

    project.write_params(RETAIN={"items": "5d"}, **params)
    project.run("--once", check=True)  # its pass, after the flush, deletes the entry of 10 days ago
    assert "http://example.com/old" not in _links(project) and len(_links(project)) == 9
    assert "retain: items 1 row deleted (older than 5d)" in project.log()

    server.route("/feed.xml", body=rss(_items(now, old_title="Old entry, edited")))  # edited at its source
    project.run("--once", check=True)
    assert "http://example.com/old" not in _links(project)
    for lost in project.staging.glob("hashes.*"):  # as if its hash had left UNIQUE_WINDOW: seen as new
        lost.unlink()
    (project.staging / "known.tsv").unlink(missing_ok=True)
    project.run("--once", check=True)
    assert "http://example.com/old" not in _links(project) and len(_links(project)) == 9
    assert "too old 1" in project.log()


def test_an_entry_older_than_the_retention_when_first_seen_is_never_stored(server, project, pg_url_or_sqlite):
    now = datetime.now(UTC)
    server.route("/feed.xml", body=rss(_items(now)))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml")}], RETAIN={"items": "5d"},
                         DB_URL=pg_url_or_sqlite)
    project.run("--once", check=True)
    url = _sa_url(project, pg_url_or_sqlite)
    stored = [r[0] for r in select(url, "SELECT link FROM items")]
    assert len(stored) == 9 and "http://example.com/old" not in stored
    assert select(url, "SELECT min(id), max(id) FROM items") == [(1, 9)]  # never inserted (it came first), not deleted
    assert "new 9  duplicates 0  too old 1" in project.log()


def _sa_url(project, url: str) -> str:
    if url.startswith("sqlite"):
        return f"sqlite:///{project.db_path}"
    return url.replace("postgresql://", "postgresql+psycopg://")


@pytest.fixture(params=["sqlite", "postgresql"])
def pg_url_or_sqlite(request):
    if request.param == "sqlite":
        return "sqlite:///db/items.db"
    return request.getfixturevalue("pg_url")


def test_a_running_daemon_prunes_at_start_beside_its_loop(server, project):
    now = datetime.now(UTC)
    server.route("/feed.xml", body=rss(_items(now)))
    params = {"SOURCES": [{"name": "blog", "url": server.url("/feed.xml")}]}
    project.write_params(**params)
    project.run("--once", check=True)
    project.write_params(RETAIN={"items": "5d"}, **params)
    before = len(project.log())  # the --once said its own pass (the runs table's default retention)
    daemon = project.start()
    try:
        wait_for(lambda: "retain: " in project.log()[before:], "the pass at start")
        assert "retain: items 1 row deleted (older than 5d)" in project.log()[before:]
        assert "http://example.com/old" not in _links(project)
        server.route("/feed.xml", body=rss(_items(now, old_title="Old entry, edited")))
        project.run("poll", "blog", check=True)  # polled now, by the running daemon
        assert "blog  new 0  duplicates 9  too old 1" in project.log()
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
    assert daemon.returncode == 0
    assert "http://example.com/old" not in _links(project) and len(_links(project)) == 9


# -- the command and the space ------------------------------------------------------------------------

def test_the_retain_command_says_what_would_go_then_prunes(server, project):
    now = datetime.now(UTC)
    server.route("/feed.xml", body=rss(_items(now)))
    params = {"SOURCES": [{"name": "blog", "url": server.url("/feed.xml")}]}
    project.write_params(**params)
    project.run("--once", check=True)
    project.write_params(RETAIN={"items": "5d"}, **params)
    dry = project.run("retain", "--dry-run", check=True)
    assert "retain: items 1 row to delete (older than 5d)" in dry.stdout and len(_links(project)) == 10
    done = project.run("retain", check=True)
    assert "retain: items 1 row deleted (older than 5d)" in done.stdout and len(_links(project)) == 9
    again = project.run("retain", check=True)
    assert "nothing older than its retention" in again.stdout


def test_sqlite_gives_the_space_of_deleted_rows_back(tmp_path):
    path = tmp_path / "new.db"
    db = Database(f"sqlite:///{path}")  # noqa: F811
    try:
        db.insert_new("items", RECORD_FIELDS, [row(f"r{n}", published=400, content="x" * 4000) for n in range(2000)])
        full = path.stat().st_size
        s = settings(tmp_path, RETAIN={"items": "365d"})
        run_pass(db, s, time.time())
        assert sqlite3.connect(path).execute("PRAGMA auto_vacuum").fetchone() == (2,)  # INCREMENTAL: a new file
        assert path.stat().st_size < full / 10
    finally:
        db.close()


def test_retain_vacuum_rewrites_a_file_made_before_auto_vacuum(server, project):
    project.folder.joinpath("db").mkdir()
    con = sqlite3.connect(project.db_path)  # a file an older version made: auto_vacuum off
    con.execute("CREATE TABLE filler (x TEXT)")
    con.execute("INSERT INTO filler VALUES (?)", ("x" * 100_000,))
    con.execute("DELETE FROM filler")
    con.commit()
    con.close()
    assert sqlite3.connect(project.db_path).execute("PRAGMA auto_vacuum").fetchone() == (0,)
    size = project.db_path.stat().st_size
    project.write_params(RETAIN={"items": "5d"})
    project.run("retain", "--vacuum", check=True)
    assert sqlite3.connect(project.db_path).execute("PRAGMA auto_vacuum").fetchone() == (2,)
    assert project.db_path.stat().st_size < size


# -- settings ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "said_"), [
    ("RETAIN = {'items': '365'}", "RETAIN: items must be a time with its unit"),
    ("RETAIN = {'itmes': '365d'}", "RETAIN: unknown key 'itmes'"),
    ("RETAIN = '365d'", "RETAIN: must be a dict"),
    ("SOURCES = [{'name': 'a', 'url': 'http://a.example/', 'retain': {'runs': '1d'}}]",
     "SOURCES[0] ('a'): retain: unknown key 'runs'"),
    ("LINK_JOBS = [{'name': 'shop', 'template': 'http://shop.example/{id}', 'values': {'id': [1]}, "
     "'fields': {'price': '//p'}, 'retain': {'content': '1d'}}]",
     "LINK_JOBS[0] ('shop'): retain: unknown key 'content'"),
])
def test_bad_retain_settings_exit_2_naming_the_setting(project, text, said_):
    project.write_params(text)
    checked = project.run("check")
    assert checked.returncode == 2 and said_ in checked.stderr


def test_done_says_each_table_once():
    task = Task("items", 365 * DAY, "published")
    assert said([Done(task, 1204), Done(Task("items", 30 * DAY, "published", "empty"), 8311)]) == \
        "items 1,204 rows deleted (older than 365d), 8,311 bodies emptied (older than 30d)"
