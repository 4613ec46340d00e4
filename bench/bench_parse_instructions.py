"""The parse path's cost in instructions (valgrind's callgrind), which the machine's noise does not move.

    .venv/bin/python -m bench.bench_parse_instructions

bench_parse.py's wall-clock ratios swing by a third from one run to the next on a shared machine;
an instruction count is the same twice for the same code and input (env: "callgrind counts
instructions, not seconds"). Over the 200 real feeds of bench_parse, each under callgrind once:
- ours: parse_body as a poll calls it (max_items 50);
- sanitizing alone: sanitize.safe_html over the content of the records ours keeps (gathered outside
  valgrind, then sanitized under it): the part no extractor can skip while stored HTML is safe;
- bare fastfeedparser.parse (`pip install -e .[bench]`), the reference of issue 10's 3x goal.
Each is measured as a run minus a run that does the same set-up and no parsing, and printed in
billions of instructions and as a multiple of fastfeedparser. About ten minutes (valgrind runs
Python some fifty times slower). Skips, saying why, without valgrind or fastfeedparser.
"""
from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bench_parse import DATA, FETCHED, URL, _count

ROOT = Path(__file__).resolve().parents[1]
MAX_ITEMS = 50


def child(what: str, contents_path: str) -> None:
    """The measured run: set-up always, then the work `what` names ("" for the set-up alone)."""
    from parser.adapters import parse_body
    from parser.adapters.sanitize import safe_html
    from parser.settings.params import Source
    bodies = [p.read_bytes() for p in sorted(DATA.iterdir()) if p.is_file()]
    source = Source(name="bench", url=URL, max_items=MAX_ITEMS)
    contents = pickle.loads(Path(contents_path).read_bytes())
    parse_body(source, bodies[0], url=URL, headers={}, fetched=FETCHED, limit=MAX_ITEMS)  # first-use caches
    safe_html("<p>x</p>", URL)
    try:
        import fastfeedparser
        fastfeedparser.parse(bodies[0])
    except ImportError:
        fastfeedparser = None
    runs = {"ours": lambda b: parse_body(source, b, url=URL, headers={}, fetched=FETCHED, limit=MAX_ITEMS),
            "ffp": lambda b: fastfeedparser.parse(b)}
    if what in runs:
        for body in bodies:
            _count(runs[what], body)  # as bench_parse: a feed that fails costs what it cost
    elif what == "sanitize":
        for content, base in contents:
            safe_html(content, base)


def kept_contents() -> list[tuple[str, str]]:
    """(content, base) of every record a poll keeps, before sanitizing: what safe_html is given."""
    from parser.adapters import xmlfeed
    from parser.settings.params import Source
    source = Source(name="bench", url=URL, max_items=MAX_ITEMS)
    found = []
    for path in sorted(DATA.iterdir()):
        parsed = xmlfeed.parse(path.read_bytes(), url=URL, headers={}, source=source, fetched=FETCHED,
                               limit=MAX_ITEMS)
        found += [(r["content"], r["base"]) for r in (parsed.records if parsed else [])]
    return found


def instructions(what: str, contents_path: str) -> int:
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
         "bench.bench_parse_instructions", "--child", what, contents_path],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or not found:
        raise SystemExit(f"callgrind run {what!r} failed: {run.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent (set PARSER_CORPUS)")
        return
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)")
        return
    try:
        import fastfeedparser  # noqa: F401
    except ImportError:
        print("skipped: fastfeedparser is not installed (pip install -e .[bench])")
        return
    with tempfile.NamedTemporaryFile(suffix=".pickle") as contents_file:
        contents = kept_contents()
        contents_file.write(pickle.dumps(contents))
        contents_file.flush()
        counts = {what: instructions(what, contents_file.name) for what in ("", "ffp", "ours", "sanitize")}
    base = counts.pop("")
    cost = {what: count - base for what, count in counts.items()}
    print(f"200 feeds, max_items {MAX_ITEMS}: {len(contents)} records kept, "
          f"{sum(len(c) for c, _ in contents) / 1e6:.1f} M characters of content to sanitize")
    print(f"{'path':44} {'instructions':>13} {'/ ffp':>7}")
    labels = {"ffp": "bare fastfeedparser.parse", "ours": "ours: parse_body (poll: max_items newest)",
              "sanitize": "  of which at least: sanitizing (nh3)"}
    for what in ("ffp", "ours", "sanitize"):
        print(f"{labels[what]:44} {cost[what] / 1e9:11.2f} G {cost[what] / cost['ffp']:7.1f}")
    print(f"ours without the sanitizing: {(cost['ours'] - cost['sanitize']) / cost['ffp']:.1f}x fastfeedparser")


if __name__ == "__main__":
    main()
