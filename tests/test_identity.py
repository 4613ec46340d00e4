"""Every entry once (issue 8): the identity of a record, through the real daemon on loopback feeds.
Entries the feed tells apart are never merged (a shared show page, fragments, no link at all); the
same item through two feeds, or again later, is stored once; files of the version before "auto" keep
working; pushed records are never cut by max_items; a poll whose entries collapse says so."""
from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import unicodedata
from datetime import timedelta
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
import requests

from parser.core.urls import canonical_url
from tests.conftest import Project
from tests.feeds import BASE_TIME, numbered_items, raw_rss, rss
from tests.process import free_port, start_listening, stop
from tests.server import LoopbackServer

DATA = Path(__file__).parent / "data"


def episodes(numbers, link: str = "https://example.org/show") -> list[dict]:
    return [{"title": f"Episode {n}", "link": link, "guid": f"ep-{n}", "date": BASE_TIME + timedelta(days=n),
             "description": f"Show notes {n}"} for n in sorted(numbers, reverse=True)]


def rss_with_home(home: str, items_xml: str) -> bytes:
    """RSS 2.0 whose channel <link> (the feed's home page) is `home`, with items written by hand."""
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Show</title>'
            f"<link>{escape(home)}</link><description>d</description>{items_xml}</channel></rss>").encode()


def test_podcast_episodes_sharing_the_show_link_are_each_stored(server, project):
    server.route("/pod.xml", body=rss(episodes([1, 2, 3])))
    project.write_params(SOURCES=[{"name": "pod", "url": server.url("/pod.xml")}])
    project.run("--once", check=True)
    assert sorted(r["guid"] for r in project.rows()) == ["ep-1", "ep-2", "ep-3"]
    assert {r["link"] for r in project.rows()} == {"https://example.org/show"}

    server.route("/pod.xml", body=rss(episodes([1, 2, 3, 4])))
    project.run("--once", check=True)
    assert sorted(r["guid"] for r in project.rows()) == ["ep-1", "ep-2", "ep-3", "ep-4"]
    assert project.polls("pod")[-1] == (4, 1, 0)


def test_a_feed_of_one_episode_linking_to_its_own_home_page_keeps_each_episode(server, project):
    show = "https://example.org/show"
    item = ('<item><title>Episode {n}</title><link>{show}</link><guid isPermaLink="false">ep-{n}</guid>'
            "<pubDate>Sun, 0{n} Nov 2026 12:00:00 GMT</pubDate></item>")
    server.route("/one.xml", body=rss_with_home(show, item.format(n=1, show=show)))
    project.write_params(SOURCES=[{"name": "one", "url": server.url("/one.xml")}])
    project.run("--once", check=True)
    server.route("/one.xml", body=rss_with_home(show, item.format(n=2, show=show)))  # only the newest listed
    project.run("--once", check=True)
    assert sorted(r["guid"] for r in project.rows()) == ["ep-1", "ep-2"]
    assert project.polls("one") == [(1, 1, 0), (1, 1, 0)]


def test_entries_told_apart_by_their_fragment_are_kept_with_it(server, project):
    # A blog whose entries are anchors on one page, without guids.
    blog = [{"title": f"Awesome thing {n}", "link": f"https://example.org/awesome#thing-{n}",
             "description": f"Thing {n}"} for n in range(43, 0, -1)]
    server.route("/blog.xml", body=rss(blog))
    # The RSS 2.0 specification's sample: permalink guids that differ only by '#When:...', no <link>.
    sample = "".join(f"<item><description>Item {t}</description><pubDate>Sun, 29 Sep 2002 {t} GMT</pubDate>"
                     f"<guid>http://scriptingnews.userland.com/backissues/2002/09/29#When:{t}</guid></item>"
                     for t in ("6:56:02PM", "6:52:22PM"))
    server.route("/spec.xml", body=rss_with_home("http://scriptingnews.userland.com/", sample))
    # PHP-Nuke numbers its stories with `sid`, which canonical links dropped as a session id until issue 18.
    nuke = [{"title": f"Story {n}", "link": f"http://nuke.example/modules.php?name=News&file=article&sid={n}"}
            for n in (265, 264)]
    server.route("/nuke.xml", body=rss(nuke))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/blog.xml")},
                                  {"name": "spec", "url": server.url("/spec.xml")},
                                  {"name": "nuke", "url": server.url("/nuke.xml")}])
    project.run("--once", check=True)
    links = [r["link"] for r in project.rows(where="WHERE source = 'blog'")]
    assert sorted(links) == sorted(f"https://example.org/awesome#thing-{n}" for n in range(1, 44))
    spec = project.rows(where="WHERE source = 'spec'")
    assert [r["link"] for r in spec] == ["http://scriptingnews.userland.com/backissues/2002/09/29#When:6:56:02PM",
                                         "http://scriptingnews.userland.com/backissues/2002/09/29#When:6:52:22PM"]
    assert [r["link"] for r in project.rows(where="WHERE source = 'nuke'")] == [
        "http://nuke.example/modules.php?file=article&name=News&sid=265",
        "http://nuke.example/modules.php?file=article&name=News&sid=264"]
    project.run("--once", check=True)  # a restart and the same feeds: nothing new
    assert [project.polls(name)[-1][:2] for name in ("blog", "spec")] == [(43, 0), (2, 0)]
    assert project.polls("nuke")[-1][1] == 0
    assert len(project.rows()) == 47


def test_a_fragment_that_tells_nothing_apart_is_dropped_and_merges_across_feeds(server, project):
    server.route("/x.xml", body=rss([{"title": "Story", "link": "http://example.com/story#comments"}]))
    server.route("/y.xml", body=rss([{"title": "Story", "link": "http://example.com/story"}]))
    project.write_params(SOURCES=[{"name": "x", "url": server.url("/x.xml")},
                                  {"name": "y", "url": server.url("/y.xml")}])
    project.run("--once", check=True)
    assert [r["link"] for r in project.rows()] == ["http://example.com/story"]


def link_less(numbers, *, guid: bool) -> list[dict]:
    """RSS 0.92-style items: a description only, or a description and a guid that is no permalink."""
    return [{"title": "", "description": f"Note number {n}", **({"guid": f"note-{n}"} if guid else {})}
            for n in numbers]


@pytest.mark.parametrize("unique", ["auto", ["link"]])
def test_link_less_entries_of_two_sources_are_all_kept(server, project, unique):
    server.route("/plain.xml", body=rss(link_less(range(50), guid=False)))
    server.route("/ids.xml", body=rss(link_less(range(50), guid=True)))
    project.write_params(SOURCES=[{"name": "plain", "url": server.url("/plain.xml")},
                                  {"name": "ids", "url": server.url("/ids.xml")}], UNIQUE_FIELDS=unique)
    project.run("--once", check=True)
    rows = project.rows()
    assert len([r for r in rows if r["source"] == "plain"]) == 50
    assert len([r for r in rows if r["source"] == "ids"]) == 50
    project.run("--once", check=True)
    assert len(project.rows()) == 100
    assert [project.polls(name)[-1] for name in ("plain", "ids")] == [(50, 0, 0), (50, 0, 0)]
    log = project.log()
    fallback = "records with empty UNIQUE_FIELDS (link) are told apart within the source"
    if unique == "auto":
        assert fallback not in log
    else:  # said once per source and run, not once per poll or per record
        assert log.count(f"plain  {fallback}") == 2 and log.count(f"ids  {fallback}") == 2


def test_the_same_item_through_two_feeds_and_later_polls_is_stored_once(server, project):
    server.route("/a.xml", body=rss([{"title": "Launch", "guid": "a-7",
                                      "link": "https://news.example/launch?id=7&utm_source=a"}]))
    server.route("/b.xml", body=rss([{"title": "Launch", "guid": "b-99",
                                      "link": "https://news.example/launch?utm_medium=feed&id=7&fbclid=q"}]))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")},
                                  {"name": "b", "url": server.url("/b.xml")}])
    project.run("--once", check=True)
    assert [r["link"] for r in project.rows()] == ["https://news.example/launch?id=7"]
    server.route("/a.xml", body=rss([{"title": "Launch", "guid": "a-7",
                                      "link": "https://news.example/launch?id=7&utm_campaign=later"}]))
    project.run("--once", check=True)
    assert len(project.rows()) == 1


def reddit_atom(entries: list[tuple[str, str | None]]) -> bytes:
    body = "".join(f"<entry><id>{i}</id><title>Post {i}</title><updated>2026-11-01T12:00:00Z</updated>"
                   + (f'<link href="{link}"/>' if link else "") + "</entry>" for i, link in entries)
    return ('<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>r/x</title>'
            '<id>https://www.reddit.com/r/x/</id><link rel="alternate" href="https://www.reddit.com/r/x/"/>'
            f"<updated>2026-11-01T12:00:00Z</updated>{body}</feed>").encode()


def test_entries_keep_their_identity_across_polls_a_restart_and_a_moved_feed(server, project):
    feed = reddit_atom([("t3_glvkc5", "https://www.reddit.com/r/x/comments/glvkc5/post/"),
                        ("t3_glvkc6", "https://www.reddit.com/r/x/comments/glvkc6/post/")])
    server.route("/r.xml", body=feed)
    project.write_params(SOURCES=[{"name": "r", "url": server.url("/r.xml")}])
    project.run("--once", check=True)
    project.run("--once", check=True)
    server.route("/moved/feed.atom", body=feed)
    project.write_params(SOURCES=[{"name": "r", "url": server.url("/moved/feed.atom")}])
    project.run("--once", check=True)
    assert len(project.rows()) == 2
    assert project.polls("r") == [(2, 2, 0), (2, 0, 0), (2, 0, 0)]


def test_a_link_less_entry_keeps_its_guid_when_the_feed_moves(server, project):
    feed = reddit_atom([("t3_glvkc5", None), ("t3_glvkc6", None)])
    server.route("/r.xml", body=feed)
    project.write_params(SOURCES=[{"name": "r", "url": server.url("/r.xml")}])
    project.run("--once", check=True)
    server.route("/elsewhere/r.xml", body=feed)
    project.write_params(SOURCES=[{"name": "r", "url": server.url("/elsewhere/r.xml")}])
    project.run("--once", check=True)
    assert sorted(r["guid"] for r in project.rows()) == ["t3_glvkc5", "t3_glvkc6"]


def test_entries_a_feed_repeats_are_stored_once_and_the_log_says_so(server, project):
    same = {"title": "Twice", "link": "http://example.com/twice", "description": "d"}
    server.route("/rep.xml", body=rss([same, same, same, *numbered_items(1, 2)]))
    project.write_params(SOURCES=[{"name": "rep", "url": server.url("/rep.xml")}])
    project.run("--once", check=True)
    assert len(project.rows()) == 3
    assert "rep  5 entries are 3 distinct entries (2 repeated, stored once)" in project.log()


def test_files_of_the_version_before_auto_store_nothing_twice(server, project):
    """Property 6: hashes.txt and the table written at 9f8182b (UNIQUE_FIELDS = ["link"]) over three
    ordinary feeds; the current version over the same feeds adds nothing, then takes a new entry."""
    data = DATA / "upgrade_9f8182b"
    (project.folder / "db").mkdir()
    project.staging.mkdir()
    shutil.copy(data / "items.db", project.db_path)
    shutil.copy(data / "hashes.txt", project.staging / "hashes.txt")
    before = project.rows()
    assert len(before) == 11
    sources = []
    for name in ("news", "cross", "blog"):
        server.route(f"/{name}.xml", body=(data / f"{name}.xml").read_bytes())
        sources.append({"name": name, "url": server.url(f"/{name}.xml")})
    project.write_params(SOURCES=sources)
    project.run("--once", check=True)
    # The table is brought to this version's shape (new columns, '' as NULL), its rows kept as they were.
    assert [{name: row[name] for name in old} for row, old in zip(project.rows(), before, strict=True)] == \
        [{name: value if value != "" else None for name, value in old.items()} for old in before]
    assert [project.polls(name)[-1][1] for name in ("news", "cross", "blog")] == [0, 0, 0]

    newer = b"<item><title>News 7</title><link>http://example.com/item/7</link><guid>news-7</guid></item>"
    news = (data / "news.xml").read_bytes().replace(b"<item>", newer + b"<item>", 1)
    server.route("/news.xml", body=news)
    project.run("--once", check=True)
    assert [r["title"] for r in project.rows()[11:]] == ["News 7"]


def test_a_webhook_delivery_is_never_cut_by_max_items(project, monkeypatch):
    secret = "identity-hook-secret"
    monkeypatch.setenv("HOOK_SECRET", secret)
    port = free_port()
    project.write_params(SOURCES=[{"name": "shop", "protocol": "webhook", "path": "/hooks/shop",
                                   "secret_env": "HOOK_SECRET", "items": "posts"}],
                         WEBHOOK_LISTEN=f"127.0.0.1:{port}", MAX_ITEMS=50, FLUSH_INTERVAL=3600)
    body = json.dumps({"posts": [{"id": f"evt-{n}", "url": f"https://shop.example/news/{n}", "title": f"Item {n}"}
                                 for n in range(120)]}).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    daemon = start_listening(project)
    try:
        answer = requests.post(f"http://127.0.0.1:{port}/hooks/shop", data=body, timeout=10,
                               headers={"Content-Type": "application/json", "X-Hub-Signature-256": signature,
                                        "X-Hub-Delivery": "big-1"})
        assert answer.status_code == 202, answer.text
    finally:
        assert stop(daemon) == 0
    assert len(project.rows()) == 120
    totals = json.loads(project.run("status", "--json", check=True).stdout)["sources"][0]["totals"]
    assert (totals["new"], totals["duplicates"]) == (120, 0)  # all 120 staged from the one delivery


# The NFC and NFD spellings of one link are one entry.
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
