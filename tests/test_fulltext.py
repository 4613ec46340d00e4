"""full_text: true through the real daemon: a short entry gets its page's main text, a long summary
is left alone, a page that fails keeps the summary with an error line and never fails the source."""
from __future__ import annotations

import os
import subprocess

import pytest

from parser.fetch import http
from parser.fetch.http import Fetcher
from tests.feeds import rss
from tests.server import LoopbackServer

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
    assert [(r["source"], r["new"]) for r in project.rows("runs")] == [("ft", 4)]

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


# full_text follows a stranger's links: an entry linking to 127.0.0.1, to a name that resolves to it, or
# to a page that redirects there is not fetched (its text would land in `content`), unless the source sets
# `full_text_internal`. The feed itself is on 127.0.0.1: the check is for the links inside entries.
SECRET_PAGE = ("<html><body><article>" + "".join(
    f"<p>Internal paragraph {n}: the instance credentials and what the intranet keeps.</p>" for n in range(8))
    + "</article></body></html>").encode()


def fetcher() -> Fetcher:
    return Fetcher(user_agent="test", timeout=5, deadline=5, max_bytes=1 << 20, max_redirects=5, per_host=2)


def test_entry_links_to_internal_addresses_are_not_fetched_unless_the_source_allows(server, project):
    port = server.url("/").split(":")[2].split("/")[0]
    items = [{"title": "Loopback", "link": server.url("/internal/1"), "description": "Teaser."},
             {"title": "By name", "link": f"http://localhost:{port}/internal/2", "description": "Teaser."},
             {"title": "Redirected", "link": server.url("/go"), "description": "Teaser."}]
    server.route("/feed.xml", body=rss(items))
    server.route("/intranet.xml", body=rss([{"title": "Intranet", "link": server.url("/internal/3"),
                                             "description": "Teaser."}]))
    for n in (1, 2, 3):
        server.route(f"/internal/{n}", body=SECRET_PAGE, content_type="text/html")
    server.route("/go", status=302, headers={"Location": server.url("/internal/1")})
    stranger = {"name": "stranger", "url": server.url("/feed.xml"), "full_text": True}
    project.write_params(SOURCES=[stranger])
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    rows = {r["title"]: r for r in project.rows()}
    assert set(rows) == {"Loopback", "By name", "Redirected"}
    for title in ("Loopback", "By name", "Redirected"):  # stored, with the summary and no page text
        assert rows[title]["content"] is None and rows[title]["summary"] == "Teaser.", rows[title]["content"][:80]
    # Nothing of the stranger's was asked, not even the redirect's first hop (127.0.0.1 too).
    assert server.hits.get("/internal/1", 0) == 0 and server.hits.get("/internal/2", 0) == 0
    assert server.hits.get("/go", 0) == 0
    errors = project.log("errors.log")
    assert errors.count("is an internal address (127.0.0.1); not fetched") == 3, errors
    assert "localhost is an internal address" in errors and "kept the summary" in errors

    # A source that says its pages are internal (an intranet's feed) gets them.
    project.write_params(SOURCES=[stranger, {"name": "intranet", "url": server.url("/intranet.xml"),
                                             "full_text": True, "full_text_internal": True}])
    project.run("--once", check=True)
    assert "Internal paragraph 7" in {r["title"]: r for r in project.rows()}["Intranet"]["content"]
    assert server.hits["/internal/3"] == 1 and server.hits.get("/internal/1", 0) == 0


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "172.16.0.9", "192.168.1.1", "169.254.169.254",
                                     "100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fd00::1", "::ffff:10.0.0.1",
                                     "2002:a00:1::", "224.0.0.1"])
def test_internal_addresses_are_not_public(address):
    assert not http.public_address(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::1111"])
def test_public_addresses_are(address):
    assert http.public_address(address)


def test_a_redirect_from_a_public_host_to_an_internal_one_is_refused(monkeypatch, server):
    """127.0.0.2 plays the public host (the only addresses a test may reach are loopback ones): its
    redirect to 127.0.0.1 is refused before a connection is made; the plain fetcher follows it."""
    monkeypatch.setattr(http, "public_address", lambda ip: ip == "127.0.0.2")
    public = LoopbackServer(host="127.0.0.2").start()
    plain = fetcher()
    try:
        server.route("/page", body=b"<p>internal</p>", content_type="text/html")
        public.route("/article", status=302, headers={"Location": server.url("/page")})
        public.route("/fine", body=b"<p>public</p>", content_type="text/html")
        only_public = plain.public_only()
        assert only_public.get(public.url("/fine")).body == b"<p>public</p>"
        with pytest.raises(http.InternalAddressError, match=r"127\.0\.0\.1 is an internal address"):
            only_public.get(public.url("/article"))
        assert public.hits["/article"] == 1 and server.hits.get("/page", 0) == 0
        assert plain.get(public.url("/article")).body == b"<p>internal</p>"  # the source's own fetcher
    finally:
        plain.close()
        public.stop()


# full_text on an install that lacks lxml_html_clean (what a stock pip left, tests/test_install_stock_pip.py):
# every entry is still stored, with its summary and one line saying why there is no page text, and
# `check` says the feature cannot run. The module's absence is made as an install makes it: a package of
# that name on PYTHONPATH that cannot be imported, as Python reports a missing one.
MISSING = 'raise ModuleNotFoundError("No module named \'lxml_html_clean\'", name="lxml_html_clean")\n'


def without_cleaner(tmp_path) -> dict[str, str]:
    shadow = tmp_path / "shadow" / "lxml_html_clean"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(MISSING, encoding="utf-8")
    return {**os.environ, "PYTHONPATH": str(shadow.parent)}


def run(project, env, *args) -> subprocess.CompletedProcess:
    return subprocess.run(project.command(*args), capture_output=True, text=True, timeout=120, cwd=project.folder,
                          env=env)


def test_a_missing_module_keeps_every_entry_with_its_summary_and_check_says_so(server, project, tmp_path):
    env = without_cleaner(tmp_path)
    items = [{"title": f"Short {n}", "link": server.url(f"/articles/{n}"), "description": f"Teaser {n}."}
             for n in (1, 2, 3)]
    server.route("/feed.xml", body=rss(items))
    for n in (1, 2, 3):
        server.route(f"/articles/{n}", body=ARTICLE, content_type="text/html")
    project.write_params(SOURCES=[{"name": "ft", "url": server.url("/feed.xml"), "full_text": True,
                                   "full_text_internal": True}])

    proc = run(project, env, "--once")
    assert proc.returncode == 0, proc.stderr
    rows = project.rows()
    assert sorted(r["title"] for r in rows) == ["Short 1", "Short 2", "Short 3"]
    assert all(r["content"] is None and r["summary"].startswith("Teaser") for r in rows)
    errors = project.log("errors.log")
    assert "full text unavailable: cannot import lxml_html_clean" in errors and "internal error" not in errors
    assert "3 entries kept their summary" in errors
    checked = run(project, env, "check")
    assert checked.returncode == 0, checked.stderr
    assert "missing:  full_text of ft cannot run: cannot import lxml_html_clean" in checked.stdout, checked.stdout

    # Mended install: the new entry gets its page; the stored ones (tried while it was missing) are not fetched.
    items.append({"title": "Short 4", "link": server.url("/articles/4"), "description": "Teaser 4."})
    server.route("/feed.xml", body=rss(items))
    server.route("/articles/4", body=ARTICLE, content_type="text/html")
    assert "missing:" not in project.run("check", check=True).stdout
    project.run("--once", check=True)
    assert "Paragraph 7 of the story" in {r["title"]: r for r in project.rows()}["Short 4"]["content"]
    assert server.hits.get("/articles/1", 0) == 0
    assert project.log("errors.log").count("full text unavailable") == 1  # the first run's line only
