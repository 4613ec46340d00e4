"""The `runs` table (db/runs_table.py): a row per poll of a source, written at each flush, on SQLite and
PostgreSQL; a query over it says which sources failed this week."""
from __future__ import annotations

import json
import socket

import pytest
import sqlalchemy as sa

from tests.feeds import numbered_items, rss
from tests.upgrade.make_051_fixtures import entries

WEEK = {"sqlite": "strftime('%Y-%m-%dT%H:%M:%SZ', 'now', '-7 days')", "postgresql": "now() - interval '7 days'"}


def rows(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, project) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{project.db_path}"
    return "postgresql+psycopg://" + request.getfixturevalue("pg_url").split("://", 1)[1]


def test_a_row_per_poll_says_its_outcome_status_and_counts(project, server, db_url):
    server.route("/news.xml", body=rss(entries(3)), etag='"v1"')
    server.route("/quiet.xml", body=rss(numbered_items(1, 2)))
    server.route("/broken.xml", status=500, body=b"down")
    project.write_params(SOURCES=[{"name": name, "url": server.url(f"/{name}.xml")}
                                  for name in ("news", "quiet", "broken")], DB_URL=db_url)
    for _ in range(2):
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr + project.log("errors.log")
    found = rows(db_url, "select source, outcome, status, entries, new, changed, error is not null, daemon "
                         "from runs order by id")
    first = {row[0]: row[1:] for row in found[:3]}
    again = {row[0]: row[1:] for row in found[3:]}
    assert len(found) == 6
    assert first == {"news": ("new", 200, 3, 3, 0, False, None), "quiet": ("new", 200, 2, 2, 0, False, None),
                     "broken": ("error", 500, None, None, None, True, None)}
    assert again == {"news": ("not modified", 304, None, None, None, False, None),
                     "quiet": ("unchanged", 200, 2, 0, 0, False, None),
                     "broken": ("error", 500, None, None, None, True, None)}
    assert "500" in rows(db_url, "select error from runs where source = 'broken'")[0][0]
    assert all(seconds >= 0 for seconds, in rows(db_url, "select seconds from runs"))
    dialect = sa.engine.make_url(db_url).get_backend_name()
    failed = rows(db_url, f"select source, count(*) from runs where outcome = 'error' and started > {WEEK[dialect]} "
                          "group by 1")
    assert failed == [("broken", 2)]


def test_in_a_group_a_row_names_the_daemon_that_polled(project, server, pg_url):
    url = "postgresql+psycopg://" + pg_url.split("://", 1)[1]
    server.route("/news.xml", body=rss(entries(3)))
    project.write_params(SOURCES=[{"name": "news", "url": server.url("/news.xml")}], DB_URL=url, SHARED=True)
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr + project.log("errors.log")
    [(daemon, outcome)] = rows(url, "select daemon, outcome from runs")
    pid = json.loads((project.staging / "daemon.json").read_text("utf-8"))["pid"]
    assert outcome == "new" and daemon == f"{socket.gethostname()}:{pid}"
