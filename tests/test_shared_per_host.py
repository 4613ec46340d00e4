"""SHARED = True: PER_HOST holds for the whole group. Two daemons, each polling its own feeds of one
loopback host: the server never sees more requests at once than PER_HOST (alone, each daemon kept
to PER_HOST but the two together sent twice as many)."""
from __future__ import annotations

import threading
import time

import psycopg
import pytest

from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.server import reply
from tests.test_shared_daemons import expected_links, group, stored_links

FEEDS = 6
ANSWER = 0.5  # seconds each feed takes to answer: long enough for the daemons' fetches to meet


class InFlight:
    """Answers a feed slowly and counts the requests in flight at once, the most of them seen."""

    def __init__(self):
        self.now = self.most = 0
        self.lock = threading.Lock()

    def handler(self, body: bytes):
        def answer(h) -> None:
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
            try:
                time.sleep(ANSWER)
                reply(h, 200, body, {"Content-Type": "application/rss+xml"})
            finally:
                with self.lock:
                    self.now -= 1
        return answer


@pytest.mark.postgres
def test_per_host_holds_for_the_group_not_per_daemon(server, tmp_path, pg_url):
    counter = InFlight()
    for i in range(FEEDS):
        server.route(f"/f{i}.xml", handler=counter.handler(rss(numbered_items(1, 3, host=f"f{i}.example"))))
    projects = group(tmp_path, 2, pg_url, server, FEEDS, PER_HOST=1, CONCURRENCY=8, TIMEOUT=3, DEADLINE=5,
                     SHARED_LEASE=15, POLL_INTERVAL=3600)
    halves = [[f"f{i}" for i in range(FEEDS) if i % 2 == n] for n in range(2)]
    # Started together, each with its own half of the feeds: both poll the one host at the same time.
    procs = [p.start(*(arg for name in half for arg in ("--source", name)))
             for p, half in zip(projects, halves, strict=True)]
    try:
        wait_for(lambda: _items_table(pg_url) and stored_links(pg_url) == expected_links(FEEDS, 3),
                 "every feed's items stored", 30)
    finally:
        assert [stop(p) for p in procs] == [0, 0]
    assert counter.most == 1, f"{counter.most} requests to the host at once with PER_HOST = 1"
    assert sum(server.hits[f"/f{i}.xml"] for i in range(FEEDS)) == FEEDS  # each feed polled once
    assert stored_links(pg_url) == expected_links(FEEDS, 3)  # every item stored once
    for project, half in zip(projects, halves, strict=True):
        assert all(f"{name}  new 3" in project.log() for name in half), project.log()
        assert "PER_HOST: host busy" not in project.log()


def _items_table(pg_url: str) -> bool:
    with psycopg.connect(pg_url) as con:
        return con.execute("SELECT to_regclass('items') IS NOT NULL").fetchone()[0]
