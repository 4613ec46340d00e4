"""JSON Feed 1.0/1.1 through the real daemon: detection by Content-Type and by body, the record
fields, sanitized content, and a JSON body that is no JSON Feed (an error line, no row)."""
from __future__ import annotations

import json

from tests.conftest import corpus_dir
from tests.feeds import numbered_items, rss

FEED_11 = {
    "version": "https://jsonfeed.org/version/1.1",
    "title": "Spec example",
    "home_page_url": "https://example.org/",
    "authors": [{"name": "Feed Author"}],
    "items": [
        {   # content_html from a stranger: scripts, handlers and javascript: links must not be stored
            "id": "tag:example.org,2026:1",
            "url": "https://example.org/posts/1?utm_source=feed",
            "title": "<b>Bold</b> first " + "x" * 800,
            "content_html": '<p onclick="steal()">Hello <script>alert(1)</script><a href="javascript:go()">x</a>'
                            '<a href="https://example.org/more">more</a><iframe src="https://evil"></iframe></p>',
            "summary": "First summary",
            "date_published": "2026-11-01T14:00:00+02:00",
            "authors": [{"name": "Ann"}, {"name": "Bob"}],
        },
        {   # only external_url and content_text; the author is the feed's
            "id": "2",
            "external_url": "https://elsewhere.example/story",
            "title": "Second",
            "content_text": "Line one & <two>\n\nSecond paragraph",
            "date_modified": "2026-11-02T08:30:00Z",
        },
    ],
}


def _titles(rows):
    return [r["title"] for r in rows]


def test_json_feed_11_detected_by_content_type_becomes_sanitized_records(server, project):
    server.route("/feed.json", body=json.dumps(FEED_11).encode(), content_type="application/feed+json")
    project.write_params(SOURCES=[{"name": "jf", "url": server.url("/feed.json")}])
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    rows = {r["guid"]: r for r in project.rows()}
    assert set(rows) == {"tag:example.org,2026:1", "2"}
    first, second = rows["tag:example.org,2026:1"], rows["2"]
    assert first["link"] == "https://example.org/posts/1"
    assert first["title"].startswith("Bold first xxx") and len(first["title"]) == 500
    assert first["published"] == "2026-11-01T12:00:00Z"
    assert first["author"] == "Ann, Bob"
    assert first["summary"] == "First summary"
    content = first["content"]
    assert "Hello" in content and 'href="https://example.org/more"' in content
    for bad in ("script", "alert", "onclick", "javascript:", "iframe"):
        assert bad not in content
    assert second["link"] == "https://elsewhere.example/story"
    assert second["author"] == "Feed Author"
    assert second["published"] == "2026-11-02T08:30:00Z"
    assert second["content"] == "<p>Line one &amp; &lt;two&gt;</p><p>Second paragraph</p>"
    assert [(r["source"], r["entries"], r["new"]) for r in project.rows("runs")] == [("jf", 2, 2)]
    assert "jsonfeed11" in project.log()  # the version read, said only there


def test_json_feed_10_from_the_corpus_detected_by_its_body(server, project):
    body = (corpus_dir("fastfeedparser", "benchmark_data") / "d4b7ab74da763119").read_bytes()
    expected = json.loads(body)["items"]
    server.route("/all.json", body=body, content_type="text/plain")  # a server that says nothing useful
    project.write_params(SOURCES=[{"name": "hwc", "url": server.url("/all.json")}])
    project.run("--once", check=True)
    rows = project.rows()
    assert sorted(_titles(rows)) == sorted(i["title"] for i in expected)
    assert all(r["author"] == "Nicholas C. Zakas" and r["published"].endswith("Z") for r in rows)
    assert "jsonfeed10" in project.log()


def test_json_feed_sample_of_the_integration_corpus(server, project):
    folder = corpus_dir("fastfeedparser", "tests", "integration")
    server.route("/sample.json", body=(folder / "json_feed_sample.json").read_bytes(),
                 content_type="application/json")
    project.write_params(SOURCES=[{"name": "sample", "url": server.url("/sample.json")}])
    project.run("--once", check=True)
    rows = {r["link"]: r for r in project.rows()}
    assert rows["https://example.org/item1"]["content"] == "<p>This is the first item in our JSON feed.</p>"
    assert rows["https://example.org/item1"]["author"] == "Jane Smith"
    assert rows["https://example.org/item2"]["author"] == "John Doe"
    assert rows["https://example.org/item2"]["published"] == "2024-01-14T10:30:00Z"


def test_json_that_is_not_a_json_feed_is_an_error_of_the_source(server, project):
    server.route("/api.json", body=b'{"data": [{"id": 1}]}', content_type="application/json")
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "notfeed", "url": server.url("/api.json")},
                                  {"name": "rss", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    assert {r["source"] for r in project.rows()} == {"rss"}
    errors = project.log("errors.log")
    assert "notfeed" in errors and "JSON without a JSON Feed version" in errors and "json_api" in errors
    assert "rss20" in project.log()  # the XML body was detected as RSS 2.0, and the log says so
