"""`parser-daemon export`: memory and speed over a large table, in each format.

    .venv/bin/python -m bench.bench_export [--rows 100000 1000000] [--formats jsonl csv atom] [--stdout]

Fills a fresh SQLite `items` table (the new shape: times as ISO text, categories and enclosures as JSON
text, `changed` on a fifth of the rows) with `rows` entries of about 1.5 KB each (a title, a summary, HTML
content, two categories, an enclosure on every third), then runs `run_daemon.py export --format F -o FILE`
in a process of its own for each format and prints its rows/s (by the clock and by its CPU time, which a
busy machine does not inflate), its peak RSS (os.wait4's ru_maxrss of that process) and the file's size.
Flat memory means the peak RSS at 1,000,000 rows is the one at 100,000.
With --stdout the export writes to a pipe this script reads and throws away, instead of -o FILE.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("hash", "source", "guid", "link", "title", "author", "published", "updated", "summary", "content",
           "categories", "enclosures", "image", "comments", "language", "fetched", "changed")
WORDS = ("the of and to in a is that for it as was with be by on not this are or from at which but have an they "
         "feed server release update news story report market city council data open source python élan").split()


def rows(count: int, seed: int = 26) -> Iterator[tuple]:
    rng = random.Random(seed)
    paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 40))) for _ in range(200)]
    for n in range(count):
        day, second = divmod(n, 86400)
        clock = f"{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        stamp = f"2024-{1 + day % 12:02d}-{1 + day % 28:02d}T{clock}Z"
        body = "".join(f'<p>{rng.choice(paragraphs)} <a href="https://example.com/{n}/{i}">more</a></p>'
                       for i in range(4))
        enclosures = json.dumps([{"url": f"https://example.com/{n}.mp3", "type": "audio/mpeg", "length": n}]) \
            if n % 3 == 0 else None
        yield (f"{n:056x}", f"source{n % 50}", f"https://example.com/item/{n}", f"https://example.com/item/{n}",
               f"Item {n}: {rng.choice(paragraphs)[:60]}", "Ann Author", stamp, None, rng.choice(paragraphs),
               body, json.dumps(["news", f"tag{n % 7}"]), enclosures, None, None, "en", stamp,
               stamp if n % 5 == 0 else None)


def fill(path: Path, count: int) -> None:
    con = sqlite3.connect(path)
    columns = ", ".join(f"{c} TEXT" for c in COLUMNS[1:])
    con.execute(f"CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, hash VARCHAR(128) NOT NULL UNIQUE, "
                f"{columns})")
    marks = ", ".join("?" for _ in COLUMNS)
    batch: list[tuple] = []
    for row in rows(count):
        batch.append(row)
        if len(batch) == 10000:
            con.executemany(f"INSERT INTO items ({', '.join(COLUMNS)}) VALUES ({marks})", batch)
            batch.clear()
    con.executemany(f"INSERT INTO items ({', '.join(COLUMNS)}) VALUES ({marks})", batch)
    con.commit()
    con.close()


def run_export(folder: Path, fmt: str, to_stdout: bool) -> tuple[float, float, float, int]:
    """Seconds, CPU seconds (what a busy machine does not inflate), peak RSS in MiB, bytes written."""
    out = folder / f"export.{fmt}"
    command = [sys.executable, str(ROOT / "run_daemon.py"), "--params", str(folder / "params.py"), "export",
               "--format", fmt]
    started = time.perf_counter()
    if to_stdout:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder)
        size = 0
        while chunk := proc.stdout.read(1 << 20):
            size += len(chunk)
    else:
        proc = subprocess.Popen([*command, "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                cwd=folder)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"export --format {fmt} failed: {proc.stderr.read().decode()}")
    if not to_stdout:
        size = out.stat().st_size
        out.unlink()
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--formats", nargs="+", default=["jsonl", "csv", "atom"])
    ap.add_argument("--stdout", action="store_true")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench_export_"))
    try:
        (folder / "params.py").write_text('DB_URL = "sqlite:///items.db"\n', encoding="utf-8")
        print(f"{'rows':>10} {'format':>6} {'seconds':>8} {'rows/s':>9} {'CPU s':>7} {'rows/CPU s':>10} "
              f"{'peak RSS':>10} {'output':>10}")
        for count in args.rows:
            db = folder / "items.db"
            db.unlink(missing_ok=True)
            started = time.perf_counter()
            fill(db, count)
            print(f"# {count:,} rows filled in {time.perf_counter() - started:.1f} s, "
                  f"{db.stat().st_size / 2**20:.0f} MiB", flush=True)
            for fmt in args.formats:
                seconds, cpu, peak, size = run_export(folder, fmt, args.stdout)
                print(f"{count:>10,} {fmt:>6} {seconds:>8.1f} {count / seconds:>9,.0f} {cpu:>7.1f} "
                      f"{count / cpu:>10,.0f} {peak:>7.1f} MiB {size / 2**20:>6.0f} MiB", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
