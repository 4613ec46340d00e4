"""The three queries of README "What gets stored" run as written, on what the daemon stored from a
podcast feed, in PostgreSQL and in SQLite, with the rows a user expects."""
from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
NOW = datetime.now(UTC)


def podcast() -> bytes:
    items = []
    for n, (age, tags, audio) in enumerate([(1, ["news", "tech"], "audio/mpeg"), (3, ["sport"], "audio/mpeg"),
                                             (30, ["news"], "video/mp4")]):
        categories = "".join(f"<category>{t}</category>" for t in tags)
        items.append(f"<item><title>Episode {n}</title><link>http://pod.example/{n}</link>"
                     f"<pubDate>{format_datetime(NOW - timedelta(days=age))}</pubDate>{categories}"
                     f'<enclosure url="http://pod.example/{n}.bin" type="{audio}" length="{1000 * (n + 1)}"/>'
                     "<description>Show notes</description></item>")
    return ('<?xml version="1.0"?><rss version="2.0"><channel><title>The Pod</title><link>http://pod.example/</link>'
            f"<description>A show</description>{''.join(items)}</channel></rss>").encode()


def readme_queries(block: int) -> list[str]:
    """The queries of the README's `block`th sql block after "Three queries" (0: PostgreSQL, 1: SQLite)."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", text[text.index("Three queries"):], re.S)
    return [q.strip() for q in blocks[block].split(";") if q.strip()]


def run_daemon(project, server, db_url: str) -> None:
    server.route("/pod.xml", body=podcast())
    project.write_params(SOURCES=[{"name": "pod", "url": server.url("/pod.xml")}], DB_URL=db_url)
    project.run("--once", check=True)


def expected(results: list[list[tuple]]) -> None:
    week, news, audio = results
    assert [(row[1], row[2]) for row in week] == [("The Pod", "Episode 0"), ("The Pod", "Episode 1")]
    assert sorted(row[0] for row in news) == ["Episode 0", "Episode 2"]
    assert sorted((row[0], row[1], int(row[2])) for row in audio) == [
        ("Episode 0", "http://pod.example/0.bin", 1000), ("Episode 1", "http://pod.example/1.bin", 2000)]


def test_the_readme_queries_on_sqlite(server, project):
    run_daemon(project, server, "sqlite:///db/items.db")
    queries = readme_queries(1)
    assert len(queries) == 3
    con = sqlite3.connect(project.db_path)
    try:
        expected([con.execute(q).fetchall() for q in queries])
    finally:
        con.close()


@pytest.mark.postgres
def test_the_readme_queries_on_postgresql(server, project, pg_url):
    import psycopg
    run_daemon(project, server, pg_url)
    with psycopg.connect(pg_url) as con:
        expected([con.execute(q).fetchall() for q in readme_queries(0)])
