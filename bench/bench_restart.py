"""A restart with records waiting in the staging CSV (after a crash or a database outage).

    .venv/bin/python -m bench.bench_restart [--sizes 10000,100000,200000]

For each size, writes a staging CSV of that many waiting records (about 600 bytes each, a torn last
record as a kill -9 leaves it) and times (1) opening it: the tail repair the daemon does at start,
and (2) the whole restart through the real daemon, `run_daemon.py --once` with no sources: open,
repair, flush every record into SQLite, exit. The code measured is the tree the command runs in
(the current folder's `parser/`), so the same file measures an older checkout for a before/after.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))

from parser.core.record import RECORD_FIELDS  # noqa: E402
from parser.pipeline.staging import StagingFile  # noqa: E402

COLUMNS = ("hash", *RECORD_FIELDS)


def row(n: int) -> str:
    """A record with a cell for every column (one short of the header's would be cut as torn when last)."""
    given = {"hash": f"{n:056x}", "source": "bench", "guid": f"urn:bench:{n}",
             "link": f"https://news.example.com/2026/11/{n}/a-story", "title": f"Story number {n} about something",
             "author": "A. Writer", "published": "2026-11-01T12:00:00Z",
             "summary": "A summary of the story, with a line break\ninside the quoted field. " * 2,
             "content": "<p>" + "Some content. " * 20 + "</p>", "fetched": "2026-11-01T12:00:05Z"}
    return ",".join('"' + given.get(c, "").replace('"', '""') + '"' for c in COLUMNS) + "\n"


def write_staging(folder: Path, rows: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "staging.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(",".join(f'"{c}"' for c in COLUMNS) + "\n")
        for n in range(rows):
            f.write(row(n))
        f.write(row(rows)[:100])  # torn: a kill -9 mid-append
    return path


def time_open(rows: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = write_staging(Path(tmp), rows)
        started = time.perf_counter()
        StagingFile(path, COLUMNS)
        return time.perf_counter() - started


def time_restart(rows: int) -> tuple[float, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        write_staging(project / "staging", rows)
        return restart_once(project)


def restart_once(project: Path) -> tuple[float, int, int]:
    """`run_daemon.py --once` with no sources in `project`, whose staging/ holds the waiting rows:
    (seconds, exit code, rows stored in its SQLite database)."""
    (project / "params.py").write_text('DB_URL = "sqlite:///db/items.db"\nSOURCES = []\n', encoding="utf-8")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, str(ROOT / "run_daemon.py"), "--params", str(project / "params.py"),
                           "--once"], cwd=project, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - started
    con = sqlite3.connect(project / "db" / "items.db")
    stored = con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    con.close()
    return seconds, proc.returncode, stored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,200000", help="waiting rows, comma-separated")
    ap.add_argument("--open-only", action="store_true", help="time only the opening (the old code is slow)")
    args = ap.parse_args()
    print(f"code measured: {ROOT}")
    print(f"{'waiting rows':>12}  {'open + repair':>13}  {'daemon --once restart':>21}  stored")
    for rows in (int(s) for s in args.sizes.split(",")):
        opened = time_open(rows)
        if args.open_only:
            print(f"{rows:>12,}  {opened:>11.2f} s", flush=True)
            continue
        seconds, code, stored = time_restart(rows)
        print(f"{rows:>12,}  {opened:>11.2f} s  {seconds:>19.2f} s  {stored:,} (exit {code})", flush=True)


if __name__ == "__main__":
    main()
