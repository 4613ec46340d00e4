"""One `--once` over 100 loopback feeds on 50 hosts (two a host) that each answer in 500 ms,
with an empty history and with 2,000,000 hashes in history, side by side in one run.

    .venv/bin/python -m bench.bench_once [--feeds 100] [--hosts 50] [--delay 0.5] [--history 2000000]

Each host is its own address (127.0.0.1 .. 127.0.0.50), so the per-host limit applies as on the
web. Prints wall time, rows stored and the daemon's peak memory (its own rusage) per run.
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

from bench.bench_dedup import write_history
from tests.feeds import numbered_items, rss
from tests.server import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]


def start_servers(hosts: int, feeds: int, delay: float, items: int, generation: int) -> tuple[list, list[dict]]:
    servers = [LoopbackServer(host=f"127.0.0.{h + 1}").start() for h in range(hosts)]
    sources = []
    for n in range(feeds):
        server = servers[n % hosts]
        path = f"/feed{n}.xml"
        body = rss(numbered_items(generation * 1000, items, host=f"site{n}.example"))
        server.route(path, body=body, delay=delay)
        sources.append({"name": f"feed{n}", "url": server.url(path)})
    return servers, sources


def run_once(folder: Path) -> tuple[float, int, int]:
    """Seconds, exit code and peak RSS (KiB) of one `run_daemon.py --once`."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(ROOT / "run_daemon.py"), "--params", str(folder / "params.py"),
                             "--once"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, proc.returncode, usage.ru_maxrss


def rows(folder: Path) -> int:
    con = sqlite3.connect(folder / "db" / "items.db")
    try:
        return con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
    finally:
        con.close()


def scenario(label: str, history: int, args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        servers, sources = start_servers(args.hosts, args.feeds, args.delay, args.items, generation=1)
        (folder / "params.py").write_text(f"SOURCES = {sources!r}\n")
        if history:
            (folder / "staging").mkdir()
            write_history(folder / "staging" / "hashes.txt", history)
            # The first start builds the Bloom filter from the file, once; time it apart.
            for s in servers:
                for route in s.routes.values():
                    route.delay = 0
            build_s, _, _ = run_once(folder)
            print(f"  ({label}: first start built the Bloom filter over {history:,} hashes in {build_s:.1f} s)")
            for s in servers:
                s.stop()
            servers, sources = start_servers(args.hosts, args.feeds, args.delay, args.items, generation=2)
            (folder / "params.py").write_text(f"SOURCES = {sources!r}\n")
        before = rows(folder) if (folder / "db" / "items.db").exists() else 0
        seconds, code, peak_kib = run_once(folder)
        stored = rows(folder) - before
        for s in servers:
            s.stop()
        print(f"{label:>22}  exit {code}  {seconds:6.2f} s  {stored:5d} rows stored  peak {peak_kib / 1024:6.1f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--feeds", type=int, default=100)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--history", type=int, default=2_000_000)
    args = ap.parse_args()
    print(f"--once over {args.feeds} feeds on {args.hosts} hosts, {args.delay * 1000:.0f} ms each, "
          f"{args.items} items a feed, default settings")
    scenario("empty history", 0, args)
    scenario(f"{args.history:,} hashes", args.history, args)


if __name__ == "__main__":
    main()
