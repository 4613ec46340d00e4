"""Poison records: one character that no UTF-8 file or database can hold (a lone surrogate, from a
JSON escape or a character reference) must not stop the daemon, in any protocol, in either database,
at any restart. Also a staging CSV left by an older version holding such bytes raw, and a row the
database refuses outright (set aside in quarantine.jsonl, the others stored)."""
from __future__ import annotations

import json

import psycopg
import pytest

from tests.feeds import OLD_RECORD_FIELDS
from tests.process import free_port, start_listening, stop, wait_for
from tests.test_webhook import SECRET, post

POISONS = ("\udc80 x", "\ud83d")  # a lone low and a lone high surrogate
REPLACED = ("\ufffd x", "\ufffd")


def rss_body(run: int) -> bytes:
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>r</title>'
            f"<item><title>&#xDC80; x</title><link>http://rss.example/{run}/bad</link></item>"
            f"<item><title>&#55357;</title><link>http://rss.example/{run}/bad2</link></item>"
            f"<item><title>rss good {run}</title><link>http://rss.example/{run}/good</link></item>"
            f"</channel></rss>").encode()


def atom_body(run: int) -> bytes:
    return (f'<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>a</title>'
            f"<id>urn:a</id><updated>2026-11-01T00:00:00Z</updated>"
            f"<entry><title>&#xDC80; x</title><id>urn:a:{run}:bad</id><link href='http://atom.example/{run}/bad'/>"
            f"<updated>2026-11-01T00:00:00Z</updated></entry>"
            f"<entry><title>atom good {run}</title><id>urn:a:{run}:good</id>"
            f"<link href='http://atom.example/{run}/good'/><updated>2026-11-01T00:00:00Z</updated></entry>"
            f"</feed>").encode()


def items(kind: str, run: int) -> list[dict]:
    bad = [{"id": f"{kind}-{run}-bad{i}", "url": f"http://{kind}.example/{run}/bad{i}", "title": poison}
           for i, poison in enumerate(POISONS)]
    return [*bad, {"id": f"{kind}-{run}-good", "url": f"http://{kind}.example/{run}/good",
                   "title": f"{kind} good {run}"}]


def serve(server, run: int) -> None:
    server.route("/rss.xml", body=rss_body(run))
    server.route("/atom.xml", body=atom_body(run), content_type="application/atom+xml")
    server.route("/feed.json", content_type="application/feed+json", body=json.dumps(
        {"version": "https://jsonfeed.org/version/1.1", "title": "j", "items": items("jsonfeed", run)}).encode())
    server.route("/api.json", content_type="application/json",
                 body=json.dumps({"data": items("api", run)}).encode())


def titles(project, db_url: str | None) -> list[str]:
    if db_url is None:
        return [r["title"] for r in project.rows()]
    with psycopg.connect(db_url) as con:
        return [r[0] for r in con.execute("SELECT title FROM items ORDER BY id")]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request):
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("pg_url")


def test_every_protocol_survives_poison_in_both_databases_twice(server, project, db_url, monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    port = free_port()
    project.write_params(
        DB_URL=db_url or "sqlite:///db/items.db", WEBHOOK_LISTEN=f"127.0.0.1:{port}",
        FLUSH_INTERVAL=3600, POLL_INTERVAL=1,
        SOURCES=[{"name": "rss", "url": server.url("/rss.xml")},
                 {"name": "atom", "url": server.url("/atom.xml")},
                 {"name": "jsonfeed", "url": server.url("/feed.json")},
                 {"name": "api", "protocol": "json_api", "url": server.url("/api.json"), "items": "data"},
                 {"name": "hook", "protocol": "webhook", "path": "/hooks/h", "secret_env": "HOOK_SECRET",
                  "items": "posts"}])
    hook_url = f"http://127.0.0.1:{port}/hooks/h"
    for run in (1, 2):
        serve(server, run)
        hits = server.hits.get("/api.json", 0)
        daemon = start_listening(project)
        try:
            answer = post(hook_url, {"posts": items("hook", run)}, delivery=f"d-{run}")
            assert answer.status_code == 202, answer.text
            wait_for(lambda before=hits: server.hits.get("/api.json", 0) > before + 1, "two polls of each source")
        finally:
            code = stop(daemon)
        assert code == 0, (daemon.stderr.read(), project.log("critical.log"))
    stored = titles(project, db_url)
    for run in (1, 2):
        for kind in ("rss", "atom", "jsonfeed", "api", "hook"):
            assert f"{kind} good {run}" in stored, (kind, run, stored)
    assert stored.count("\ufffd x") == 2 * 5 and stored.count("\ufffd") == 2 * 4  # every poison, made safe
    assert "stopped" not in project.log("critical.log")


def write_raw_staging(project, rows: list[list[bytes]]) -> None:
    """A staging CSV as an older version wrote it: surrogateescape'd bytes, i.e. not UTF-8."""
    columns = ["hash", *OLD_RECORD_FIELDS]
    project.staging.mkdir(parents=True, exist_ok=True)
    lines = [b",".join(b'"' + c.encode() + b'"' for c in columns)]
    for row in rows:
        lines.append(b",".join(b'"' + cell + b'"' for cell in row))
    (project.staging / "staging.csv").write_bytes(b"\n".join(lines) + b"\n")


def raw_row(n: int, title: bytes, hash_: bytes | None = None) -> list[bytes]:
    return [hash_ or f"{n:056x}".encode(), b"old", f"g{n}".encode(), f"http://old.example/{n}".encode(), title,
            b"", b"", b"", b"", b"2026-11-01T00:00:00Z"]


def test_a_poisoned_staging_csv_from_before_is_flushed_at_restart(project, db_url):
    write_raw_staging(project, [raw_row(1, b"good one"), raw_row(2, b"\x80 raw byte"),
                                raw_row(3, b"\xed\xb2\x80 surrogate as UTF-8"), raw_row(4, b"nul \x00 here"),
                                raw_row(5, b"good two")])
    project.write_params(DB_URL=db_url or "sqlite:///db/items.db", SOURCES=[])
    for _ in range(2):
        proc = project.run("--once")
        assert proc.returncode == 0, (proc.stderr, project.log("critical.log"))
    stored = titles(project, db_url)
    assert stored[0] == "good one" and stored[-1] == "good two" and len(stored) == 5
    assert stored[1].startswith("\ufffd") and "raw byte" in stored[1] and stored[3] == "nul  here"


def test_a_row_the_database_refuses_is_set_aside_and_the_others_stored(project, pg_url):
    # PostgreSQL keeps hashes in varchar(128): a longer one (a hand-edited or foreign file) is refused.
    rows = [raw_row(n, f"row {n}".encode()) for n in range(1, 1001)]
    rows[700] = raw_row(701, b"refused", hash_=b"f" * 300)
    write_raw_staging(project, rows)
    project.write_params(DB_URL=pg_url, SOURCES=[])
    proc = project.run("--once")
    assert proc.returncode == 0, (proc.stderr, project.log("critical.log"))
    stored = titles(project, pg_url)
    assert len(stored) == 999 and "refused" not in stored and "row 1000" in stored
    quarantined = [json.loads(line) for line in (project.staging / "quarantine.jsonl").read_text().splitlines()]
    assert [q["record"]["title"] for q in quarantined] == ["refused"]
    assert quarantined[0]["source"] == "old" and "refused a value" in quarantined[0]["error"]
    assert "quarantine.jsonl" in project.log("errors.log")
    assert not list(project.staging.glob("staging.flushing-*"))
