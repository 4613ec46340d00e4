"""Issue 27, case 5, the smaller losses: a leap second is a date (the next second), the NFC and NFD
spellings of one link are one entry, a failed `poll` says `error:` once, a text/plain body says it is
text/plain, and pass 2 does not glue the words on either side of a <br> or a block."""
from __future__ import annotations

import unicodedata

from parser.core.dates import read_date
from parser.core.urls import canonical_url
from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.server import LoopbackServer


def raw_rss(items: list[tuple[str, str]]) -> bytes:
    """RSS 2.0 of (link, pubDate as written) pairs."""
    entries = "".join(f"<item><title>Item {i}</title><link>{link}</link><pubDate>{date}</pubDate></item>"
                      for i, (link, date) in enumerate(items))
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t</title>'
            f"<link>http://example.com/</link><description>d</description>{entries}</channel></rss>").encode()


# -- the leap second --------------------------------------------------------------------------------
def test_a_leap_second_is_the_next_second_and_second_60_elsewhere_no_date():
    assert read_date("2016-12-31T23:59:60Z").iso == "2017-01-01T00:00:00Z"
    assert read_date("Sat, 31 Dec 2016 23:59:60 +0000").iso == "2017-01-01T00:00:00Z"
    assert read_date("2017-01-01T00:59:60+01:00").iso == "2017-01-01T00:00:00Z"  # 23:59:60 UTC in Paris
    assert read_date("2015-06-30T23:59:60.250Z").iso == "2015-07-01T00:00:00Z"
    assert read_date("2016-12-31T23:58:60Z").iso == ""  # no leap second is inserted there
    assert read_date("2016-12-31T23:59:61Z").iso == ""


def test_a_feed_dated_at_a_leap_second_stores_the_date(server: LoopbackServer, project: Project):
    server.route("/feed.xml", body=raw_rss([("http://example.com/leap", "Sat, 31 Dec 2016 23:59:60 GMT")]))
    project.write_params(SOURCES=[{"name": "leap", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    assert [r["published"] for r in project.rows()] == ["2017-01-01T00:00:00Z"]


# -- NFC and NFD ------------------------------------------------------------------------------------
def test_the_nfd_spelling_of_a_link_is_the_entry_already_stored(server: LoopbackServer, project: Project):
    composed = "http://example.com/caf\u00e9/r\u00e9sum\u00e9?q=\u00e9t\u00e9"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed and canonical_url(decomposed) == canonical_url(composed)
    date = "Sat, 01 Jun 2024 10:00:00 GMT"
    server.route("/feed.xml", body=raw_rss([(composed, date)]))
    project.write_params(SOURCES=[{"name": "cafe", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    server.route("/feed.xml", body=raw_rss([(decomposed, date)]))  # the same item, saved on a Mac
    project.run("--once", check=True)
    assert [r["link"] for r in project.rows()] == [
        "http://example.com/caf%C3%A9/r%C3%A9sum%C3%A9?q=%C3%A9t%C3%A9"]


# -- a failed poll's answer ---------------------------------------------------------------------------
def test_a_failed_poll_says_error_once(server: LoopbackServer, project: Project):
    server.route("/down.xml", status=500, body=b"oops", content_type="text/plain")
    project.write_params(SOURCES=[{"name": "down", "url": server.url("/down.xml"), "interval": 3600}])
    proc = project.start()
    try:
        wait_for(lambda: "down  error" in project.log(), "the first poll")
        done = project.run("poll", "down", "--wait", "60", timeout=90)
        assert done.returncode == 4, done.stderr
        assert done.stderr.startswith("error: poll down: HTTP 500"), done.stderr
        assert done.stderr.count("error:") == 1, done.stderr
    finally:
        assert stop(proc) == 0


# -- a text/plain body ------------------------------------------------------------------------------
def test_a_text_plain_body_is_not_a_feed_named_by_its_type(server: LoopbackServer, project: Project):
    server.route("/notes.txt", body=b"Shopping list\n- eggs\n- milk\n", content_type="text/plain; charset=utf-8")
    server.route("/plain-feed.xml", body=rss(numbered_items(1, 2)), content_type="text/plain")  # a feed all the same
    project.write_params(SOURCES=[{"name": "notes", "url": server.url("/notes.txt")},
                                  {"name": "fine", "url": server.url("/plain-feed.xml")}])
    project.run("--once")
    errors = project.log("errors.log")
    assert "notes" in errors and "not a feed: text/plain" in errors, errors
    assert "syntax error" not in errors and "<unknown>" not in errors, errors
    assert len(project.rows()) == 2  # a feed served as text/plain is still read


# -- pass 2 at <br> and blocks ----------------------------------------------------------------------
def item_page(n: int) -> bytes:
    return (f"<html><body><h1>Item {n}</h1><div class='desc'>Item number {n}.<br>Second line"
            f"<p>Third</p><ul><li>one</li><li>two</li></ul></div>"
            f"<table class='spec'><tr><td>Weight</td><td>2 kg</td></tr></table></body></html>").encode()


def test_pass_2_puts_a_space_where_a_br_or_a_block_parts_words(server: LoopbackServer, project: Project):
    for n in (1, 2):
        server.route(f"/item/{n}", body=item_page(n), content_type="text/html; charset=utf-8")
    job = {"name": "pages", "template": server.url("/item/{id}"), "values": {"id": {"from": 1, "to": 2}},
           "fields": {"name": "//h1/text()", "desc": "css:div.desc", "spec": "css:table.spec"}}
    project.write_params(LINK_JOBS=[job])
    project.run("--once", "--job", "pages", check=True)
    rows = sorted(project.rows("pages"), key=lambda r: r["name"])
    assert [r["desc"] for r in rows] == [f"Item number {n}. Second line Third one two" for n in (1, 2)]
    assert [r["spec"] for r in rows] == ["Weight 2 kg", "Weight 2 kg"]
