"""Secrets stay secret and local files stay local.

A source's credentials (a bearer token or an API key header from `auth`, a token in the URL's query
or userinfo, the database password) never appear in parser.log, errors.log or critical.log, also
when that source fails in every way a fetch can fail; they are not sent on to another origin by a
redirect. Nothing a source serves can make the daemon put a local file's content into staging or
the database.

params.py refuses literal secrets in `headers`: tokens come from environment variables named by
`auth`'s token_env, set here with monkeypatch for the daemon to inherit."""
from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import psycopg.rows
import pytest

from tests.feeds import numbered_items, rss
from tests.process import free_port, start_listening, stop, wait_for
from tests.server import reply
from tests.test_webhook import SECRET as HOOK_SECRET
from tests.test_webhook import post

SECRETS = {
    "bearer": "BearerSecret-4d1c0e",
    "header": "HeaderToken-9a7f21",
    "query": "QueryToken-c03b55",
    "apikey": "ApiKey-77e0aa",
    "password": "UserPass-5b8e13",
    "db": "DbPassword-e1f0c2",
}
LOCAL_MARKER = "CONTENT-OF-A-LOCAL-FILE-31f5"


def everything_written(project, stderr: str = "") -> str:
    """All the text a person or a log collector would see."""
    logs = "".join(p.read_text(encoding="utf-8", errors="replace") for p in project.logs.glob("*.log*"))
    return logs + stderr


BEARER = {"type": "bearer", "token_env": "PARSER_TEST_BEARER"}
API_KEY = {"type": "api_key", "token_env": "PARSER_TEST_HEADER_TOKEN", "header": "X-Api-Token"}


def test_credentials_never_reach_the_logs_whatever_fails(server, project, monkeypatch):
    monkeypatch.setenv("PARSER_TEST_BEARER", SECRETS["bearer"])
    monkeypatch.setenv("PARSER_TEST_HEADER_TOKEN", SECRETS["header"])
    # A token read from a file often keeps its newline: requests' own message would quote it.
    monkeypatch.setenv("PARSER_TEST_BAD_TOKEN", SECRETS["bearer"] + "\n")
    token = f"token={SECRETS['query']}&api_key={SECRETS['apikey']}"
    dead = free_port()
    server.route("/fails", status=500, body=b"oops")
    server.route("/hangs", hang=True)
    server.route("/loop", status=302, headers={"Location": f"/loop2?{token}"})
    server.route("/loop2", status=302, headers={"Location": f"/loop?{token}"})
    server.route("/moves", status=301, headers={"Location": f"/moved-here?{token}"})
    server.route("/moved-here", body=rss(numbered_items(1, 1, host="moved.example")))
    server.route("/to-file", status=302, headers={"Location": "file:///etc/hostname"})
    server.route("/works", body=rss(numbered_items(1, 2, host="works.example")))
    server.route("/not-a-feed", body=b"<html><body>no</body></html>", content_type="text/html")
    base = f"http://127.0.0.1:{server.port}"
    userinfo = f"http://reader:{SECRETS['password']}@127.0.0.1:{server.port}"
    sources = [
        {"name": "fails", "url": f"{base}/fails?{token}", "auth": BEARER},
        {"name": "hangs", "url": f"{base}/hangs?{token}", "auth": API_KEY},
        {"name": "loops", "url": f"{base}/loop?{token}", "auth": BEARER},
        {"name": "moves", "url": f"{base}/moves?{token}", "auth": API_KEY},
        {"name": "to-file", "url": f"{userinfo}/to-file?{token}", "auth": BEARER},
        {"name": "dead", "url": f"http://reader:{SECRETS['password']}@127.0.0.1:{dead}/x?{token}", "auth": BEARER},
        {"name": "userinfo", "url": f"{userinfo}/works?{token}"},
        {"name": "not-a-feed", "url": f"{userinfo}/not-a-feed?{token}", "auth": API_KEY},
        {"name": "bad-header", "url": f"{base}/works",
         "auth": {"type": "bearer", "token_env": "PARSER_TEST_BAD_TOKEN"}},
    ]
    db = f"postgresql://parser:{SECRETS['db']}@127.0.0.1:{free_port()}/items"
    project.write_params(SOURCES=sources, TIMEOUT=1, DEADLINE=2, PER_HOST=16, DB_URL=db)
    proc = project.run("--once")
    assert proc.returncode == 1  # the database is unreachable: the final flush fails

    errors = project.log("errors.log")
    for name in ("fails", "hangs", "loops", "to-file", "dead", "not-a-feed", "bad-header"):
        assert f"  {name}  " in errors, f"no errors.log line for {name}"
    assert "moved permanently to" in errors and "records kept in staging" in errors
    assert "request header 'Authorization' has a name or value HTTP does not allow" in errors
    assert "token=%2A%2A%2A" in errors or "token=***" in errors  # the address is there, its token is not
    written = everything_written(project, proc.stderr + proc.stdout)
    leaked = [name for name, secret in SECRETS.items() if secret in written]
    assert not leaked, f"secrets in the logs: {leaked}"
    assert "Bearer" not in written


def test_credentials_are_not_sent_on_to_another_origin(server, project, monkeypatch):
    """The source's headers are for its own server; a redirect to another host gets none of them."""
    other = f"http://localhost:{server.port}/elsewhere.xml"  # same server, another origin
    server.route("/a.xml", status=302, headers={"Location": other})
    server.route("/elsewhere.xml", body=rss(numbered_items(1, 1)))
    server.route("/b.xml", status=302, headers={"Location": "/same-origin.xml"})
    server.route("/same-origin.xml", body=rss(numbered_items(5, 1)))
    monkeypatch.setenv("PARSER_TEST_BEARER", SECRETS["bearer"])
    monkeypatch.setenv("PARSER_TEST_HEADER_TOKEN", SECRETS["header"])
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml"), "auth": BEARER},
                                  {"name": "b", "url": server.url("/b.xml"), "auth": API_KEY},
                                  {"name": "c", "url": server.url("/c.xml"), "headers": {"X-Client": "feeds"}}])
    server.route("/c.xml", status=302, headers={"Location": f"http://localhost:{server.port}/other.xml"})
    server.route("/other.xml", body=rss(numbered_items(7, 1)))
    project.run("--once", check=True)
    sent = {path.split("?")[0]: {k.lower(): v for k, v in h.items()} for path, h in server.requests}
    assert sent["/a.xml"]["authorization"] == f"Bearer {SECRETS['bearer']}"
    assert "authorization" not in sent["/elsewhere.xml"]
    assert sent["/b.xml"]["x-api-token"] == sent["/same-origin.xml"]["x-api-token"] == SECRETS["header"]
    assert sent["/c.xml"]["x-client"] == "feeds" and "x-client" not in sent["/other.xml"]
    assert len(project.rows()) == 3


def test_nothing_a_source_serves_puts_a_local_file_into_a_record(server, project, tmp_path):
    secret = tmp_path / "private.txt"
    secret.write_text(LOCAL_MARKER)
    uri = secret.as_uri()
    bodies = {
        "entity": f'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY x SYSTEM "{uri}">]>'
                  '<rss version="2.0"><channel><title>t</title><item><title>a &x;</title>'
                  '<link>http://e.example/1</link><description>&x;</description></item></channel></rss>',
        "parameter-entity": f'<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY % p SYSTEM "{uri}"> %p;]>'
                            '<rss version="2.0"><channel><title>t</title><item><title>b</title>'
                            '<link>http://e.example/2</link></item></channel></rss>',
        "xinclude": '<?xml version="1.0"?><rss version="2.0" xmlns:xi="http://www.w3.org/2001/XInclude">'
                    f'<channel><title>t</title><item><title>c</title><link>http://e.example/3</link>'
                    f'<description><xi:include href="{uri}" parse="text"/></description></item></channel></rss>',
        "atom-content-src": '<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
                            f'<entry><title>d</title><id>http://e.example/4</id><link href="http://e.example/4"/>'
                            f'<content src="{uri}" type="text/plain"/></entry></feed>',
    }
    sources = []
    for name, body in bodies.items():
        server.route(f"/{name}", body=body.encode())
        sources.append({"name": name, "url": server.url(f"/{name}")})
    server.route("/redirect-to-file", status=302, headers={"Location": uri})
    sources.append({"name": "redirect-to-file", "url": server.url("/redirect-to-file")})
    project.write_params(SOURCES=sources, FLUSH_INTERVAL=3600)
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    stored = json.dumps(project.rows(), ensure_ascii=False)
    assert {r["link"] for r in project.rows()} >= {f"http://e.example/{n}" for n in (1, 2, 3, 4)}
    assert LOCAL_MARKER not in stored
    for path in Path(project.staging).iterdir():
        if path.is_file():
            assert LOCAL_MARKER.encode() not in path.read_bytes(), path.name
    assert LOCAL_MARKER not in everything_written(project, proc.stderr)
    assert "redirect to a non-HTTP address" in project.log("errors.log")


# Addresses a reader's browser would run or open: an entry's link, picture, comments page or file is
# never one of them, from any protocol.
SCRIPT_LINKS = ("javascript:alert(document.domain)", "data:text/html,<script>alert(1)</script>",
                " JAVASCRIPT:alert(2)", "java\tscript:alert(3)", "vbscript:msgbox(4)")
RUNNABLE = re.compile(r'(?i)(href|src)="\s*(java\s*script|data|vbscript):')  # in content, in the export


def script_items(kind: str) -> list[dict]:
    return [{"id": f"{kind}-{n}", "url": link, "title": f"{kind} {n}", "image": link, "comments_url": link,
             "attachments": [{"url": link, "mime_type": "audio/mpeg"}],
             "content_html": f'<p><a href="{link}">a</a><img src="{link}"> {kind} {n}</p>'}
            for n, link in enumerate(SCRIPT_LINKS)]


def stored_rows(project, db_url: str | None) -> list[dict]:
    if db_url is None:
        return project.rows()
    with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as con:
        return list(con.execute("SELECT * FROM items ORDER BY id"))


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request):
    return None if request.param == "sqlite" else request.getfixturevalue("pg_url")


def test_no_protocol_stores_or_exports_a_javascript_or_data_link(server, project, db_url, monkeypatch):
    escaped = [html.escape(link) for link in SCRIPT_LINKS]
    server.route("/rss.xml", body=('<?xml version="1.0"?><rss version="2.0"><channel><title>r</title>' + "".join(
        f"<item><title>rss {n}</title><guid>rss-{n}</guid><link>{link}</link><comments>{link}</comments>"
        f'<enclosure url="{link}" type="audio/mpeg"/></item>' for n, link in enumerate(escaped))
        + "</channel></rss>").encode())
    server.route("/feed.json", content_type="application/feed+json", body=json.dumps(
        {"version": "https://jsonfeed.org/version/1.1", "title": "j", "items": script_items("jsonfeed")}).encode())
    server.route("/api.json", content_type="application/json",
                 body=json.dumps({"data": script_items("api")}).encode())
    monkeypatch.setenv("HOOK_SECRET", HOOK_SECRET)
    port = free_port()
    project.write_params(
        DB_URL=db_url or "sqlite:///db/items.db", WEBHOOK_LISTEN=f"127.0.0.1:{port}", FLUSH_INTERVAL=3600,
        POLL_INTERVAL=1,
        SOURCES=[{"name": "rss", "url": server.url("/rss.xml")},
                 {"name": "jsonfeed", "url": server.url("/feed.json")},
                 {"name": "api", "protocol": "json_api", "url": server.url("/api.json"), "items": "data"},
                 {"name": "hook", "protocol": "webhook", "path": "/hooks/h", "secret_env": "HOOK_SECRET",
                  "items": "posts"}])
    daemon = start_listening(project)
    try:
        answer = post(f"http://127.0.0.1:{port}/hooks/h", {"posts": script_items("hook")}, delivery="d-1")
        assert answer.status_code == 202, answer.text
        wait_for(lambda: min(server.hits.get(p, 0) for p in ("/rss.xml", "/feed.json", "/api.json")) > 1,
                 "two polls of each source")
    finally:
        code = stop(daemon)
    assert code == 0, project.log("critical.log")
    rows = stored_rows(project, db_url)
    assert sorted(r["guid"] for r in rows) == sorted(f"{kind}-{n}" for kind in ("rss", "jsonfeed", "api", "hook")
                                                     for n in range(len(SCRIPT_LINKS)))  # every entry kept
    addresses = [(r["guid"], r["link"], r["image"], r["comments"]) for r in rows]
    assert [a for a in addresses if any(a[1:])] == []  # NULL, as RSS has always stored them
    enclosures = [e["url"] for r in rows if r["enclosures"]
                  for e in (r["enclosures"] if db_url else json.loads(r["enclosures"]))]
    assert [url for url in enclosures if not url.startswith("http")] == []
    assert [r["guid"] for r in rows if RUNNABLE.search(r["content"] or "")] == []
    atom = project.run("export", "--format", "atom", check=True).stdout
    assert atom.count("<entry>") == len(rows) and not RUNNABLE.search(atom)


def test_no_secret_is_written_to_the_state_or_the_database(server, project, db_url, monkeypatch):
    """An `auth` param read from the environment kept by a 301 in the new address, and a password and
    a token in a source's url, are sent on every poll and never written: not in state.json, not in
    the `sources` table (nor its export). The move is remembered across restarts all the same."""
    monkeypatch.setenv("PARSER_TEST_API_KEY", SECRETS["apikey"])
    server.route("/api/v1", handler=lambda h: reply(h, 301, headers={"Location": "/api/v2?" + urlsplit(h.path).query}))
    server.route("/api/v2", body=json.dumps({"data": [{"id": 1, "url": "https://api.example/1"}]}).encode(),
                 content_type="application/json")
    server.route("/private", handler=lambda h: reply(h, 301, headers={"Location": "/private2?" +
                                                                      urlsplit(h.path).query}))
    server.route("/private2", body=rss(numbered_items(1, 2, host="private.example")))
    userinfo = f"http://reader:{SECRETS['password']}@127.0.0.1:{server.port}"
    project.write_params(DB_URL=db_url or "sqlite:///db/items.db", SOURCES=[
        {"name": "api", "protocol": "json_api", "url": server.url("/api/v1") + "?lang=en", "items": "data",
         "auth": {"type": "api_key", "token_env": "PARSER_TEST_API_KEY", "param": "api_key"}},
        {"name": "private", "url": f"{userinfo}/private?token={SECRETS['query']}"}])
    for run in range(3):  # a permanent redirect is followed for good once two polls in a row saw it
        before = len(server.requests)
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr + project.log("errors.log")
        written = "".join(p.read_text(encoding="utf-8", errors="replace") for p in project.staging.rglob("*")
                          if p.is_file() and p.suffix in (".json", ".jsonl", ".txt", ".csv"))
        sources = project.run("export", "--table", "sources", check=True).stdout
        assert [name for name, secret in SECRETS.items() if secret in written + sources] == [], run
    rows = {row["name"]: row for row in map(json.loads, sources.splitlines())}
    api, private = rows["api"], rows["private"]
    assert api["address"] == server.url("/api/v2") + "?lang=en"  # its key is added to each request
    assert private["url"] == f"http://***@127.0.0.1:{server.port}/private?token=***"
    assert private["address"] == f"http://***@127.0.0.1:{server.port}/private2?token=***"
    state = json.loads((project.staging / "state.json").read_text())
    assert state["private"]["moved_to"] == private["address"]
    # The third run asked the remembered address with the real secrets; the API's key came from the
    # environment on every request, the moved address asked without a stray placeholder.
    (third,) = [(path, headers) for path, headers in server.requests[before:] if path.startswith("/private")]
    assert third[0] == f"/private2?token={SECRETS['query']}"  # straight to where it moved, token and all
    assert base64.b64decode(third[1]["Authorization"].split()[1]).decode() == f"reader:{SECRETS['password']}"
    api_paths = [path for path, _ in server.requests if path.startswith("/api/")]
    assert api_paths[-1] == f"/api/v2?lang=en&api_key={SECRETS['apikey']}"
    assert all(f"api_key={SECRETS['apikey']}" in path for path in api_paths)
    assert len(stored_rows(project, db_url)) == 3
