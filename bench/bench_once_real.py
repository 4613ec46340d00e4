"""A first `--once` over real feeds served on loopback, against newsboat's `-x reload` of the same URLs.

    .venv/bin/python -m bench.bench_once_real [--repeat 5] [--hosts 50] [--concurrency 32] [--no-newsboat]
        [--server nginx|python]

The 200 real feeds of ../shared/corpus/fastfeedparser/benchmark_data, each served `repeat` times
under its own address (1,000 feeds by default), spread over `hosts` loopback addresses
(127.0.0.1 .. 127.0.0.50: every address is loopback on Linux), served by nginx in a process of its own
(bench/nginx_feeds.py, installed with apt-get when absent), or with `--server python` the old way, one
threaded Python server a host inside the bench process (bench/loopback_feeds.py), which takes CPU from the
cores both sides share. In the same run, against the same server:
- ours: `run_daemon.py --once` (through bench/once_timed.py, which only adds clocks) in a fresh
  project folder: params.py written here, SQLite database, default settings but CONCURRENCY;
- newsboat: `newsboat -x reload` with a urls file and a temporary config and cache
  (`reload-threads` = our CONCURRENCY), installed with apt-get when absent; skipped, with the reason
  printed, when it cannot be had.
Prints wall time, peak RSS (os.wait4's ru_maxrss of the process) and rows stored for both; where our
wall time goes (fetch, parse, uniqueness, staging, flush); how many feeds went to the feedparser
fallback ("via feedparser" in parser.log). Goal (issue 10): ours faster than newsboat, under 300 MiB.
Run with --repeat 1 and --repeat 5 to see that peak RSS follows CONCURRENCY, not the number of feeds;
with MALLOC_ARENA_MAX=16 in the environment (glibc's default on 2 cores) to see why parser/core/memory.py
caps malloc's arenas.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.feed_server import FeedServer
from bench.loopback_feeds import LoopbackFeeds
from bench.nginx_feeds import NginxFeeds, NginxStartError, find_nginx

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("PARSER_CORPUS", ROOT.parent / "shared" / "corpus"))
DATA = CORPUS / "fastfeedparser" / "benchmark_data"
GOAL_MIB = 300


SERVERS = ("nginx", "python")


def serve(bodies: list[bytes], repeat: int, hosts: int, server: str = "nginx") -> FeedServer:
    """Feed n is body n % len(bodies) at /feed{n}.xml on loopback host n % hosts, each with an ETag and a
    Last-Modified, served by nginx or ("python") by one Python thread server per host; when nginx cannot be
    had or started, by Python, the reason printed."""
    if server == "nginx":
        binary = find_nginx()
        if binary:
            try:
                return NginxFeeds(binary, bodies, repeat, hosts)
            except (NginxStartError, OSError) as exc:
                print(f"nginx could not serve the feeds ({exc})")
        print("serving from Python threads instead (--server python)", flush=True)
    return LoopbackFeeds(bodies, repeat, hosts)


def timed_run(command: list[str], **kwargs) -> tuple[float, int, float]:
    """(wall seconds, exit code, peak RSS in MiB) of one child process."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as said:  # a file, not a pipe: a full pipe would stop the child
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=said, **kwargs)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        said.seek(0)
        stderr = said.read().decode("utf-8", "replace").strip()
    if proc.returncode and stderr:
        print(f"  ({command[0]} said: {stderr[-300:]})")
    return seconds, proc.returncode, usage.ru_maxrss / 1024


def write_params(folder: Path, urls: list[str], concurrency: int) -> Path:
    """A project folder's params.py: one source a URL, default settings but CONCURRENCY."""
    sources = [{"name": f"feed{n}", "url": url} for n, url in enumerate(urls)]
    (folder / "params.py").write_text(f"CONCURRENCY = {concurrency}\nSOURCES = {sources!r}\n")
    return folder / "params.py"


def run_ours(folder: Path, urls: list[str], concurrency: int) -> dict:
    write_params(folder, urls, concurrency)
    timings = folder / "timings.json"
    seconds, code, peak = timed_run([sys.executable, "-m", "bench.once_timed", str(timings),
                                     "--params", str(folder / "params.py"), "--once"], cwd=ROOT)
    log = (folder / "logs" / "parser.log").read_text(encoding="utf-8", errors="replace") \
        if (folder / "logs" / "parser.log").exists() else ""
    return {"seconds": seconds, "code": code, "peak": peak, "rows": count_rows(folder / "db" / "items.db", "items"),
            "fallbacks": sum(1 for line in log.splitlines() if line.rstrip().endswith("via feedparser")),
            "errors": [line for line in log.splitlines() if "  error  " in line],
            "timings": json.loads(timings.read_text()) if timings.exists() else None}


def newsboat() -> str | None:
    """The newsboat binary, installed with apt-get when absent; None (and the reason printed) when it cannot be."""
    found = shutil.which("newsboat")
    if found:
        return found
    print("newsboat is absent: apt-get install -y newsboat ...", flush=True)
    try:
        subprocess.run(["apt-get", "install", "-y", "-qq", "newsboat"], check=True, capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"newsboat skipped: it could not be installed ({exc})")
        return None
    return shutil.which("newsboat")


def newsboat_reload(binary: str, folder: Path, urls: list[str], threads: int) -> tuple[list[str], dict[str, str]]:
    """The command and environment of one `newsboat -x reload` with its urls, config and cache in `folder`
    (written here): run again in the same folder, it reloads the same cache."""
    (folder / "urls").write_text("".join(u + "\n" for u in urls))
    (folder / "config").write_text(f"reload-threads {threads}\nshow-read-feeds yes\n")
    env = {**os.environ, "HOME": str(folder), "XDG_CONFIG_HOME": str(folder / "xdg-config"),
           "XDG_DATA_HOME": str(folder / "xdg-data")}
    return [binary, "-x", "reload", "-u", str(folder / "urls"), "-c", str(folder / "cache.db"),
            "-C", str(folder / "config")], env


def run_newsboat(binary: str, folder: Path, urls: list[str], threads: int) -> dict:
    command, env = newsboat_reload(binary, folder, urls, threads)
    seconds, code, peak = timed_run(command, env=env)
    return {"seconds": seconds, "code": code, "peak": peak, "rows": count_rows(folder / "cache.db", "rss_item")}


def count_rows(path: Path, table: str) -> int:
    if not path.exists():
        return 0
    con = sqlite3.connect(path)
    try:
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        con.close()


def phases(ours: dict) -> None:
    """Where our wall time went: main-thread phases as shares of it; the workers' fetch (waiting,
    summed over threads) and parse (CPU seconds: the one Python core they share) beside them."""
    timings = ours["timings"]
    if not timings:
        print("  (no timings: the daemon did not finish)")
        return
    wall, cpu, total = timings["wall"], timings["cpu"], ours["seconds"]
    main_thread = sum(wall.get(k, 0.0) for k in ("uniqueness", "staging", "flush"))
    print(f"  where our {total:.2f} s went (process CPU {timings['process_cpu']:.2f} s on 2 cores):")
    print(f"    fetch       {wall.get('fetch', 0.0):8.2f} s summed over worker threads "
          f"(~{wall.get('fetch', 0.0) / total:.1f} workers waiting on average; CPU {cpu.get('fetch', 0.0):.2f} s)")
    parse, waited = cpu.get("parse", 0.0), wall.get("parse", 0.0)
    print(f"    parse       {parse:8.2f} CPU s in worker threads = {parse / total:6.1%} "
          f"of the wall time ({timings['calls'].get('parse', 0)} bodies; {waited:.2f} s summed waiting for them, "
          "most of it for the parse processes when there are)")
    cpu["staging"] = cpu.get("stage", 0.0) - cpu.get("uniqueness", 0.0)
    for name in ("uniqueness", "staging", "flush"):
        calls = timings["calls"].get("stage" if name == "staging" else name, 0)
        print(f"    {name:11} {wall.get(name, 0.0):8.2f} s on the main thread = {wall.get(name, 0.0) / total:6.1%} "
              f"(CPU {cpu.get(name, 0.0):.2f} s, {calls} calls)")
    print(f"    start-up, waiting for workers, logging: {total - main_thread:.2f} s = "
          f"{(total - main_thread) / total:6.1%}")


def _best(runs: list[dict]) -> dict:
    """The fastest run, with the highest peak RSS of all the runs (memory is not luck)."""
    best = dict(min(runs, key=lambda r: r["seconds"]))
    best["peak"] = max(r["peak"] for r in runs)
    return best


def _seconds(runs: list[dict]) -> str:
    return ", ".join(f"{r['seconds']:.1f}" for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="times each of the 200 bodies is served (5: 1,000 feeds)")
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--no-newsboat", action="store_true")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each, best time kept (the machine is shared)")
    ap.add_argument("--server", choices=SERVERS, default="nginx", help="what serves the feeds")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent (set PARSER_CORPUS)")
        return
    bodies = [p.read_bytes() for p in sorted(DATA.iterdir()) if p.is_file()]
    binary = None if args.no_newsboat else newsboat()
    server = serve(bodies, args.repeat, args.hosts, args.server)
    urls = server.urls
    print(f"first --once over {len(urls)} real feeds ({len(bodies)} bodies x {args.repeat}, "
          f"{sum(map(len, bodies)) * args.repeat / (1 << 20):.0f} MiB) on {args.hosts} loopback hosts, "
          f"CONCURRENCY {args.concurrency}; served by {server.describe()}", flush=True)
    ours_runs, boat_runs = [], []
    try:
        for round_ in range(args.rounds):
            # Each round in a fresh folder (a first --once each time); the order alternates, so that
            # neither side always meets the machine as the other left it.
            with tempfile.TemporaryDirectory() as ours_dir, tempfile.TemporaryDirectory() as boat_dir:
                steps = [lambda d=ours_dir: ours_runs.append(run_ours(Path(d), urls, args.concurrency))]
                if binary:
                    steps.append(lambda d=boat_dir: boat_runs.append(run_newsboat(binary, Path(d), urls,
                                                                                  args.concurrency)))
                for step in steps if round_ % 2 == 0 else steps[::-1]:
                    step()
    finally:
        server.stop()
    ours = _best(ours_runs)
    boat = _best(boat_runs) if boat_runs else None
    phases(ours)
    print(f"  best of {args.rounds} round(s) each; peak RSS: the highest seen; "
          f"ours {_seconds(ours_runs)} s, newsboat {_seconds(boat_runs) or '-'} s")
    print(f"  {'':10} {'exit':>4} {'seconds':>8} {'feeds/s':>8} {'peak RSS':>10} {'rows':>7}")
    for name, run in (("ours", ours), ("newsboat", boat)):
        if run:
            print(f"  {name:10} {run['code']:4d} {run['seconds']:8.2f} {len(urls) / run['seconds']:8.0f} "
                  f"{run['peak']:6.0f} MiB {run['rows']:7d}")
    if boat is None:
        print("  newsboat: skipped (--no-newsboat, or it could not be installed)")
    else:
        print(f"  ours / newsboat: {ours['seconds'] / boat['seconds']:.2f}x the time, "
              f"{ours['peak'] / boat['peak']:.2f}x the memory")
    verdict = "under" if ours["peak"] < GOAL_MIB else "OVER"
    print(f"  peak RSS {ours['peak']:.0f} MiB: {verdict} the {GOAL_MIB} MiB goal")
    print(f"  feeds handed to the feedparser fallback: {ours['fallbacks']} of {len(urls)}; "
          f"polls that failed: {len(ours['errors'])}")
    for line in ours["errors"][:5]:
        print(f"    {line[:200]}")


if __name__ == "__main__":
    main()
