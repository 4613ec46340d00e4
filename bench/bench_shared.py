"""SHARED = True: several daemons, one PostgreSQL (parser/group/shared.py, db/coord.py).

    PARSER_TEST_PG_URL=postgresql://postgres@127.0.0.1:5432/test .venv/bin/python -m bench.bench_shared \
        [--sources 600] [--daemons 1,2,4] [--table-sizes 100000,1000000]

1. Sources polled per minute with 1, 2 and 4 daemon processes (each its own folder, CONCURRENCY 32)
   against loopback feeds that each take 500 ms to answer: latency-bound, so the ratio to one
   daemon is the figure (close to the number of daemons is linear).
2. The database's share: the time one claim of 32 sources plus their write-back takes, per source
   polled, against the time a poll takes a daemon (500 ms / 32 in flight).
3. The claim query's cost with 100,000 and 1,000,000 generated sources in the table (a tenth of them
   due, their due times spread over an hour), and the table's size.
4. Pass 2's claim and mark of 32 links with 1,000,000 links of one job in the table, half of them done
   (the done ones first, as pass 2 leaves them), and the table's size.
5. PER_HOST for the group: what a fetch costs extra (taking one of its host's slots and giving it
   back, two statements), with 1,000 hosts' slots in the table, against a poll's 500 ms.
Each part runs in a database of its own, made on the server of PARSER_TEST_PG_URL and dropped after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from db.coord import Coordinator  # noqa: E402
from db.coord_jobs import JobTables  # noqa: E402
from tests.feeds import numbered_items, rss  # noqa: E402
from tests.server import LoopbackServer  # noqa: E402

LATENCY = 0.5
CONCURRENCY = 32


@contextmanager
def fresh_database(base: str):
    conninfo = base.replace("postgresql+psycopg://", "postgresql://")
    admin = psycopg.connect(conninfo, autocommit=True)
    name = f"parser_bench_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{conninfo.rpartition('/')[0]}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def polls_per_minute(base: str, daemons: int, sources: int) -> tuple[float, float]:
    """(sources polled per minute by the group, seconds from the first request to the last)."""
    server = LoopbackServer().start()
    body = rss(numbered_items(1, 3))
    for i in range(sources):
        server.route(f"/f{i}.xml", body=body, delay=LATENCY)
    procs = []
    with fresh_database(base) as url, tempfile.TemporaryDirectory() as tmp:
        Coordinator(url).create_schema()  # made before the daemons start, as a running group has it
        try:
            params = (f"DB_URL = {url!r}\nSHARED = True\nCONCURRENCY = {CONCURRENCY}\nPER_HOST = 1000\n"
                      "POLL_INTERVAL = 3600\nFLUSH_INTERVAL = 5\n"
                      f"SOURCES = [{{'name': f'f{{i}}', 'url': {server.url('/f')!r} + f'{{i}}.xml'}}"
                      f" for i in range({sources})]\n")
            for n in range(daemons):
                folder = Path(tmp) / f"machine{n}"
                folder.mkdir()
                (folder / "params.py").write_text(params, encoding="utf-8")
                procs.append(subprocess.Popen([sys.executable, str(ROOT / "run_daemon.py"), "--params",
                                               str(folder / "params.py")], cwd=folder, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)}))
            deadline = time.monotonic() + 300
            while len(server.times) < sources and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(LATENCY + 0.2)
            times = [t for t, _ in server.times]
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=60)
            server.stop()
    polled = len(set(p for _, p in server.times))
    span = max(times) - min(times) + LATENCY
    return polled / span * 60, span


def claim_cost(base: str, table_size: int, rounds: int = 100, batch: int = CONCURRENCY) -> tuple[float, float, str]:
    """(ms per claim of `batch`, ms per write-back of `batch`, table size) with `table_size` sources,
    a tenth of them due (claimed ones are written back an hour ahead, so every round claims)."""
    with fresh_database(base) as url:
        coord = Coordinator(url)
        coord.create_schema()
        coord.execute("""
            INSERT INTO parser_sources (name, url, interval_s, due_at, state)
            SELECT 's' || g, 'http://feeds.example/' || g || '.xml', 3600,
                   now() + make_interval(secs => (g %% 10) * 360 - 1),
                   jsonb_build_object('etag', '"v' || g || '"', 'failures', 0, 'last_outcome', 'new 0')
            FROM generate_series(1, %s) g""", (table_size,))
        coord.execute("VACUUM ANALYZE parser_sources")
        claims, finishes = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            claimed = coord.claim_sources(batch, lease=300)
            claims.append(time.perf_counter() - started)
            started = time.perf_counter()
            coord.finish_sources([(c.name, c.state, 3600.0, 0.0) for c in claimed])
            finishes.append(time.perf_counter() - started)
        size = coord.execute("SELECT pg_size_pretty(pg_total_relation_size('parser_sources'))")[0][0]
        coord.close()
        return statistics.median(claims) * 1000, statistics.median(finishes) * 1000, size


def link_claim_cost(base: str, links: int, rounds: int = 100, batch: int = CONCURRENCY) -> tuple[float, float, str]:
    """(ms per claim of `batch` links, ms per mark of them, table size) with `links` links, half done."""
    with fresh_database(base) as url:
        coord = Coordinator(url)
        coord.create_schema()
        coord.execute("""
            INSERT INTO parser_links (job, url, depth, origin, status, attempts)
            SELECT 'shop', 'https://shop.example/item/' || g, NULL, 'template',
                   CASE WHEN g <= %s THEN 'done' ELSE 'pending' END, CASE WHEN g <= %s THEN 1 ELSE 0 END
            FROM generate_series(1, %s) g""", (links // 2, links // 2, links))
        coord.execute("VACUUM ANALYZE parser_links")
        tables = JobTables(coord)
        claims, marks = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            claimed = tables.claim_links("shop", batch, lease=300)
            claims.append(time.perf_counter() - started)
            started = time.perf_counter()
            tables.mark_links([(i, "done", 1, "", 0.0) for i, _ in claimed])
            marks.append(time.perf_counter() - started)
        size = coord.execute("SELECT pg_size_pretty(pg_total_relation_size('parser_links'))")[0][0]
        coord.close()
        return statistics.median(claims) * 1000, statistics.median(marks) * 1000, size


def host_slot_cost(base: str, hosts: int = 1000, rounds: int = 2000) -> tuple[float, float]:
    """Median ms of take_host_slot and free_host_slot (PER_HOST 2), cycling over `hosts` hosts."""
    with fresh_database(base) as url:
        coord = Coordinator(url)
        coord.create_schema()
        for h in range(hosts):  # the hosts' rows made (a first fetch's one extra INSERT)
            coord.free_host_slot(f"h{h}:https", coord.take_host_slot(f"h{h}:https", 2, 60))
        takes, frees = [], []
        for i in range(rounds):
            host = f"h{i % hosts}:https"
            started = time.perf_counter()
            slot = coord.take_host_slot(host, 2, 60)
            taken = time.perf_counter()
            coord.free_host_slot(host, slot)
            takes.append(taken - started)
            frees.append(time.perf_counter() - taken)
        coord.close()
    return statistics.median(takes) * 1000, statistics.median(frees) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=600)
    ap.add_argument("--daemons", default="1,2,4")
    ap.add_argument("--table-sizes", default="100000,1000000")
    ap.add_argument("--links", type=int, default=1_000_000)
    ap.add_argument("--only-host-slots", action="store_true", help="part 5 alone")
    args = ap.parse_args()
    base = os.environ.get("PARSER_TEST_PG_URL") or os.environ.get("PARSER_BENCH_PG_URL")
    if not base:
        print("skipped: set PARSER_TEST_PG_URL to a PostgreSQL server (e.g. postgresql://postgres@127.0.0.1:5432/test)")
        return
    print(f"code measured: {ROOT}")
    if args.only_host_slots:
        return host_slots(base)
    print(f"\n1. {args.sources} loopback feeds, {LATENCY * 1000:.0f} ms each, CONCURRENCY {CONCURRENCY} per daemon")
    print(f"{'daemons':>7}  {'polls/min':>10}  {'seconds':>7}  {'vs 1 daemon':>11}")
    one = None
    for n in (int(x) for x in args.daemons.split(",")):
        rate, span = polls_per_minute(base, n, args.sources)
        one = one or rate
        print(f"{n:>7}  {rate:>10.0f}  {span:>7.1f}  {rate / one:>10.2f}x", flush=True)

    print(f"\n2-3. claim and write-back of {CONCURRENCY} sources (median of 100), a tenth of the table due")
    print(f"{'sources':>9}  {'claim ms':>8}  {'write-back ms':>13}  {'ms per source':>13}  {'db share':>8}  table")
    poll_cost = LATENCY / CONCURRENCY * 1000  # ms of a daemon's time per source polled
    for size in (int(x) for x in args.table_sizes.split(",")):
        claim_ms, finish_ms, table = claim_cost(base, size)
        per_source = (claim_ms + finish_ms) / CONCURRENCY
        print(f"{size:>9}  {claim_ms:>8.2f}  {finish_ms:>13.2f}  {per_source:>13.3f}  "
              f"{per_source / poll_cost:>7.1%}  {table}", flush=True)

    if args.links:
        claim_ms, mark_ms, table = link_claim_cost(base, args.links)
        print(f"\n4. pass 2 with {args.links:,} links of one job, half done: claim of {CONCURRENCY} links "
              f"{claim_ms:.2f} ms, their marks {mark_ms:.2f} ms ({(claim_ms + mark_ms) / CONCURRENCY:.3f} ms a link); "
              f"table {table}", flush=True)
    host_slots(base)


def host_slots(base: str) -> None:
    take_ms, free_ms = host_slot_cost(base)
    print(f"\n5. PER_HOST for the group, per fetch (median of 2000, 1,000 hosts): take a slot {take_ms:.2f} ms, "
          f"give it back {free_ms:.2f} ms; {(take_ms + free_ms) / (LATENCY * 1000):.2%} of a 500 ms poll", flush=True)


if __name__ == "__main__":
    main()
