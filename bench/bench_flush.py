"""Loading staged rows into the database: the project's flush against the drivers' own bulk paths.

    .venv/bin/python -m bench.bench_flush [--rows 200000] [--no-pg] [--no-restart]

Makes `rows` records of about 4 KB (a feed entry's fields: a link, a title, a summary, HTML content
with attributes, so with quotes) and stages them as the daemon does (StagingFile.append, 1,000 a
write). Then, in one run, the same rows:
- ours: Sink.flush of that staging folder (reading the staging CSV included) into a fresh SQLite file,
  then into a fresh PostgreSQL table, each in a process of its own (as at a restart);
- raw sqlite3: the rows, read beforehand (not timed), by one executemany of INSERT ... ON CONFLICT
  (hash) DO NOTHING into the same schema (made by the project: its indexes), in one transaction, with
  `stored` set as ours sets it (the time of each row's statement, db/upsert.py's NOW);
- raw psycopg: COPY of the rows, read beforehand, into the same schema, in one transaction, `stored`
  given as one more cell (the time the load began).
Prints seconds, rows/s and ours/raw for each database, and how long reading the staging CSV alone
takes (read_parts, as the flush reads it, each part let go: its share of ours into SQLite, where ours is
also set against raw plus that reading, the floor of any flush that reads the file in Python; into
PostgreSQL the server parses the file itself, db/csv_load.py, and read_parts only reads a batch the
server refused). Then a restart
over the staged rows: `run_daemon.py --once` in a project folder with the rows waiting in staging/ and
no sources, into SQLite (bench/bench_restart.py's restart_once). PostgreSQL: PARSER_TEST_PG_URL (a database is made for
the bench and dropped after); without it, or with --no-pg, only SQLite.
Goals (issue 20): ours at most 1.3x raw for both databases; the restart within 15 s.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))

from bench.bench_restart import restart_once  # noqa: E402
from db.store import Database  # noqa: E402
from db.upsert import NOW  # noqa: E402
from parser.core.record import RECORD_FIELDS  # noqa: E402
from parser.pipeline.batch_read import read_parts  # noqa: E402
from parser.pipeline.sink import Sink, SinkFiles, UniqueRule  # noqa: E402
from parser.pipeline.staging import StagingFile  # noqa: E402

COLUMNS = ("hash", *RECORD_FIELDS)
GOAL_RATIO = 1.3
GOAL_RESTART = 15.0
WORDS = ("the of and to in a is that for it as was with be by on not this are or from at which but have an they "
         "you were their one all we can her has there been if more when will would who so no feed server release "
         "update news story report market city council data open source python database élan naïve").split()


def records(count: int, seed: int = 20) -> Iterator[dict]:
    """Feed entries of about 4 KB each: 11 paragraphs of HTML with a class and a link in each."""
    rng = random.Random(seed)
    pool = [f'<p class="body">{" ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 80)))} '
            f'<a href="https://example.com/{rng.choice(WORDS)}">{rng.choice(WORDS)}</a>.</p>' for _ in range(400)]
    for n in range(count):
        link = f"https://news{n % 50}.example.com/2026/11/{n}/a-story-about-{rng.choice(WORDS)}"
        yield {"hash": hashlib.sha224(link.encode()).hexdigest(), "source": f"feed{n % 1000}", "guid": link,
               "link": link, "title": f"Story {n}: {' '.join(pool[n % 400].split()[2:9])}", "author": "A. Writer",
               "published": "2026-11-01T12:00:00Z", "summary": pool[(n * 3) % 400][16:300],
               "content": "".join(pool[(n * 7 + k * 13) % 400] for k in range(11)), "fetched": "2026-11-01T12:00:05Z"}


def stage(folder: Path, count: int) -> Path:
    staging = StagingFile(folder / "staging.csv", COLUMNS)
    batch: list[dict] = []
    for record in records(count):
        batch.append(record)
        if len(batch) == 1000:
            staging.append(batch)
            batch = []
    staging.append(batch)
    return staging.path


def ours(staged: Path, db_url: str) -> tuple[float, float]:
    """Sink.flush of a copy of the staged file, in a process of its own (as a restart flushes: a fresh
    interpreter, not one holding the rows the raw loads need); the seconds the flush took, and its CPU seconds."""
    folder = Path(tempfile.mkdtemp(prefix="bench-flush-"))
    try:
        shutil.copy(staged, folder / "staging.csv")
        child = subprocess.run([sys.executable, "-m", "bench.bench_flush", "--flush", str(folder), db_url],
                               cwd=ROOT, capture_output=True, text=True, check=True)
        cpu, seconds = child.stdout.split()[-2:]
        return float(seconds), float(cpu)
    finally:
        shutil.rmtree(folder)


def flush_folder(folder: Path, db_url: str, search: bool = False) -> None:
    """The child's side of ours() (and of bench_search's flush(), with or without the index): print the CPU
    seconds and then the seconds Sink.flush took (every row must be new)."""
    sink = Sink(table="items", columns=RECORD_FIELDS, unique=UniqueRule("auto", "hashfile", "sha224"),
                files=SinkFiles(folder))
    db = Database(db_url, timeout=60, search=search)
    pending = sink.pending_rows()
    started, cpu = time.perf_counter(), time.process_time()
    written = sink.flush(db).written
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert written == pending, (written, pending)
    sink.close()
    db.close()
    print(cpu, seconds)


def make_table(db_url: str) -> None:
    """The table as the project makes it, empty: the raw loads go into the same schema."""
    db = Database(db_url)
    db.table("items", COLUMNS)
    db.close()


def raw_sqlite(path: Path, rows: list[tuple]) -> tuple[float, float]:
    """The seconds the load took, and its CPU seconds."""
    con = sqlite3.connect(path)
    started, cpu = time.perf_counter(), time.process_time()
    # `stored`, as ours writes it: a flush must say when it wrote each row (export --since reads it).
    con.executemany(f"INSERT INTO items ({', '.join(COLUMNS)}, stored) VALUES ({', '.join('?' * len(COLUMNS))}, "
                    f"{NOW['sqlite']}) ON CONFLICT (hash) DO NOTHING", rows)
    con.commit()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    con.close()
    return seconds, cpu


def raw_copy(url: str, rows: list[tuple]) -> float:
    import psycopg  # imported on first use: only the PostgreSQL half needs it
    with psycopg.connect(url) as con:
        stored = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # as ours writes it (now()); not timed
        given = [(*row, stored) for row in rows]
        started = time.perf_counter()
        with con.cursor() as cursor, cursor.copy(f"COPY items ({', '.join(COLUMNS)}, stored) FROM STDIN") as copy:
            for row in given:
                copy.write_row(row)
        con.commit()
        return time.perf_counter() - started


def sqlite_side(staged: Path, rows: list[tuple], tmp: Path) -> tuple[tuple[float, float], tuple[float, float]]:
    """(seconds, CPU seconds) of ours and of raw."""
    seconds = ours(staged, f"sqlite:///{tmp / 'ours.db'}")
    make_table(f"sqlite:///{tmp / 'raw.db'}")
    return seconds, raw_sqlite(tmp / "raw.db", rows)


def postgresql_side(staged: Path, rows: list[tuple], base: str) -> tuple[float, float]:
    import psycopg  # imported on first use: only the PostgreSQL half needs it
    admin = psycopg.connect(base, autocommit=True)
    name = f"bench_flush_{uuid.uuid4().hex[:8]}"
    url = f"{base.rpartition('/')[0]}/{name}"
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        seconds, _ = ours(staged, url.replace("postgresql://", "postgresql+psycopg://"))  # the server's CPU is apart
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("DROP TABLE items")
            con.execute("CHECKPOINT")  # the raw load starts from a clean state too
        make_table(url.replace("postgresql://", "postgresql+psycopg://"))
        return seconds, raw_copy(url, rows)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def restart(staged: Path, tmp: Path) -> tuple[float, int, int]:
    """`run_daemon.py --once` with the rows waiting in staging/ and no sources: open, flush, exit."""
    project = tmp / "project"
    (project / "staging").mkdir(parents=True)
    shutil.copy(staged, project / "staging" / "staging.csv")
    return restart_once(project)


def line(name: str, seconds: float, rows: int, raw: float | None = None) -> str:
    ratio = f"  {seconds / raw:4.2f}x raw" if raw else ""
    return f"  {name:<28} {seconds:7.2f} s  {rows / seconds:9,.0f} rows/s{ratio}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--no-pg", action="store_true", help="SQLite only")
    ap.add_argument("--no-restart", action="store_true", help="leave out the daemon restart")
    ap.add_argument("--flush", nargs=2, metavar=("FOLDER", "DB_URL"), help=argparse.SUPPRESS)  # ours()'s child
    args = ap.parse_args()
    if args.flush:
        return flush_folder(Path(args.flush[0]), args.flush[1])
    pg = None if args.no_pg else os.environ.get("PARSER_TEST_PG_URL", "").replace("postgresql+psycopg://",
                                                                                  "postgresql://") or None
    print(f"code measured: {ROOT}")
    with tempfile.TemporaryDirectory(prefix="bench-flush-") as name:
        tmp = Path(name)
        started = time.perf_counter()
        staged = stage(tmp / "staged", args.rows)
        each = staged.stat().st_size / args.rows
        print(f"staged {args.rows:,} rows, {each:,.0f} bytes each, in {time.perf_counter() - started:.1f} s")
        started, cpu = time.perf_counter(), time.process_time()
        assert sum(len(part.rows) for part in read_parts(staged)) == args.rows
        reading, reading_cpu = time.perf_counter() - started, time.process_time() - cpu
        print(line("reading the staging CSV", reading, args.rows) + f"  (CPU {reading_cpu:.2f} s)")
        rows = [row for part in read_parts(staged) for row in part.rows]  # for the raw loads, all at once; not timed
        # The raw loads store what ours stores: an empty cell as NULL (a time column takes no ''); not timed.
        rows = [tuple(cell if cell != "" or column == 0 else None for column, cell in enumerate(row)) for row in rows]
        (seconds, cpu), (raw, raw_cpu) = sqlite_side(staged, rows, tmp)
        print("SQLite")
        print(line("raw sqlite3 executemany", raw, args.rows) + f"  (CPU {raw_cpu:.2f} s)")
        print(line("ours (Sink.flush)", seconds, args.rows, raw) + f"  (goal {GOAL_RATIO}x; CPU {cpu:.2f} s, "
              f"{cpu / raw_cpu:4.2f}x raw's)")
        # What no flush of a staging file avoids: the driver's write, and the csv module's read of the file.
        print(f"  ours / (raw + reading the CSV): {seconds / (raw + reading):4.2f}x, in CPU "
              f"{cpu / (raw_cpu + reading_cpu):4.2f}x")
        if pg:
            seconds, raw = postgresql_side(staged, rows, pg)
            print("PostgreSQL")
            print(line("raw psycopg COPY", raw, args.rows))
            print(line("ours (Sink.flush)", seconds, args.rows, raw) + f"  (goal {GOAL_RATIO}x)")
        else:
            print("PostgreSQL: left out (--no-pg, or PARSER_TEST_PG_URL not set)")
        del rows
        if not args.no_restart:
            seconds, code, stored = restart(staged, tmp)
            print(f"restart over {args.rows:,} staged rows (run_daemon.py --once, SQLite): {seconds:.2f} s, "
                  f"{stored:,} stored, exit {code}  (goal {GOAL_RESTART:g} s)")


if __name__ == "__main__":
    main()
