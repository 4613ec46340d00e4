"""Issue 27 case 14: a `published` column a user altered to timestamptz (as docs/design.md says is honoured)
takes undated entries: what an entry lacks is NULL on the way in, never '' that the cast refuses and
sends the records to quarantine (0 of 5 were stored)."""
from __future__ import annotations

import pytest

from tests.feeds import rss


@pytest.mark.postgres
def test_undated_entries_go_into_a_users_timestamptz_column(server, project, pg_url):
    import psycopg
    undated = [{"title": f"Undated {n}", "link": f"http://example.com/u/{n}"} for n in range(5)]
    server.route("/feed.xml", body=rss(undated[:1]))
    project.write_params(DB_URL=pg_url, SOURCES=[{"name": "u", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)  # the table made; then the user's own change of a column's type
    with psycopg.connect(pg_url) as con:
        con.execute("ALTER TABLE items ALTER COLUMN published TYPE timestamptz "
                    "USING NULLIF(published::text, '')::timestamptz")
    server.route("/feed.xml", body=rss(undated))
    project.run("--once", check=True)
    with psycopg.connect(pg_url) as con:
        rows = con.execute("SELECT title, published FROM items ORDER BY id").fetchall()
    assert rows == [(f"Undated {n}", None) for n in (0, 1, 2, 3, 4)]
    assert not (project.staging / "quarantine.jsonl").exists()
