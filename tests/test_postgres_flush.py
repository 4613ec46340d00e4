"""The flush into PostgreSQL (and the same crash case on SQLite): bulk, idempotent, nothing twice."""
from __future__ import annotations

import csv
from datetime import UTC, datetime

import psycopg
import pytest
import sqlalchemy

from tests.feeds import OLD_RECORD_FIELDS, numbered_items, rss


def pg_rows(url: str) -> list[tuple]:
    with psycopg.connect(url) as con:
        return con.execute("SELECT source, title, link, published FROM items ORDER BY id").fetchall()


@pytest.mark.postgres
def test_once_flushes_into_postgresql_and_a_rerun_adds_only_new_items(server, project, pg_url):
    server.route("/p.xml", body=rss(numbered_items(1, 3)))
    project.write_params(DB_URL=pg_url, SOURCES=[{"name": "p", "url": server.url("/p.xml")}])
    project.run("--once", check=True)
    assert [r[1] for r in pg_rows(pg_url)] == ["Item 3", "Item 2", "Item 1"]
    assert pg_rows(pg_url)[0][3] == datetime(2026, 11, 1, 12, 3, tzinfo=UTC)  # a timestamptz
    server.route("/p.xml", body=rss(numbered_items(1, 4)))
    project.run("--once", check=True)
    assert len(pg_rows(pg_url)) == 4
    assert (project.last_flush()["rows"], project.last_flush()["already"]) == (1, 0)


@pytest.mark.postgres
def test_a_batch_loaded_twice_after_a_crash_is_stored_once_in_postgresql(server, project, pg_url):
    crash_after_commit_before_delete(server, project, pg_url)
    assert len(pg_rows(pg_url)) == 3


def test_a_batch_loaded_twice_after_a_crash_is_stored_once_in_sqlite(server, project):
    crash_after_commit_before_delete(server, project, f"sqlite:///{project.db_path}")
    assert len(project.rows()) == 3


def crash_after_commit_before_delete(server, project, db_url: str) -> None:
    """Put the stored rows back as a batch file, as if the daemon died between the database's commit
    and the batch's removal; the restart loads the batch again and must store nothing twice."""
    server.route("/b.xml", body=rss(numbered_items(1, 3)))
    project.write_params(DB_URL=db_url, SOURCES=[{"name": "b", "url": server.url("/b.xml")}])
    project.run("--once", check=True)
    columns = ["hash", *OLD_RECORD_FIELDS]
    engine = sqlalchemy.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as con:
        stored = con.execute(sqlalchemy.text(f"SELECT {', '.join(columns)} FROM items")).all()
    engine.dispose()
    assert len(stored) == 3
    batch = project.staging / "staging.flushing-1.csv"
    with open(batch, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(stored)
    project.run("--once", check=True)
    assert not batch.exists()
    assert "3 already stored" in project.log()
