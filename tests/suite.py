"""`make test`: the suite in two phases, so that the files marked one_worker (tests/conftest.py: the
listener attacks) have the machine to themselves. Phase 1 runs every other test on pytest-xdist's
workers; phase 2 runs the one_worker files in one process, with nothing beside them. Both phases run
(a failure in the first does not hide the second's results), and a closing line in pytest's own
form adds the two up.

    python -m tests.suite --workers 4 [pytest arguments...]

The exit code is pytest's: 0 when every test collected passed, 1 when a test failed in either phase,
5 when neither phase collected a test (a phase with nothing of the selection in it is no failure);
an interrupted or broken first phase (2, 3, 4) ends the run with its code. --workers 0: the whole
suite in one process, one phase, as plain pytest.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter

# pytest's closing line: "==== 1 failed, 990 passed, 3 skipped, 2 warnings in 301.25s (0:05:01) ===="
CLOSING = re.compile(r"^=+ (?P<counts>.*?) in (?P<seconds>[\d.]+)s\b.* =+$")
COUNT = re.compile(r"(\d+) (\w+)")
NO_TESTS = 5
STOPS_THE_RUN = {2, 3, 4}  # interrupted, internal error, usage error


def main(argv: list[str]) -> int:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--workers", type=int, default=4)
    ours, pytest_args = cli.parse_known_args(argv)
    base = [sys.executable, "-m", "pytest"]
    if ours.workers == 0:
        return subprocess.call([*base, "-n", "0", *pytest_args])
    started = time.monotonic()
    phases = [
        (f"phase 1: all but the one_worker files, on {ours.workers} workers",
         [*base, "-n", str(ours.workers), "--dist", "loadscope", "--one-worker-files=skip", *pytest_args]),
        ("phase 2: the one_worker files alone, in one process",
         [*base, "-n", "0", "--one-worker-files=only", *pytest_args]),
    ]
    codes, closings = [], []
    for title, command in phases:
        print(f"\n#### make test, {title}", flush=True)
        code, closing = run(command)
        codes.append(code)
        closings.append(closing)
        if code in STOPS_THE_RUN:
            break
    code = combined(codes)
    print(closing_line(closings, time.monotonic() - started, code), flush=True)
    return code


def run(command: list[str]) -> tuple[int, str | None]:
    """Run pytest with its output passed through as it comes; its exit code and its closing line."""
    closing = None
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # its lines as they come, not a pipe's buffer at a time
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, errors="replace", env=env) as proc:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                if CLOSING.match(line.strip()):
                    closing = line.strip()
        except KeyboardInterrupt:  # Ctrl-C reached pytest too (the terminal's group): its summary, its code
            sys.stdout.write(proc.stdout.read())
    return proc.wait(), closing


def combined(codes: list[int]) -> int:
    """One exit code for the phases: the first failure's, else 0 if any phase ran tests, else 5."""
    failing = [c for c in codes if c not in (0, NO_TESTS)]
    if failing:
        return failing[0]
    return 0 if 0 in codes else NO_TESTS


def closing_line(closings: list[str | None], seconds: float, code: int) -> str:
    """The phases' closing lines added up, in pytest's form, e.g. `== 1 failed, 1010 passed in 301.2s
    (both phases of make test) ==`."""
    counts: Counter[str] = Counter()
    for line in closings:
        if line and (m := CLOSING.match(line)):
            for n, what in COUNT.findall(m["counts"]):
                counts[what] += int(n)
    order = ["failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "warnings", "warning",
             "errors", "error"]
    words = [f"{counts[w]} {w}" for w in order if counts[w]] + \
            [f"{n} {w}" for w, n in counts.items() if w not in order and n]
    text = ", ".join(words) or "no tests ran"
    if code not in (0, NO_TESTS) and not (counts["failed"] or counts["errors"] or counts["error"]):
        text += f", exit code {code}"
    return f"{'=' * 20} {text} in {seconds:.2f}s (both phases of make test) {'=' * 20}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
