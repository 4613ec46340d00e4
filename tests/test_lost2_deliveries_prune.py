"""SHARED = True: parser_deliveries, the group's delivery ids, is bounded as one daemon's deliveries.txt is
(the newest KEEP_DELIVERY_IDS kept). Before, it only grew: 400,000 ids stayed 400,000."""
from __future__ import annotations

import psycopg
import pytest

from db.coord import Coordinator
from parser.group import shared_push
from parser.group.shared_push import SharedInbox
from parser.pipeline.inbox import KEEP_DELIVERY_IDS
from tests.process import start_listening, stop
from tests.test_shared_push import machines
from tests.test_webhook import post, post_item

pytestmark = pytest.mark.postgres
OLD = 2 * KEEP_DELIVERY_IDS


def deliveries(pg_url: str) -> int:
    with psycopg.connect(pg_url) as con:
        return con.execute("SELECT count(*) FROM parser_deliveries").fetchone()[0]


def taken(pg_url: str, delivery: str) -> bool:
    with psycopg.connect(pg_url) as con:
        return con.execute("SELECT 1 FROM parser_deliveries WHERE delivery = %s", (delivery,)).fetchone() is not None


def test_a_daemon_keeps_the_newest_delivery_ids_of_the_group(tmp_path, pg_url, monkeypatch):
    Coordinator(pg_url).create_schema()
    with psycopg.connect(pg_url, autocommit=True) as con:  # a group's year of deliveries, oldest first
        con.execute("INSERT INTO parser_deliveries (source, delivery, at) SELECT 'shop', 'old-' || g,"
                    " now() - make_interval(secs => %s - g) FROM generate_series(1, %s) g", (OLD + 1, OLD))
    monkeypatch.setenv("HOOK_SECRET", "hook-secret-from-env")
    source = {"name": "shop", "protocol": "webhook", "path": "/hooks/shop", "secret_env": "HOOK_SECRET",
              "items": "posts"}
    [project] = machines(tmp_path, 1, DB_URL=pg_url, SOURCES=[source])
    daemon = start_listening(project)
    try:
        url = f"http://127.0.0.1:{project.port}/hooks/shop"
        assert post(url, {"posts": [post_item(1)]}, delivery="new-1").status_code == 202
        newest_old = post(url, {"posts": [post_item(2)]}, delivery=f"old-{OLD}")  # kept: still a repeat
        assert newest_old.status_code == 200 and "repeated" in newest_old.text
    finally:
        assert stop(daemon) == 0
    assert deliveries(pg_url) == KEEP_DELIVERY_IDS + 1  # the newest 200,000 of the old ones, and new-1
    assert not taken(pg_url, "old-1") and not taken(pg_url, f"old-{OLD - KEEP_DELIVERY_IDS}")
    assert taken(pg_url, f"old-{OLD - KEEP_DELIVERY_IDS + 1}")
    assert f"parser_deliveries: {OLD - KEEP_DELIVERY_IDS} older delivery ids forgotten" in project.log()


def test_a_running_daemon_prunes_after_every_few_deliveries(tmp_path, pg_url, monkeypatch):
    """The same bound while it runs: pruned at a drain once PRUNE_EVERY deliveries were taken (10,000;
    3 here, with 5 ids kept)."""
    monkeypatch.setattr(shared_push, "KEEP_DELIVERY_IDS", 5)
    monkeypatch.setattr(shared_push, "PRUNE_EVERY", 3)
    inbox = SharedInbox(tmp_path / "staging", pg_url)
    try:
        most = 0
        for n in range(1, 21):
            assert inbox.accept("shop", f"d-{n}", [{"title": f"Item {n}"}])
            inbox.drain(lambda source, records: None)
            most = max(most, deliveries(pg_url))
        assert most <= 5 + 3 and deliveries(pg_url) <= 5 + 3
        assert taken(pg_url, "d-20") and not taken(pg_url, "d-1")
    finally:
        inbox.close()
