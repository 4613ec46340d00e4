"""The `runs` table: a row per poll of a source and per pass 2 of a job, written with the flushes, on
SQLite and PostgreSQL: what a user asks of it ("what failed this week") answered by one query."""
from __future__ import annotations

import json
import socket

import pytest
import sqlalchemy as sa

from tests.feeds import numbered_items, rss
from tests.shop import HARVEST_FIELDS, Shop

COLUMNS = "source, outcome, status, entries, new, changed, error, daemon"
FAILED_THIS_WEEK = {
    "sqlite": "select source, count(*) from runs where outcome = 'error' "
              "and started > strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-7 days') group by 1",
    "postgresql": "select source, count(*) from runs where outcome = 'error' "
                  "and started > now() - interval '7 days' group by 1",
}


def query(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, project):
    if request.param == "sqlite":
        return f"sqlite:///{project.folder / 'db' / 'items.db'}"
    return "postgresql+psycopg://" + request.getfixturevalue("pg_url").split("://", 1)[1]


def test_every_poll_and_job_pass_is_a_row_and_a_week_of_failures_is_one_query(project, server, db_url):
    server.route("/news.xml", body=rss(numbered_items(1, 3)), etag='"n1"')
    server.route("/gone.xml", status=404, body=b"no such feed")
    Shop(server)
    job = {"name": "shop", "harvest": {"root": server.url("/"), "follow": r"/list/", "depth": 3},
           "objects": r"/item/\d+$", "fields": HARVEST_FIELDS}
    project.write_params(SOURCES=[{"name": "news", "url": server.url("/news.xml")},
                                  {"name": "gone", "url": server.url("/gone.xml")}], LINK_JOBS=[job], DB_URL=db_url)
    project.run("--once")  # exit 1: a source failed
    server.route("/news.xml", body=rss(numbered_items(1, 4)), etag='"n2"')  # one entry more
    project.run("--once")
    project.run("--once")  # 304 to the second's validators

    polls = query(db_url, f"select {COLUMNS} from runs where source = 'news' order by started, id")
    assert polls == [("news", "new", 200, 3, 3, 0, None, None), ("news", "new", 200, 4, 1, 0, None, None),
                     ("news", "not modified", 304, 0, 0, 0, None, None)]
    failed = query(db_url, f"select {COLUMNS} from runs where source = 'gone'")
    assert len(failed) == 3 and {row[:3] for row in failed} == {("gone", "error", 404)}
    assert all("404" in row[6] for row in failed)
    shop = query(db_url, "select outcome, entries, new from runs where source = 'shop' order by started, id")
    assert shop[0] == ("new", 9, 8)  # its first pass: 9 links fetched (one a 404), 8 objects stored
    assert query(db_url, FAILED_THIS_WEEK[db_url.split(":")[0].split("+")[0]]) == [("gone", 3)]
    seconds = query(db_url, "select min(seconds), max(seconds) from runs")[0]
    assert 0 <= seconds[0] <= seconds[1] < 60


def test_in_a_group_a_row_names_the_daemon_that_polled(project, server, pg_url):
    url = "postgresql+psycopg://" + pg_url.split("://", 1)[1]
    server.route("/news.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "news", "url": server.url("/news.xml")}], DB_URL=url, SHARED=True)
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr + project.log("errors.log")
    [(daemon, outcome)] = query(url, "select daemon, outcome from runs")
    pid = json.loads((project.staging / "daemon.json").read_text("utf-8"))["pid"]
    assert outcome == "new" and daemon == f"{socket.gethostname()}:{pid}"
