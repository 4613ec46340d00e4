"""SHARED = True with pushed sources: two daemons, each with its own listener, one PostgreSQL. A webhook
delivery replayed to the other daemon is refused as a repeat; a WebSub hub gets one subscription."""
from __future__ import annotations

import itertools
import threading
import time

import psycopg
import pytest

from db.coord import Coordinator
from parser.group import shared_push
from parser.group.shared_push import SharedInbox
from parser.pipeline.inbox import KEEP_DELIVERY_IDS
from tests.conftest import Project
from tests.process import free_port, start_listening, stop, wait_for
from tests.test_webhook import post, post_item
from tests.test_websub import HubStub, atom

pytestmark = pytest.mark.postgres


def machines(tmp_path, n: int, **params) -> list[Project]:
    projects = []
    for i in range(n):
        project = Project(tmp_path / f"machine{i}")
        project.folder.mkdir()
        project.port = free_port()
        project.write_params(WEBHOOK_LISTEN=f"127.0.0.1:{project.port}", SHARED=True, **params)
        projects.append(project)
    return projects


def test_a_delivery_replayed_to_another_daemon_is_refused(tmp_path, pg_url, monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", "hook-secret-from-env")
    source = {"name": "shop", "protocol": "webhook", "path": "/hooks/shop", "secret_env": "HOOK_SECRET",
              "items": "posts"}
    a, b = machines(tmp_path, 2, DB_URL=pg_url, SOURCES=[source])
    daemons = [start_listening(a), start_listening(b)]
    try:
        url_a, url_b = (f"http://127.0.0.1:{p.port}/hooks/shop" for p in (a, b))
        assert post(url_a, {"posts": [post_item(1)]}, delivery="d-1").status_code == 202
        replay = post(url_b, {"posts": [post_item(2)]}, delivery="d-1")  # same id, the other machine
        assert replay.status_code == 200 and "repeated" in replay.text
        assert post(url_b, {"posts": [post_item(3)]}, delivery="d-2").status_code == 202
    finally:
        assert [stop(d) for d in daemons] == [0, 0]
    with psycopg.connect(pg_url) as con:
        titles = [r[0] for r in con.execute("SELECT title FROM items ORDER BY title")]
    assert titles == ["Item 1", "Item 3"]


class CountingHub(HubStub):
    """HubStub that also notes when each subscription request came."""

    def __init__(self):
        super().__init__()
        self.times: list[float] = []

    def handle(self, h) -> None:
        with self.lock:
            self.times.append(time.monotonic())
        super().handle(h)


def test_a_hub_gets_one_subscription_per_source_from_the_group(server, tmp_path, pg_url):
    hub = CountingHub()
    feed_url = server.url("/feed.xml")
    server.route("/feed.xml", body=atom([1, 2], hub=server.url("/hub"), self_url=feed_url),
                 content_type="application/atom+xml")
    server.route("/hub", handler=hub.handle)
    projects = machines(tmp_path, 2, DB_URL=pg_url, POLL_INTERVAL=1,
                        SOURCES=[{"name": "blog", "protocol": "websub", "url": feed_url}])
    daemons = []
    starters = [threading.Thread(target=lambda p=p: daemons.append(start_listening(p))) for p in projects]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    try:
        # The hub grants 2 s leases, renewed after 1.5 s: the first subscription and three renewals,
        # each made once by the group (a renewal made by two daemons shows as a gap under a second).
        wait_for(lambda: len(hub.push_status) == 2, "the pushes after the first verification")
        wait_for(lambda: len(hub.times) >= 4, "three renewals of the subscription", 20)
    finally:
        assert [stop(d) for d in daemons] == [0, 0]
    gaps = [b - a for a, b in itertools.pairwise(sorted(hub.times))]
    assert len(hub.times) >= 2 and min(gaps) > 1.0, gaps  # renewals one after the other, none twice
    assert all(hub.challenges_echoed), hub.challenges_echoed  # any daemon answers the hub's check
    assert hub.push_status == [202, 202]
    with psycopg.connect(pg_url) as con:
        titles = [r[0] for r in con.execute("SELECT title FROM items ORDER BY title")]
    assert titles == ["Entry 1", "Entry 2", "Entry 3"]  # the signed push taken, the forged one not


# SHARED = True: parser_deliveries, the group's delivery ids, is bounded as one daemon's deliveries.txt is
# (the newest KEEP_DELIVERY_IDS kept). Before, it only grew: 400,000 ids stayed 400,000.
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
