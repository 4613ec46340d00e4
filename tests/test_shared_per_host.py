"""SHARED = True: PER_HOST holds for the whole group. Two daemons, each polling its own feeds of one
loopback host: the server never sees more requests at once than PER_HOST (alone, each daemon kept
to PER_HOST but the two together sent twice as many). A fetch whose host is busy on another daemon
fails at its deadline, unsent; without the database, each daemon keeps to its own PER_HOST."""
from __future__ import annotations

import threading
import time

import psycopg
import pytest

from db.coord import Coordinator
from parser.core.errors import FetchError
from parser.fetch.host_slots import host_key
from parser.fetch.http import Fetcher
from parser.group.shared_hosts import SharedHostSlots
from tests.conftest import daemon_name, group_runs
from tests.feeds import numbered_items, rss
from tests.process import free_port, stop, wait_for
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
    # Each feed polled once, by the daemon given its half, its 3 entries new (the runs table).
    assert {r["source"]: (r["daemon"], r["new"]) for r in group_runs(pg_url)} == \
        {name: (daemon_name(proc), 3) for proc, half in zip(procs, halves, strict=True) for name in half}
    assert len(group_runs(pg_url)) == FEEDS
    for project in projects:
        assert "PER_HOST: host busy" not in project.log()


def _items_table(pg_url: str) -> bool:
    with psycopg.connect(pg_url) as con:
        return con.execute("SELECT to_regclass('items') IS NOT NULL").fetchone()[0]


def shared_fetcher(db_url: str, deadline: float) -> Fetcher:
    return Fetcher(user_agent="test", timeout=deadline, deadline=deadline, max_bytes=1 << 20, max_redirects=3,
                   per_host=1, slots=SharedHostSlots(db_url, 1, deadline, threading.Event()))


@pytest.mark.postgres
def test_a_host_busy_on_another_daemon_fails_the_fetch_at_the_deadline_unsent(server, pg_url):
    server.route("/feed.xml", body=rss(numbered_items(1, 1)))
    other = Coordinator(pg_url)  # another daemon, mid-fetch on the same host
    other.create_schema()
    host = host_key(server.url("/"))  # as the group's slot rows name it
    assert other.take_host_slot(host, 1, 60) == 0
    fetcher = shared_fetcher(pg_url, 0.5)
    try:
        with pytest.raises(FetchError, match="PER_HOST: host busy on other daemons"):
            fetcher.get(server.url("/feed.xml"))
        assert server.hits.get("/feed.xml", 0) == 0
        other.free_host_slot(host, 0)
        assert fetcher.get(server.url("/feed.xml")).status == 200  # free again: taken, and given back
        assert other.take_host_slot(host, 1, 60) == 0
        other.close()  # its connection gone (a killed daemon): the slot is free at once
        assert fetcher.get(server.url("/feed.xml")).status == 200
    finally:
        fetcher.close()


def test_without_the_database_per_host_holds_for_this_daemon_only(server):
    server.route("/feed.xml", body=rss(numbered_items(1, 1)))
    fetcher = shared_fetcher(f"postgresql://postgres@127.0.0.1:{free_port()}/none", 2.0)
    try:
        assert fetcher.get(server.url("/feed.xml")).status == 200
        assert fetcher.slots.outage  # the local slot took it: the group's could not be asked
    finally:
        fetcher.close()
