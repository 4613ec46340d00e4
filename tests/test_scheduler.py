"""The daemon's one scheduler. Run as a user runs it: each source polled on its own time whatever
another source does, flushes on FLUSH_INTERVAL, a poll's own seconds (the runs table's), and a stop that is
no source's failure. In-process (parser/fetch/scheduler.py on a simulated pool and clock): round-robin
across hosts, so a host with many sources does not starve one with few; PER_HOST; results back to
the main thread."""
from __future__ import annotations

import heapq
import itertools
import json
import math
import re
import signal
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

from parser.fetch.scheduler import Scheduler, Work
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


@pytest.mark.slow  # a 15 s window of the daemon's own loop, with a flush every 2 s
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

    drip = [r for r in project.rows("runs") if r["source"] == "drip"]  # cut at its deadline, as a failed poll
    assert drip and all(r["outcome"] == "error" and "8 s deadline" in r["error"] for r in drip), drip
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
    wait_for(lambda: project.staged_rows() == 2 and server.hits.get("/slow.xml"), "both polls under way")
    time.sleep(0.5)  # the slow body is coming in
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    state = json.loads((project.staging / "state.json").read_text())
    assert state["slow"]["failures"] == 3
    assert state["slow"]["last_outcome"] == ""  # never polled to the end: nothing to say about it
    assert "slow" not in project.log("errors.log")
    assert [r["source"] for r in project.rows("runs")] == ["fast"]  # the slow poll, cut short: no outcome
    assert len(project.rows()) == 2  # the stop's flush stored the fast source's records


def test_a_polls_logged_seconds_are_its_own_not_the_wait_for_its_host(server, project):
    for i in range(4):
        server.route(f"/d{i}.xml", body=rss(numbered_items(10 * i, 1)), delay=1.0)
    project.write_params(SOURCES=[{"name": f"d{i}", "url": server.url(f"/d{i}.xml")} for i in range(4)],
                         CONCURRENCY=4, PER_HOST=1)
    started = time.monotonic()
    project.run("--once", check=True)
    ended = time.monotonic()
    # One at a time (PER_HOST is 1), as the server saw them: each request came after the last one's
    # answer, which waited 1 s.
    came = [(at, path.strip("/").removesuffix(".xml")) for at, path in server.times if path.startswith("/d")]
    assert len(came) == 4
    assert all(b - a >= 0.99 for (a, _), (b, _) in zip(came, came[1:], strict=False)), came
    # Each poll's own seconds, as the runs table keeps them (parser.log's poll line says the same, rounded).
    seconds = {r["source"]: r["seconds"] for r in project.rows("runs") if (r["outcome"], r["new"]) == ("new", 1)}
    assert len(seconds) == 4
    assert all(s >= 0.9 for s in seconds.values()), seconds  # the server's 1 s is in each
    # A poll's own time starts once it has its host, after the answer to the one before it (its request
    # plus 1 s), and ends before the run does; had it counted its wait for the host too, the last
    # would say about 4 s. (Both clocks are the machine's monotonic clock; 0.01 covers the rounding.)
    for (before, _), (_, name) in zip(came, came[1:], strict=False):
        assert seconds[name] <= ended - (before + 1.0) + 0.01, (name, seconds, came, ended)
    assert sum(seconds.values()) <= ended - started + 0.04, (seconds, ended - started)


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


# -- the scheduler itself, in-process: a fake pool and a simulated clock ----------------------------
# The worker loop is tested on its public interface (add, dispatch, absorb): a fake pool stands for
# the worker threads, holding what was submitted until the simulated clock reaches its end, so the
# round-robin order and the per-host limit are checked exactly, with no wall clock and no sleep.

class SimulatedPool:
    """The scheduler's worker threads, played by a clock: `submit` notes when a piece of work would
    end (`seconds(work)` after now); `finish_next` moves the clock there and runs it, which puts its
    result on the scheduler's queue for `absorb` as a worker thread would."""

    def __init__(self, seconds: Callable[[Work], float]):
        self.now = 0.0
        self.seconds = seconds
        self.started: list[tuple[float, str]] = []  # (simulated time, url) of every submitted piece
        self._ends: list[tuple[float, int, Callable, tuple]] = []
        self._count = itertools.count()

    def submit(self, fn: Callable, *args) -> None:
        work = args[0]
        self.started.append((self.now, work.url))
        heapq.heappush(self._ends, (self.now + self.seconds(work), next(self._count), fn, args))

    def next_end(self) -> float:
        return self._ends[0][0] if self._ends else math.inf

    def finish_next(self) -> None:
        self.now, _, fn, args = heapq.heappop(self._ends)
        fn(*args)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self._ends.clear()


def simulated_scheduler(workers: int, per_host: int,
                        seconds: Callable[[Work], float]) -> tuple[Scheduler, SimulatedPool]:
    scheduler = Scheduler(workers, per_host)
    scheduler.pool.shutdown()  # the real threads are never used: the simulated pool stands in
    pool = scheduler.pool = SimulatedPool(seconds)
    return scheduler, pool


def work_for(url: str, absorbed: list | None = None, owner=None, run=lambda: None, failed=None) -> Work:
    def absorb(result) -> None:
        if absorbed is not None:
            absorbed.append((url, result))

    def failed_default(exc: BaseException) -> None:
        raise AssertionError(f"{url} failed: {exc!r}")
    return Work(url=url, run=run, absorb=absorb, failed=failed or failed_default, owner=owner)


def raise_it(exc: BaseException) -> None:
    raise exc


def poll_sources_for(scheduler: Scheduler, pool: SimulatedPool, urls: list[str], interval: float,
                     until: float) -> None:
    """The daemon's part, in small: every source is added to the scheduler when it is due, and is due
    again `interval` seconds after its poll started (as parser/sources/source_schedule.py does); the clock
    runs on to the next end of a poll or the next due source, until `until`."""
    due = dict.fromkeys(urls, 0.0)
    queued: set[str] = set()
    started_at: dict[str, float] = {}

    def polled(url: str) -> Callable[[object], None]:
        def absorb(_result) -> None:
            queued.discard(url)
            due[url] = started_at[url] + interval
        return absorb

    def run_for(url: str) -> Callable[[], None]:
        def run() -> None:
            started_at[url] = next(at for at, u in reversed(pool.started) if u == url)
        return run
    while pool.now < until:
        for url, at in due.items():
            if at <= pool.now and url not in queued:
                queued.add(url)
                scheduler.add(Work(url=url, run=run_for(url), absorb=polled(url), failed=raise_it))
        scheduler.dispatch()
        next_due = min((at for url, at in due.items() if url not in queued), default=math.inf)
        if pool.next_end() <= next_due:
            pool.finish_next()
            scheduler.absorb(0)
        else:
            pool.now = next_due


def test_a_host_with_many_sources_does_not_starve_a_host_with_few():
    """Guards what the daemon test of the same name checked against the wall clock after sleep(8):
    60 sources on a busy host whose answers take 0.2 s, 2 on a quiet host, all with a 1 s interval,
    2 workers and PER_HOST 2. The busy host is always behind, yet each quiet source is polled at least
    5 times in 8 s with at most 2 s between polls, and the busy host still gets its turns (>= 10)."""
    busy = [f"http://busy.example/b/{i}.xml" for i in range(60)]
    quiet = [f"http://quiet.example/q/{i}.xml" for i in range(2)]
    scheduler, pool = simulated_scheduler(2, 2, lambda w: 0.2 if "busy" in w.url else 0.01)
    poll_sources_for(scheduler, pool, busy + quiet, interval=1.0, until=8.0)
    for url in quiet:
        times = [at for at, u in pool.started if u == url]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert len(times) >= 5 and max(gaps) <= 2.0, f"{url}: polls at gaps {gaps} (interval 1 s)"
    assert sum(1 for _, url in pool.started if "busy" in url) >= 10
    scheduler.close()


def test_ready_work_is_taken_round_robin_across_hosts_in_the_order_it_came():
    """When workers are scarce, one host with many ready items gets one turn in each round like a
    host with one: the start order is exact, whatever the wall clock does."""
    scheduler, pool = simulated_scheduler(1, 1, lambda w: 1.0)
    for url in ["http://a.example/1", "http://a.example/2", "http://a.example/3", "http://a.example/4",
                "http://b.example/1", "http://c.example/1", "http://c.example/2"]:
        scheduler.add(work_for(url))
    while not scheduler.idle():
        scheduler.dispatch()
        pool.finish_next()
        assert scheduler.absorb(0) == 1
    assert [url for _, url in pool.started] == [
        "http://a.example/1", "http://b.example/1", "http://c.example/1", "http://a.example/2",
        "http://c.example/2", "http://a.example/3", "http://a.example/4"]


def test_per_host_limit_leaves_free_workers_to_other_hosts():
    """At most PER_HOST items run on one host (host:port: another port is another host), even with
    workers free; those workers go to other hosts' work at once, so no worker waits for a host's slot."""
    scheduler, pool = simulated_scheduler(4, 2, lambda w: 0.5 if "two" in w.url else 1.0)
    for i in range(5):
        scheduler.add(work_for(f"http://one.example/{i}"))
    scheduler.add(work_for("http://two.example/x"))
    assert scheduler.dispatch() == 3
    assert sorted(url for _, url in pool.started) == [
        "http://one.example/0", "http://one.example/1", "http://two.example/x"]
    pool.finish_next()  # two.example/x ends: two workers free, one.example still at its limit
    assert scheduler.absorb(0) == 1
    assert scheduler.dispatch() == 0 and scheduler.running == 2 and scheduler.waiting() == 3
    scheduler.add(work_for("http://one.example:8080/x"))
    assert scheduler.dispatch() == 1 and pool.started[-1][1] == "http://one.example:8080/x"
    pool.finish_next()  # one.example/0 ends: its host has room for one more
    assert scheduler.absorb(0) == 1
    assert scheduler.dispatch() == 1 and pool.started[-1][1] == "http://one.example/2"
    assert scheduler.running == 3 and scheduler.waiting() == 2


def test_a_piece_of_work_that_never_ends_holds_one_worker_and_its_host_only():
    """A source that drips to its deadline holds its worker; every other source keeps its interval
    on the workers left (the in-process half of the fifty-sources daemon test above)."""
    sources = [f"http://s{i % 5}.example/{i}.xml" for i in range(20)]
    scheduler, pool = simulated_scheduler(4, 4, lambda w: 1e9 if "drip" in w.url else 0.05)
    poll_sources_for(scheduler, pool, ["http://drip.example/feed.xml", *sources], interval=2.0, until=15.0)
    for url in sources:
        times = [at for at, u in pool.started if u == url]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert len(times) >= 7 and max(gaps) <= 2.1, (url, times)
    assert [u for _, u in pool.started].count("http://drip.example/feed.xml") == 1
    assert scheduler.running == 1  # the drip, still running at the end


def test_results_come_back_to_the_main_thread_counted_by_owner_and_bounded_per_call():
    """`absorb` hands each result (or the exception `run` raised, to `failed`) to the main thread, at
    most `limit` at a time; waiting(owner) and running_for(owner) count a job's own work, which is
    how a job keeps its window of links in flight."""
    scheduler, pool = simulated_scheduler(3, 3, lambda w: 1.0)
    absorbed: list = []
    failures: list[BaseException] = []

    def boom() -> None:
        raise ValueError("a bug in a worker")
    scheduler.add(work_for("http://a.example/1", absorbed, owner="job", run=lambda: "one"))
    scheduler.add(work_for("http://a.example/2", absorbed, owner="job", run=lambda: "two"))
    scheduler.add(work_for("http://a.example/3", absorbed, owner="feeds", run=boom, failed=failures.append))
    scheduler.add(work_for("http://a.example/4", absorbed, owner="job"))
    assert scheduler.waiting("job") == 3 and scheduler.waiting() == 4
    scheduler.dispatch()
    assert scheduler.running_for("job") == 2 and scheduler.waiting("job") == 1
    for _ in range(3):
        pool.finish_next()
    assert scheduler.absorb(0, limit=2) == 2
    assert scheduler.absorb(0) == 1
    assert absorbed == [("http://a.example/1", "one"), ("http://a.example/2", "two")]
    assert [str(exc) for exc in failures] == ["a bug in a worker"]
    assert scheduler.running_for("job") == 0 and scheduler.running == 0 and not scheduler.idle()
    assert scheduler.absorb(0) == 0  # nothing finished: returns at once


def test_a_signal_whose_handler_outlasts_the_wait_for_results_does_not_make_it_endless():
    """The daemon's SIGTERM sets the stop, and the main thread sees it once absorb's wait is over. A
    signal that interrupts the wait, and whose handler (or the GIL, on a loaded machine) keeps the main
    thread past the wait's deadline, still ends the wait then: absorb returns with nothing absorbed.
    On CPython 3.11 and 3.12 a queue.SimpleQueue waited on then with no timeout at all, until a result
    came: a daemon with only webhook sources, which has none, never stopped (test_listener_abuse's
    daemon, once in about ten runs of the suite). Here a result comes only when the wait has gone on
    30 s too long."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("Python runs signal handlers in the main thread only")
    timeout = 1.0
    scheduler = Scheduler(1, 1)
    let_go, waiting, returned = threading.Event(), threading.Event(), threading.Event()
    scheduler.add(work_for("http://a.example/1", run=let_go.wait))  # running, its result held back
    scheduler.dispatch()
    handled: list[int] = []

    def slow_handler(signum, _frame) -> None:
        handled.append(signum)
        time.sleep(timeout)  # a whole wait: its deadline passes in here

    def interrupt() -> None:
        # The main thread holds the GIL from waiting.set() until its wait releases it: the signal
        # comes in the wait.
        waiting.wait()
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
        if not returned.wait(timeout + 30):
            let_go.set()  # absorb still waiting: the result it waits for, so the test fails, not hangs

    previous = signal.signal(signal.SIGUSR1, slow_handler)
    sender = threading.Thread(target=interrupt, name="interrupt")
    try:
        sender.start()
        waiting.set()
        absorbed = scheduler.absorb(timeout)
    finally:
        returned.set()
        sender.join()
        signal.signal(signal.SIGUSR1, previous)
    assert handled, "the signal was sent"
    assert absorbed == 0, "absorb waited on past its timeout, until a result came"
    let_go.set()
    assert scheduler.absorb(30) == 1 and scheduler.idle()
    scheduler.close()
