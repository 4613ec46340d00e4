"""The retention pass on a large table, and what it costs a flush running beside it.

    .venv/bin/python -m bench.bench_retention [--rows 1000000] [--due 100000] [--no-pg]

Fills an `items` table (the project's schema, made by Database.table) with `rows` entries of about
700 bytes, `due` of them (spread evenly over the ids) published 400 days ago and the rest 10 days ago,
then runs the pass of RETAIN = {"items": "365d"} (parser/retention.run_pass, as the daemon and
`parser-daemon retain` run it) while another process flushes beside it: every 0.2 s 200 new rows through
Database.insert_new (the flush's own load: db/bulk.py), each load timed. Prints the pass's time and rows
deleted, and the flushes' loads beside it: how many, median and longest, against the same loads without
the pass (measured first). SQLite always; PostgreSQL too with PARSER_TEST_PG_URL (a database made for the
bench and dropped after), unless --no-pg.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))

from db.store import Database  # noqa: E402
from parser.core.record import RECORD_FIELDS  # noqa: E402
from parser.retention import run_pass  # noqa: E402
from parser.settings.params import settings_from_dict  # noqa: E402

FIELDS = ("hash", *RECORD_FIELDS)
FLUSH_ROWS, FLUSH_EVERY = 200, 0.2
BODY = "<p>" + "lorem ipsum dolor sit amet " * 20 + "</p>"


def when(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


def entries(start: int, count: int, due_every: int) -> list[list]:
    old, recent = when(400), when(10)
    rows = []
    for n in range(start, start + count):
        link = f"https://news{n % 50}.example.com/{n}"
        published = old if due_every and n % due_every == 0 else recent
        row = {"hash": f"h{n}", "source": f"feed{n % 1000}", "guid": link, "link": link, "title": f"Story {n}",
               "summary": BODY[3:300], "content": BODY, "published": published, "fetched": recent,
               "categories": '["news"]'}
        rows.append([row.get(f) for f in FIELDS])
    return rows


def fill(db_url: str, rows: int, due: int) -> float:
    db = Database(db_url, timeout=30)
    started = time.perf_counter()
    every = rows // due if due else 0
    try:
        for start in range(0, rows, 10_000):
            db.insert_new("items", RECORD_FIELDS, entries(start, min(10_000, rows - start), every), fields=FIELDS)
    finally:
        db.close()
    return time.perf_counter() - started


def flusher(db_url: str, stop_file: Path, out: Path) -> None:
    """The child: a load of FLUSH_ROWS new rows every FLUSH_EVERY s until `stop_file` exists; each load's
    seconds written to `out`."""
    db = Database(db_url, timeout=30)
    took, n = [], 10**9 + os.getpid() * 10**5
    try:
        while not stop_file.exists():
            rows = entries(n, FLUSH_ROWS, 0)  # made before the clock starts
            n += FLUSH_ROWS
            started = time.perf_counter()
            db.insert_new("items", RECORD_FIELDS, rows, fields=FIELDS)
            took.append(time.perf_counter() - started)
            if len(took) == 1:
                out.with_suffix(".ready").touch()  # imported and loaded once: the work may begin
            time.sleep(FLUSH_EVERY)
    finally:
        db.close()
        out.write_text(json.dumps(took))


def flushes_during(db_url: str, tmp: Path, work) -> tuple[object, list[float]]:
    """Run `work()` with a flusher process beside it; return what work returned and the loads' seconds."""
    stop, out = tmp / f"stop-{uuid.uuid4().hex}", tmp / f"took-{uuid.uuid4().hex}.json"
    child = subprocess.Popen([sys.executable, "-m", "bench.bench_retention", "--flusher", db_url, str(stop), str(out)],
                             cwd=ROOT)
    try:
        while not out.with_suffix(".ready").exists() and child.poll() is None:
            time.sleep(0.05)  # its imports and first load (not counted as beside the work)
        result = work()
    finally:
        stop.touch()
        child.wait(timeout=120)
    return result, json.loads(out.read_text())


def side(name: str, db_url: str, tmp: Path, rows: int, due: int) -> None:
    print(f"{name}: filling {rows:,} rows ({due:,} due) ...", flush=True)
    print(f"  filled in {fill(db_url, rows, due):.1f} s", flush=True)
    _, alone = flushes_during(db_url, tmp, lambda: time.sleep(5))
    settings = settings_from_dict({"DB_URL": db_url, "RETAIN": {"items": "365d"}}, tmp / "params.py")
    db = Database(db_url, timeout=30)

    def work():
        started = time.perf_counter()
        done = run_pass(db, settings, time.time())
        return time.perf_counter() - started, sum(d.rows for d in done)
    try:
        (seconds, deleted), beside = flushes_during(db_url, tmp, work)
    finally:
        db.close()
    print(f"  pass: {deleted:,} rows deleted of {rows:,} in {seconds:.1f} s ({deleted / seconds:,.0f} rows/s)")
    for what, took in (("alone", alone[1:]), ("beside the pass", beside[1:])):  # the first: before the work
        figures = f"median {statistics.median(took) * 1000:.0f} ms, longest {max(took) * 1000:.0f} ms" if took else ""
        print(f"  flush loads of {FLUSH_ROWS} rows {what}: {len(took)}, {figures}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--due", type=int, default=100_000)
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    ap.add_argument("--flusher", nargs=3, help=argparse.SUPPRESS)  # flushes_during's child
    args = ap.parse_args()
    if args.flusher:
        return flusher(args.flusher[0], Path(args.flusher[1]), Path(args.flusher[2]))
    print(f"code measured: {ROOT}")
    with tempfile.TemporaryDirectory(prefix="bench-retention-") as name:
        tmp = Path(name)
        side("SQLite", f"sqlite:///{tmp / 'items.db'}", tmp, args.rows, args.due)
        pg = None if args.no_pg else os.environ.get("PARSER_TEST_PG_URL")
        if pg:
            import psycopg
            base = pg.replace("postgresql+psycopg://", "postgresql://")
            database = f"bench_retention_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(base, autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {database}")
            try:
                url = base.rsplit("/", 1)[0] + "/" + database
                side("PostgreSQL", url.replace("postgresql://", "postgresql+psycopg://"), tmp, args.rows, args.due)
            finally:
                with psycopg.connect(base, autocommit=True) as admin:
                    admin.execute(f"DROP DATABASE {database} WITH (FORCE)")
        else:
            print("PostgreSQL: left out (--no-pg, or PARSER_TEST_PG_URL not set)")


if __name__ == "__main__":
    main()
