"""The storage benchmarks, and bench_steady, run at a size that takes seconds: a change to what the code returns
(the flush's count gaining a field broke bench_flush and bench_search unseen) fails here, not at the next
measurement. Each is run as a person runs it, `python -m bench.NAME`, on SQLite; the figures are not judged."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.bench_once_real import DATA
from bench.nginx_feeds import find_nginx

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


def test_bench_steady_runs_through_nginx_and_counts_its_304s():
    """Ours only, 20 feeds, two rounds: in the second every request is conditional and nginx answers each 304."""
    if not DATA.is_dir():
        pytest.skip(f"{DATA} is absent (set PARSER_CORPUS)")
    if find_nginx() is None:
        pytest.skip("nginx is absent and could not be installed (apt-get install nginx-light)")
    proc = subprocess.run([sys.executable, "-m", "bench.bench_steady", "--feeds", "20", "--rounds", "2",
                           "--no-newsboat", "--server", "nginx"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "served by nginx" in proc.stdout, proc.stdout[-2000:]
    # ... requests, conditional, answered 304, server CPU s: the last columns of round 2's line
    round_2 = re.search(r"^ +ours +--once 2 +0 .* (\d+) +(\d+) +(\d+) +[\d.]+$", proc.stdout, re.M)
    assert round_2, proc.stdout[-2000:]
    requests, conditional, not_modified = map(int, round_2.groups())
    assert requests == 20 and conditional == not_modified > 0, round_2.group(0)
