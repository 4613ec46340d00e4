"""SHARED = True with pushed sources: two daemons, each with its own listener, one PostgreSQL. A webhook
delivery replayed to the other daemon is refused as a repeat; a WebSub hub gets one subscription."""
from __future__ import annotations

import itertools
import threading
import time

import psycopg
import pytest

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
