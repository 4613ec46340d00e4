"""JSON APIs through the real daemon against a loopback API: bearer auth from the environment, query
and header parameters each in their place, two pages by a `next` link, numbered pages, timestamps
in s/ms/ISO, an error object in a 200, and the settings that keep secrets out of params.py."""
from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.server import reply

TOKEN = "t0ken-from-env"

PAGE_1 = {"data": {"posts": [
    {"id": 101, "permalink": "https://api.example/p/101", "headline": "One",
     "author": {"name": "Ann"}, "created": 1793534400, "body_html": "<p>one<script>x()</script></p>"},
    {"id": 102, "permalink": "https://api.example/p/102", "headline": "Two",
     "author": {"name": "Bob"}, "created": 1793534400123, "body_html": "<p>two</p>"},
]}, "paging": {"next": "/api/posts?cursor=p2&limit=2"}}
PAGE_2 = {"data": {"posts": [
    {"id": 103, "permalink": "https://api.example/p/103", "headline": "Three",
     "author": {"name": "Cy"}, "created": "2026-11-01T09:30:00-05:00"},
    {"id": 104, "permalink": "https://api.example/p/104", "headline": "Four",
     "author": {"name": "Di"}, "created": "1793534400"},
]}, "paging": {"next": None}}

API_SOURCE = {
    "name": "api", "protocol": "json_api", "items": "data.posts", "next": "paging.next",
    "map": {"guid": "id", "link": "permalink", "title": "headline", "author": "author.name",
            "published": "created", "content": "body_html"},
    "query_params": {"limit": 2}, "header_params": {"X-Model": "m1"},
    "auth": {"type": "bearer", "token_env": "TEST_API_TOKEN"},
}


def _json(h, status: int, document) -> None:
    reply(h, status, json.dumps(document).encode(), {"Content-Type": "application/json"})


def posts_api(h) -> None:
    """Answers only a request that has the token, and each parameter in its own place."""
    query = parse_qs(urlsplit(h.path).query)
    if h.headers.get("Authorization") != f"Bearer {TOKEN}":
        return _json(h, 401, {"error": "unauthorized"})
    if h.headers.get("X-Model") != "m1" or "X-Model" in query or h.headers.get("limit"):
        return _json(h, 400, {"error": "parameters in the wrong place"})
    if query.get("limit") != ["2"]:
        return _json(h, 400, {"error": "limit missing"})
    _json(h, 200, PAGE_2 if query.get("cursor") == ["p2"] else PAGE_1)


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv("TEST_API_TOKEN", TOKEN)  # the daemon's subprocess inherits it


def test_two_pages_with_bearer_auth_become_rows_with_utc_times(server, project, token):
    server.route("/api/posts", handler=posts_api)
    project.write_params(SOURCES=[{**API_SOURCE, "url": server.url("/api/posts")}])
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    rows = {r["title"]: r for r in project.rows()}
    assert set(rows) == {"One", "Two", "Three", "Four"}
    assert rows["One"]["guid"] == "101" and rows["One"]["link"] == "https://api.example/p/101"
    assert rows["One"]["author"] == "Ann"
    assert rows["One"]["published"] == "2026-11-01T12:00:00Z"     # seconds since the epoch
    assert rows["Two"]["published"] == "2026-11-01T12:00:00Z"     # milliseconds
    assert rows["Three"]["published"] == "2026-11-01T14:30:00Z"   # ISO 8601 at -05:00
    assert rows["Four"]["published"] == "2026-11-01T12:00:00Z"    # seconds, as digits in a string
    assert rows["One"]["content"] == "<p>one</p>"                  # sanitized like any content
    assert server.hits["/api/posts"] == 2
    assert [(r["source"], r["outcome"], r["entries"], r["new"]) for r in project.rows("runs")] == [("api", "new", 4, 4)]
    assert project.log("errors.log") == ""
    assert all(TOKEN not in path for path, _ in server.requests)   # the token never went into a URL


def test_an_error_object_in_a_200_is_an_error_of_the_source(server, project, token):
    server.route("/api/broken", body=json.dumps({"error": {"code": "rate_limit_exceeded",
                                                           "message": "slow down"}}).encode(),
                 content_type="application/json")
    server.route("/api/posts", handler=posts_api)
    project.write_params(SOURCES=[{**API_SOURCE, "name": "broken", "url": server.url("/api/broken")},
                                  {**API_SOURCE, "url": server.url("/api/posts")}])
    project.run("--once", check=True)
    assert {r["source"] for r in project.rows()} == {"api"}
    errors = project.log("errors.log")
    assert "broken" in errors and "the API answered with an error: rate_limit_exceeded: slow down" in errors


def test_a_wrong_token_is_an_http_error_and_no_row(server, project, monkeypatch):
    monkeypatch.setenv("TEST_API_TOKEN", "not-the-token")
    server.route("/api/posts", handler=posts_api)
    project.write_params(SOURCES=[{**API_SOURCE, "url": server.url("/api/posts")}])
    assert project.run("--once").returncode == 4  # every source polled failed
    assert project.rows() == []
    assert "HTTP 401" in project.log("errors.log")
    assert "not-the-token" not in project.log("errors.log") + project.log()


def test_numbered_pages_stop_at_max_pages(server, project):
    def paged(h):
        page = int(parse_qs(urlsplit(h.path).query)["page"][0])
        _json(h, 200, {"results": [{"id": f"{page}-{i}", "url": f"https://api.example/{page}/{i}",
                                    "title": f"Page {page} item {i}", "published_at": 1793534400 + page}
                                   for i in range(3)]})
    server.route("/api/paged", handler=paged)
    project.write_params(SOURCES=[{"name": "paged", "protocol": "json_api", "url": server.url("/api/paged"),
                                   "items": "results", "page_param": "page", "max_pages": 2}])
    project.run("--once", check=True)
    titles = sorted(r["title"] for r in project.rows())
    assert titles == [f"Page {p} item {i}" for p in (1, 2) for i in range(3)]
    assert [parse_qs(urlsplit(path).query)["page"] for path, _ in server.requests] == [["1"], ["2"]]


@pytest.mark.parametrize("source, message", [
    ({"auth": {"type": "bearer", "token": "abc"}}, "use token_env"),
    ({"header_params": {"Authorization": "Bearer abc"}}, "secrets do not belong in params.py"),
    ({"query_params": {"api_key": "abc"}}, "secrets do not belong in params.py"),
    ({"query_params": {"X-Model": "m1"}}, "looks like an HTTP header; put it in header_params"),
    ({"query_params": {"limit": 1}, "header_params": {"limit": "1"}}, "in both query_params and header_params"),
    ({"auth": {"type": "bearer", "token_env": "SURELY_UNSET_TOKEN_VAR"}}, "SURELY_UNSET_TOKEN_VAR is not set"),
    ({"map": {"titel": "headline"}}, "'titel' is not a record field"),
    ({"protocol": "xml_rpc"}, "protocol must be one of"),
    ({"protocol": "feed", "items": "data"}, "'items' is a key of protocol json_api / webhook"),
])
def test_settings_refuse_literal_secrets_and_mixed_parameters(project, source, message):
    base = {"name": "api", "protocol": "json_api", "url": "https://api.example/posts"}
    project.write_params(SOURCES=[{**base, **source}])
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "SOURCES[0] ('api')" in proc.stderr
    expected = "literal" if message == "use token_env" else message
    assert expected in proc.stderr, proc.stderr
    if message == "use token_env":
        assert "token_env" in proc.stderr
