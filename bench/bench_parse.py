"""Parse + normalize over the 200 real feeds of ../shared/corpus/fastfeedparser/benchmark_data.

    .venv/bin/python -m bench.bench_parse [--repeat 3] [--max-items 50]

Side by side in one run, best of `repeat` each:
- old: the feedparser path as parse_body ran it before the fast path (adapters/feed.py, then
  sanitize.finish_record), every entry normalized, max_items cut after;
- new: parse_body as a poll calls it (limit=max_items: only the kept entries are normalized);
- new, every entry: parse_body with no limit (what a webhook or WebSub push gets);
- bare feedparser.parse, bare fastfeedparser.parse (when installed: `pip install -e .[bench]`;
  it is a reference only, the daemon does not use it), bare lxml (the floor).
Prints seconds, feeds/s, entries/s, the ratios, and how many feeds went to the feedparser fallback.
"""
from __future__ import annotations

import argparse
import io
import os
import time
from pathlib import Path

import feedparser
import lxml.etree

from parser.adapters import FALLBACK, jsonfeed, looks_like_json, newest, parse_body
from parser.adapters import feed as feedparser_adapter
from parser.adapters.sanitize import finish_record
from parser.core.errors import ParseError
from parser.settings.params import Source

CORPUS = Path(os.environ.get("PARSER_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))
DATA = CORPUS / "fastfeedparser" / "benchmark_data"
URL = "http://127.0.0.1/feed.xml"
FETCHED = "2026-01-01T00:00:00Z"


def old_parse_body(source: Source, body: bytes) -> int:
    """parse_body as it was: feedparser for every XML body, finish_record on every kept record."""
    adapter = jsonfeed.parse if looks_like_json(body, {}) else feedparser_adapter.parse
    parsed = adapter(body, url=URL, headers={}, source=source, fetched=FETCHED)
    return len([finish_record(r) for r in newest(parsed.records, source.max_items)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-items", type=int, default=50)
    ap.add_argument("--slow-repeat", type=int, default=None,
                    help="runs of the two feedparser paths (default: --repeat; each takes 20-250 s)")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent (set PARSER_CORPUS)")
        return
    bodies = [p.read_bytes() for p in sorted(DATA.iterdir()) if p.is_file()]
    kept = Source(name="bench", url=URL, max_items=args.max_items)
    every = Source(name="bench", url=URL, max_items=1 << 30)
    fallbacks: list[int] = []

    def new(body: bytes, limit: int | None) -> int:
        parsed = parse_body(kept if limit else every, body, url=URL, headers={}, fetched=FETCHED, limit=limit)
        if parsed.kind.endswith(FALLBACK):
            fallbacks.append(1)
        return len(parsed.records)

    paths = {
        "old parse_body (feedparser + normalize)": lambda b: old_parse_body(kept, b),
        "new parse_body (poll: max_items newest)": lambda b: new(b, args.max_items),
        "new parse_body, every entry": lambda b: new(b, None),
        "bare feedparser.parse": lambda b: len(feedparser.parse(io.BytesIO(b)).entries),
        "bare lxml.etree.fromstring": bare_lxml,
    }
    try:
        import fastfeedparser
        paths["bare fastfeedparser.parse"] = lambda b: len(fastfeedparser.parse(b).entries)
    except ImportError:
        print("fastfeedparser is not installed: its column is left out")
    results: dict[str, tuple[float, int]] = {}
    for name, run in paths.items():
        best, entries = float("inf"), 0
        runs = args.slow_repeat if args.slow_repeat and "feedparser" in name and "new" not in name else args.repeat
        for _ in range(runs):
            fallbacks.clear()
            started = time.perf_counter()
            entries = sum(_count(run, b) for b in bodies)
            best = min(best, time.perf_counter() - started)
        results[name] = (best, entries)
        if name.startswith("new parse_body (poll"):
            fallback_count = len(fallbacks)
    old = results["old parse_body (feedparser + normalize)"][0]
    ffp = results.get("bare fastfeedparser.parse", (None, 0))[0]
    print(f"{len(bodies)} feeds, {sum(map(len, bodies)) / (1 << 20):.0f} MiB, best of {args.repeat} "
          f"(feedparser paths: {args.slow_repeat or args.repeat}), max_items {args.max_items}")
    print(f"{'path':44} {'seconds':>8} {'feeds/s':>9} {'entries':>8} {'entries/s':>10} {'x old':>7} "
          f"{'/ ffp':>7}")
    for name, (seconds, entries) in results.items():
        vs_ffp = f"{seconds / ffp:7.1f}" if ffp else "      -"
        print(f"{name:44} {seconds:8.2f} {len(bodies) / seconds:9.0f} {entries:8d} {entries / seconds:10.0f} "
              f"{old / seconds:7.1f} {vs_ffp}")
    print(f"feeds handed to the feedparser fallback by the new path: {fallback_count} of {len(bodies)}")


def bare_lxml(body: bytes) -> int:
    parser = lxml.etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = lxml.etree.fromstring(body, parser)
    except lxml.etree.XMLSyntaxError:
        return 0
    return 0 if root is None else sum(1 for e in root.iter() if isinstance(e.tag, str)
                                      and e.tag.rsplit("}", 1)[-1] in ("item", "entry"))


def _count(run, body: bytes) -> int:
    try:
        return run(body)
    except (ParseError, ValueError):
        return 0


if __name__ == "__main__":
    main()
