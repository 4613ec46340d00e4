"""The daemon's one scheduler, run as a user runs it: each source polled on its own time whatever
another source does, flushes on FLUSH_INTERVAL, fairness across hosts, a poll's own seconds in the
log, and a stop that is no source's failure."""
from __future__ import annotations

import json
import re
import signal
import sqlite3
import time
from collections import defaultdict

from tests.feeds import numbered_items, rss
from tests.process import wait_for
from tests.server import LoopbackServer, reply


def growing_feeds(server: LoopbackServer, prefix: str) -> None:
    """Every path under `prefix` answers a feed with one item more on each request."""
    def answer(h) -> None:
        path = h.path
        n = server.hits.get(path, 1)
        reply(h, 200, rss(numbered_items(n, 1, host=path.strip("/").replace("/", "-") + ".example")),
              {"Content-Type": "application/rss+xml"})
    server.route(prefix + "*", handler=answer)


def arrivals(server: LoopbackServer) -> dict[str, list[float]]:
    seen = defaultdict(list)
    for at, path in list(server.times):
        seen[path].append(at)
    return seen


def row_count(project) -> int:
    if not project.db_path.exists():
        return 0
    con = sqlite3.connect(project.db_path)
    try:
        return con.execute("SELECT count(*) FROM items").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def test_fifty_sources_keep_their_interval_and_flushes_their_time_while_one_drips_to_the_deadline(server, project):
    slow = LoopbackServer().start()  # another host:port, as a slow server elsewhere would be
    try:
        growing_feeds(server, "/f/")
        slow.route("/drip.xml", body=b"<rss>" + b" " * 200, drip=1.0)  # a byte a second: cut at DEADLINE
        sources = [{"name": f"s{i}", "url": server.url(f"/f/{i}.xml"), "interval": 2} for i in range(50)]
        sources.append({"name": "drip", "url": slow.url("/drip.xml"), "interval": 2})
        project.write_params(SOURCES=sources, CONCURRENCY=8, PER_HOST=4, TIMEOUT=5, DEADLINE=8, FLUSH_INTERVAL=2)
        daemon = project.start()
        samples: list[tuple[float, int]] = []  # (time, rows in the database)
        try:
            wait_for(lambda: row_count(project) > 0, "the first flush")
            end = time.monotonic() + 15
            while time.monotonic() < end:
                samples.append((time.monotonic(), row_count(project)))
                time.sleep(0.2)
        finally:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=30) == 0
        start = samples[0][0]
    finally:
        slow.stop()

    assert "drip  error  took longer than the 8 s deadline" in project.log()
    seen = arrivals(server)
    for i in range(50):
        times = [t for t in seen[f"/f/{i}.xml"] if start <= t <= samples[-1][0]]
        assert len(times) >= 6, (i, times)
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert max(gaps) <= 3.0, f"source s{i} waited {max(gaps):.2f} s between polls (interval 2 s)"
    # Rows reach the database on every flush: never more than a flush interval and a bit without.
    rises = [t for (t, n), (_, before) in zip(samples[1:], samples, strict=False) if n > before]
    assert rises, samples
    stalls = [b - a for a, b in zip([start, *rises], rises, strict=False)]
    assert max(stalls) <= 3.5, f"no rows stored for {max(stalls):.2f} s with FLUSH_INTERVAL 2"


def test_stopping_during_a_slow_fetch_is_not_a_failure_of_that_source(server, project):
    server.route("/fast.xml", body=rss(numbered_items(1, 2)))
    server.route("/slow.xml", body=rss(numbered_items(10, 3)), drip=0.05)  # seconds of dripping
    slow_url = server.url("/slow.xml")
    project.staging.mkdir(parents=True)
    (project.staging / "state.json").write_text(json.dumps({"slow": {"url": slow_url, "failures": 3}}))
    project.write_params(SOURCES=[{"name": "fast", "url": server.url("/fast.xml")},
                                  {"name": "slow", "url": slow_url}], DEAD_AFTER=5)
    daemon = project.start()
    wait_for(lambda: "fast  new 2" in project.log() and server.hits.get("/slow.xml"), "both polls under way")
    time.sleep(0.5)  # the slow body is coming in
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    state = json.loads((project.staging / "state.json").read_text())
    assert state["slow"]["failures"] == 3
    assert state["slow"]["last_outcome"] == ""  # never polled to the end: nothing to say about it
    assert "slow" not in project.log("errors.log")
    assert "slow  error" not in project.log()
    assert "flush (stop)" in project.log()


def test_a_host_with_many_sources_does_not_starve_a_host_with_few(server, project):
    busy = LoopbackServer().start()
    try:
        growing_feeds(busy, "/b/")
        busy.route("/b/*", handler=busy.routes["/b/*"].handler, delay=0.2)  # each answer takes 0.2 s
        growing_feeds(server, "/q/")
        sources = [{"name": f"b{i}", "url": busy.url(f"/b/{i}.xml"), "interval": 1} for i in range(60)]
        sources += [{"name": f"q{i}", "url": server.url(f"/q/{i}.xml"), "interval": 1} for i in range(2)]
        # Two workers for 60 polls a second of 0.2 s each: the busy host is always behind.
        project.write_params(SOURCES=sources, CONCURRENCY=2, PER_HOST=2, FLUSH_INTERVAL=60)
        daemon = project.start()
        try:
            wait_for(lambda: all(server.hits.get(f"/q/{i}.xml") for i in range(2)), "the quiet host's first polls")
            started = time.monotonic()
            time.sleep(8)
        finally:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=30) == 0
    finally:
        busy.stop()
    seen = arrivals(server)
    for i in range(2):
        times = [t for t in seen[f"/q/{i}.xml"] if t >= started]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert len(times) >= 5 and max(gaps) <= 2.0, f"q{i}: polls at gaps {gaps} (interval 1 s)"
    assert sum(1 for path in arrivals(busy) if path.startswith("/b/")) >= 10  # the busy host got its turns


def test_a_polls_logged_seconds_are_its_own_not_the_wait_for_its_host(server, project):
    for i in range(4):
        server.route(f"/d{i}.xml", body=rss(numbered_items(10 * i, 1)), delay=1.0)
    project.write_params(SOURCES=[{"name": f"d{i}", "url": server.url(f"/d{i}.xml")} for i in range(4)],
                         CONCURRENCY=4, PER_HOST=1)
    started = time.monotonic()
    project.run("--once", check=True)
    assert time.monotonic() - started >= 4  # one at a time: PER_HOST is 1
    seconds = [float(s) for s in re.findall(r"d\d  new 1  duplicates 0  (\d+\.\d\d) s", project.log())]
    assert len(seconds) == 4
    assert all(0.9 <= s < 1.8 for s in seconds), seconds


def test_pass_2_stores_objects_while_the_harvest_that_found_them_goes_on(server, project):
    from tests.shop import HARVEST_FIELDS, Shop
    Shop(server)
    server.routes["/list/2"].delay = 5.0  # a slow listing keeps the harvest run open
    project.write_params(LINK_JOBS=[{"name": "shop", "harvest": {"root": server.url("/"), "follow": r"/list/",
                                                                  "depth": 3},
                                     "objects": r"/item/\d+$", "fields": HARVEST_FIELDS}])
    folder = project.staging / "jobs" / "shop"
    proc = project.start("--once")

    def staged_items() -> set[str]:
        path = folder / "staging.csv"
        return set(re.findall(r"Item \d+", path.read_text())) if path.exists() else set()
    try:
        wait_for(lambda: {f"Item {n}" for n in range(1, 5)} <= staged_items(), "the first listing's objects staged")
        harvest_log = (folder / "harvest.log").read_text()
        assert "\nend\t" not in harvest_log and "/list/2" not in [line.split("\t")[1] for line in
                                                                  harvest_log.splitlines() if line.startswith("done")]
    finally:
        assert proc.wait(timeout=60) == 0
    assert "\nend\t" in (folder / "harvest.log").read_text()
    assert {r["name"] for r in project.rows("shop")} >= {f"Item {n}" for n in range(1, 9)}
