"""The database changing underneath a running project (issue 18, cases 5, 6, 7 and 14): a record the
database refuses for its own content is set aside and the others stored; an id sequence left behind
the table's ids is moved on, never blamed on the records; a table dropped or an SQLite file restored
over the open one is reconnected to and made again; another connection's lock on the table bounds
the flush, so polls go on, /healthz says what is stuck and SIGTERM is acted on."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import string
from collections import Counter

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from db.faults import Fault, classify
from db.store import Database
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.test_status_page import get, start_with_page

LINKS = [f"http://example.com/item/{n}" for n in range(1, 5)]


def stored_links(project, db_url: str | None = None) -> list[str]:
    """The links in table items, by id; [] while the table does not exist."""
    if db_url is None:
        return [r["link"] for r in project.rows()]
    with psycopg.connect(db_url) as con:
        try:
            return [r[0] for r in con.execute("SELECT link FROM items ORDER BY id")]
        except psycopg.errors.UndefinedTable:
            return []


def quarantined(project) -> list[dict]:
    path = project.staging / "quarantine.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def first_run(server, project, db_url: str, interval: float = 600) -> list[dict]:
    """Items 1 and 2 stored by --once, so table items exists; then the feed offers items 1 to 4.
    Return the sources, for a daemon started next (`interval`: its source's)."""
    server.route("/f.xml", body=rss(numbered_items(1, 2)))
    sources = [{"name": "f", "url": server.url("/f.xml"), "interval": interval}]
    project.write_params(DB_URL=db_url, SOURCES=sources)
    project.run("--once", check=True)
    server.route("/f.xml", body=rss(numbered_items(1, 4)))
    return sources


# -- case 5: one record the database refuses for its own content ------------------------------------
def test_a_link_over_a_users_index_limit_is_set_aside_and_the_good_rows_stored(server, project, pg_url):
    first_run(server, project, pg_url)
    with psycopg.connect(pg_url) as con:
        con.execute("CREATE INDEX items_link ON items (link)")  # the user's own index
    # Random letters do not compress: the index row is over btree's 2704 bytes (SQLSTATE 54000).
    long_link = "http://example.com/" + "".join(random.choices(string.ascii_letters, k=4000))
    server.route("/f.xml", body=rss([{"title": "long", "link": long_link}, *numbered_items(1, 4)]))
    done = project.run("--once")
    assert done.returncode == 0, (done.stderr, project.log("critical.log"))
    assert sorted(stored_links(project, pg_url)) == LINKS
    [aside] = quarantined(project)
    assert aside["record"]["link"] == long_link and "index row size" in aside["error"]
    assert project.staged_rows() == 0


# -- case 6: the id sequence behind the table's ids -------------------------------------------------
@pytest.mark.parametrize("how", ["explicit ids", "setval back"])
def test_an_id_sequence_behind_the_table_is_moved_on_and_every_record_stored(server, project, pg_url, how):
    first_run(server, project, pg_url)
    with psycopg.connect(pg_url) as con:
        if how == "explicit ids":  # rows inserted by hand (or a restore) with ids the sequence has not given
            con.execute("INSERT INTO items (id, hash, title) SELECT n, 'manual-' || n, 'by hand' "
                        "FROM generate_series(3, 40) AS n")
        else:  # a restore that left the sequence where it was when the dump began
            con.execute("SELECT setval(pg_get_serial_sequence('items', 'id'), 1)")
    done = project.run("--once")
    assert done.returncode == 0, (done.stderr, project.log("critical.log"))
    assert quarantined(project) == []
    assert set(LINKS) <= set(stored_links(project, pg_url))
    moved_to = 41 if how == "explicit ids" else 3
    for log in ("errors.log", "parser.log"):
        assert "its id sequence was behind the ids the table holds" in project.log(log)
        assert f"moved it on to {moved_to}" in project.log(log)
    assert project.staged_rows() == 0


def test_sqlite_ids_never_fall_behind_rows_inserted_with_explicit_ids(server, project):
    """SQLite gives a new row the largest id + 1 (an INTEGER PRIMARY KEY without AUTOINCREMENT): its ids
    cannot fall behind the table, so there is nothing to mend; this holds that."""
    first_run(server, project, "sqlite:///db/items.db")
    with sqlite3.connect(project.db_path) as con:
        con.executemany("INSERT INTO items (id, hash, title) VALUES (?, ?, 'by hand')",
                        [(n, f"manual-{n}") for n in range(3, 41)])
    project.run("--once", check=True)
    assert set(LINKS) <= set(stored_links(project)) and quarantined(project) == []
    assert "id sequence" not in project.log("errors.log")


# -- case 7: the table or the file changed underneath a running daemon -------------------------------
def running(server, project, db_url: str):
    """A daemon in forever mode polling items 1 and 2, returned once both are stored."""
    server.route("/f.xml", body=rss(numbered_items(1, 2)))
    project.write_params(DB_URL=db_url, SOURCES=[{"name": "f", "url": server.url("/f.xml"), "interval": 0.3}],
                         FLUSH_INTERVAL=0.5)
    proc = project.start()
    wait_for(lambda: len(stored_links(project, None if db_url.startswith("sqlite") else db_url)) == 2
             or proc.poll() is not None, "the first flush")
    assert proc.poll() is None, proc.stderr.read()
    return proc


def test_an_sqlite_file_restored_over_the_open_one_gets_the_new_rows(server, project):
    proc = running(server, project, "sqlite:///db/items.db")
    try:
        backup = project.db_path.with_name("backup.db")
        with sqlite3.connect(project.db_path) as con, sqlite3.connect(backup) as copy:
            con.backup(copy)
        with sqlite3.connect(backup) as copy:
            copy.execute("UPDATE items SET title = 'from the backup'")
        # Restored as an operator does: cp to a temporary name, mv over the file.
        shutil.copy(backup, project.db_path.with_name("items.db.restoring"))
        os.replace(project.db_path.with_name("items.db.restoring"), project.db_path)
        server.route("/f.xml", body=rss(numbered_items(1, 4)))
        wait_for(lambda: sorted(stored_links(project)) == LINKS, "items 3 and 4 in the restored file", timeout=15)
    finally:
        assert stop(proc) == 0
    assert [r["title"] for r in project.rows()][:2] == ["from the backup"] * 2  # the new file, not the old one
    assert "table items: attempt to write a readonly database" in project.log("errors.log")
    assert "connected again, made what was missing, and loading the staged rows" in project.log()
    assert project.log("critical.log") == ""


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_dropped_table_is_made_again_and_gets_the_new_rows(server, project, database, request):
    db_url = "sqlite:///db/items.db" if database == "sqlite" else request.getfixturevalue("pg_url")
    pg = None if database == "sqlite" else db_url
    proc = running(server, project, db_url)
    try:
        if pg:
            with psycopg.connect(pg) as con:
                con.execute("DROP TABLE items")
        else:
            with sqlite3.connect(project.db_path) as con:
                con.execute("DROP TABLE items")
        server.route("/f.xml", body=rss(numbered_items(1, 4)))
        wait_for(lambda: sorted(stored_links(project, pg)) == LINKS[2:], "items 3 and 4 in a new table", timeout=15)
    finally:
        assert stop(proc) == 0
    assert "the table was gone" in project.log("errors.log")
    assert "created it again and loading the staged rows into it" in project.log()
    assert project.log("critical.log") == ""


def test_a_dropped_unique_index_on_hash_is_made_again_and_nothing_stored_twice(pg_url):
    """In-process: the index every insert names (ON CONFLICT (hash)) dropped by hand."""
    db = Database(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        assert db.insert_new("items", ("hash", "link"), [{"hash": "a", "link": "1"}]).inserted == 1
        with psycopg.connect(pg_url) as con:
            con.execute("ALTER TABLE items DROP CONSTRAINT items_hash_key")
        rows = [{"hash": "a", "link": "1"}, {"hash": "b", "link": "2"}]
        assert db.insert_new("items", ("hash", "link"), rows).inserted == 1
        assert db.insert_new("items", ("hash", "link"), [{"hash": "b", "link": "2"}]).inserted == 0
    finally:
        db.close()
    assert stored_links(None, pg_url) == ["1", "2"]


# -- case 14: another connection holds a lock on the table ------------------------------------------
def test_a_locked_table_bounds_the_flush_polls_go_on_healthz_says_so_and_sigterm_is_prompt(server, project, pg_url):
    sources = first_run(server, project, pg_url, interval=0.3)
    locker = psycopg.connect(pg_url)
    locker.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")  # held until the rollback below
    proc = None
    try:
        proc, base = start_with_page(project, DB_URL=pg_url, DB_TIMEOUT=1, FLUSH_INTERVAL=0.5, SOURCES=sources)
        lock_line = ": waited 1 s for a lock held by another connection"
        wait_for(lambda: lock_line in project.log("errors.log"), "a flush that gave up on the lock", timeout=20)
        # The polls go on, each reading the 4 entries (new 0): their rows reach the runs table, which is not locked.
        polls = project.polls("f", pg_url).count((4, 0, 0))
        wait_for(lambda: project.polls("f", pg_url).count((4, 0, 0)) >= polls + 2, "polls while the lock is held")
        status, reason = get(base + "/healthz")
        assert status == 503 and "failing since" in reason and "a lock held by another connection" in reason
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0  # the final flush gives up after DB_TIMEOUT: the lock is never let go
        stopped = project.last_flush()  # daemon.json: the stop's flush, refused by the lock
        assert stopped["why"] == "stop" and stopped["ok"] is False, stopped
        assert project.staged_rows() == 2
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        locker.rollback()
        locker.close()
    project.run("--once", check=True)  # the lock is gone: the rows kept in staging are stored
    assert sorted(stored_links(project, pg_url)) == LINKS


# A database trigger that refuses writes for a while (RAISE(ABORT, 'writes paused for maintenance'),
# an operator's pause) says nothing about a record's content: the records staged meanwhile stay staged
# and are stored once the pause ends, as the same pause does on PostgreSQL (issue 27, case 13).
PAUSE = ("CREATE TRIGGER pause BEFORE INSERT ON items "
         "BEGIN SELECT RAISE(ABORT, 'writes paused for maintenance'); END")


def sqlite_error(*statements: str) -> DBAPIError:
    """The error SQLAlchemy raises (as the flush sees it) when SQLite refuses an insert after `statements`."""
    engine = sa.create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE items (link TEXT NOT NULL CHECK (link <> ''))")
            for statement in statements:
                conn.exec_driver_sql(statement)
            conn.exec_driver_sql("INSERT INTO items VALUES ('')")
    except DBAPIError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError("the insert was not refused")


def test_a_trigger_that_raises_is_not_the_records_fault():
    paused = sqlite_error(PAUSE)
    assert paused.orig.sqlite_errorname == "SQLITE_CONSTRAINT_TRIGGER"
    assert classify(paused) is Fault.AWAY
    # A CHECK or NOT NULL of the table's own is still about the value.
    assert classify(sqlite_error()) is Fault.RECORD


def test_records_staged_while_a_trigger_pauses_writes_are_stored_after_it(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    project.run("--once", check=True)
    assert len(project.rows()) == 3

    con = sqlite3.connect(project.db_path)
    con.execute(PAUSE)
    con.commit()
    con.close()
    server.route("/a.xml", body=rss(numbered_items(1, 8)))
    paused = project.run("--once")
    assert paused.returncode == 1, paused.stderr  # the final flush failed: the rows wait in staging
    assert "writes paused for maintenance" in project.log("errors.log")  # the database's own reason, shown
    assert project.staged_rows() == 5  # the new records kept for the next flush, none set aside
    assert not (project.staging / "quarantine.jsonl").exists()
    assert len(project.rows()) == 3

    con = sqlite3.connect(project.db_path)
    con.execute("DROP TRIGGER pause")
    con.commit()
    con.close()
    resumed = project.run("--once")
    assert resumed.returncode == 0, resumed.stderr
    assert Counter(r["link"] for r in project.rows()) == Counter(
        f"http://example.com/item/{n}" for n in range(1, 9))


# Issue 27 case 12: an operator stops the daemon, deletes a junk source's rows (the newest) and
# starts it again. The start is refused as before (a backup older than the last flush looks the same),
# but it says the table and its older rows are there and offers a way that keeps every hash: after
# `accept-deletions` the junk stays out and the other feeds go on, nothing stored twice.
def test_rows_deleted_on_purpose_are_accepted_keeping_every_hash(server, project):
    server.route("/good.xml", body=rss(numbered_items(1, 5, host="good.example")))
    server.route("/junk.xml", body=rss(numbered_items(1, 12, host="junk.example")))
    good = {"name": "good", "url": server.url("/good.xml")}
    project.write_params(SOURCES=[good])
    project.run("--once", check=True)
    project.write_params(SOURCES=[good, {"name": "junk", "url": server.url("/junk.xml")}])
    project.run("--once", check=True)  # the junk source's rows: the newest
    assert len(project.rows()) == 17

    with sqlite3.connect(project.db_path) as con:
        con.execute("DELETE FROM items WHERE link LIKE 'http://junk.example/%'")
    refused = project.run("--once")
    assert refused.returncode == 2, refused.stderr
    critical = project.log("critical.log")
    assert "does not hold them: table items is there with older rows flushed from these hashes" in critical
    assert "accept-deletions" in critical and "every hash is kept" in critical

    accepted = project.run("accept-deletions")
    assert accepted.returncode == 0, accepted.stderr
    assert "items: the table as it is now is the mark of this database" in accepted.stdout
    server.route("/good.xml", body=rss(numbered_items(1, 6, host="good.example")))  # one new entry
    project.run("--once", check=True)
    links = sorted(r["link"] for r in project.rows())
    assert links == sorted(f"http://good.example/item/{n}" for n in range(1, 7))  # the junk stays out
    [junk] = [(r["entries"], r["new"]) for r in project.rows("runs") if r["source"] == "junk"][-1:]
    assert junk == (12, 0)  # its last poll read the 12 entries and stored none again
    assert project.run("accept-deletions").stdout.startswith("nothing to accept")


def test_a_replaced_database_is_still_refused_without_the_accept_way(server, project):
    server.route("/good.xml", body=rss(numbered_items(1, 5, host="good.example")))
    project.write_params(SOURCES=[{"name": "good", "url": server.url("/good.xml")}])
    project.run("--once", check=True)
    with sqlite3.connect(project.db_path) as con:
        con.execute("DELETE FROM items")  # nothing of what was flushed: another database, as far as it shows
    refused = project.run("--once")
    assert refused.returncode == 2
    critical = project.log("critical.log")
    assert "does not hold them (no table items, or none of the rows flushed there)" in critical
    assert "accept-deletions" not in critical
