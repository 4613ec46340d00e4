"""A job's `refresh` over many links: loading the link file and picking the links due again.

    .venv/bin/python -m bench.bench_refresh [--links 100000 1000000]

For each size, a link file of done links is written as a job with `refresh` leaves it (each status line
with its ETag, Last-Modified, digest and wait: 1, 2, 4 or 8 times refresh; visits spread over the last 8
refresh periods, so about half is due now), then each measure runs in a fresh process: the load
(LinkFile(..., refresh=...)), taking every link due now off the queues (a thousand at a time let go, as
pass 2 marks them), and one more look when none is due (what pass 2 does every second), with the
process's peak RSS above what it held before the load. The same load without refresh (the 0.5 link
file's cost) is the baseline.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from linkgen.linkfile import LinkFile

REFRESH = 86400.0
NOW = 1_800_000_000.0


def url(n: int) -> str:
    return f"https://shop.example.com/catalogue/product-name-number-{n}_{n % 997}/index.html"


def write(folder: Path, links: int) -> None:
    """links.txt and links.status as pass 1 and a pass 2 with refresh leave them (written here directly)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "links.txt", "w", encoding="utf-8") as out:
        out.write("# job bench: object links\n")
        for n in range(links):
            out.write(f"{url(n)}\t-\ttemplate\n")
    with open(folder / "links.status", "w", encoding="utf-8") as out:
        out.write("# job bench: statuses\n")
        # Visits spread over the last 8 refresh periods, the links in no order; the lines, as appended, in
        # the order of their times.
        for k in range(links):
            n = k * 7919 % links  # 7919 is prime: every link once
            wait = 1 << (n % 4)
            at = NOW - (links - k) / links * 8 * REFRESH
            stamp = datetime.fromtimestamp(int(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            out.write(f"{stamp}\tdone\t1\t{url(n)}\t\t{n}\t\"{n:x}-5f2a\"\tWed, 21 Oct 2026 07:28:00 GMT\t"
                      f"{n:016x}\t{wait}\t0\n")


def rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(folder: Path, refresh: bool) -> dict:
    """One process: load, then (with refresh) take the due links, then look once more."""
    import gc
    gc.collect()
    before = rss_kib()
    started = time.perf_counter()
    links = LinkFile(folder, "bench", clock=lambda: NOW, read_only=True, refresh=REFRESH if refresh else None)
    load = time.perf_counter() - started
    loaded = rss_kib()
    result = {"links": len(links), "load_s": round(load, 3), "load_rss_mib": round((loaded - before) / 1024, 1)}
    if refresh:
        started = time.perf_counter()
        due = 0
        # As pass 2 takes them: a window at a time, marked before the next.
        for _ in links._due(links.revisits, NOW, True):
            due += 1
            if due % 1000 == 0:
                links._out.clear()
        links._out.clear()
        result["due"] = due
        result["take_due_s"] = round(time.perf_counter() - started, 3)
        started = time.perf_counter()
        again = sum(1 for _ in links._due(links.revisits, NOW, True))
        result["next_look_ms"] = round((time.perf_counter() - started) * 1000, 3)
        result["next_look_due"] = again
        result["peak_rss_mib"] = round((rss_kib() - before) / 1024, 1)
    links.close()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--child", nargs=2, metavar=("FOLDER", "REFRESH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), args.child[1] == "1")))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.links:
            folder = Path(tmp) / f"links{size}"
            write(folder, size)
            disk = sum(p.stat().st_size for p in folder.iterdir()) / 1024 / 1024
            for refresh in (False, True):
                out = subprocess.run([sys.executable, "-m", "bench.bench_refresh", "--child", str(folder),
                                      "1" if refresh else "0"], capture_output=True, text=True, check=True)
                result = json.loads(out.stdout)
                per_link = result.get("peak_rss_mib", result["load_rss_mib"]) * 1024 * 1024 / size
                print(f"{size:>9,} links  refresh {'on ' if refresh else 'off'}  files {disk:6.1f} MiB  "
                      + "  ".join(f"{k} {v}" for k, v in result.items() if k != "links")
                      + f"  ({per_link:.1f} bytes a link)", flush=True)


if __name__ == "__main__":
    main()
