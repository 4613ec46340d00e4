"""Per-source rates: the rate text, the token bucket on a controlled clock, and the real daemon
stopping a JSON API's paging where the rate runs out (the rest comes with the next poll)."""
from __future__ import annotations

import json
import threading
from urllib.parse import parse_qs, urlsplit

import pytest

from parser.fetch.ratelimit import RateLimits, TokenBucket, parse_rate
from tests.server import reply


def test_rate_text():
    a, b = parse_rate("30/min"), parse_rate("30 / minutes")
    assert (a.count, a.seconds, a.burst) == (b.count, b.seconds, b.burst) == (30, 60.0, 1)
    rate = parse_rate("100/hour burst 10")
    assert (rate.count, rate.seconds, rate.burst) == (100, 3600.0, 10)
    assert parse_rate("5/10s").seconds == 10.0 and parse_rate("2/s").burst == 1
    for bad in ("30 per min", "0/min", "30/fortnight", 30, "30/min burst 0"):
        with pytest.raises(ValueError):
            parse_rate(bad)


def test_bucket_gives_the_burst_then_spaces_requests_by_the_rate():
    now = [1000.0]
    bucket = TokenBucket(parse_rate("30/min burst 3"), clock=lambda: now[0])
    assert [bucket.reserve(max_wait=0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve(max_wait=1.0) is None         # the 4th is 2 s away: more than we may wait
    assert bucket.reserve(max_wait=10.0) == pytest.approx(2.0)
    assert bucket.reserve(max_wait=10.0) == pytest.approx(4.0)  # slots are promised in order
    now[0] += 60.0
    assert bucket.reserve(max_wait=0) == 0.0             # refilled, but never above the burst
    assert bucket.reserve(max_wait=0) == 0.0 and bucket.reserve(max_wait=0) == 0.0
    assert bucket.reserve(max_wait=0) is None


def test_rate_limits_keep_one_bucket_per_source():
    now = [0.0]
    limits, stop = RateLimits(clock=lambda: now[0]), threading.Event()
    rate = parse_rate("1/hour")
    assert limits.wait("a", rate, 0, stop) == 0.0
    assert limits.wait("a", rate, 0, stop) is None and limits.next_free("a") == pytest.approx(3600)
    assert limits.wait("b", rate, 0, stop) == 0.0       # another source has its own
    assert limits.wait("c", None, 0, stop) == 0.0       # no rate: never waits


def test_paging_stops_where_the_rate_runs_out(server, project):
    def paged(h):
        page = int(parse_qs(urlsplit(h.path).query)["page"][0])
        body = json.dumps({"items": [{"id": f"{page}-{i}", "url": f"https://api.example/{page}/{i}",
                                      "title": f"P{page} #{i}"} for i in range(2)]}).encode()
        reply(h, 200, body, {"Content-Type": "application/json"})
    server.route("/api", handler=paged)
    project.write_params(SOURCES=[{"name": "limited", "protocol": "json_api", "url": server.url("/api"),
                                   "items": "items", "page_param": "page", "max_pages": 5,
                                   "rate": "2/min burst 2"}], TIMEOUT=2, DEADLINE=2)
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["title"] for r in project.rows()) == ["P1 #0", "P1 #1", "P2 #0", "P2 #1"]
    assert server.hits["/api"] == 2
    assert "stopped after page 2: rate 2/min burst 2 allows the next page only later" in project.log("errors.log")


def test_a_source_polled_faster_than_its_rate_is_a_settings_error(project):
    project.write_params(SOURCES=[{"name": "fast", "url": "https://x.example/feed", "interval": 10,
                                   "rate": "1/min"}])
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "interval 10 s polls more often than rate '1/min' allows (one request every 60 s)" in proc.stderr
