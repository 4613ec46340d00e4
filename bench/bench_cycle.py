"""A running daemon's steady state: the CPU one cycle over the real feeds costs the daemon's process tree.

    .venv/bin/python -m bench.bench_cycle [--feeds 1000] [--interval 30] [--changed 0.1] [--server nginx|python]

bench_steady runs `--once` a round, as newsboat's `-x reload` runs: each round pays the interpreter's start,
the imports and the reading of the state, which a daemon pays once. Here one daemon (no `--once`) polls the
feeds of bench_steady (same bodies, hosts, validators, server: nginx or `--server python`, CONCURRENCY 32)
every `--interval` seconds, and the CPU of its process tree (utime + stime of the daemon and of every
descendant, the parse processes included, read from /proc at the start and at the end of a cycle) is taken
over:
1. a cycle where every feed answers 304 (after the first poll, not measured);
2. a cycle where `--changed` of the feeds (the same sample as bench_steady's round 3) have 2 new entries.
A cycle ends when every feed that answered the first poll has been polled again (its 304 or new line in
parser.log), its new rows are flushed (FLUSH_INTERVAL 5 s) and one more flush turn has passed; the
first poll's own flush comes before the first measured cycle. Prints CPU s per cycle, ms per
unchanged poll, ms per changed feed (the changed cycle over its changed feeds, as bench_steady counts it)
and the marginal cost of a changed feed (cycle 3 less as many polls at cycle 2's cost per poll, over the
changed feeds: a daemon spreads its polls over the interval, so a window may hold a few more or fewer).
"""
from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.bench_once_real import DATA, ROOT, SERVERS, serve, write_params
from bench.bench_steady import ServedFeeds
from bench.tree_usage import tree_cpu

POLL_LINE = re.compile(r"  (feed\d+)  (304 not modified|new \d+|error)")
FLUSH_LINE = re.compile(r"flush \(interval\): [1-9]\d* rows written")
FLUSH_EVERY = 5  # FLUSH_INTERVAL: each measured cycle holds its own flush and ends after one more turn


def polled(log: Path, errors: bool = False) -> dict[str, int]:
    """How many times each feed has answered (304 or new; with `errors`, failed too), from parser.log."""
    counts: dict[str, int] = {}
    for name, outcome in POLL_LINE.findall(_text(log)):
        if errors or outcome != "error":
            counts[name] = counts.get(name, 0) + 1
    return counts


def flushed(log: Path) -> int:
    """How many flushes have written rows, from parser.log."""
    return len(FLUSH_LINE.findall(_text(log)))


def _text(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""


def wait(condition: Callable[[], bool], what: str, proc: subprocess.Popen, limit: float) -> None:
    """Until `condition()`; the bench ends, saying what it waited for, if the daemon exits or `limit` passes."""
    deadline = time.monotonic() + limit
    while not condition():
        if proc.poll() is not None:
            raise SystemExit(f"the daemon exited {proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {limit:g} s waiting for {what}")
        time.sleep(0.2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--feeds", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=30.0, help="POLL_INTERVAL, seconds")
    ap.add_argument("--changed", type=float, default=0.10, help="share of the feeds changed in cycle 3")
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--server", choices=SERVERS, default="nginx", help="what serves the feeds (bench_steady's)")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent (set PARSER_CORPUS)")
        return
    bodies = [p.read_bytes() for p in sorted(DATA.iterdir()) if p.is_file()]
    server = serve(bodies, args.feeds // len(bodies), args.hosts, args.server)
    urls = server.urls
    feeds = ServedFeeds(server)
    with tempfile.TemporaryDirectory() as folder:
        params = write_params(Path(folder), urls, 32)
        with open(params, "a", encoding="utf-8") as f:
            f.write(f"POLL_INTERVAL = {args.interval}\nFLUSH_INTERVAL = {FLUSH_EVERY}\n")
        log = Path(folder) / "logs" / "parser.log"
        proc = subprocess.Popen([sys.executable, "run_daemon.py", "--params", str(params)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            limit = args.interval * 4 + 120
            wait(lambda: len(polled(log, errors=True)) == len(urls), "the first poll of every feed", proc, limit)
            names = set(polled(log))
            wait(lambda: flushed(log) >= 1, "the first poll's flush", proc, limit)  # not this bench's
            rows = []
            for cycle, share in ((2, 0.0), (3, args.changed)):
                changed = feeds.change(share, cycle)[0] if share else 0
                feeds.requests_since_last()
                flushes = flushed(log)
                before, started = tree_cpu(proc.pid), time.monotonic()
                wait(lambda c=cycle: all(polled(log).get(n, 0) >= c for n in names), f"cycle {cycle}", proc, limit)
                if changed:  # the cycle's own flush of its new rows
                    wait(lambda f=flushes: flushed(log) > f, f"cycle {cycle}'s flush", proc, limit)
                time.sleep(FLUSH_EVERY + 1)  # a flush turn after the last poll, with or without rows
                cpu, seconds = tree_cpu(proc.pid) - before, time.monotonic() - started
                requests, conditional, _ = feeds.requests_since_last()
                rows.append((cycle, changed, cpu, seconds, requests, conditional))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
            server.stop()
    print(f"a running daemon, {len(urls)} real feeds on {args.hosts} loopback hosts ({len(names)} answering), "
          f"POLL_INTERVAL {args.interval:g} s, FLUSH_INTERVAL {FLUSH_EVERY} s, CONCURRENCY 32; "
          f"served by {server.describe()}")
    print("  cycle  changed  CPU s  wall s  requests  conditional  ms per poll  ms per changed feed")
    for cycle, changed, cpu, seconds, requests, conditional in rows:
        per_changed = f"{cpu * 1000 / changed:.1f}" if changed else "-"
        print(f"  {cycle:5d}  {changed:7d}  {cpu:5.2f}  {seconds:6.1f}  {requests:8d}  {conditional:11d}  "
              f"{cpu * 1000 / max(requests, 1):11.2f}  {per_changed:>19}")
    (_, _, unchanged, _, unchanged_requests, _), (_, changed, with_changed, _, requests, _) = rows
    if changed:  # the polls of a daemon are spread over its interval: a window may hold more or fewer
        expected = unchanged / max(unchanged_requests, 1) * requests
        print(f"  marginal cost of a changed feed (cycle 3 less as many unchanged polls at cycle 2's cost, "
              f"over {changed}): {(with_changed - expected) * 1000 / changed:.1f} ms CPU")


if __name__ == "__main__":
    main()
