"""Webhook deliveries to the real daemon's listener: good, bad and missing signatures, a replayed
delivery id, an oversized body, and records that survive a kill -9 right after the 202."""
from __future__ import annotations

import hashlib
import hmac
import json

import pytest
import requests

from parser.core.runinfo import load_run_info
from tests.process import free_port, start_listening, stop, wait_for

SECRET = "hook-secret-from-env"


def signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post(url: str, document, *, delivery: str | None, signature: str | None = "good", raw: bytes | None = None):
    body = raw if raw is not None else json.dumps(document).encode()
    headers = {"Content-Type": "application/json"}
    if signature == "good":
        headers["X-Hub-Signature-256"] = signed(body)
    elif signature is not None:
        headers["X-Hub-Signature-256"] = signature
    if delivery:
        headers["X-Hub-Delivery"] = delivery
    return requests.post(url, data=body, headers=headers, timeout=10)


def post_item(n: int) -> dict:
    return {"id": f"evt-{n}", "url": f"https://shop.example/news/{n}", "title": f"Item {n}",
            "who": {"login": f"user{n}"}, "at": 1793534400000 + n * 60000,
            "html": f"<p>item {n}<img src=x onerror=alert(1)></p>"}


@pytest.fixture
def hook_project(project, monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    port = free_port()
    project.write_params(
        SOURCES=[{"name": "shop", "protocol": "webhook", "path": "/hooks/shop", "secret_env": "HOOK_SECRET",
                  "items": "posts", "map": {"author": "who.login", "published": "at", "content": "html"}}],
        WEBHOOK_LISTEN=f"127.0.0.1:{port}", MAX_BYTES=64 * 1024, FLUSH_INTERVAL=3600)
    project.hook_url = f"http://127.0.0.1:{port}/hooks/shop"
    return project


def last_flush(project) -> str | None:
    """Why the running daemon last flushed ("start", "interval"), from its daemon.json."""
    info = load_run_info(project.staging / "daemon.json") or {}
    return (info.get("last_flush") or {}).get("why")


def test_deliveries_are_checked_and_survive_kill_9(hook_project):
    project, url = hook_project, hook_project.hook_url
    daemon = start_listening(project)
    try:
        # The start's flush (a crash's leftovers first) drains the inbox too, and may come after the
        # listener opened: the deliveries below come after it, as daemon.json records it.
        wait_for(lambda: last_flush(project) == "start", "the start's flush")
        good = post(url, {"posts": [post_item(1), post_item(2)]}, delivery="d-1")
        assert good.status_code == 202, good.text
        assert post(url, {"posts": [post_item(3)]}, delivery="d-2",
                    signature=signed(b"another body")).status_code == 401
        assert post(url, {"posts": [post_item(4)]}, delivery="d-3", signature=None).status_code == 401
        assert post(url, {"posts": [post_item(5)]}, delivery="d-4",
                    signature=signed(json.dumps({"posts": [post_item(5)]}).encode(), "wrong")).status_code == 401
        replay = post(url, {"posts": [post_item(6)]}, delivery="d-1")  # same id, new body, signed well
        assert replay.status_code == 200 and "repeated" in replay.text
        big = json.dumps({"posts": [post_item(7)], "pad": "x" * 70_000}).encode()
        assert post(url, None, delivery="d-5", raw=big).status_code == 413
        assert requests.get(url, timeout=10).status_code == 405
        last = post(url, {"posts": [post_item(8)]}, delivery="d-6")
        assert last.status_code == 202
    finally:
        daemon.kill()  # kill -9 right after the last 2xx: nothing was flushed, nothing was staged
        daemon.wait(timeout=10)
    assert project.rows() == []

    # A restart stages and flushes what was accepted; a repeat of a delivery from before the kill
    # is still known.
    daemon = start_listening(project)
    try:
        again = post(url, {"posts": [post_item(9)]}, delivery="d-6")
        assert again.status_code == 200 and "repeated" in again.text
    finally:
        assert stop(daemon) == 0
    rows = {r["title"]: r for r in project.rows()}
    assert set(rows) == {"Item 1", "Item 2", "Item 8"}
    assert rows["Item 1"]["source"] == "shop" and rows["Item 1"]["guid"] == "evt-1"
    assert rows["Item 1"]["link"] == "https://shop.example/news/1" and rows["Item 1"]["author"] == "user1"
    assert rows["Item 1"]["published"] == "2026-11-01T12:01:00Z"
    assert rows["Item 8"]["content"] == '<p>item 8<img src="https://shop.example/news/x"></p>'  # made absolute
    errors = project.log("errors.log")
    assert errors.count("refused (401)") == 3
    assert "no X-Hub-Signature-256 header" in errors and "does not match" in errors
    assert "refused (413)" in errors and "over MAX_BYTES" in errors
    assert SECRET not in errors + project.log()


def test_a_body_that_is_not_json_is_refused_with_an_error_line(hook_project):
    daemon = start_listening(hook_project)
    try:
        bad = post(hook_project.hook_url, None, delivery="x-1", raw=b"<xml>not json</xml>")
        assert bad.status_code == 400
        single = post(hook_project.hook_url, {"posts": [post_item(1)]}, delivery=None)  # no id: still taken
        assert single.status_code == 202
    finally:
        assert stop(daemon) == 0
    assert [r["title"] for r in hook_project.rows()] == ["Item 1"]
    assert "not valid JSON" in hook_project.log("errors.log")


def test_webhook_settings_need_a_secret_from_the_environment(project):
    project.write_params(SOURCES=[{"name": "h", "protocol": "webhook", "path": "/h", "secret": "abc"}])
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "a literal secret does not belong in params.py" in proc.stderr and "secret_env" in proc.stderr
    project.write_params(SOURCES=[{"name": "h", "protocol": "webhook", "path": "/h", "secret_env": "NOPE_UNSET"},
                                  {"name": "i", "protocol": "webhook", "path": "/h", "secret_env": "NOPE_UNSET"}])
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "NOPE_UNSET is not set" in proc.stderr


def test_the_inbox_skips_a_line_torn_by_a_crash(tmp_path):
    from parser.pipeline.inbox import Inbox
    inbox = Inbox(tmp_path)
    assert inbox.accept("shop", "d-1", [{"title": "kept"}])
    with open(tmp_path / "inbox.jsonl", "ab") as f:
        f.write(b'{"source": "shop", "delivery": "d-2", "records": [{"tit')  # never fsynced, never answered
    again = Inbox(tmp_path)  # a restart
    assert again.seen("shop", "d-1") and not again.seen("shop", "d-2")
    staged: list = []
    assert again.drain(lambda source, records: staged.append((source, records))) == 1
    assert staged == [("shop", [{"title": "kept"}])]
    assert not again.accept("shop", "d-1", [{"title": "again"}])  # remembered in deliveries.txt now
    assert not list(tmp_path.glob("inbox.draining-*"))
