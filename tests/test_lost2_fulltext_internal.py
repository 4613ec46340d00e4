"""full_text follows a stranger's links: an entry linking to 127.0.0.1, to a name that resolves to it, or
to a page that redirects there is not fetched (its text would land in `content`), unless the source sets
`full_text_internal`. The feed itself is on 127.0.0.1: the check is for the links inside entries."""
from __future__ import annotations

import pytest

from parser.fetch import http
from parser.fetch.http import Fetcher
from tests.feeds import rss
from tests.server import LoopbackServer

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
