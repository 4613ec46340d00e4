"""Uniqueness check cost against history size: the seed's tail scan vs. HashFile (Bloom + tail confirm).

    .venv/bin/python -m bench.bench_dedup [--history 2000000] [--records 2000]

For each history size it times checking `records` records (90% new, 10% duplicates of recent
records), in polls of 50 as the daemon asks, with both methods, in the same run, and prints the
time per record and the ratio. The tail scan reads the file backwards a line at a time, as in
seeds/004. It also times a steady-state poll: 50 records that are all recent duplicates, asked one
by one (is_new) and as the daemon asks, one batch per poll (unseen).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import tempfile
import time
from pathlib import Path

from parser.pipeline.dedup import HashFile

LINE = 57  # sha224 hex + newline
POLL = 50  # records a feed poll hands to the check at once


def digest(n: int) -> str:
    return hashlib.sha224(str(n).encode()).hexdigest()


def write_history(path: Path, count: int) -> None:
    with open(path, "wb") as f:
        batch = []
        for n in range(count):
            batch.append(digest(n).encode() + b"\n")
            if len(batch) == 100_000:
                f.write(b"".join(batch))
                batch = []
        f.write(b"".join(batch))


def tail_scan_is_new(path: Path, h: str) -> bool:
    """The seed's check: read the file from its end one hash at a time."""
    needle = h.encode()
    with open(path, "rb") as f:
        pos = f.seek(0, os.SEEK_END)
        while pos >= LINE:
            pos -= LINE
            f.seek(pos)
            if f.read(LINE - 1) == needle:
                return False
    return True


def workload(history: int, records: int, rng: random.Random) -> list[str]:
    out = []
    for i in range(records):
        if history and rng.random() < 0.1:
            out.append(digest(history - 1 - rng.randrange(min(history, 200))))  # a recent duplicate
        else:
            out.append(digest(10**9 + i))
    return out


def measure(history: int, records: int, naive_records: int) -> dict:
    rng = random.Random(42)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hashes.txt"
        write_history(path, history)
        started = time.perf_counter()
        check = HashFile(path, 56)  # no saved filter yet: builds it from the file, once
        build_seconds = time.perf_counter() - started
        check.close()
        started = time.perf_counter()
        check = HashFile(path, 56)  # what every later start costs: load the saved filter
        reopen_seconds = time.perf_counter() - started
        keys = workload(history, records, rng)
        started = time.perf_counter()
        ours_answers = []
        for at in range(0, len(keys), POLL):
            poll = keys[at:at + POLL]
            unseen = check.unseen(poll)
            ours_answers += [k in unseen for k in poll]
        ours = (time.perf_counter() - started) / len(keys)
        polls = [[digest(history - 1 - rng.randrange(min(history, 500))) for _ in range(POLL)]
                 for _ in range(100)] if history else []
        started = time.perf_counter()
        for poll in polls:
            [bool(check.unseen([k])) for k in poll]
        one_by_one_ms = (time.perf_counter() - started) / max(len(polls), 1) * 1000
        started = time.perf_counter()
        for poll in polls:
            check.unseen(poll)
        batched_ms = (time.perf_counter() - started) / max(len(polls), 1) * 1000
        check.close()
        sample = keys[:naive_records]
        started = time.perf_counter()
        naive_answers = [tail_scan_is_new(path, k) for k in sample]
        naive = (time.perf_counter() - started) / len(sample)
    return {"ours_us": ours * 1e6, "naive_us": naive * 1e6, "build_s": build_seconds, "reopen_s": reopen_seconds,
            "agree": ours_answers[:naive_records] == naive_answers, "one_by_one_ms": one_by_one_ms,
            "batched_ms": batched_ms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", type=int, default=2_000_000)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--naive-records", type=int, default=20)
    args = ap.parse_args()
    print(f"{'history':>10} {'ours µs/rec':>12} {'tail scan µs/rec':>17} {'tail/ours':>10} {'bloom build s':>14}"
          f" {'reopen s':>9}  {'poll of 50 duplicates: one by one / batched':>44}")
    for history in (0, 100_000, args.history):
        r = measure(history, args.records, args.naive_records)
        ratio = r["naive_us"] / r["ours_us"] if r["ours_us"] else float("inf")
        print(f"{history:>10} {r['ours_us']:>12.1f} {r['naive_us']:>17.1f} {ratio:>10.0f} {r['build_s']:>14.2f}"
              f" {r['reopen_s']:>9.3f}  {r['one_by_one_ms']:>31.2f} ms / {r['batched_ms']:.2f} ms"
              f"  {'answers agree' if r['agree'] else 'ANSWERS DIFFER'}")


if __name__ == "__main__":
    main()
