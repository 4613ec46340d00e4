"""The link file at 100,000 links: its size on disk and how long a restart takes to resume from it.

    .venv/bin/python -m bench.bench_linkfile [--links 100000]

Writes `links` object links as pass 1 does (batches of 10,000, or 20 a page as a harvest does,
each batch one append and one fsync), then marks them done as pass 2 does (batches of 64), and
times a restart: reading links.txt and links.status and listing the pending links, with none,
half and all of them done. URLs look like a shop's (about 70 characters).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from linkgen.linkfile import Link, LinkFile, Mark


def url(n: int) -> str:
    return f"https://shop.example.com/catalogue/product-name-number-{n}_{n % 997}/index.html"


def write(folder: Path, links: int, batch: int) -> float:
    started = time.perf_counter()
    lf = LinkFile(folder, "bench")
    for start in range(0, links, batch):
        lf.add(Link(url(n), 2, "https://shop.example.com/catalogue/category/books_1/page-3.html")
               for n in range(start, min(start + batch, links)))
    lf.close()
    return time.perf_counter() - started


def mark(folder: Path, first: int, last: int) -> float:
    lf = LinkFile(folder, "bench")
    started = time.perf_counter()
    for start in range(first, last, 64):
        lf.mark(Mark(url(n), "done", index=n) for n in range(start, min(start + 64, last)))
    seconds = time.perf_counter() - started
    lf.close()
    return seconds


def resume(folder: Path) -> tuple[float, int]:
    started = time.perf_counter()
    lf = LinkFile(folder, "bench")
    pending = sum(1 for _ in lf.pending(hand_out=False))
    seconds = time.perf_counter() - started
    lf.close()
    return seconds, pending


def size(path: Path) -> str:
    return f"{path.stat().st_size / 1024 / 1024:.1f} MiB" if path.exists() else "0"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=100_000)
    args = ap.parse_args()
    n = args.links
    with tempfile.TemporaryDirectory() as tmp:
        harvest_like = write(Path(tmp) / "harvest", n, 20)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        template_like = write(folder, n, 10_000)
        print(f"{n:,} links: pass 1 writes them in {template_like:.2f} s in batches of 10,000, "
              f"{harvest_like:.2f} s at 20 a page (one fsync a page)")
        print(f"{'done':>8} {'links.txt':>10} {'links.status':>13} {'resume s':>9} {'pending':>9} {'marking s':>10}")
        marked = 0.0
        for done in (0, n // 2, n):
            if done:
                marked = mark(folder, done - (n // 2 if done == n else done), done)
            seconds, pending = resume(folder)
            print(f"{done:>8,} {size(folder / 'links.txt'):>10} {size(folder / 'links.status'):>13} {seconds:>9.3f}"
                  f" {pending:>9,} {marked:>10.2f}")


if __name__ == "__main__":
    main()
