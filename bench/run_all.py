"""Run every bench/bench_*.py in turn (`make bench`), each printing its own side-by-side figures."""
from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path


def main() -> int:
    names = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    for name in names:
        print(f"\n== bench.{name}", flush=True)
        started = time.perf_counter()
        module = importlib.import_module(f"bench.{name}")
        saved, sys.argv = sys.argv, [name]  # each bench with its defaults
        try:
            module.main()
        finally:
            sys.argv = saved
        print(f"== {name}: {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
