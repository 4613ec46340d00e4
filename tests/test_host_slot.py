"""One host key and one host slot (parser/fetch/host_slots.py), asked by feed polls, harvest pages and pass-2
objects alike: the key is the same for every form of a host's address (IPv6 literals too, and the
key of a key); a hold keeps requests off the host until its time on an injected clock; a Retry-After
a job's request receives holds the host's feed polls, and a feed's holds the host's job links (in
process against the loopback server, then end to end with the daemon over two --once runs, counted
at the server and read in errors.log and parser.log)."""
from __future__ import annotations

import json
import re
import threading
import time

import pytest

from db.coord import Coordinator
from db.coord_jobs import JobTables
from linkgen.politeness import polite_get
from parser.core.errors import FetchError
from parser.fetch.host_slots import MAX_HOLD, HostHeldError, HostSlots, host_key
from parser.fetch.http import Fetcher
from parser.fetch.scheduler import Scheduler, Work
from parser.group.shared_hosts import SharedHostSlots
from tests.feeds import numbered_items, rss
from tests.server import reply
from tests.shop import HARVEST_FIELDS, Shop


@pytest.mark.parametrize(("url", "key"), [
    ("http://a.test/x?y=1", "http://a.test:80"),
    ("HTTP://A.Test:80/", "http://a.test:80"),
    ("https://a.test", "https://a.test:443"),
    ("http://user:secret@a.test:8080/p", "http://a.test:8080"),
    ("http://[::1]:8080/feed.xml", "http://[::1]:8080"),
    ("http://[::1]/", "http://[::1]:80"),
    ("http://a.test:", "http://a.test:80"),  # as a job's state.json kept a hold before this key
])
def test_one_key_for_every_form_of_a_hosts_address(url, key):
    assert host_key(url) == key
    assert host_key(key) == key  # the key of a key: holds are kept and read back by key


def test_an_ipv6_host_held_by_its_key_is_held_for_its_urls():
    slots = HostSlots(clock=lambda: 0.0)
    slots.hold_key(host_key("http://[::1]:8080/a"), 60)
    assert slots.held_for("http://[::1]:8080/b") == 60
    assert slots.held_for("http://[::1]:8081/b") == 0


def test_a_hold_keeps_every_request_off_the_host_until_its_time():
    now = [1000.0]
    slots = HostSlots(clock=lambda: now[0])
    slots.refused("http://a.test/page", 30)  # a job's request was refused
    for ask in (lambda: slots.reserve("http://a.test/other", 0), lambda: slots.before_request("http://a.test/x"),
                lambda: slots.sources.before_request("http://a.test/feed.xml")):
        with pytest.raises(HostHeldError, match=r"http://a\.test:80 asked for no requests for 30 s more"):
            ask()
    slots.sources.before_request("http://b.test/feed.xml")  # another host is free
    assert slots.holds() == {"http://a.test:80": 30.0}
    slots.hold("http://a.test/", 5)  # a shorter pause does not cut a longer one
    slots.hold("http://a.test/", -5)  # nor does one that is over
    assert slots.held_for("http://a.test/") == 30.0
    now[0] += 30
    assert slots.reserve("http://a.test/other", 0) == 0.0 and slots.holds() == {}
    slots.hold("http://a.test/", 10 ** 9)
    assert slots.held_for("http://a.test/") == MAX_HOLD


def test_a_feeds_retry_after_holds_the_hosts_crawl_and_not_its_other_feeds():
    """A source's answer may be about its own address: the other sources of the host each wait for a
    Retry-After of their own (their not_before), while the crawl keeps off the host."""
    now = [0.0]
    slots = HostSlots(clock=lambda: now[0])
    slots.sources.refused("http://a.test/feed.xml", 3600)
    with pytest.raises(HostHeldError):
        slots.reserve("http://a.test/item/1", 0)
    assert slots.held_for("http://a.test/item/1") == 3600
    slots.sources.before_request("http://a.test/other-feed.xml")  # not raised
    now[0] = 3600.0
    assert slots.reserve("http://a.test/item/1", 0) == 0.0


def test_connections_in_flight_are_counted_per_host_key():
    slots = HostSlots(per_host=1)
    with slots.slot("http://a.test/x"):
        assert not slots.slot("http://A.test:80/y").semaphore.acquire(blocking=False)  # the same host
        other = slots.slot("https://a.test/y").semaphore  # another scheme and port: another host
        assert other.acquire(blocking=False)
        other.release()
    assert slots.slot("http://a.test/z").semaphore.acquire(blocking=False)


def test_the_scheduler_hands_out_work_by_the_same_slots_the_fetcher_counts():
    slots = HostSlots(per_host=1)
    scheduler = Scheduler(4, 1, slots)
    release, done = threading.Event(), []
    for url in ("http://a.test/1", "http://A.test:80/2", "https://a.test/3"):
        scheduler.add(Work(url=url, run=lambda: release.wait(10), absorb=done.append, failed=done.append))
    try:
        assert scheduler.dispatch() == 2  # one on http://a.test:80, one on https://a.test:443
        assert not slots.book("http://a.test:80") and not slots.book("https://a.test:443")
        release.set()
        for _ in range(20):  # bounded: a booking never given back fails the assert below instead of hanging
            if len(done) == 3:
                break
            scheduler.absorb(10)
            scheduler.dispatch()
        assert done == [True, True, True] and scheduler.idle()
        assert slots.book("http://a.test:80")  # every piece of work gave its booking back
    finally:
        scheduler.close()


@pytest.mark.postgres
def test_in_a_group_the_holds_reach_every_daemon_as_far_as_they_reach_one(pg_url):
    """SHARED: a feed's Retry-After keeps every daemon's crawl off the host (not its other feeds), a
    job's keeps every daemon's requests off it; both through parser_hosts."""
    coord = Coordinator(pg_url)
    coord.create_schema()
    one, two, three = (SharedHostSlots(pg_url, 2, 10, threading.Event()) for _ in range(3))
    try:
        one.sources.refused("http://a.test/feed.xml", 600)
        assert two.held_for("http://a.test/item/1") > 590  # the crawl of the host, on another daemon
        with pytest.raises(HostHeldError):
            two.reserve("http://a.test/item/1", 1.0)
        assert JobTables(coord).reserve_host(host_key("http://a.test/"), 1.0) is None  # nothing booked
        two.sources.before_request("http://a.test/other.xml")  # another feed of the host is its own
        one.refused("http://b.test/item/1", 600)  # a job's request refused
        with pytest.raises(HostHeldError):
            three.sources.before_request("http://b.test/feed.xml")
    finally:
        for slots in (one, two, three):
            slots.close()
        coord.close()


@pytest.fixture
def fetcher():
    fetcher = Fetcher(user_agent="test", timeout=5, deadline=10, max_bytes=1 << 20, max_redirects=3, per_host=2)
    yield fetcher
    fetcher.close()


def refuse(server, path: str) -> None:
    server.route(path, handler=lambda h: reply(h, 429, b"busy", {"Content-Type": "text/plain",
                                                                  "Retry-After": "3600"}))


def test_in_process_a_feeds_429_holds_the_job_links_and_a_jobs_429_the_feed_polls(server, fetcher):
    refuse(server, "/feed.xml")
    refuse(server, "/item/2")
    server.route("/item/1", body=b"<h1>one</h1>", content_type="text/html")
    server.route("/other.xml", body=rss(numbered_items(1, 1)))
    with pytest.raises(FetchError) as refused:
        fetcher.get(server.url("/feed.xml"))  # a feed poll: no gate
    assert refused.value.retry_after == 3600
    with pytest.raises(HostHeldError):
        polite_get(server.url("/item/1"), fetcher=fetcher, host_slots=fetcher.slots, delay=0)
    assert fetcher.get(server.url("/other.xml")).status == 200  # another feed of the host: its own

    fetcher.slots = HostSlots(2)  # a fresh run
    with pytest.raises(FetchError):
        polite_get(server.url("/item/2"), fetcher=fetcher, host_slots=fetcher.slots, delay=0)
    with pytest.raises(HostHeldError):
        fetcher.get(server.url("/other.xml"))
    assert server.hits == {"/feed.xml": 1, "/other.xml": 1, "/item/2": 1}


def shared_host(server, project, *, feed_refuses: bool) -> Shop:
    """A feed and a template job on one loopback host; the feed or the job's second link says 429."""
    shop = Shop(server)
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    refuse(server, "/feed.xml" if feed_refuses else "/item/2")
    project.write_params(SOURCES=[{"name": "news", "url": server.url("/feed.xml")}],
                         LINK_JOBS=[{"name": "pages", "template": server.url("/item/{id}"),
                                     "values": {"id": [1, 2, 3]}, "fields": HARVEST_FIELDS}], PER_HOST=1)
    return shop


def test_a_feeds_429_holds_the_hosts_job_links_in_the_next_run(server, project):
    shop = shared_host(server, project, feed_refuses=True)
    assert project.run("--once", "--source", "news").returncode == 4  # its one source failed (held by the 429)
    assert server.hits == {"/feed.xml": 1}
    assert [(r["outcome"], r["status"]) for r in project.rows("runs") if r["source"] == "news"] == [("error", 429)]
    project.run("--once", check=True)  # the feed and the job
    assert shop.item_hits() == {} and server.hits == {"/feed.xml": 1}  # nothing asked on the held host
    # The feed's state.json keeps the hold (about an hour); the job's 3 links wait behind it.
    not_before = json.loads((project.staging / "state.json").read_text())["news"]["not_before"]
    assert time.time() + 3500 < not_before <= time.time() + 3600, not_before
    log = project.log()
    assert "news  skipped: the server asked to wait" in log
    # About an hour, never more: 3600 when the second run starts within half a second of the hold.
    assert re.search(rf"pages  3 links wait for {re.escape(host_key(server.url('/')))} "
                     r"\(Retry-After, (?:3600|35\d\d) s more\): left for the next run", log), log


def test_a_job_links_429_holds_the_hosts_feed_polls_in_the_next_run(server, project):
    shop = shared_host(server, project, feed_refuses=False)
    project.run("--once", "--job", "pages", check=True)
    assert shop.item_hits() == {"/item/1": 1, "/item/2": 1}  # /item/3 waits behind the refusal
    asked = dict(server.hits)
    host = host_key(server.url("/"))
    assert list(json.loads((project.staging / "jobs" / "pages" / "state.json").read_text())["holds"]) == [host]
    project.run("--once", check=True)  # the feed and the job
    assert server.hits == asked and "/feed.xml" not in server.hits  # the feed was not asked either
    errors = project.log("errors.log")
    assert re.search(rf"news  {re.escape(server.url('/feed.xml'))}  not sent: {re.escape(host_key(server.url('/')))}"
                     r" asked for no requests for (?:3600|35\d\d) s more \(Retry-After\)", errors), errors
    status = json.loads(project.run("status", "--json", check=True).stdout)
    news = next(s for s in status["sources"] if s["name"] == "news")
    assert news["state_kind"] == "held"
    # A poll not sent for its host's hold is no failure of the source: no count towards DEAD_AFTER.
    assert json.loads((project.staging / "state.json").read_text())["news"]["failures"] == 0
