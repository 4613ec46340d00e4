"""SHARED = True: several daemon processes, each in its own folder (its own machine), one PostgreSQL.
The loopback server counts the polls: each source at most once per interval across the group, every
item stored once, and a daemon killed with -9 has its sources taken over when its leases end."""
from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time
from collections import defaultdict

import psycopg
import pytest

from tests.conftest import Project, daemon_name, group_runs, machines
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for

INTERVAL = 2.0
FEED_DELAY = 0.3  # seconds each answer takes: a poll is in flight long enough to be killed in


def group(tmp_path, n: int, pg_url: str, server, sources: int, **extra) -> list[Project]:
    """n machines with the same params.py, each in its own folder (its own staging)."""
    params = dict(DB_URL=pg_url, SHARED=True, SHARED_LEASE=3, TIMEOUT=1, DEADLINE=1.2, CONCURRENCY=3,
                  FLUSH_INTERVAL=1, POLL_INTERVAL=INTERVAL,
                  SOURCES=[{"name": f"f{i}", "url": server.url(f"/f{i}.xml")} for i in range(sources)])
    params.update(extra)
    return machines(tmp_path, n, **params)


def publish(server, sources: int, items: int) -> None:
    for i in range(sources):
        server.route(f"/f{i}.xml", body=rss(numbered_items(1, items, host=f"f{i}.example")), delay=FEED_DELAY)


def start(project: Project) -> subprocess.Popen:
    before = project.log().count("started:")
    proc = project.start()
    wait_for(lambda: proc.poll() is not None or project.log().count("started:") > before, "the daemon's start")
    assert proc.poll() is None, proc.stderr.read()
    return proc


def poll_times(server) -> dict[str, list[float]]:
    times = defaultdict(list)
    for at, path in list(server.times):
        times[path].append(at)
    return times


def gaps_below(times: dict[str, list[float]], interval: float) -> tuple[list, int]:
    """([(source, gap)] for two polls of one source closer than the interval, how many gaps in all)."""
    gaps = [(path, b - a) for path, ts in times.items() for a, b in itertools.pairwise(ts)]
    return [(p, round(g, 2)) for p, g in gaps if g < interval - 0.05], len(gaps)


def stored_links(pg_url: str) -> list[str]:
    with psycopg.connect(pg_url) as con:
        if con.execute("SELECT to_regclass('items')").fetchone()[0] is None:
            return []  # before the group's first flush
        return [r[0] for r in con.execute("SELECT link FROM items ORDER BY link")]


def expected_links(sources: int, items: int) -> list[str]:
    return sorted(f"http://f{i}.example/item/{n}" for i in range(sources) for n in range(1, items + 1))


def polled_after(server, sources: int, moment: float) -> bool:
    times = poll_times(server)
    return all(any(t > moment + FEED_DELAY for t in times[f"/f{i}.xml"]) for i in range(sources))


@pytest.mark.postgres
@pytest.mark.parametrize("daemons", [2, 4])
def test_each_source_polled_once_per_interval_across_the_group_and_each_item_stored_once(
        server, tmp_path, pg_url, daemons):
    sources = 12
    publish(server, sources, 3)
    projects = group(tmp_path, daemons, pg_url, server, sources)
    procs = [start(p) for p in projects]
    started = time.monotonic()
    # Every source polled once by the group (stored, not only asked for), then new items while it runs.
    wait_for(lambda: stored_links(pg_url) == expected_links(sources, 3), "the first items stored", 120)
    publish(server, sources, 5)
    changed = time.monotonic()
    wait_for(lambda: polled_after(server, sources, changed), "a poll of every source after the change", 120)
    # Stored, not only asked for: a poll still in flight at the stop is abandoned.
    wait_for(lambda: stored_links(pg_url) == expected_links(sources, 5), "the new items stored", 120)
    time.sleep(max(0.0, 8 - (time.monotonic() - started)))
    assert [stop(p) for p in procs] == [0] * daemons
    ended = time.monotonic()
    times = poll_times(server)
    short, gaps = gaps_below(times, INTERVAL)
    assert not short, f"{len(short)} of {gaps} polls came sooner than the interval after the previous one: {short}"
    for path, ts in times.items():  # one daemon's worth of polls, not one per daemon
        assert len(ts) <= (ended - ts[0]) / INTERVAL + 1, (path, len(ts))
    assert stored_links(pg_url) == expected_links(sources, 5)
    # The runs table names the daemon of each poll, "host:pid": two of the group's daemons or more polled.
    named = {r["daemon"] for r in group_runs(pg_url)}
    assert len(named) >= 2, f"the polls were not shared: one daemon did them all ({named})"
    assert named <= {daemon_name(proc) for proc in procs}, named


@pytest.mark.postgres
def test_sources_of_a_daemon_killed_mid_cycle_are_taken_over_after_the_lease(server, tmp_path, pg_url):
    sources, lease = 9, 3.0
    publish(server, sources, 3)
    projects = group(tmp_path, 2, pg_url, server, sources, SHARED_LEASE=lease)
    procs = [start(p) for p in projects]
    victim, survivor = procs
    held: dict[str, float] = {}  # source -> when (test clock) its lease ends

    def victim_mid_poll() -> bool:  # it holds leases: requests of its own are in flight
        asked = time.monotonic()  # before the query's now(): a loaded machine's slow answer moves no lease later
        with psycopg.connect(pg_url) as con:
            rows = con.execute("SELECT name, EXTRACT(EPOCH FROM lease_until - now()) FROM parser_sources"
                               " WHERE lease_owner LIKE %s", (f"%:{victim.pid}:%",)).fetchall()
        held.update({name: asked + float(left) for name, left in rows})
        return bool(held)

    wait_for(victim_mid_poll, "the first daemon to hold leases", 120)
    victim.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    victim.wait()
    publish(server, sources, 4)  # published after the kill: only the survivor can store it
    wait_for(lambda: polled_after(server, sources, killed + lease), "every source polled after the lease", 120)
    newest = {f"http://f{i}.example/item/4" for i in range(sources)}
    wait_for(lambda: newest <= set(stored_links(pg_url)), "the items published after the kill stored", 120)
    times = poll_times(server)
    for name, lease_ends in held.items():  # taken over, but not before the lease ended
        after = [t for t in times[f"/{name}.xml"] if t > killed + 0.05]
        assert after and after[0] >= lease_ends - 0.1, (name, after[0] - lease_ends)
    assert stop(survivor) == 0
    short, gaps = gaps_below(times, INTERVAL)
    assert not short, f"{len(short)} of {gaps} polls came sooner than the interval after the previous one: {short}"
    # The killed machine comes back: what it had staged and not flushed is flushed at its start.
    projects[0].run("--once", check=True)
    assert stored_links(pg_url) == expected_links(sources, 4)


def test_shared_needs_postgresql_and_says_so(project):
    project.write_params(SHARED=True, SOURCES=[])
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "SHARED" in proc.stderr and "PostgreSQL" in proc.stderr
    assert not project.staging.exists()  # refused before anything is made


def test_a_lease_shorter_than_a_poll_is_refused(project):
    project.write_params(DB_URL="postgresql://postgres@127.0.0.1:9/x", SHARED=True, SHARED_LEASE=100, DEADLINE=60)
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "SHARED_LEASE: must be more than twice DEADLINE (60 s)" in proc.stderr


@pytest.mark.postgres
def test_poll_on_one_machine_polls_the_groups_source_there(server, tmp_path, pg_url):
    publish(server, 2, 3)
    [project] = group(tmp_path, 1, pg_url, server, 2, POLL_INTERVAL=3600)
    proc = start(project)
    try:
        wait_for(lambda: stored_links(pg_url) == expected_links(2, 3), "the first polls' items stored")
        done = project.run("poll", "f0", "--wait", "60", timeout=90)  # (one in flight would be the answer)
        assert done.returncode == 0, done.stdout + done.stderr
        assert server.hits["/f0.xml"] == 2 and server.hits["/f1.xml"] == 1
    finally:
        assert stop(proc) == 0
    with psycopg.connect(pg_url) as con:
        due_in = con.execute("SELECT EXTRACT(EPOCH FROM due_at - now()) FROM parser_sources WHERE name = 'f0'")
        assert float(due_in.fetchone()[0]) > 3000  # the group's row: next poll an interval after this one


@pytest.mark.postgres
def test_a_daemon_rides_out_lost_database_connections(server, tmp_path, pg_url):
    publish(server, 4, 3)
    [project] = group(tmp_path, 1, pg_url, server, 4)
    proc = start(project)
    database = pg_url.rpartition("/")[2]
    try:
        for _ in range(3):  # the database restarts (as far as this daemon can tell): its connections cut
            time.sleep(1.5)
            with psycopg.connect(pg_url, autocommit=True) as con:
                con.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE datname = %s AND pid <> pg_backend_pid()", (database,))
        cut = time.monotonic()
        wait_for(lambda: polled_after(server, 4, cut), "polls after the last cut", 120)
        assert proc.poll() is None
    finally:
        assert stop(proc) == 0
    times = poll_times(server)
    short, gaps = gaps_below(times, INTERVAL)
    assert not short, f"{len(short)} of {gaps} polls came sooner than the interval after the previous one: {short}"


@pytest.mark.postgres
def test_status_on_any_machine_shows_the_groups_sources(server, tmp_path, pg_url):
    publish(server, 6, 3)
    projects = group(tmp_path, 2, pg_url, server, 6, POLL_INTERVAL=3600)
    procs = [start(p) for p in projects]
    try:
        wait_for(lambda: all(server.hits.get(f"/f{i}.xml") == 1 for i in range(6)), "a poll of every source")
        time.sleep(0.5)  # the last write-back
    finally:
        assert [stop(p) for p in procs] == [0, 0]
    for project in projects:  # each machine polled some; each shows all six as polled
        shown = json.loads(project.run("status", "--json", check=True).stdout)
        assert {s["name"]: s["last_outcome"] for s in shown["sources"]} == {f"f{i}": "new 3" for i in range(6)}
        assert all(s["next_poll"] for s in shown["sources"])


# Issue 27 case 6: SHARED = True with one machine on an older params.py. Its file lacking a source
# is not the group's decision: the daemons whose file lists it keep polling it, and every daemon's
# log says the files disagree.
FILES_INTERVAL = 1.0


def machine(tmp_path, name: str, pg_url: str, server, sources: list[str]) -> Project:
    project = Project(tmp_path / name)
    project.folder.mkdir()
    project.write_params(DB_URL=pg_url, SHARED=True, SHARED_LEASE=3, TIMEOUT=1, DEADLINE=1.2, CONCURRENCY=3,
                         FLUSH_INTERVAL=1, POLL_INTERVAL=FILES_INTERVAL,
                         SOURCES=[{"name": s, "url": server.url(f"/{s}.xml")} for s in sources])
    return project


@pytest.mark.postgres
def test_a_daemon_on_an_older_params_py_does_not_stop_a_source_the_others_list(server, tmp_path, pg_url):
    for name in ("f0", "f1"):
        server.route(f"/{name}.xml", body=rss(numbered_items(1, 2, host=f"{name}.example")))
    new = machine(tmp_path, "new", pg_url, server, ["f0", "f1"])
    old = machine(tmp_path, "old", pg_url, server, ["f0"])  # restarted before the deploy reached it
    procs = []
    try:
        procs.append(start(new))
        wait_for(lambda: "/f1.xml" in poll_times(server), "the first poll of f1")
        procs.append(start(old))
        joined = time.monotonic()

        def polls_of_f1_since() -> int:
            return sum(1 for t in poll_times(server)["/f1.xml"] if t > joined)

        # Before the fix the older file disabled f1 in the group's table: never polled again.
        wait_for(lambda: polls_of_f1_since() >= 3, "f1 polled by the group after the older daemon joined", 20)
        # errors.log's lines are written first, then parser.log's (parser/group/shared.py): both waited for
        wait_for(lambda: "f1" in old.log("errors.log") and "files disagree" in old.log(),
                 "the older daemon's errors.log naming f1", 10)
        assert "other running daemons' params.py enable 1 source (f1)" in old.log("errors.log")
        assert "the running daemons' params.py files disagree" in old.log()
        # The daemon whose file has it says so too, in its own log, once it notices the newcomer.
        wait_for(lambda: "this params.py enables 1 source (f1)" in new.log("errors.log")
                 and "files disagree" in new.log(), "the other daemon's errors.log naming f1", 10)
    finally:
        assert [stop(p) for p in procs] == [0] * len(procs)


@pytest.mark.postgres
def test_a_source_no_running_daemon_lists_is_disabled(server, tmp_path, pg_url):
    import psycopg
    for name in ("f0", "f1"):
        server.route(f"/{name}.xml", body=rss(numbered_items(1, 2, host=f"{name}.example")))
    first = machine(tmp_path, "m", pg_url, server, ["f0", "f1"])
    assert first.run("--once").returncode == 0
    # f1 removed everywhere
    first.write_params(DB_URL=pg_url, SHARED=True, SHARED_LEASE=3, TIMEOUT=1, DEADLINE=1.2,
                       POLL_INTERVAL=FILES_INTERVAL, SOURCES=[{"name": "f0", "url": server.url("/f0.xml")}])
    assert first.run("--once").returncode == 0
    with psycopg.connect(pg_url) as con:
        rows = dict(con.execute("SELECT name, enabled FROM parser_sources").fetchall())
    assert rows == {"f0": True, "f1": False}
    assert "disagree" not in first.log()  # alone: nothing to disagree with
