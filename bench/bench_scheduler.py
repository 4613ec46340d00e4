"""Forever mode over many sources on 50 loopback hosts: how late polls come, and what it costs.

    .venv/bin/python -m bench.bench_scheduler [--minutes 10] [--sources 10000] [--hosts 50] [--interval 60]
    .venv/bin/python -m bench.bench_scheduler --minutes 1 --sources 1000      # a quick run

Each host is its own address (127.0.0.1 .. 127.0.0.50). Every source is due every `interval`
seconds; a tenth of them change each interval (a new item and ETag), the rest answer 304. Prints
the lateness of polls (arrival at the server minus due time: for the first poll, the start plus the
source's spread offset; after that, the previous poll plus the interval), the daemon's peak RSS,
its CPU seconds and bytes written to disk per minute, and how often it wrote state.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from parser.sources.source_schedule import spread_offset
from tests.feeds import numbered_items, rss
from tests.server import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
PROFILED = """
import cProfile, os, runpy, sys
out, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(script))  # this tree's parser, not an installed one
profile = cProfile.Profile()
real_exit = os._exit
def exit_profiled(code):
    profile.disable()
    profile.dump_stats(out)
    real_exit(code)
os._exit = exit_profiled  # the daemon leaves by os._exit (parser/cli.py)
profile.enable()
runpy.run_path(script, run_name="__main__")
"""


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def write_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--sources", type=int, default=10_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--interval", type=float, default=60)
    ap.add_argument("--profile", metavar="PATH", help="profile the daemon's main thread (cProfile) into PATH")
    args = ap.parse_args()

    servers = [LoopbackServer(host=f"127.0.0.{h + 1}").start() for h in range(args.hosts)]
    routes, sources, generation = [], [], {}
    for n in range(args.sources):
        server = servers[n % args.hosts]
        path = f"/feed{n}.xml"
        generation[n] = 1
        routes.append(server.route(path, body=rss(numbered_items(1, 5, host=f"site{n}.example")), etag=f'"{n}-1"'))
        sources.append({"name": f"feed{n}", "url": server.url(path), "interval": args.interval})
    rng = random.Random(11)

    def change_a_tenth() -> None:
        for n in rng.sample(range(args.sources), args.sources // 10):
            generation[n] += 1
            routes[n].body = rss(numbered_items(generation[n], 5, host=f"site{n}.example"))
            routes[n].etag = f'"{n}-{generation[n]}"'

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "params.py").write_text(f"SOURCES = {sources!r}\nDB_URL = 'sqlite:///db/items.db'\n")
        command = [sys.executable, str(ROOT / "run_daemon.py"), "--params", str(folder / "params.py")]
        if args.profile:
            command[1:2] = ["-c", PROFILED, str(Path(args.profile).resolve()), str(ROOT / "run_daemon.py")]
        proc = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.monotonic()
        end = started + args.minutes * 60
        next_change = started + args.interval
        written_start, written = 0, 0
        while time.monotonic() < end and proc.poll() is None:
            time.sleep(0.5)
            if not written_start and any(s.times for s in servers):
                written_start = write_bytes(proc.pid)  # the daemon's start (imports, first flush) apart
            if time.monotonic() >= next_change:
                change_a_tenth()
                next_change += args.interval
        written = write_bytes(proc.pid) - written_start
        proc.send_signal(signal.SIGTERM)
        _, status, usage = os.wait4(proc.pid, 0)
        minutes = (time.monotonic() - started) / 60
        info = json.loads((folder / "staging" / "daemon.json").read_text())
        state_writes = info["totals"].get("state_writes", 0)
        state_size = (folder / "staging" / "state.json").stat().st_size
    for s in servers:
        s.stop()

    arrivals: dict[str, list[float]] = defaultdict(list)
    for s in servers:
        for at, path in s.times:
            arrivals[path].append(at)
    names = {f"/feed{n}.xml": f"feed{n}" for n in range(args.sources)}
    # The schedule's start: no poll is early, so the earliest (first poll - its offset) is the start.
    firsts = {path: times[0] - spread_offset(names[path], args.interval) for path, times in arrivals.items()}
    origin = min(firsts.values())
    first_late = [first - origin for first in firsts.values()]
    later = [b - a - args.interval for times in arrivals.values() for a, b in zip(times, times[1:], strict=False)]
    lateness = first_late + later
    polls = sum(len(t) for t in arrivals.values())
    print(f"{args.sources} sources on {args.hosts} hosts, interval {args.interval:g} s, {minutes:.1f} min, "
          f"exit {os.waitstatus_to_exitcode(status)}")
    print(f"  polls {polls}; lateness p50 {percentile(lateness, 50):.3f} s, p99 {percentile(lateness, 99):.3f} s, "
          f"max {max(lateness):.3f} s (first polls p99 {percentile(first_late, 99):.3f} s, "
          f"later polls p99 {percentile(later, 99):.3f} s)")
    print(f"  peak RSS {usage.ru_maxrss / 1024:.1f} MiB; CPU {(usage.ru_utime + usage.ru_stime) / minutes:.1f} s/min")
    print(f"  disk writes {written / minutes / 2**20:.1f} MiB/min; state.json written {state_writes / minutes:.1f}"
          f" times/min ({state_size / 2**20:.1f} MiB each)")


if __name__ == "__main__":
    main()
