"""Steady state against newsboat: the same real feeds polled in rounds, ours and newsboat side by side.

    .venv/bin/python -m bench.bench_steady [--feeds 1000] [--rounds 4] [--concurrency 32] [--no-newsboat] [--phases]
        [--server nginx|python]

The feeds of bench/bench_once_real.py (the 200 bodies of ../shared/corpus/fastfeedparser/benchmark_data, each
served feeds/200 times, on `--hosts` loopback addresses), each with an ETag and a Last-Modified, answered 304 when
a request carries either. They are served by nginx (bench/nginx_feeds.py: Debian's nginx-light, installed with
apt-get when absent; a process of its own with one worker, its config and logs in a temp folder; each feed a static
file, its validators from the file's mtime and size), which neither side is charged for. `--server python` serves
them the old way, one threaded Python server a host inside this process (bench/loopback_feeds.py, also the fallback
when nginx cannot be had, the reason printed), whose serving of 215 MiB takes CPU from the two cores both sides
share while they are measured (docs/benchmarks.md: how much). One project folder
(`run_daemon.py --once` each round: state.json keeps the validators) and one newsboat cache (`newsboat -x reload`,
reload-threads = CONCURRENCY) go through:
1. first poll: everything new;
2. all unchanged: every server answers 304 to a conditional request. newsboat sends conditional requests
   only from its third reload, so it reloads twice here (2, unconditional; 3, conditional) and its
   reload 3 is the one compared;
3. 10 % of the feeds changed (a fixed sample), 2 new entries each at the top (bench/feed_edits.py), new
   validators: newsboat's reload 4;
4. 100 % changed, 2 more new entries each: newsboat's reload 5.
Between rounds only the bodies change. Per round and side: wall s, CPU s and peak RSS (and PSS) of the whole
process tree (bench/tree_usage.py), CPU ms per changed feed, cores busy on average (ours: also while polling, from
the round's first request to its last), rows stored (ours: `items` in db/items.db; newsboat: `rss_item` in its
cache.db), the requests the server saw (how many conditional, how many answered 304: its access log for nginx) and
the server's CPU during the run; ours' floor (bench/floor.py: the CPU of lxml's parse of the bodies the round
served and of a bare executemany of the rows it stored, measured after the round); then ours/newsboat, and the
goals set for this benchmark beside the figures (a first poll: CPU <= 1.0x newsboat's, wall <= 0.6x, peak PSS
<= 250 MiB and <= 1.2x newsboat's). Who goes first alternates by round. `--feeds 10000` (200 bodies x 50) runs the
first poll only unless --rounds says otherwise (goal: <= 60 s, <= 250 MiB PSS); under 200 takes the first bodies
once each (a smoke run). `--phases` runs ours through bench/once_timed.py and prints where each round's time went,
and where its memory was: each kind of process's peak PSS, and every process at the tree's peak.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.bench_once_real import (
    DATA,
    ROOT,
    SERVERS,
    count_rows,
    newsboat,
    newsboat_reload,
    phases,
    serve,
    write_params,
)
from bench.feed_edits import with_new_entries
from bench.feed_server import FeedServer
from bench.floor import Floor, largest_id, reading_cpu, writing_cpu
from bench.tree_usage import TreeUsage, measure

ROUNDS = {1: "first poll", 2: "all unchanged", 3: "10 % changed", 4: "100 % changed"}
SHARE_CHANGED = {3: 0.10, 4: 1.0}  # the rounds that change feeds, and how many of them
NEWSBOAT_RELOADS = {1: (1,), 2: (2, 3), 3: (4,), 4: (5,)}  # the last of each is the one compared
# The goals set for this benchmark (print_goals): a first poll's CPU at most newsboat's, its wall time at most
# 0.6x, its peak PSS at most 250 MiB and 1.2x newsboat's; 10 % changed as an earlier goal set it; 10,000 feeds.
FIRST_CPU_RATIO, FIRST_WALL_RATIO, FIRST_PSS_MIB, FIRST_PSS_RATIO = 1.0, 0.6, 250, 1.2
STEADY_MS_PER_CHANGED, STEADY_RATIO = 8.0, 0.25
LARGE_SECONDS, LARGE_PSS_MIB = 60, 250


@dataclass
class Run:
    side: str           # "ours" or "newsboat"
    label: str          # which run of that side: "--once 3", "reload 4"
    usage: TreeUsage
    rows: int
    new_rows: int
    requests: int
    conditional: int
    not_modified: int   # requests answered 304
    server_cpu: float   # CPU s the server spent during the run
    timings: dict | None = None
    polling_cores: float | None = None  # cores busy from the round's first request to its last
    floor: Floor | None = None  # ours: the CPU under what the round served (bench/floor.py)


class ServedFeeds:
    """The served feeds (each with its validators); `change` puts new entries at the top of some."""

    def __init__(self, server: FeedServer):
        self.server = server
        self._counted = 0  # requests already counted
        self._cpu = server.cpu()
        self.fresh = set(range(len(server.urls)))  # feeds whose body ours has not fetched yet

    def change(self, share: float, round_: int) -> tuple[int, int]:
        """New entries in `share` of the feeds (a fixed sample). (feeds changed, feeds that could not be)."""
        count = round(len(self.server.urls) * share)
        chosen = sorted(random.Random(20).sample(range(len(self.server.urls)), count))
        now, failed = datetime.now(UTC), 0
        for n in chosen:
            try:
                body = with_new_entries(self.server.body(n), f"r{round_}-f{n}", now)
            except ValueError:
                failed += 1
                continue
            self.server.replace(n, body)
            self.fresh.add(n)
        return count - failed, failed

    def take_fresh(self) -> list[bytes]:
        """The bodies of the feeds changed since the last call (the first: all): what a round answers with a 200."""
        fresh, self.fresh = sorted(self.fresh), set()
        return [self.server.body(n) for n in fresh]

    def request_span(self, since: float) -> tuple[float, float] | None:
        """(first, last) time.monotonic() of the requests the server saw after `since`: the polling."""
        times = [r.arrived for r in self.server.requests()[self._counted:] if r.arrived >= since]
        return (min(times), max(times)) if times else None

    def requests_since_last(self) -> tuple[int, int, int]:
        """(requests, conditional ones, ones answered 304) the server saw since the last call."""
        recent = self.server.requests()[self._counted:]
        self._counted += len(recent)
        return len(recent), sum(r.conditional for r in recent), sum(r.not_modified for r in recent)

    def cpu_since_last(self) -> float:
        """CPU s the server spent since the last call."""
        before, self._cpu = self._cpu, self.server.cpu()
        return self._cpu - before


class Sides:
    """Ours (one project folder) and newsboat (one cache), each run as a process tree and recorded as a Run."""

    def __init__(self, args: argparse.Namespace, feeds: ServedFeeds, urls: list[str], binary: str | None,
                 ours_dir: Path, boat_dir: Path):
        self.feeds, self.phases, self.ours_dir, self.boat_dir = feeds, args.phases, ours_dir, boat_dir
        self.params = write_params(ours_dir, urls, args.concurrency)
        self.boat = newsboat_reload(binary, boat_dir, urls, args.concurrency) if binary else None
        self.rows = {"ours": 0, "newsboat": 0}

    def ours(self, round_: int) -> Run:
        timings = self.ours_dir / "timings.json"
        command = [sys.executable, "-m", "bench.once_timed", str(timings)] if self.phases \
            else [sys.executable, "run_daemon.py"]
        started = time.monotonic()
        self.feeds.cpu_since_last()
        db = self.ours_dir / "db" / "items.db"
        stored_before = largest_id(db, "items")
        usage = measure(command + ["--params", str(self.params), "--once"], spare=self.feeds.server.pids, cwd=ROOT)
        span = self.feeds.request_span(started)
        run = self._record("ours", f"--once {round_}", usage, db, "items",
                           json.loads(timings.read_text()) if self.phases and timings.exists() else None)
        run.polling_cores = usage.cores_between(*span) if span else None
        bodies = self.feeds.take_fresh()  # measured after the run, the machine to this process alone
        rows, writing = writing_cpu(db, "items", stored_before)
        run.floor = Floor(len(bodies), reading_cpu(bodies), rows, writing)
        return run

    def newsboat(self, reload: int) -> Run:
        command, env = self.boat
        self.feeds.cpu_since_last()
        return self._record("newsboat", f"reload {reload}", measure(command, spare=self.feeds.server.pids, env=env),
                            self.boat_dir / "cache.db", "rss_item")

    def _record(self, side: str, label: str, usage: TreeUsage, db: Path, table: str,
                timings: dict | None = None) -> Run:
        stored = count_rows(db, table)
        server_cpu = self.feeds.cpu_since_last()
        requests, conditional, not_modified = self.feeds.requests_since_last()
        run = Run(side, label, usage, stored, stored - self.rows[side], requests, conditional, not_modified,
                  server_cpu, timings)
        self.rows[side] = stored
        return run


def poll_rounds(rounds: int, feeds: ServedFeeds, sides: Sides) -> dict[int, tuple[int, list[Run]]]:
    """Every round, both sides; printed as it ends. {round: (feeds changed, runs)}."""
    results: dict[int, tuple[int, list[Run]]] = {}
    for round_ in range(1, rounds + 1):
        changed, failed = feeds.change(SHARE_CHANGED[round_], round_) if round_ in SHARE_CHANGED else (0, 0)
        # Who goes first alternates: neither side always meets the machine as the other left it.
        ours_first = round_ % 2 == 1
        runs = [sides.ours(round_)] if ours_first else []
        if sides.boat:
            runs += [sides.newsboat(reload) for reload in NEWSBOAT_RELOADS[round_]]
        if not ours_first:
            runs.insert(0, sides.ours(round_))
        results[round_] = (changed, runs)
        print_round(round_, changed, failed, runs)
    return results


def print_round(round_: int, changed: int, failed: int, runs: list[Run]) -> None:
    said = f" ({changed} feeds, 2 new entries each; {failed} could not be edited)" if round_ in SHARE_CHANGED else ""
    print(f"\nround {round_}: {ROUNDS[round_]}{said}")
    print(f"  {'side':9} {'run':9} {'exit':>4} {'wall s':>7} {'CPU s':>7} {'ms/changed':>10} {'cores':>5} "
          f"{'RSS MiB':>7} {'PSS MiB':>7} {'rows':>7} {'+rows':>7} {'requests':>8} {'conditional':>11} {'304':>5} "
          f"{'server CPU s':>12}")
    for run in runs:
        u = run.usage
        per_changed = f"{u.cpu * 1000 / changed:10.1f}" if changed else f"{'-':>10}"
        print(f"  {run.side:9} {run.label:9} {u.code:4d} {u.seconds:7.2f} {u.cpu:7.2f} {per_changed} {u.cores:5.2f} "
              f"{u.peak_mib:7.0f} {u.peak_pss_mib:7.0f} {run.rows:7d} {run.new_rows:+7d} {run.requests:8d} "
              f"{run.conditional:11d} {run.not_modified:5d} {run.server_cpu:12.2f}")
        if u.code and u.said:
            print(f"    ({run.side} said: {u.said})")
        if u.orphans_killed:
            print(f"    ({run.side} left {u.orphans_killed} processes running: killed)")
        if run.polling_cores is not None:
            print(f"    ({run.side}: {run.polling_cores:.2f} cores busy while polling, first request to last)")
        if run.floor:
            print(f"    ({run.side}: {run.floor.describe(u.cpu)})")
        if run.timings:
            phases({"timings": run.timings, "seconds": u.seconds})
            print("\n".join(f"    {line}" for line in u.describe()))
    ours, boat = _compared(runs)
    if ours and boat:
        print(f"  ours/newsboat (newsboat's {boat.label}): wall {_ratio(ours, boat, 'seconds'):.2f}x, "
              f"CPU {_ratio(ours, boat, 'cpu'):.2f}x, peak RSS {_ratio(ours, boat, 'peak_mib'):.2f}x, "
              f"peak PSS {_ratio(ours, boat, 'peak_pss_mib'):.2f}x"
              + (f"; +{2 * changed} rows expected on each side" if changed else ""))
    sys.stdout.flush()


def print_goals(results: dict[int, tuple[int, list[Run]]], feeds: int) -> None:
    """The goals beside what this run measured (ours; newsboat's run as said)."""
    print("\ngoals, ours:")
    ours, boat = _compared(results[1][1])
    if feeds >= 10000:
        _goal(f"first poll of {feeds} feeds, wall <= {LARGE_SECONDS} s", ours.usage.seconds, LARGE_SECONDS, "s")
        _goal(f"first poll of {feeds} feeds, peak PSS <= {LARGE_PSS_MIB} MiB (process tree; RSS "
              f"{ours.usage.peak_mib:.0f} MiB)", ours.usage.peak_pss_mib, LARGE_PSS_MIB, "MiB")
        return
    if boat:
        _goal(f"first poll, CPU <= {FIRST_CPU_RATIO}x newsboat's ({boat.label})",
              _ratio(ours, boat, "cpu"), FIRST_CPU_RATIO, "x")
        _goal(f"first poll, wall <= {FIRST_WALL_RATIO}x newsboat's ({boat.label})",
              _ratio(ours, boat, "seconds"), FIRST_WALL_RATIO, "x")
        _goal(f"first poll, peak PSS <= {FIRST_PSS_RATIO}x newsboat's ({boat.label})",
              _ratio(ours, boat, "peak_pss_mib"), FIRST_PSS_RATIO, "x")
    _goal(f"first poll, peak PSS <= {FIRST_PSS_MIB} MiB (process tree; RSS {ours.usage.peak_mib:.0f} MiB)",
          ours.usage.peak_pss_mib, FIRST_PSS_MIB, "MiB")
    cores = f"{ours.polling_cores:.2f} while polling, " if ours.polling_cores is not None else ""
    print(f"  (first poll, cores busy: {cores}{ours.usage.cores:.2f} over the whole run)")
    if 3 in results and results[3][0]:
        changed, runs = results[3]
        ours, boat = _compared(runs)
        _goal(f"10 % changed, CPU <= {STEADY_MS_PER_CHANGED} ms per changed feed",
              ours.usage.cpu * 1000 / changed, STEADY_MS_PER_CHANGED, "ms")
        if boat:
            _goal(f"10 % changed, CPU per changed feed <= {STEADY_RATIO}x newsboat's ({boat.label})",
                  _ratio(ours, boat, "cpu"), STEADY_RATIO, "x")
    if feeds != 1000:
        print(f"  (the goals are set for 1,000 feeds; this run had {feeds})")


def _goal(what: str, value: float, limit: float, unit: str) -> None:
    """value <= limit is met; a lower bound is passed negated."""
    print(f"  {what:88} {abs(value):8.2f} {unit:3} {'met' if value <= limit else 'MISSED'}")


def _compared(runs: list[Run]) -> tuple[Run | None, Run | None]:
    """Ours, and newsboat's last run of the round (its conditional reload in round 2)."""
    ours = next((r for r in runs if r.side == "ours"), None)
    boat = next((r for r in reversed(runs) if r.side == "newsboat"), None)
    return ours, boat


def _ratio(ours: Run, boat: Run, measure_name: str) -> float:
    mine, theirs = getattr(ours.usage, measure_name), getattr(boat.usage, measure_name)
    return mine / theirs if theirs else float("inf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--feeds", type=int, default=1000,
                    help="a multiple of the 200 bodies (10000: the large goal); under 200: the first bodies")
    ap.add_argument("--rounds", type=int, choices=range(1, 5), default=None,
                    help="rounds to run, in order (default 4; 1 when --feeds is over 1000)")
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=32, help="ours' CONCURRENCY and newsboat's reload-threads")
    ap.add_argument("--no-newsboat", action="store_true")
    ap.add_argument("--phases", action="store_true", help="run ours through bench/once_timed.py: where time went")
    ap.add_argument("--server", choices=SERVERS, default="nginx",
                    help="what serves the feeds: nginx, a process of its own; python, threads of this one")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent (set PARSER_CORPUS)")
        return
    bodies = [p.read_bytes() for p in sorted(DATA.iterdir()) if p.is_file()]
    if 0 < args.feeds < len(bodies):
        bodies = bodies[:args.feeds]  # a smoke run: the first bodies, once each
    elif args.feeds <= 0 or args.feeds % len(bodies):
        ap.error(f"--feeds must be under {len(bodies)} or a multiple of the {len(bodies)} bodies, got {args.feeds}")
    if args.rounds is None:
        args.rounds = 4 if args.feeds <= 1000 else 1
    binary = None if args.no_newsboat else newsboat()
    # Our modules compiled before the first round, as a user's first run leaves them: where
    # PYTHONDONTWRITEBYTECODE is set (this workplace sets it), each round would compile them again.
    compileall.compile_dir(ROOT, quiet=1, rx=re.compile(r"/(\.venv|tests|\.git)/"))
    repeat = args.feeds // len(bodies)
    server = serve(bodies, repeat, args.hosts, args.server)
    urls = server.urls
    print(f"steady state over {len(urls)} real feeds ({len(bodies)} bodies x {repeat}, "
          f"{sum(map(len, bodies)) * repeat / (1 << 20):.0f} MiB) on {args.hosts} loopback hosts, "
          f"CONCURRENCY {args.concurrency}, {args.rounds} round(s); "
          f"newsboat {'skipped' if binary is None else binary}; load average {_load()}\n"
          f"served by {server.describe()}", flush=True)
    try:
        with tempfile.TemporaryDirectory() as ours_dir, tempfile.TemporaryDirectory() as boat_dir:
            feeds = ServedFeeds(server)
            sides = Sides(args, feeds, urls, binary, Path(ours_dir), Path(boat_dir))
            results = poll_rounds(args.rounds, feeds, sides)
    finally:
        server.stop()
    print_goals(results, args.feeds)
    print(f"  load average at the end {_load()} (other work on this machine slows both sides alike: "
          f"read the ratios)")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
