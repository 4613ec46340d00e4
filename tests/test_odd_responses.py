"""One odd answer from a server must not change the daemon for good nor reach the operator raw: a
maintenance page does not move a feed to the comments feed it links to, a Last-Modified in the future
is not sent back (a server comparing dates would answer 304 until that day), and a control character
in a header reaches no log and no terminal unescaped. Through the real daemon, on loopback."""
from __future__ import annotations

import json
import time
from email.utils import formatdate

import pytest

from parser.core import logs
from parser.core.errors import FetchError
from parser.fetch.http import Fetcher
from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.server import LoopbackServer, reply

MAINTENANCE = b"""<!doctype html><html><head><title>Back soon</title>
<link rel="alternate" type="application/rss+xml" title="Comments" href="/comments.xml">
</head><body><p>Down for maintenance</p></body></html>"""
NOT_FOLLOWED = ("answered an HTML page, not a feed; not following its feed links because this address has "
                "served a feed before")
FUTURE = "Tue, 01 Jan 2030 00:00:00 GMT"


def states(project) -> dict:
    return json.loads((project.staging / "state.json").read_text(encoding="utf-8"))


def links(project) -> list[str]:
    return sorted(r["link"] for r in project.rows())


def test_a_maintenance_page_from_a_feed_is_an_error_and_the_feed_is_asked_again(server, project):
    server.route("/feed.xml", body=rss(numbered_items(1, 2, host="blog.example")))
    server.route("/comments.xml", body=rss(numbered_items(1, 5, host="comments.example")))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)

    server.route("/feed.xml", body=MAINTENANCE, content_type="text/html; charset=utf-8")
    assert project.run("--once").returncode == 4  # its one source failed (issue 27, case 16)
    assert server.hits.get("/comments.xml", 0) == 0
    assert NOT_FOLLOWED in project.log("errors.log")
    assert states(project)["blog"]["feed_url"] == ""

    server.route("/feed.xml", body=rss(numbered_items(1, 3, host="blog.example")))  # the blink is over
    project.run("--once", check=True)
    assert server.hits["/feed.xml"] == 3 and server.hits.get("/comments.xml", 0) == 0
    assert links(project) == [f"http://blog.example/item/{n}" for n in (1, 2, 3)]
    assert states(project)["blog"]["feed_url"] == ""  # still polled at its own address
    assert states(project)["blog"]["was_feed"] is True


def test_a_state_saved_before_the_upgrade_counts_its_feed_as_served(server, project):
    """state.json from a version without `was_feed`: a source that has polled its feed is not moved either."""
    server.route("/feed.xml", body=rss(numbered_items(1, 2, host="blog.example")))
    server.route("/comments.xml", body=rss(numbered_items(1, 5, host="comments.example")))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    saved = states(project)
    saved["blog"].pop("was_feed", None)
    (project.staging / "state.json").write_text(json.dumps(saved), encoding="utf-8")

    server.route("/feed.xml", body=MAINTENANCE, content_type="text/html")
    assert project.run("--once").returncode == 4  # its one source failed (issue 27, case 16)
    assert server.hits.get("/comments.xml", 0) == 0
    assert NOT_FOLLOWED in project.log("errors.log")
    assert links(project) == [f"http://blog.example/item/{n}" for n in (1, 2)]


def test_reset_forgets_a_feed_found_on_the_page_and_asks_the_configured_address(server, project):
    """The upgrade case: an older version followed a maintenance page and saved the comments feed as
    `feed_url`; `reset` makes the daemon ask the configured address again."""
    server.route("/feed.xml", body=rss(numbered_items(1, 2, host="blog.example")))
    server.route("/comments.xml", body=rss(numbered_items(1, 5, host="comments.example")))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml"), "interval": 3600}])
    project.staging.mkdir(parents=True)
    old = {"url": server.url("/feed.xml"), "feed_url": server.url("/comments.xml"), "etag": '"c1"',
           "last_success": "2026-01-01T00:00:00Z", "next_due": time.time() + 3000, "delay": 3600}
    (project.staging / "state.json").write_text(json.dumps({"blog": old}), encoding="utf-8")
    proc = project.start()
    try:
        wait_for(lambda: (project.staging / "daemon.json").exists()
                 and json.loads((project.staging / "daemon.json").read_text())["pid"] == proc.pid, "daemon.json")
        assert server.hits.get("/comments.xml", 0) == 0  # not due: only the reset polls
        done = project.run("reset", "blog", "--wait", "60", timeout=90)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "reset blog: new 2"
        assert server.hits["/feed.xml"] == 1 and server.hits.get("/comments.xml", 0) == 0
        assert (f"blog  reset by the operator: 0 failures cleared, polled now; the feed found on its page "
                f"({server.url('/comments.xml')}) forgotten, its url asked again") in project.log()
        # the comments feed's ETag went with it: the configured address was asked unconditionally
        assert all(h.get("If-None-Match") is None for p, h in server.requests if p == "/feed.xml")
    finally:
        assert stop(proc) == 0
    state = states(project)["blog"]
    assert state["feed_url"] == "" and state["was_feed"] is True
    assert links(project) == [f"http://blog.example/item/{n}" for n in (1, 2)]


def dated_feed(server, path: str, items: list[dict]):
    """A feed whose Last-Modified is in 2030 and that answers 304 to any If-Modified-Since (as a server
    comparing dates would: nothing is later than 2030)."""
    def answer(h):
        if h.headers.get("If-Modified-Since"):
            return reply(h, 304, b"", {"Last-Modified": FUTURE})
        reply(h, 200, rss(items), {"Content-Type": "application/rss+xml", "Last-Modified": FUTURE})
    server.route(path, handler=answer)


def test_a_last_modified_in_the_future_is_not_kept_nor_sent(server, project):
    dated_feed(server, "/dated.xml", numbered_items(1, 1))
    project.write_params(SOURCES=[{"name": "dated", "url": server.url("/dated.xml")}])
    project.run("--once", check=True)
    dated_feed(server, "/dated.xml", numbered_items(1, 2))  # new content on the second poll
    project.run("--once", check=True)
    assert links(project) == ["http://example.com/item/1", "http://example.com/item/2"]
    assert states(project)["dated"]["last_modified"] is None
    assert all("If-Modified-Since" not in h for _, h in server.requests)
    errors = project.log("errors.log")
    assert errors.count(f"Last-Modified {FUTURE} is in the future (later than the server's own Date") == 2  # once a run

    # A state written by an older version holds the future date: it is not sent either.
    saved = states(project)
    saved["dated"]["last_modified"] = FUTURE
    (project.staging / "state.json").write_text(json.dumps(saved), encoding="utf-8")
    dated_feed(server, "/dated.xml", numbered_items(1, 3))
    project.run("--once", check=True)
    assert all("If-Modified-Since" not in h for _, h in server.requests)
    assert len(project.rows()) == 3


def test_a_last_modified_is_judged_by_the_servers_date_with_a_minute_of_skew(server):
    """In-process: the Date the server sent decides, not our clock; up to 60 s past it is taken as true."""
    fetcher = Fetcher(user_agent="test", timeout=5, deadline=5, max_bytes=1 << 20, max_redirects=3, per_host=2)
    fetcher.wall = lambda: 0.0  # our clock in 1970: were it asked, every date would be in the future
    now = time.time()  # the loopback server's Date
    modified = {"/past.xml": formatdate(now - 3600, usegmt=True), "/skewed.xml": formatdate(now + 30, usegmt=True),
                "/ahead.xml": formatdate(now + 600, usegmt=True)}
    for path, when in modified.items():
        server.route(path, body=rss(numbered_items(1, 1)), headers={"Last-Modified": when})
    try:
        got = {path: fetcher.get(server.url(path)) for path in modified}
    finally:
        fetcher.close()
    assert got["/past.xml"].last_modified == modified["/past.xml"]
    assert got["/skewed.xml"].last_modified == modified["/skewed.xml"]
    assert got["/ahead.xml"].last_modified is None
    assert got["/ahead.xml"].future_last_modified == modified["/ahead.xml"]


def test_polls_answered_304_and_200_keep_one_connection_to_the_host(server):
    """In-process: a 304 hands its connection back to the pool like a whole 200 does; closing it made
    every poll of an unchanged feed open a new connection (a TLS handshake each, on a real host)."""
    server.route("/kept.xml", body=rss(numbered_items(1, 2)), etag='"v1"')
    fetcher = Fetcher(user_agent="test", timeout=5, deadline=5, max_bytes=1 << 20, max_redirects=3, per_host=1)
    try:
        first = fetcher.get(server.url("/kept.xml"))
        later = [fetcher.get(server.url("/kept.xml"), etag='"v1"') for _ in range(4)]
    finally:
        fetcher.close()
    assert (first.status, [r.status for r in later]) == (200, [304] * 4)
    assert len(set(server.peers)) == 1, f"{len(set(server.peers))} connections for 5 requests"


def test_an_empty_answer_keeps_the_connection_and_an_unread_page_closes_it(server):
    """In-process: an empty 404 and an empty redirect hand their connection back like a 304; an error
    page's body is never read just to keep the connection, so the request after it opens a new one."""
    server.route("/kept.xml", body=rss(numbered_items(1, 2)))
    server.route("/gone.xml", status=404, body=b"")
    server.route("/away.xml", status=302, body=b"", headers={"Location": "/kept.xml"})
    server.route("/broken.xml", status=500, body=b"<html>" + b"x" * 5000 + b"</html>")
    fetcher = Fetcher(user_agent="test", timeout=5, deadline=5, max_bytes=1 << 20, max_redirects=3, per_host=1)
    try:
        with pytest.raises(FetchError):
            fetcher.get(server.url("/gone.xml"))
        assert fetcher.get(server.url("/away.xml")).status == 200
        assert len(set(server.peers)) == 1  # 404, 302 and 200 over one connection
        with pytest.raises(FetchError):
            fetcher.get(server.url("/broken.xml"))
        fetcher.get(server.url("/kept.xml"))
    finally:
        fetcher.close()
    assert len(set(server.peers)) == 2  # the 500's page left unread: its connection closed


def test_a_control_character_a_server_sends_reaches_no_log_and_no_terminal_raw(server, project):
    server.route("/esc.xml", body=b"<html><body>down</body></html>", content_type="text/html\x1b[2J\x1b[31m")
    server.route("/away.xml", status=301, headers={"Location": "gopher://example.com/\x1b]0;owned\x07"})
    project.write_params(SOURCES=[{"name": "esc", "url": server.url("/esc.xml")},
                                  {"name": "away", "url": server.url("/away.xml")}])
    done = project.run("--once")
    assert done.returncode == 4, done.stderr  # both sources failed (issue 27, case 16)
    errors = project.log("errors.log")
    assert "not a feed: text/html\\x1b[2j\\x1b[31m" in errors  # shown, escaped
    assert "gopher://example.com/\\x1b]0;owned\\x07" in errors
    status = project.run("status", timeout=30)
    assert "esc: not a feed: text/html\\x1b[2j" in status.stdout
    for where, text in (("errors.log", errors), ("parser.log", project.log()), ("stderr", done.stderr),
                        ("status", status.stdout), ("state.json", (project.staging / "state.json").read_text())):
        assert "\x1b" not in text and "\x07" not in text, where


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_every_log_line_escapes_control_characters_whatever_wrote_it(tmp_path, log_format):
    """The formatter is the last door: a warning or address quoting a server (not an exception's
    message) is escaped too, C1 controls (U+009B, a CSI) included."""
    logs.setup(tmp_path, console=False, log_format=log_format)
    try:
        logs.error_line("src", "http://example.com/", "feed is malformed (title \x1b[31mred\x9b2J)")
        logs.log.info("src  moved to http://example.com/\x1b]0;title\x07")
    finally:
        logs.setup(None, console=False)
    for name in ("errors.log", "parser.log"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert not any(c in text for c in "\x1b\x9b\x07"), (name, text)
    line = (tmp_path / "errors.log").read_text(encoding="utf-8").strip()
    shown = json.loads(line)["description"] if log_format == "json" else line
    assert shown.endswith("feed is malformed (title \\x1b[31mred\\x9b2J)")


# A text/plain body says it is text/plain; a feed served as text/plain is still read.
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
