"""The storage benchmarks run, at a size that takes seconds: a change to what the code returns (the flush's
count gaining a field broke bench_flush and bench_search unseen) fails here, not at the next measurement.
Each is run as a person runs it, `python -m bench.NAME`, on SQLite; the figures are not judged."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("bench", "args", "said"), [
    ("bench_flush", ["--rows", "300", "--no-pg", "--no-restart"], "ours (Sink.flush)"),
    ("bench_search", ["--rows", "300", "--flushes", "1", "--no-pg"], "a flush of 1,000 rows into them"),
    ("bench_retention", ["--rows", "2000", "--due", "200", "--no-pg"], "SQLite"),
])
def test_a_storage_benchmark_runs_to_its_figures(bench, args, said):
    proc = subprocess.run([sys.executable, "-m", f"bench.{bench}", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert said in proc.stdout, proc.stdout[-2000:]
