"""Full-text search (SEARCH): a query over a large items table, and what the index costs a flush.

    .venv/bin/python -m bench.bench_search [--rows 200000] [--flushes 5] [--no-pg]

Makes `rows` records of about 4.5 KB (bench/bench_flush.py's, with a title of 8 and a summary of 40 words
drawn from 50,000 made-up words by Zipf's law, as a language uses its words, and a language from en, de,
fr, es and none), stages them as the daemon does, then, in one run, for SQLite and for PostgreSQL:
- the first load: Sink.flush of all of them into a fresh table with the index (SEARCH = True) and
  without it (SEARCH = False), each in a process of its own (bench_flush's ours());
- a flush of 1,000 new rows into each of those two full tables, `--flushes` times, with and without
  alternating (the daemon's steady state: FLUSH_INTERVAL brings hundreds of rows, not millions);
- queries on the indexed table through db/search_index.search (the `search` command's path, the 20 best):
  a rare word, a word of middling use, one of the commonest, two words, a phrase; best of 3 each.
Prints seconds and with/without ratios; the goal (issue "a store that lives for years"): a flush with the
index within 15 % of one without. PostgreSQL: PARSER_TEST_PG_URL (databases made and dropped here).
"""
from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))

from bench.bench_flush import flush_folder  # noqa: E402
from bench.bench_flush import records as flush_records  # noqa: E402
from db.search_index import Query, search  # noqa: E402
from db.store import Database  # noqa: E402
from parser.core.record import RECORD_FIELDS  # noqa: E402
from parser.pipeline.staging import StagingFile  # noqa: E402

COLUMNS = ("hash", *RECORD_FIELDS)
GOAL = 1.15
VOCABULARY = 50_000
LANGUAGES = ("en", "de-DE", "fr", "es", None)
STEADY_ROWS = 1_000
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ber", "dan", "gel", "hor", "lin", "mar", "pol", "sten",
             "tur", "wen", "ach", "ist")


def words(seed: int = 4) -> tuple[list[str], list[float]]:
    """VOCABULARY made-up words (unique) and their cumulative Zipf weights, the commonest first."""
    rng = random.Random(seed)
    made: dict[str, None] = {}
    while len(made) < VOCABULARY:
        made["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(made), list(itertools.accumulate(1 / rank for rank in range(1, VOCABULARY + 1)))


def records(count: int, start: int = 0) -> Iterator[dict]:
    """bench_flush's records (a 4 KB HTML body), numbered from `start`, with text a search has to sift."""
    vocabulary, weights = words()
    rng = random.Random(start)
    for n, record in enumerate(flush_records(count, seed=20 + start), start):
        link = f"https://news{n % 50}.example.com/2026/11/{n}/story"
        drawn = rng.choices(vocabulary, cum_weights=weights, k=48)
        yield {**record, "hash": f"{n:056x}", "guid": link, "link": link, "title": " ".join(drawn[:8]).capitalize(),
               "summary": " ".join(drawn[8:]) + ".", "language": LANGUAGES[n % len(LANGUAGES)]}


def stage(folder: Path, count: int, start: int = 0) -> Path:
    staging = StagingFile(folder / "staging.csv", COLUMNS)
    batch: list[dict] = []
    for record in records(count, start):
        batch.append(record)
        if len(batch) == 1000:
            staging.append(batch)
            batch = []
    staging.append(batch)
    return staging.path


def flush(staged: Path, db_url: str, search: bool) -> float:
    """Sink.flush of a copy of `staged` into `db_url`, in a process of its own; the seconds it took."""
    folder = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        shutil.copy(staged, folder / "staging.csv")
        child = subprocess.run([sys.executable, "-m", "bench.bench_search", "--flush", str(folder), db_url,
                                "on" if search else "off"], cwd=ROOT, capture_output=True, text=True, check=True)
        return float(child.stdout.split()[-1])
    finally:
        shutil.rmtree(folder)


def queries() -> list[tuple[str, str]]:
    vocabulary, _weights = words()
    return [("a rare word (rank 20,000)", vocabulary[20_000]), ("a middling word (rank 300)", vocabulary[300]),
            ("a common word (rank 3)", vocabulary[3]), ("two words (ranks 50, 400)",
                                                        f"{vocabulary[50]} {vocabulary[400]}"),
            ("a phrase (ranks 1, 2)", f'"{vocabulary[1]} {vocabulary[2]}"')]


def query_times(db_url: str) -> list[tuple[str, float, int]]:
    db = Database(db_url)
    timed = []
    try:
        for name, text in queries():
            best, found = float("inf"), 0
            for _ in range(3):
                with db.engine.connect() as conn:
                    started = time.perf_counter()
                    found = len(search(conn, Query(text)))
                    best = min(best, time.perf_counter() - started)
            timed.append((name, best, found))
    finally:
        db.close()
    return timed


def side(name: str, urls: tuple[str, str], staged: Path, steady: Path, flushes: int) -> None:
    """One database: `urls` (with the index, without), empty."""
    print(name)
    on, off = flush(staged, urls[0], True), flush(staged, urls[1], False)
    rows = sum(1 for _ in staged.open(encoding="utf-8")) - 1
    print(f"  first load of {rows:,} rows   with the index {on:7.2f} s   without {off:7.2f} s   {on / off:4.2f}x")
    ons, offs = [], []
    for n in range(flushes):  # alternating, so that the machine's load weighs on both alike
        part = steady.parent / f"part{n}.csv"
        ons.append(flush(part, urls[0], True))
        offs.append(flush(part, urls[1], False))
    on, off = statistics.median(ons), statistics.median(offs)
    print(f"  a flush of {STEADY_ROWS:,} rows into them, median of {flushes}: with {on:6.3f} s   without {off:6.3f} s"
          f"   {on / off:4.2f}x  (goal {GOAL}x)")
    for query, seconds, found in query_times(urls[0]):
        print(f"  query: {query:<28} {seconds * 1000:8.1f} ms  ({found} shown)")


def postgresql_urls(base: str) -> tuple[list[str], tuple[str, str]]:
    import psycopg  # imported on first use: only the PostgreSQL half needs it
    names = [f"bench_search_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    with psycopg.connect(base, autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}"')
    prefix = base.rpartition("/")[0].replace("postgresql://", "postgresql+psycopg://")
    return names, (f"{prefix}/{names[0]}", f"{prefix}/{names[1]}")


def drop_databases(base: str, names: list[str]) -> None:
    import psycopg  # imported on first use: only the PostgreSQL half needs it
    with psycopg.connect(base, autocommit=True) as admin:
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows in the table (the goal is set for 1,000,000)")
    ap.add_argument("--flushes", type=int, default=5, help="flushes of 1,000 rows into the full table, each way")
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    ap.add_argument("--flush", nargs=3, metavar=("FOLDER", "DB_URL", "on|off"), help=argparse.SUPPRESS)  # a child
    args = ap.parse_args()
    if args.flush:
        return flush_folder(Path(args.flush[0]), args.flush[1], args.flush[2] == "on")
    pg = None if args.no_pg else os.environ.get("PARSER_TEST_PG_URL", "").replace("postgresql+psycopg://",
                                                                                  "postgresql://") or None
    print(f"code measured: {ROOT}")
    with tempfile.TemporaryDirectory(prefix="bench-search-") as name:
        tmp = Path(name)
        started = time.perf_counter()
        staged = stage(tmp / "staged", args.rows)
        for n in range(args.flushes):
            stage(tmp / "steady" / f"{n}", STEADY_ROWS, start=args.rows + n * STEADY_ROWS).rename(
                tmp / "steady" / f"part{n}.csv")
        print(f"staged {args.rows:,} rows ({staged.stat().st_size / args.rows:,.0f} bytes each) and {args.flushes} "
              f"x {STEADY_ROWS:,} in {time.perf_counter() - started:.1f} s")
        side("SQLite", (f"sqlite:///{tmp / 'on.db'}", f"sqlite:///{tmp / 'off.db'}"), staged,
             tmp / "steady" / "part0.csv", args.flushes)
        if pg:
            names, urls = postgresql_urls(pg)
            try:
                side("PostgreSQL", urls, staged, tmp / "steady" / "part0.csv", args.flushes)
            finally:
                drop_databases(pg, names)
        else:
            print("PostgreSQL: left out (--no-pg, or PARSER_TEST_PG_URL not set)")


if __name__ == "__main__":
    main()
