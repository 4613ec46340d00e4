"""Every record parse_body makes of the corpus's feeds, written to one file: two trees' outputs diffed
prove that a change to the parse stores every field as before.

    .venv/bin/python -m bench.parse_snapshot OUT.jsonl [--only benchmark_data]
    diff <(main's OUT.jsonl) <(this tree's OUT.jsonl)

Each body of ../shared/corpus (the 200 of fastfeedparser/benchmark_data, fastfeedparser's integration
feeds, feedparser's conformance suite, chardet's legacy encodings) is parsed twice:
- "poll": as a first poll reads it (parser/pipeline/first_read.py): limit max_items (50), each adapter's
  scan with the ids (digest included) kept under "select", every entry read;
- "push": parse_body with no limit, as a webhook or WebSub push is parsed.
One JSON line per body and way: its records (every field, in the stored order), the feed's info, kind,
home, warnings and notes, or the error it raised. The lines are in a fixed order, so a diff points at
the body that differs.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.bench_once_real import CORPUS

URL = "http://127.0.0.1/feed.xml"
FETCHED = "2026-01-01T00:00:00Z"
MAX_ITEMS = 50
# The corpus folders that hold feeds, and which of their files are bodies (the rest are expectations).
FOLDERS = {
    "benchmark_data": (CORPUS / "fastfeedparser" / "benchmark_data", "*"),
    "integration": (CORPUS / "fastfeedparser" / "tests" / "integration", "*.xml"),
    "feedparser": (CORPUS / "feedparser" / "tests", "*.xml"),
    "feedparser_json": (CORPUS / "feedparser" / "tests" / "json", "*.json"),
    "chardet": (CORPUS / "chardet" / "tests", "*.xml"),
}
# feedparser's suite names the headers a file is meant to be served with (its paths hold "http").
_HEADER = re.compile(rb"^Header:\s*([\w-]+):\s*(.*?)\s*$", re.M)


def bodies(only: str | None) -> list[tuple[str, bytes, dict[str, str]]]:
    """(name relative to the corpus, body, headers) of every feed body, in a fixed order."""
    found = []
    for folder, (root, pattern) in FOLDERS.items():
        if only and folder != only or not root.is_dir():
            continue
        for path in sorted(p for p in root.rglob(pattern) if p.is_file() and not p.name.startswith(".")):
            body = path.read_bytes()
            headers = {}
            if folder == "feedparser" and "http" in path.name:
                headers = {k.decode(): v.decode("latin-1") for k, v in _HEADER.findall(body[:4000])}
            found.append((str(path.relative_to(CORPUS)), body, headers))
    return found


def snapshot(body: bytes, headers: dict[str, str], way: str) -> dict[str, Any]:
    from parser.adapters import Parsed, finished, parse_body, scans
    from parser.core.errors import ParseError
    from parser.settings.params import Source
    source = Source(name="snapshot", url=URL, max_items=MAX_ITEMS)
    handed: list[list[dict[str, str]]] = []  # each scan's ids, as the intake's first look is given them

    def polled() -> Parsed:
        for scan in scans(source, body, url=URL, headers=headers, fetched=FETCHED, limit=MAX_ITEMS, ids=True):
            handed.append([{**one, "home": scan.home} for one in scan.ids])
            read = scan.read()
            if read is not None:
                return finished(read)
        raise AssertionError("scans ends in a read")

    try:
        parsed = polled() if way == "poll" else parse_body(source, body, url=URL, headers=headers, fetched=FETCHED)
    except ParseError as exc:
        return {"error": f"ParseError: {exc}", "select": handed}
    except Exception as exc:  # noqa: BLE001 - a crash is part of what must stay the same
        return {"error": f"{type(exc).__name__}: {exc}", "select": handed}
    return {"kind": parsed.kind, "home": parsed.home, "feed": asdict(parsed.feed), "warnings": parsed.warnings,
            "notes": parsed.notes, "next_url": parsed.next_url, "feed_url": parsed.feed_url,
            "select": handed, "records": parsed.records}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", choices=sorted(FOLDERS), help="one folder of the corpus")
    args = ap.parse_args()
    found = bodies(args.only)
    if not found:
        sys.exit(f"no corpus bodies under {CORPUS} (set PARSER_CORPUS)")
    with args.out.open("w", encoding="utf-8") as out:
        for name, body, headers in found:
            for way in ("poll", "push"):
                line = {"body": name, "way": way, **snapshot(body, headers, way)}
                out.write(json.dumps(line, ensure_ascii=True) + "\n")
    print(f"{len(found)} bodies, {2 * len(found)} lines in {args.out}")


if __name__ == "__main__":
    main()
