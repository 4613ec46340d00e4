"""Pass 2 throughput: objects per second against a loopback site with the per-host limit off.

    .venv/bin/python -m bench.bench_pass2 [--objects 3000] [--concurrency 1 8 32]

A template job over `objects` product pages (about 8 KiB of HTML each, four fields by XPath and
CSS) served by tests.server on 127.0.0.1. For each CONCURRENCY (PER_HOST set as large) it runs
`run_daemon.py --once --links-only` (pass 1, not timed), then `--once` and reads the pass-2 line
of parser.log: objects fetched, parsed, staged and marked done per second, and the whole run's
wall time (start-up and the flush into SQLite included). The server shares the machine's cores.
"""
from __future__ import annotations

import argparse
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.server import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"name": "//h1[@class='name']", "price": "css:p.price::text", "sku": "//td[@id='sku']",
          "tags": "css:ul.tags li"}


def product(n: int) -> bytes:
    filler = "".join(f"<p class='review'>Review {i} of product {n}: good value, would buy again.</p>"
                     for i in range(80))
    return (f"<!DOCTYPE html><html><head><title>Product {n}</title></head><body>"
            f"<nav><a href='/'>home</a> <a href='/list/{n // 20}'>list</a></nav>"
            f"<h1 class='name'>Product {n}</h1><p class='price'>{n % 97}.99</p>"
            f"<table><tr><th>SKU</th><td id='sku'>SKU-{n:06d}</td></tr></table>"
            f"<ul class='tags'><li>tag{n % 7}</li><li>tag{n % 11}</li></ul>{filler}</body></html>").encode()


def run(folder: Path, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "run_daemon.py"), "--params", str(folder / "params.py"), *args],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)
    return time.perf_counter() - started


def measure(server: LoopbackServer, objects: int, concurrency: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        job = {"name": "bench", "template": server.url("/p/{id}"), "values": {"id": range(objects)},
               "fields": FIELDS}
        (folder / "params.py").write_text(
            f"DB_URL = 'sqlite:///db/items.db'\nCONCURRENCY = {concurrency}\nPER_HOST = {concurrency}\n"
            f"FLUSH_INTERVAL = 3600\nLINK_JOBS = [{job!r}]\n")
        run(folder, "--once", "--links-only")
        wall = run(folder, "--once")
        log = (folder / "logs" / "parser.log").read_text()
        line = re.search(r"bench  pass 2: (\d+) fetched: (\d+) new.*?([\d.]+) s$", log, re.MULTILINE)
        fetched, new, seconds = int(line.group(1)), int(line.group(2)), float(line.group(3))
        con = sqlite3.connect(folder / "db" / "items.db")
        stored = con.execute("SELECT COUNT(*) FROM bench").fetchone()[0]
        con.close()
    return {"fetched": fetched, "new": new, "seconds": seconds, "wall": wall, "stored": stored}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = ap.parse_args()
    server = LoopbackServer()
    # The test server writes headers and body in two sends; with Nagle on, each response would wait
    # for the client's delayed ACK (40 ms) and the figure would measure that, not the parser.
    server.httpd.RequestHandlerClass.disable_nagle_algorithm = True
    server.start()
    for n in range(args.objects):
        server.route(f"/p/{n}", body=product(n), content_type="text/html; charset=utf-8")
    print(f"{args.objects} objects of {len(product(1)) / 1024:.1f} KiB on one loopback host, per-host limit off")
    print(f"{'concurrency':>11} {'pass 2 s':>9} {'objects/s':>10} {'run wall s':>11} {'rows stored':>12}")
    try:
        for concurrency in args.concurrency:
            r = measure(server, args.objects, concurrency)
            print(f"{concurrency:>11} {r['seconds']:>9.2f} {r['fetched'] / r['seconds']:>10.0f} {r['wall']:>11.2f}"
                  f" {r['stored']:>12}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
