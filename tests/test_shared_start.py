"""Several daemons started at the same instant on an empty PostgreSQL database all start: the schema
is created under an advisory lock (db/store.py), so no CREATE TABLE races another."""
from __future__ import annotations

import shutil

import psycopg
import pytest

from tests.conftest import machines
from tests.feeds import numbered_items, rss


@pytest.mark.postgres
@pytest.mark.parametrize("daemons", [2, 4])
def test_daemons_started_at_once_on_an_empty_database_all_start(server, tmp_path, pg_url, daemons):
    server.route("/p.xml", body=rss(numbered_items(1, 5)))
    projects = machines(tmp_path, daemons, DB_URL=pg_url, SOURCES=[{"name": "p", "url": server.url("/p.xml")}])
    for _ in range(3):  # the race is a matter of milliseconds: three empty starts, not one
        for project in projects:  # each machine forgets what it stored, so each flush makes the table
            shutil.rmtree(project.staging, ignore_errors=True)
        procs = [project.start("--once") for project in projects]  # all before any has made a table
        results = [(proc.wait(timeout=120), proc.stderr.read()) for proc in procs]
        assert [code for code, _ in results] == [0] * daemons, results
        with psycopg.connect(pg_url, autocommit=True) as con:
            titles = [r[0] for r in con.execute("SELECT title FROM items ORDER BY title")]
            con.execute("DROP TABLE items")
        assert titles == [f"Item {n}" for n in range(1, 6)]  # each item once, whichever daemon stored it
