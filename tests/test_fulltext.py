"""full_text: true through the real daemon: a short entry gets its page's main text, a long summary
is left alone, a page that fails keeps the summary with an error line and never fails the source."""
from __future__ import annotations

from tests.feeds import rss

ARTICLE = ("<html><head><title>Article</title></head><body><nav><a href='/'>Home</a> | <a href='/about'>About"
           "</a></nav><article><h1>The whole story</h1>"
           + "".join(f"<p>Paragraph {n} of the story tells what happened next, in some detail, so that a reader "
                     f"learns more than the teaser said.</p>" for n in range(8))
           + "<script>track()</script></article><footer>Copyright footer text</footer></body></html>").encode()
LONG_SUMMARY = "A summary long enough to stand on its own. " * 6


def test_short_entries_get_the_page_text_and_failures_keep_the_summary(server, project):
    items = [
        {"title": "Short", "link": server.url("/articles/1"), "description": "Teaser."},
        {"title": "Long", "link": server.url("/articles/2"), "description": LONG_SUMMARY},
        {"title": "Missing", "link": server.url("/articles/missing"), "description": "Gone page."},
        {"title": "Slow", "link": server.url("/articles/slow"), "description": "Slow page."},
    ]
    server.route("/feed.xml", body=rss(items))
    server.route("/articles/1", body=ARTICLE, content_type="text/html; charset=utf-8")
    server.route("/articles/2", body=ARTICLE, content_type="text/html")
    server.route("/articles/slow", body=ARTICLE, content_type="text/html", delay=3)
    project.write_params(SOURCES=[{"name": "ft", "url": server.url("/feed.xml"), "full_text": True,
                                  "full_text_internal": True}],
                         FULL_TEXT_TIMEOUT=1)
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    rows = {r["title"]: r for r in project.rows()}
    assert set(rows) == {"Short", "Long", "Missing", "Slow"}
    content = rows["Short"]["content"]
    assert "Paragraph 7 of the story" in content and content.startswith("<")
    assert "track()" not in content and "Copyright footer" not in content
    assert rows["Short"]["summary"] == "Teaser."
    assert rows["Long"]["content"] is None and "/articles/2" not in server.hits
    assert rows["Missing"]["content"] is None and rows["Missing"]["summary"] == "Gone page."
    assert rows["Slow"]["content"] is None
    errors = project.log("errors.log")
    assert "full text of http://127.0.0.1" in errors and "HTTP 404" in errors and "kept the summary" in errors
    assert "deadline" in errors or "timed out" in errors
    assert "ft  new 4" in project.log()

    # Next poll: a new entry; the pages already tried are not fetched again.
    items.append({"title": "Newer", "link": server.url("/articles/3"), "description": "Another teaser."})
    server.route("/feed.xml", body=rss(items))
    server.route("/articles/3", body=ARTICLE, content_type="text/html")
    project.run("--once", check=True)
    assert server.hits["/articles/1"] == 1 and server.hits["/articles/3"] == 1
    assert "Paragraph 0" in {r["title"]: r for r in project.rows()}["Newer"]["content"]


def test_full_text_is_off_unless_asked(server, project):
    server.route("/feed.xml", body=rss([{"title": "Short", "link": server.url("/articles/1"),
                                         "description": "Teaser."}]))
    server.route("/articles/1", body=ARTICLE, content_type="text/html")
    project.write_params(SOURCES=[{"name": "plain", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    assert project.rows()[0]["content"] is None and "/articles/1" not in server.hits
