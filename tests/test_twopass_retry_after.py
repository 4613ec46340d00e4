"""429 and 503 with Retry-After in the two-pass jobs, end to end against tests/server.py: no request to
the host before the time the server asked for (counted and timed at the server), the refused link or
page asked again after it at the cost of one attempt per refusal, and the logs saying so."""
from __future__ import annotations

import json
import re
import threading
import time

import pytest

from linkgen.politeness import HostHeldError, HostSlots, polite_get
from parser.core.errors import FetchError
from parser.fetch.http import Fetcher
from tests.conftest import Project
from tests.process import stop, wait_for
from tests.server import LoopbackServer, reply
from tests.shop import HARVEST_FIELDS, Shop


@pytest.fixture
def shop(server) -> Shop:
    return Shop(server)


class Refusals:
    """Makes a route answer `status` with Retry-After its first `times` requests, then as before;
    remembers when each refusal was sent (time.monotonic, like server.times)."""

    def __init__(self, server: LoopbackServer, path: str, *, times: int = 1, status: int = 429,
                 retry_after: str = "2"):
        self.route = server.routes[path]
        self.times, self.status, self.retry_after = times, status, retry_after
        self.sent: list[float] = []
        self._lock = threading.Lock()
        body, content_type = self.route.body, self.route.content_type
        self.route.delay = 0.0

        def handler(h) -> None:
            with self._lock:
                refuse = len(self.sent) < self.times
                if refuse:
                    self.sent.append(time.monotonic())
            if refuse:
                reply(h, self.status, b"slow down", {"Content-Type": "text/plain",
                                                                    "Retry-After": self.retry_after})
            else:
                reply(h, 200, body, {"Content-Type": content_type})
        self.route.handler = handler


def requests_within(server: LoopbackServer, start: float, seconds: float) -> list[str]:
    """Requests that reached the server in the `seconds` after `start` (a refusal was sent at start)."""
    return [path for at, path in server.times if start < at < start + seconds]


def status_lines(project: Project, job: str, url: str) -> list[tuple[str, str]]:
    text = (project.staging / "jobs" / job / "links.status").read_text(encoding="utf-8")
    return [(p[1], p[2]) for p in (line.split("\t") for line in text.splitlines() if "\t" in line) if p[3] == url]


def template_job(server, ids, name: str = "pages") -> dict:
    return {"name": name, "template": server.url("/item/{id}"), "values": {"id": list(ids)}, "fields": HARVEST_FIELDS}


def test_pass_2_holds_the_host_and_asks_the_refused_link_again_after_retry_after(server, shop, project):
    refusal = Refusals(server, "/item/3", retry_after="2")
    # Four workers, one connection to the host: requests queue behind the refused one and must not go.
    project.write_params(LINK_JOBS=[template_job(server, range(1, 9))], CONCURRENCY=4, PER_HOST=1)
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr

    assert len(refusal.sent) == 1
    assert requests_within(server, refusal.sent[0], 2.0) == []
    assert shop.item_hits() == {**{f"/item/{n}": 1 for n in range(1, 9)}, "/item/3": 2}
    assert sorted(r["name"] for r in project.rows("pages")) == sorted(f"Item {n}" for n in range(1, 9))
    # One attempt for the refusal, one for the fetch that worked; the links kept back spent none.
    assert status_lines(project, "pages", server.url("/item/3")) == [("refused", "1"), ("done", "2")]
    for n in (1, 2, 4, 5, 6, 7, 8):
        assert status_lines(project, "pages", server.url(f"/item/{n}")) == [("done", "1")]
    host = server.url("")
    errors = project.log("errors.log")
    assert re.search(rf"pages  {re.escape(server.url('/item/3'))}  HTTP 429 Too Many Requests; no request to "
                     rf"{re.escape(host)} before \S+Z \(Retry-After\); attempt 1 of 4, asked again then", errors)
    log = project.log()
    assert f"pages  {host} asked for a pause (HTTP 429 Too Many Requests): no request to it before" in log
    assert "pages  waiting" in log and "1 refused with Retry-After" in log


def test_a_server_that_keeps_refusing_costs_one_attempt_per_refusal(server, shop, project):
    refusal = Refusals(server, "/item/1", times=100, status=503, retry_after="1")
    project.write_params(LINK_JOBS=[template_job(server, [1])])
    project.run("--once", check=True)
    assert len(refusal.sent) == 4  # MAX_ATTEMPTS refusals, then given up
    for earlier, later in zip(refusal.sent, refusal.sent[1:], strict=False):
        assert later - earlier >= 1.0
    assert [s for s, _ in status_lines(project, "pages", server.url("/item/1"))] == ["refused"] * 3 + ["dead"]
    assert "HTTP 503 Service Unavailable; no request to" in project.log("errors.log")
    assert "(Retry-After); given up after 4 attempts" in project.log("errors.log")
    project.run("--once", check=True)
    assert len(refusal.sent) == 4 and project.rows("pages") == []


def test_a_long_retry_after_outlasts_the_run_and_holds_the_next_one(server, shop, project):
    refusal = Refusals(server, "/item/2", retry_after="3600")
    project.write_params(LINK_JOBS=[template_job(server, range(1, 6))], CONCURRENCY=1)
    project.run("--once", check=True)
    assert shop.item_hits() == {"/item/1": 1, "/item/2": 1}
    host = server.url("")
    # 3600 less the moments since the answer, rounded: 3600, or 359x on a slow machine.
    assert re.search(rf"pages  4 links wait for {re.escape(host)} \(Retry-After, (3600|359\d) s more\): "
                     "left for the next run", project.log())
    state_path = project.staging / "jobs" / "pages" / "state.json"
    holds = json.loads(state_path.read_text())["holds"]
    assert list(holds) == [host] and holds[host] > time.time() + 3500

    hits = len(server.times)
    project.run("--once", check=True)  # a restart: the pause the server asked for still holds
    assert len(server.times) == hits
    assert re.search(rf"pages  {re.escape(host)} asked for no requests before \S+Z \(Retry-After\): held until then",
                     project.log())

    state = json.loads(state_path.read_text())
    state["holds"][host] = time.time() - 1  # as if the hour had passed
    state_path.write_text(json.dumps(state))
    project.run("--once", check=True)
    assert len(refusal.sent) == 1
    assert shop.item_hits() == {**{f"/item/{n}": 1 for n in range(1, 6)}, "/item/2": 2}
    assert len(project.rows("pages")) == 5
    assert status_lines(project, "pages", server.url("/item/2")) == [("refused", "1"), ("done", "2")]


def test_a_harvest_page_refused_with_retry_after_is_expanded_after_it(server, shop, project):
    refusal = Refusals(server, "/list/1", retry_after="2")
    project.write_params(LINK_JOBS=[{"name": "shop", "objects": r"/item/\d+$", "fields": HARVEST_FIELDS,
                                     "harvest": {"root": server.url("/"), "follow": r"/list/", "depth": 3}}],
                         CONCURRENCY=4, PER_HOST=1)
    project.run("--once", check=True)
    assert len(refusal.sent) == 1 and server.hits["/list/1"] == 2
    assert requests_within(server, refusal.sent[0], 2.0) == []
    assert len(project.rows("shop")) == 8  # /list/1's objects and, one level on, /list/2's
    harvest_log = (project.staging / "jobs" / "shop" / "harvest.log").read_text()
    assert f"refused\t{server.url('/list/1')}\t1\tHTTP 429 Too Many Requests\n" in harvest_log
    assert f"done\t{server.url('/list/1')}\tok\n" in harvest_log
    assert re.search(rf"shop  {re.escape(server.url('/list/1'))}  harvest: HTTP 429 Too Many Requests; no request "
                     rf"to \S+ before \S+Z \(Retry-After\); attempt 1 of 4", project.log("errors.log"))
    assert set(project.harvest_pages("shop")[1].values()) == {"ok"}  # no page failed


def test_a_refused_robots_txt_holds_the_host_too(server, shop, project):
    refusal = Refusals(server, "/robots.txt", status=503, retry_after="1")
    project.write_params(LINK_JOBS=[{"name": "shop", "objects": r"/item/\d+$", "fields": HARVEST_FIELDS,
                                     "harvest": {"root": server.url("/"), "follow": r"/list/", "depth": 3}}],
                         PER_HOST=1)
    project.run("--once", check=True)
    assert len(refusal.sent) == 1 and server.hits["/robots.txt"] == 2
    assert requests_within(server, refusal.sent[0], 1.0) == []
    assert len(project.rows("shop")) == 8 and "/private/list" not in server.hits  # robots.txt read after all


def test_forever_mode_comes_back_when_the_hold_ends(server, shop, project):
    refusal = Refusals(server, "/item/2", retry_after="2")
    project.write_params(LINK_JOBS=[template_job(server, range(1, 4))], FLUSH_INTERVAL=0.2, PER_HOST=1)
    daemon = project.start()
    try:
        wait_for(lambda: len(project.rows("pages")) == 3, "the held object stored after the hold", timeout=20)
    finally:
        assert stop(daemon, timeout=20) == 0
    assert len(project.rows("pages")) == 3
    assert requests_within(server, refusal.sent[0], 2.0) == []
    assert server.hits["/item/2"] == 2


def test_host_slots_hold_a_host_and_refuses_at_once():
    now = [100.0]
    host_slots = HostSlots(clock=lambda: now[0])
    host_slots.refused("http://a.test/x", 30)
    with pytest.raises(HostHeldError, match="a.test:.*30 s more"):
        host_slots.reserve("http://a.test/y", 0)
    with pytest.raises(HostHeldError):
        host_slots.before_request("http://a.test/z")
    assert host_slots.reserve("http://b.test/y", 0) == 0.0  # another host is not held
    assert host_slots.held_for("http://a.test/") == 30.0 and host_slots.holds() == {"http://a.test:80": 30.0}
    host_slots.hold("http://a.test/", 5)  # a shorter pause does not cut a longer one
    now[0] = 130.0
    assert host_slots.reserve("http://a.test/y", 2.0) == 0.0 and host_slots.holds() == {}
    host_slots.hold("http://a.test/", 10 ** 9)
    assert host_slots.held_for("http://a.test/") == 24 * 3600.0  # a day at most, as for the feeds


def test_a_request_queued_behind_a_refused_one_on_the_host_is_not_sent(server):
    """The hold is set before the host's connection slot goes to the next request: even when a thread
    switch comes at the worst moment (here: holding takes 0.2 s), the queued request is not sent."""
    server.route("/refuse", status=429, headers={"Retry-After": "30"}, delay=0.3, content_type="text/plain")
    server.route("/other", body=b"<html><body>x</body></html>", content_type="text/html")

    class SlowToHold(HostSlots):
        def hold(self, url: str, seconds: float) -> float:
            time.sleep(0.2)
            return super().hold(url, seconds)

    host_slots = SlowToHold()
    fetcher = Fetcher(user_agent="t", timeout=5, deadline=10, max_bytes=1 << 20, max_redirects=3, per_host=1)
    outcome: dict[str, object] = {}

    def get(path: str) -> None:
        try:
            outcome[path] = polite_get(server.url(path), fetcher=fetcher, host_slots=host_slots, delay=0)
        except FetchError as exc:
            outcome[path] = exc

    first = threading.Thread(target=get, args=("/refuse",))
    first.start()
    while "/refuse" not in server.hits:  # the first request holds the host's only slot
        time.sleep(0.01)
    second = threading.Thread(target=get, args=("/other",))
    second.start()  # passes the host_slots (no hold yet) and queues for the slot
    first.join(10)
    second.join(10)
    fetcher.close()
    assert isinstance(outcome["/refuse"], FetchError) and outcome["/refuse"].retry_after == 30
    assert isinstance(outcome["/other"], HostHeldError)
    assert "/other" not in server.hits
