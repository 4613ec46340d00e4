"""Issue 26, point 2: the `sources` table, written at each flush from what the daemon knows, joins an
entry to its feed's title on SQLite and PostgreSQL; what a restart does not know yet is never written
over what the table holds; a job may not be named `sources`. Point 3: a new table's types and indexes."""
from __future__ import annotations

import json

import sqlalchemy as sa

from tests.feeds import rss
from tests.upgrade.make_051_fixtures import entries

JOIN = "select i.title, s.title from items i join sources s on s.name = i.source order by i.id"
FEED = rss(entries(3), title="Morning news")


def rows(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def run_twice(project, server, db_url: str) -> None:
    """A --once on a feed that answers, then one on the same feed failing with a 500."""
    server.route("/feed.xml", body=FEED)
    project.write_params(SOURCES=[{"name": "morning", "url": server.url("/feed.xml"), "tags": ["news", "en"]}],
                         DB_URL=db_url)
    first = project.run("--once")
    assert first.returncode == 0, first.stderr + project.log("errors.log")
    server.route("/feed.xml", status=500, body=b"down")
    project.run("--once")  # its exit code says every source failed


def check_sources(url: str) -> None:
    assert rows(url, JOIN) == [("Entry 3", "Morning news"), ("Entry 2", "Morning news"), ("Entry 1", "Morning news")]
    (row,) = rows(url, "select name, title, site, description, tags, last_status, failures, dead, last_poll, "
                       "last_success from sources")
    name, title, site, description, tags, status, failures, dead, last_poll, last_success = row
    # The restart's failed poll knew nothing of the feed: the title from the first run's answer is kept.
    assert (name, title, site, description) == ("morning", "Morning news", "http://example.com/", "test")
    assert (tags if isinstance(tags, list) else json.loads(tags)) == ["news", "en"]
    assert (status, failures, bool(dead)) == (500, 1, False)
    assert str(last_poll) >= str(last_success)  # whole seconds: the two runs may share one


def test_the_sources_table_joins_items_to_their_feed_sqlite(project, server):
    run_twice(project, server, "sqlite:///db/items.db")
    url = f"sqlite:///{project.db_path}"
    check_sources(url)
    assert "flush" not in project.log("errors.log")


def test_the_sources_table_joins_items_to_their_feed_postgresql(project, server, pg_url):
    url = "postgresql+psycopg://" + pg_url.split("://", 1)[1]
    run_twice(project, server, url)
    check_sources(url)
    types = dict(rows(url, "select column_name, data_type from information_schema.columns "
                           "where table_name = 'sources'"))
    assert types["last_poll"] == "timestamp with time zone" and types["tags"] == "jsonb"
    items = dict(rows(url, "select column_name, data_type from information_schema.columns "
                           "where table_name = 'items'"))
    assert items["published"] == items["changed"] == "timestamp with time zone" and items["categories"] == "jsonb"
    indexes = {i["name"] for i in sa.inspect(sa.create_engine(url)).get_indexes("items")}
    assert {"items_source_published", "items_published"} <= indexes
    assert rows(url, "select version from parser_schema where table_name = 'items'") == [(2,)]


def test_a_job_named_sources_is_a_settings_error(project, server):
    project.write_params(LINK_JOBS=[{"name": "sources", "template": server.url("/item/{n}"), "values": {"n": [1, 2, 3]},
                                     "fields": {"name": "//h1/text()"}}])
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "LINK_JOBS[0] ('sources')" in proc.stderr and "name 'sources' is the sources' table" in proc.stderr
