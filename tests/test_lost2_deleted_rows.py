"""Issue 27 case 12: an operator stops the daemon, deletes a junk source's rows (the newest) and
starts it again. The start is refused as before (a backup older than the last flush looks the same),
but it says the table and its older rows are there and offers a way that keeps every hash: after
`accept-deletions` the junk stays out and the other feeds go on, nothing stored twice."""
from __future__ import annotations

import sqlite3

from tests.feeds import numbered_items, rss


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
    assert "junk  new 0  duplicates 12" in project.log()
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
