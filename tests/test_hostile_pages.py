"""Hostile object pages in the two-pass technique, through the real daemon: lxml resolves no entity
and fetches nothing, huge trees and bodies are refused, slow pages are cut at the deadline, and
each failure is a line in errors.log naming the page while the good object is stored."""
from __future__ import annotations

from tests.server import LoopbackServer
from tests.test_hostile_sources import SECRET_MARKER, MiB, gzip_bomb, run_measured

SETTINGS = {"TIMEOUT": 2, "DEADLINE": 4, "PER_HOST": 16, "CONCURRENCY": 16, "FLUSH_INTERVAL": 3600}


def page(title: str, doctype: str = "") -> bytes:
    return f'{doctype}<html><head><title>t</title></head><body><h1>{title}</h1></body></html>'.encode()


def hostile_pages(server: LoopbackServer, secret_uri: str) -> dict[str, dict]:
    laughs = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10 if i else "lol"}">' for i in range(10))
    return {
        "good": {"body": page("A good object"), "content_type": "text/html"},
        "laughs": {"body": page("laughs &l9;", f"<!DOCTYPE html [{laughs}]>"), "content_type": "text/html"},
        "xxe": {"body": page("secret: &xxe;", f'<!DOCTYPE html [<!ENTITY xxe SYSTEM "{secret_uri}">]>'),
                "content_type": "text/html"},
        "dtd": {"body": page("dtd &fromdtd;", f'<!DOCTYPE html SYSTEM "{server.url("/evil.dtd")}">'),
                "content_type": "text/html"},
        "bomb": {"body": gzip_bomb(1 << 30), "precompressed": True, "content_type": "text/html"},
        "deep": {"body": b"<html><body>" + b"<div>" * 300_000 + b"</body></html>", "content_type": "text/html"},
        "drip": {"body": page("slow") * 10, "drip": 1.0, "content_type": "text/html"},
        "pdf": {"body": b"%PDF-1.4 not a page", "content_type": "application/pdf"},
    }


def test_hostile_object_pages_are_refused_or_defused_and_the_good_one_is_stored(server, project, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET_MARKER)
    routes = hostile_pages(server, secret.as_uri())
    for name, route in routes.items():
        server.route(f"/obj/{name}", **route)
    server.route("/evil.dtd", body=b'<!ENTITY fromdtd "DTD WAS FETCHED">', content_type="application/xml-dtd")
    names = [*routes, "missing"]  # /obj/missing answers 404
    project.write_params(LINK_JOBS=[{"name": "objects", "template": server.url("/obj/{name}"),
                                     "values": {"name": names}, "fields": {"title": "//h1"}}], **SETTINGS)
    run = run_measured(project, "--once")
    assert run["code"] == 0, run["stderr"]
    assert run["peak"] < 400 * MiB

    rows = {r["url"].rsplit("/", 1)[1]: r["title"] for r in project.rows("objects")}
    assert rows["good"] == "A good object"
    assert all(SECRET_MARKER not in (title or "") for title in rows.values())
    assert all("DTD WAS FETCHED" not in (title or "") for title in rows.values())
    assert "/evil.dtd" not in server.hits
    assert "lol" * 100 not in "".join(t or "" for t in rows.values())  # no entity was expanded

    errors = project.log("errors.log")
    for name, says in {"bomb": "response over 10 MiB", "drip": "deadline", "pdf": "not an HTML page",
                       "deep": "refused", "missing": "HTTP 404 Not Found"}.items():
        lines = [line for line in errors.splitlines() if server.url(f"/obj/{name}") in line]
        assert lines and says in lines[0], (name, lines)
        assert name not in rows
