"""The cyclic pass end to end: run_daemon.py against a loopback server, then read the SQLite file
and the log files, as a user would."""
from __future__ import annotations

import csv
import json

from tests.feeds import numbered_items, rss


def test_once_stores_every_item_and_a_second_run_stores_none_again(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 5)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])

    first = project.run("--once")
    assert first.returncode == 0, first.stderr
    rows = project.rows()
    assert [r["title"] for r in rows] == [f"Item {n}" for n in range(5, 0, -1)]
    assert rows[0]["link"] == "http://example.com/item/5"
    assert rows[0]["published"] == "2026-11-01T12:05:00Z"
    assert rows[0]["source"] == "a" and len(rows[0]["hash"]) == 56

    server.route("/a.xml", body=rss(numbered_items(1, 7)))  # two newer items appear
    second = project.run("--once")
    assert second.returncode == 0, second.stderr
    titles = [r["title"] for r in project.rows()]
    assert len(titles) == 7 and len(set(titles)) == 7
    assert project.polls("a")[-1] == (7, 2, 0)  # entries read, new, changed


def test_conditional_get_sends_validators_and_treats_304_as_nothing_new(server, project):
    server.route("/c.xml", body=rss(numbered_items(1, 3)), etag='"v1"', last_modified="Sun, 01 Nov 2026 12:00:00 GMT")
    project.write_params(SOURCES=[{"name": "c", "url": server.url("/c.xml")}])
    project.run("--once", check=True)
    project.run("--once", check=True)
    second_request_headers = server.requests[-1][1]
    assert second_request_headers.get("If-None-Match") == '"v1"'
    assert second_request_headers.get("If-Modified-Since") == "Sun, 01 Nov 2026 12:00:00 GMT"
    assert project.outcomes("c") == ["new", "not modified"]
    assert len(project.rows()) == 3


def test_tracking_parameters_do_not_make_a_cross_posted_item_new(server, project):
    server.route("/x.xml", body=rss([{"title": "Same story", "link": "http://Example.com/story?id=7&utm_source=x#top"}]))
    server.route("/y.xml", body=rss([{"title": "Same story", "link": "http://example.com/story?fbclid=abc&id=7"}]))
    project.write_params(SOURCES=[{"name": "x", "url": server.url("/x.xml")},
                                  {"name": "y", "url": server.url("/y.xml")}])
    project.run("--once", check=True)
    rows = project.rows()
    assert len(rows) == 1
    assert rows[0]["link"] == "http://example.com/story?id=7"


def test_staging_csv_is_emptied_by_the_flush_and_keeps_awkward_text(server, project):
    text = 'Comma, "quotes",\nnew line and Кириллица'
    server.route("/t.xml", body=rss([{"title": "T", "link": "http://example.com/t", "description": text}]))
    project.write_params(SOURCES=[{"name": "t", "url": server.url("/t.xml")}], FLUSH_INTERVAL=3600)
    project.run("--once", check=True)
    assert project.rows()[0]["summary"] == 'Comma, "quotes", new line and Кириллица'  # plain text, spaces collapsed
    with open(project.staging / "staging.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows == [["hash", "source", "guid", "link", "title", "author", "published", "updated", "summary",
                     "content", "categories", "enclosures", "image", "comments", "language", "fetched"]]


def test_dry_run_prints_records_and_writes_nothing(server, project):
    server.route("/d.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "d", "url": server.url("/d.xml")}])
    proc = project.run("--dry-run")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [r["title"] for r in records] == ["Item 2", "Item 1"]
    assert records[0]["author"] is None and records[0]["categories"] is None  # none in the feed: null, not ""
    assert not project.db_path.exists()
    assert not project.staging.exists() and not project.logs.exists()
    # After a real run the dry run shows only what is new since.
    project.run("--once", check=True)
    stored = {row["title"]: row for row in project.rows()}["Item 2"]
    # A value is null where the table holds NULL, and only there (as `export` writes it).
    nulls = {k for k in records[0] if k in stored and stored[k] is None}
    assert {k for k, v in records[0].items() if v is None} == nulls
    server.route("/d.xml", body=rss(numbered_items(1, 3)))
    before = sorted(p.name for p in project.staging.iterdir())
    proc = project.run("--dry-run")
    assert [json.loads(line)["title"] for line in proc.stdout.splitlines() if line.startswith("{")] == ["Item 3"]
    assert "3 records, 1 new would be staged" in proc.stderr
    assert sorted(p.name for p in project.staging.iterdir()) == before


def test_source_option_limits_the_run(server, project):
    server.route("/1.xml", body=rss(numbered_items(1, 1)))
    server.route("/2.xml", body=rss(numbered_items(10, 1)))
    project.write_params(SOURCES=[{"name": "one", "url": server.url("/1.xml")},
                                  {"name": "two", "url": server.url("/2.xml")}])
    project.run("--once", "--source", "two", check=True)
    assert [r["source"] for r in project.rows()] == ["two"]
    assert server.hits.get("/1.xml") is None
    unknown = project.run("--once", "--source", "three")
    assert unknown.returncode == 2 and "no source named 'three'" in unknown.stderr


def test_at_most_max_items_of_a_feed_are_taken_and_they_are_the_newest(server, project):
    items = numbered_items(1, 60)
    items = items[1::2] + items[0::2]  # not in date order in the document
    server.route("/many.xml", body=rss(items))
    server.route("/few.xml", body=rss(numbered_items(100, 10)))
    project.write_params(SOURCES=[{"name": "many", "url": server.url("/many.xml")},
                                  {"name": "few", "url": server.url("/few.xml"), "max_items": 3}])
    project.run("--once", check=True)
    many = sorted(int(r["title"].split()[1]) for r in project.rows(where="WHERE source = 'many'"))
    assert many == list(range(11, 61))  # the 50 newest of 60
    few = sorted(int(r["title"].split()[1]) for r in project.rows(where="WHERE source = 'few'"))
    assert few == [107, 108, 109]
