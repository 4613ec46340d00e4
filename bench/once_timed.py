"""`run_daemon.py` with per-phase clocks, for bench/bench_once_real.py: where a `--once` spends its time.

    python -m bench.once_timed TIMINGS.json --params FOLDER/params.py --once

Runs parser.cli.main unchanged, with a clock around each phase's one entry point (nothing else is
replaced), and writes the sums to TIMINGS.json before leaving as run_daemon.py does:
- fetch: Fetcher.get, in the worker threads (wall seconds summed over threads: mostly waiting);
- parse: Poller._parse (parser/sources/poll.py), in the worker threads: with parse processes
  (PARSE_PROCESSES) the wall seconds a thread waits for its body to be parsed elsewhere, summed over
  threads; parsing in the threads, their CPU seconds (time waiting for the GIL not counted twice);
- uniqueness: intake.decide (identity keys and the hash-file check: the verdicts), on the main thread;
- staging: the rest of Sink.stage_many (CSV append, fsync, hashes remembered), on the main thread;
- flush: Sink.flush and Sink.save (the database insert, the Bloom filter saved), on the main thread.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections import defaultdict

from parser import cli
from parser.fetch.http import Fetcher
from parser.pipeline import intake, sink
from parser.sources import poll

_wall: dict[str, float] = defaultdict(float)
_cpu: dict[str, float] = defaultdict(float)
_calls: dict[str, int] = defaultdict(int)
_lock = threading.Lock()


def _clocked(phase: str, function):
    def clocked(*args, **kwargs):
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            with _lock:
                _wall[phase] += wall
                _cpu[phase] += cpu
                _calls[phase] += 1
    return clocked


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    started = time.perf_counter()
    Fetcher.get = _clocked("fetch", Fetcher.get)
    poll.Poller._parse = _clocked("parse", poll.Poller._parse)
    intake.decide = _clocked("uniqueness", intake.decide)  # as the Intake calls it
    # Sink.stage is stage_many of one batch; the daemon stages polls in batches: one clock for both.
    sink.Sink.stage_many = _clocked("stage", sink.Sink.stage_many)  # uniqueness included: subtracted below
    sink.Sink.flush = _clocked("flush", sink.Sink.flush)
    sink.Sink.save = _clocked("flush", sink.Sink.save)
    code = cli.main(argv)
    wall = {k: round(v, 3) for k, v in _wall.items()}
    wall["staging"] = round(_wall.get("stage", 0.0) - _wall.get("uniqueness", 0.0), 3)
    usage = os.times()
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"wall": wall, "cpu": {k: round(v, 3) for k, v in _cpu.items()}, "calls": dict(_calls),
                   "seconds": round(time.perf_counter() - started, 3),
                   "process_cpu": round(usage.user + usage.system, 3)}, f)
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)  # as parser.cli.run: worker threads stuck in a read must not hold the exit


if __name__ == "__main__":
    main()
