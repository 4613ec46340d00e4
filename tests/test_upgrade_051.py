"""Issue 26, migration: this version started on project folders the released 0.5.1 wrote itself
(tests/upgrade/make_051_fixtures.py: its rows, its hash files, 2 entries it left staged). Its tables are
brought to this version's shape at start with their rows ('' made NULL, PostgreSQL's times and lists
typed), the version recorded; a refusal is exit 2 with nothing changed; a kill leaves one shape or the other.
"""
from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import Project
from tests.feeds import rss
from tests.process import wait_for
from tests.upgrade.make_051_fixtures import copy_fixture, entries

FEED_TITLE = "News of the day"
# 300,000 rows more in 0.5.1's shape: every third without a date (''), none with an author ('').
BULK_051_ROWS = ("with recursive n(value) as (select 1 union all select value + 1 from n where value < 300000) "
                 "insert into items (hash, source, guid, link, title, author, published, summary, content, fetched) "
                 "select printf('%056x', value), 'bulk', 'g' || value, 'http://example.org/b/' || value, 't', '', "
                 "case when value % 3 = 0 then '' else '2026-01-01T00:00:00Z' end, 's', '', '2026-01-02T00:00:00Z' "
                 "from n")
JOIN = "select i.title, s.title from items i join sources s on s.name = i.source order by i.id"


def upgraded_project(tmp_path: Path, server, which: str, db_url: str | None = None) -> Project:
    """The 0.5.1 fixture in tmp_path, its feed now served by `server` (the same 8 entries, the last 2 of
    which 0.5.1 left staged); the job's site is left where 0.5.1 crawled it (gone: no object fetched twice)."""
    copy_fixture(which, tmp_path)
    server.route("/feed.xml", body=rss(entries(8), title=FEED_TITLE), content_type="application/rss+xml")
    params = tmp_path / "params.py"
    text = re.sub(r"http://127\.0\.0\.1:\d+/feed\.xml", server.url("/feed.xml"), params.read_text("utf-8"))
    if db_url:
        text = re.sub(r"DB_URL = .*", f"DB_URL = {db_url!r}", text)
    params.write_text(text, encoding="utf-8")
    return Project(tmp_path)


def load_051_dump(pg_url: str, tmp_path: Path) -> str:
    """The PostgreSQL fixture's dump (made by pg_dump from 0.5.1's database) loaded into `pg_url`."""
    import psycopg
    dump = (Path(__file__).parent / "upgrade" / "fixtures_051" / "postgresql" / "dump.sql").read_text("utf-8")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(dump)
    return "postgresql+psycopg://" + pg_url.split("://", 1)[1]


def query(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def sqlite_url(project: Project) -> str:
    return f"sqlite:///{project.db_path}"


def assert_upgraded(url: str, project: Project) -> None:
    """What a user checks after the upgrade, on either database."""
    items = query(url, "select guid, published, author from items order by id")
    assert len(items) == 8 and len({guid for guid, _, _ in items}) == 8  # 6 flushed, 2 staged; none twice
    assert {guid for guid, published, _ in items if published is None} == {"news-6", "news-3"}  # '' before
    assert query(url, "select count(*) from items where author is null")[0][0] == 4
    assert query(url, "select count(*) from items where author = '' or content = '' or summary = ''")[0][0] == 0
    shop = query(url, "select url, price from shop order by id")
    assert len(shop) == 8 and [url for url, price in shop if price is None] == [shop[2][0]]  # item 3: no price
    assert dict(query(url, "select table_name, version from parser_schema")) == {"items": 2, "shop": 2, "sources": 2}
    indexes = {i["name"]: i["column_names"] for i in sa.inspect(sa.create_engine(url)).get_indexes("items")}
    assert indexes["items_source_published"] == ["source", "published"] and indexes["items_published"] == ["published"]
    assert query(url, JOIN) == [(f"Entry {n}", FEED_TITLE) for n in (6, 5, 4, 3, 2, 1, 8, 7)]
    errors = project.log("errors.log")
    assert "does not hold them" not in errors and "stopped" not in errors
    assert "table items: now schema 2 (6 rows had '' made NULL)" in project.log()


def test_a_051_sqlite_project_is_brought_to_the_new_shape_with_its_rows(tmp_path, server):
    project = upgraded_project(tmp_path, server, "sqlite")
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr + project.log("errors.log")
    assert_upgraded(sqlite_url(project), project)
    # 0.5.1's staged batch, taken as it is by the start's flush: daemon.json's flushes are that one (2 rows)
    # and the once flush (last_flush), which had nothing new to write.
    info = json.loads((project.staging / "daemon.json").read_text(encoding="utf-8"))
    assert [rows for _, rows, _, _ in info["flushes"]] == [2, 0], info["flushes"]
    assert (info["last_flush"]["why"], info["last_flush"]["rows"]) == ("once", 0), info["last_flush"]
    columns = {c["name"] for c in sa.inspect(sa.create_engine(sqlite_url(project))).get_columns("shop")}
    assert {"changed", "gone"} <= columns
    again = project.run("--once")  # a second start: nothing to migrate, nothing stored twice
    assert again.returncode == 0, again.stderr
    assert project.log().count("bringing it from schema 1") == 2  # items and shop, once each
    assert query(sqlite_url(project), "select count(*) from items")[0][0] == 8


def test_a_051_postgresql_database_gets_typed_columns_with_its_rows(tmp_path, server, pg_url):
    url = load_051_dump(pg_url, tmp_path)
    project = upgraded_project(tmp_path, server, "postgresql", url)
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr + project.log("errors.log")
    assert_upgraded(url, project)
    types = dict(query(url, "select column_name, data_type from information_schema.columns where table_name = 'items'"))
    assert types["published"] == types["fetched"] == types["updated"] == types["changed"] == "timestamp with time zone"
    assert types["categories"] == types["enclosures"] == "jsonb" and types["title"] == "text"
    shop = dict(query(url, "select column_name, data_type from information_schema.columns where table_name = 'shop'"))
    assert shop["fetched"] == shop["gone"] == "timestamp with time zone" and shop["price"] == "text"
    # What failed on the first undated row before: a time comparison over every row.
    recent = query(url, "select count(*) from items where published > timestamptz '2026-03-01 15:30Z'")
    assert recent[0][0] == 4  # entries 4, 5, 7 and 8 (16:00-20:00); 1 and 2 before, 3 and 6 undated (NULL)



def test_the_rows_made_null_are_counted_alike_on_both_databases(tmp_path, server, pg_url):
    # Before: PostgreSQL's figure left out the rows whose only '' was in a column the migration casts to a
    # time or a list (published here), which the cast did make NULL: 0 there, 2 in SQLite, for the same rows.
    sqlite_side = upgraded_project(tmp_path / "sqlite", server, "sqlite")
    pg = load_051_dump(pg_url, tmp_path)
    for project, url in ((sqlite_side, sqlite_url(sqlite_side)),
                         (upgraded_project(tmp_path / "pg", server, "postgresql", pg), pg)):
        engine = sa.create_engine(url)
        with engine.begin() as conn:  # '' left only in `published` (entries 3 and 6)
            conn.execute(sa.text("update items set author = 'A', content = 'c' where author = '' or content = ''"))
        engine.dispose()
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr + project.log("errors.log")
        assert query(url, "select guid from items where published is null order by guid") == [("news-3",), ("news-6",)]
        assert "table items: now schema 2 (2 rows had '' made NULL)" in project.log(), url


def test_a_value_postgresql_cannot_cast_is_exit_2_and_changes_nothing(tmp_path, server, pg_url):
    url = load_051_dump(pg_url, tmp_path)
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # a person's edit of 0.5.1's text column
        conn.execute(sa.text("update items set published = 'soon' where guid = 'news-2'"))
    engine.dispose()
    project = upgraded_project(tmp_path, server, "postgresql", url)
    proc = project.run("--once")
    assert proc.returncode == 2, proc.stderr
    critical = project.log("critical.log")
    assert 'invalid input syntax for type timestamp with time zone: "soon"' in critical
    assert "nothing was changed" in critical and "set it to NULL or mend it, and start the daemon again" in critical
    # Every step undone: the type, the '' cells, the new columns, the version.
    types = dict(query(url, "select column_name, data_type from information_schema.columns where table_name = 'items'"))
    assert types["published"] == "text" and "changed" not in types and "categories" not in types
    assert query(url, "select count(*) from items where published = ''")[0][0] == 2
    assert query(url, "select count(*) from items")[0][0] == 6
    # The chain's steps before the items' ran and are recorded; the items' step (3) is neither done nor
    # recorded: its changes and its record row were one transaction.
    assert query(url, "select step from parser_migrations order by step") == [(1,), (2,)]
    assert query(url, "select count(*) from parser_schema")[0][0] == 0
    with sa.create_engine(url).begin() as conn:  # mended as the message says
        conn.execute(sa.text("update items set published = NULL where published = 'soon'"))
    again = project.run("--once")
    assert again.returncode == 0, again.stderr + project.log("errors.log")
    # news-2's date, set to NULL by hand, came back from its feed at the poll (an update of the row).
    assert query(url, "select guid from items where published is null order by guid") == [("news-3",), ("news-6",)]


def test_a_sqlite_trigger_refusing_the_migration_leaves_the_051_table_whole(tmp_path, server):
    project = upgraded_project(tmp_path, server, "sqlite")
    con = sqlite3.connect(project.db_path)
    con.execute("create trigger paused before update on items begin select raise(abort, 'writes paused'); end")
    con.commit()
    con.close()
    proc = project.run("--once")
    assert proc.returncode == 2, proc.stderr
    critical = project.log("critical.log")
    assert "writes paused" in critical and "nothing was changed" in critical and "a trigger or a constraint" in critical
    # The columns added before the UPDATE failed are gone again: SQLite's ALTER TABLE was in the transaction.
    columns = [c["name"] for c in sa.inspect(sa.create_engine(sqlite_url(project))).get_columns("items")]
    assert columns == ["id", "hash", "source", "guid", "link", "title", "author", "published", "summary", "content",
                       "fetched"]
    assert query(sqlite_url(project), "select count(*) from items where published = ''")[0][0] == 2


@pytest.mark.slow
def test_a_kill_during_the_migration_leaves_the_old_shape_or_the_new(tmp_path, server):
    project = upgraded_project(tmp_path, server, "sqlite")
    con = sqlite3.connect(project.db_path)  # 0.5.1's table grown to 300,000 rows, as 0.5.1 made them
    con.execute(BULK_051_ROWS)
    con.commit()
    con.close()
    proc = project.start("--once")
    try:
        wait_for(lambda: "bringing it from schema 1" in project.log(), "the migration to begin")
        os.kill(proc.pid, signal.SIGKILL)
        said = project.log()  # "now schema 2" is said inside the transaction, before its commit
    finally:
        proc.kill()
        proc.wait()
    url = sqlite_url(project)
    columns = {c["name"] for c in sa.inspect(sa.create_engine(url)).get_columns("items")}
    empties = query(url, "select count(*) from items where published = '' or author = ''")[0][0]
    versions = query(url, "select version from parser_schema where table_name = 'items'") if "parser_schema" in \
        sa.inspect(sa.create_engine(url)).get_table_names() else []
    old = "changed" not in columns and empties == 300_004 and not versions  # every bulk row has author ''
    new = "changed" in columns and empties == 0 and versions == [(2,)]
    assert old or new, (sorted(columns), empties, versions)
    if "now schema 2" not in said:  # killed before the commit (here, 300,000 rows take about 2 s): all undone
        assert old, (sorted(columns), empties, versions)
    again = project.run("--once")  # and the next start finishes it
    assert again.returncode == 0, again.stderr
    assert query(url, "select count(*) from items where published is null")[0][0] == 100_000 + 2
    assert query(url, "select count(*) from items")[0][0] == 300_008
