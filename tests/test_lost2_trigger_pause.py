"""A database trigger that refuses writes for a while (RAISE(ABORT, 'writes paused for maintenance'),
an operator's pause) says nothing about a record's content: the records staged meanwhile stay staged
and are stored once the pause ends, as the same pause does on PostgreSQL (issue 27, case 13)."""
from __future__ import annotations

import sqlite3
from collections import Counter

from sqlalchemy.exc import IntegrityError

from db.faults import Fault, classify
from tests.feeds import numbered_items, rss

PAUSE = ("CREATE TRIGGER pause BEFORE INSERT ON items "
         "BEGIN SELECT RAISE(ABORT, 'writes paused for maintenance'); END")


def sqlite_error(*statements: str) -> sqlite3.Error:
    con = sqlite3.connect(":memory:")
    try:
        con.execute("CREATE TABLE items (link TEXT NOT NULL CHECK (link <> ''))")
        for statement in statements:
            con.execute(statement)
        con.execute("INSERT INTO items VALUES ('')")
    except sqlite3.Error as exc:
        return exc
    finally:
        con.close()
    raise AssertionError("the insert was not refused")


def test_a_trigger_that_raises_is_not_the_records_fault():
    paused = sqlite_error(PAUSE)
    assert paused.sqlite_errorname == "SQLITE_CONSTRAINT_TRIGGER"
    assert classify(IntegrityError("INSERT", {}, paused)) is Fault.AWAY
    # A CHECK or NOT NULL of the table's own is still about the value.
    assert classify(IntegrityError("INSERT", {}, sqlite_error())) is Fault.RECORD


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
    errors = project.log("errors.log")
    assert "writes paused for maintenance" in errors
    assert "5 records kept in staging for the next flush" in errors
    assert "quarantine" not in errors
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

