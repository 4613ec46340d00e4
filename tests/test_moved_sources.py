"""Sources whose address is not quite their feed's, through the real daemon: a permanent redirect seen
twice in a row is followed for good, and an HTML page is searched for the feed it links to."""
from __future__ import annotations

import json

from tests.feeds import numbered_items, rss


def state_of(project, name: str) -> dict:
    return json.loads((project.staging / "state.json").read_text(encoding="utf-8"))[name]


def test_a_301_seen_twice_in_a_row_moves_the_source_for_good(server, project):
    server.route("/old.xml", status=301, headers={"Location": "/new.xml"})
    server.route("/new.xml", body=rss(numbered_items(1, 2, host="moved.example")))
    project.write_params(SOURCES=[{"name": "m", "url": server.url("/old.xml")}])
    for _ in range(2):
        assert project.run("--once").returncode == 0
    assert server.hits["/old.xml"] == 2 and server.hits["/new.xml"] == 2
    assert state_of(project, "m")["moved_to"] == server.url("/new.xml")
    for _ in range(2):  # from now on straight to the new address
        assert project.run("--once").returncode == 0
    assert server.hits["/old.xml"] == 2 and server.hits["/new.xml"] == 4
    errors = project.log("errors.log")
    assert errors.count("(twice in a row): polled there from now on; update its url in params.py") == 1
    assert errors.count("moved permanently") == 2  # the first sighting, then the move: nothing after
    assert sorted(r["link"] for r in project.rows()) == ["http://moved.example/item/1", "http://moved.example/item/2"]


def test_a_301_that_is_not_repeated_moves_nothing(server, project):
    server.route("/feed.xml", status=301, headers={"Location": "/elsewhere.xml"})
    server.route("/elsewhere.xml", body=rss(numbered_items(1, 1, host="e.example")))
    project.write_params(SOURCES=[{"name": "m", "url": server.url("/feed.xml")}])
    assert project.run("--once").returncode == 0
    server.route("/feed.xml", body=rss(numbered_items(1, 1, host="e.example")))  # the server's mistake, undone
    assert project.run("--once").returncode == 0
    server.route("/feed.xml", status=301, headers={"Location": "/elsewhere.xml"})
    assert project.run("--once").returncode == 0
    assert state_of(project, "m")["moved_to"] == ""  # three polls, never two 301s in a row
    assert server.hits["/feed.xml"] == 3


PAGE = b"""<!doctype html><html><head><title>A blog</title>
<link rel="alternate" hreflang="de" href="/de/">
<link rel="alternate" type="application/json" href="/wp-json/wp/v2/pages/1">
<link rel="alternate" type="application/rss+xml" title="Posts" href="feed/posts.xml">
<link rel="alternate" type="application/atom+xml" title="Comments" href="/comments.atom">
</head><body><p>Hello</p></body></html>"""


def test_an_html_page_is_searched_for_its_feed(server, project):
    server.route("/blog/", body=PAGE, content_type="text/html; charset=utf-8")
    server.route("/blog/feed/posts.xml", body=rss(numbered_items(1, 3, host="blog.example")))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/blog/")}])
    for _ in range(2):
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr
    assert sorted(r["link"] for r in project.rows()) == [f"http://blog.example/item/{n}" for n in (1, 2, 3)]
    assert server.hits["/blog/"] == 1 and server.hits["/blog/feed/posts.xml"] == 2  # the page once, then the feed
    assert project.log().count(f"it links to the feed {server.url('/blog/feed/posts.xml')}, polled from now on") == 1
    assert state_of(project, "blog")["feed_url"] == server.url("/blog/feed/posts.xml")
    assert project.log("errors.log") == ""


def test_a_page_without_a_feed_or_with_a_broken_one_says_what_it_found(server, project):
    server.route("/plain.html", body=b"<html><head><title>x</title></head><body>no feed</body></html>",
                 content_type="text/html")
    server.route("/broken.html", body=PAGE, content_type="text/html")  # its feeds are 404s here
    project.write_params(SOURCES=[{"name": "plain", "url": server.url("/plain.html")},
                                  {"name": "broken", "url": server.url("/broken.html")}])
    assert project.run("--once").returncode == 4  # every source polled failed
    errors = project.log("errors.log")
    assert "not a feed: text/html; the page links to no feed" in errors
    assert (f"the page links to the feeds {server.url('/feed/posts.xml')}, {server.url('/comments.atom')}; "
            "the first failed: HTTP 404 Not Found") in errors
