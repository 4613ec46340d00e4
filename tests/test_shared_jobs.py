"""SHARED = True with a two-pass job: several daemon processes, one PostgreSQL, one loopback site. Pass 1
runs on one daemon, pass 2's links are shared out and each fetched once, the job's per-host delay
holds for the group, and a daemon killed with -9 mid-pass-2 leaves its links to the others."""
from __future__ import annotations

import itertools
import signal
import subprocess

import psycopg
import pytest

from tests.conftest import Project, group_runs, machines
from tests.process import stop, wait_for
from tests.shop import HARVEST_FIELDS, item_page

pytestmark = pytest.mark.postgres


def site(server, items: int, delay: float = 0.0) -> None:
    server.route("/robots.txt", body=b"User-agent: *\n", content_type="text/plain")
    for n in range(1, items + 1):
        server.route(f"/item/{n}", content_type="text/html", body=item_page(n), delay=delay)


# Generous: a fetch cut at its deadline is retried only after linkgen's RETRY_BASE (600 s), so the
# test would wait in vain, and a lease that ends while its daemon waits for the CPU hands its links
# to another daemon, fetched twice. Only the kill test needs a lease to end, and shortens it.
PATIENT = dict(SHARED_LEASE=60, TIMEOUT=10, DEADLINE=20)


def group(tmp_path, n: int, pg_url: str, server, items: int, settings: dict | None = None,
          **job) -> list[Project]:
    params = dict(DB_URL=pg_url, SHARED=True, **(settings or PATIENT), CONCURRENCY=4, FLUSH_INTERVAL=1,
                  LINK_JOBS=[{"name": "pages", "template": server.url("/item/{id}"),
                              "values": {"id": {"from": 1, "to": items}}, "fields": HARVEST_FIELDS, **job}])
    return machines(tmp_path, n, **params)


def start(*projects: Project) -> list[subprocess.Popen]:
    """All at once (as machines that boot together), then each waited for."""
    procs = [project.start() for project in projects]
    for project, proc in zip(projects, procs, strict=True):
        wait_for(lambda p=project, q=proc: q.poll() is not None or "started:" in p.log(), "the daemon's start")
        assert proc.poll() is None, proc.stderr.read()
    return procs


def links_done(pg_url: str) -> int:
    with psycopg.connect(pg_url) as con:
        return con.execute("SELECT count(*) FROM parser_links WHERE job = 'pages' AND status = 'done'").fetchone()[0]


def stored(pg_url: str) -> list[str]:
    with psycopg.connect(pg_url) as con:
        try:
            return [r[0] for r in con.execute("SELECT url FROM pages ORDER BY url")]
        except psycopg.errors.UndefinedTable:
            return []


def item_times(server) -> list[tuple[float, str]]:
    return [(t, p) for t, p in list(server.times) if p.startswith("/item/")]


@pytest.mark.parametrize("daemons", [2, 4])
def test_each_link_fetched_once_across_the_group(server, tmp_path, pg_url, daemons):
    items = 80
    site(server, items, delay=0.1)
    projects = group(tmp_path, daemons, pg_url, server, items)
    procs = start(*projects)
    wait_for(lambda: len(stored(pg_url)) == items, "every object stored", 240)
    assert [stop(p) for p in procs] == [0] * daemons
    hits = {p: n for p, n in server.hits.items() if p.startswith("/item/")}
    assert hits == {f"/item/{n}": 1 for n in range(1, items + 1)}
    assert len(stored(pg_url)) == items
    assert sum("pass 1 (template)" in p.log() for p in projects) == 1  # one daemon's turn
    passes = [r for r in group_runs(pg_url) if r["source"] == "pages"]
    assert len({r["daemon"] for r in passes}) >= 2  # the links were shared out: pass 2 ran on two daemons or more
    assert sum(r["new"] for r in passes) == items


def test_the_per_host_delay_holds_for_the_whole_group(server, tmp_path, pg_url):
    items, delay = 12, 0.5
    site(server, items)
    projects = group(tmp_path, 3, pg_url, server, items, delay=delay)
    procs = start(*projects)
    wait_for(lambda: len(stored(pg_url)) == items, "every object stored", 240)
    assert [stop(p) for p in procs] == [0] * 3
    arrivals = sorted(t for t, _ in item_times(server))
    assert len(arrivals) == items
    # Booked one `delay` apart in the database, the requests take (items - 1) * delay at least (5.5 s)
    # from the first booking; three daemons each keeping only their own pace would be done in a third
    # of that (1.5 s). Half of it holds however late a loaded machine sends a request, unless the first
    # one alone is held up for 2.75 s while the rest go on time: no bound between two arrivals, which
    # the CPU's whims decide.
    assert arrivals[-1] - arrivals[0] >= (items - 1) * delay / 2, [round(b - a, 2) for a, b in
                                                                    itertools.pairwise(arrivals)]


def test_links_of_a_daemon_killed_mid_pass_2_are_taken_over_after_the_lease(server, tmp_path, pg_url):
    items = 40
    site(server, items, delay=0.3)
    # The lease ends 12 s after the kill at most; a deadline under half of it, as params.py requires.
    projects = group(tmp_path, 2, pg_url, server, items, settings=dict(SHARED_LEASE=12, TIMEOUT=5, DEADLINE=5.5))
    victim, survivor = start(*projects)
    held: list[str] = []

    def victim_mid_pass_2() -> bool:
        with psycopg.connect(pg_url) as con:
            held[:] = [r[0] for r in con.execute("SELECT url FROM parser_links WHERE lease_owner LIKE %s"
                                                 " AND status = 'pending'", (f"%:{victim.pid}:%",))]
        return len(held) >= 2

    wait_for(victim_mid_pass_2, "the first daemon to hold links", 120)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # Every link done by the group: the survivor takes the victim's over when their lease ends. Not every
    # object stored yet: what the victim staged in its last second (FLUSH_INTERVAL) was marked done and
    # waits in its staging folder, which a loaded machine's later kill often caught.
    wait_for(lambda: links_done(pg_url) == items, "every link done by the group", 240)
    assert stop(survivor) == 0
    projects[0].run("--links-only", "--once", check=True)  # the machine comes back: its staging flushed
    assert len(stored(pg_url)) == items  # nothing lost, nothing doubled
    hits = {p: n for p, n in server.hits.items() if p.startswith("/item/")}
    assert set(hits) == {f"/item/{n}" for n in range(1, items + 1)}
    twice = sorted(p for p, n in hits.items() if n > 1)
    # Only links in flight at the kill are fetched again (the killed daemon never marked them): at
    # most the CONCURRENCY it claims at a time.
    assert len(twice) <= 4, (twice, held)


def test_two_once_runs_at_the_same_moment_share_one_pass_1_and_the_links(server, tmp_path, pg_url):
    items = 30
    site(server, items, delay=0.05)
    projects = group(tmp_path, 2, pg_url, server, items)
    procs = [p.start("--once") for p in projects]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0], [proc.stderr.read() for proc in procs]
    assert sum("pass 1 (template)" in p.log() for p in projects) == 1
    hits = {p: n for p, n in server.hits.items() if p.startswith("/item/")}
    assert hits == {f"/item/{n}": 1 for n in range(1, items + 1)}
    assert len(stored(pg_url)) == items


def test_a_harvest_runs_on_one_daemon_and_its_objects_are_fetched_once(server, tmp_path, pg_url):
    from tests.shop import Shop
    Shop(server, items_per_list=10, lists=3, item_delay=0.1)
    job = {"name": "pages", "harvest": {"root": server.url("/"), "follow": r"/list/", "depth": 6},
           "objects": r"/item/\d+$", "fields": HARVEST_FIELDS}
    params = dict(DB_URL=pg_url, SHARED=True, **PATIENT, CONCURRENCY=4, FLUSH_INTERVAL=1, LINK_JOBS=[job])
    projects = machines(tmp_path, 2, **params)
    procs = start(*projects)
    wait_for(lambda: len(stored(pg_url)) == 30, "the 30 objects stored", 240)
    assert [stop(p) for p in procs] == [0, 0]
    assert sum("pass 1 (harvest run" in p.log() for p in projects) == 1
    listings = {p: n for p, n in server.hits.items() if p.startswith("/list/")}
    assert listings and set(listings.values()) == {1}, listings  # each page harvested once
    objects = {p: n for p, n in server.hits.items() if p.startswith("/item/")}
    assert {p: n for p, n in objects.items() if n != 1} == {}
