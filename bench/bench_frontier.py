"""Costs per link of the two-pass frontiers: a harvest with a huge listing, pass 1 of a huge template,
pass 2 at the start and at the end of a long link file. Each figure comes from the real daemon.

    .venv/bin/python -m bench.bench_frontier [--before REV] [--follow 1000 50000] [--template 10000000]
                                             [--pass2-links 1000000] [--parts harvest template pass2]

- harvest: `--once --links-only` of a job whose root page holds N follow-links (each page behind one
  holds one object link); max_pages (1,000) bounds the pages fetched, so only the queue's size differs.
- template: `--once --links-only` of a template job of N values; the daemon's peak RSS (ru_maxrss).
- pass2: a link file of N links already written (and all but the last 10,000 done, for "end"); `--once`
  fetches from a loopback site, and the seconds between the server's first and 10,000th request say
  what one 10,000 costs at the start and at the end of the file.

With `--before REV` each figure is measured for that commit's code too (exported with git archive),
side by side in one run, because these machines are noisy.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import ExitStack
from io import BytesIO
from pathlib import Path

from tests.server import LoopbackServer, reply

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = 10_000
FIELDS = {"title": "//h1"}


def export(rev: str, into: Path) -> Path:
    """The code of commit `rev`, unpacked into `into`."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def write_params(folder: Path, job: dict, **settings) -> None:
    lines = ["DB_URL = 'sqlite:///db/items.db'", "FLUSH_INTERVAL = 3600", f"LINK_JOBS = [{job!r}]"]
    lines += [f"{k} = {v!r}" for k, v in settings.items()]
    (folder / "params.py").write_text("\n".join(lines) + "\n")


def run_measured(code: Path, folder: Path, *args: str, timeout: float = 3600) -> tuple[float, float, int]:
    """Run the daemon of `code` on `folder`; (wall seconds, peak RSS in MiB, exit code)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(code / "run_daemon.py"), "--params", str(folder / "params.py"),
                             *args], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss / 1024, proc.returncode


def link_lines(folder: Path) -> int:
    path = folder / "staging" / "jobs" / "bench" / "links.txt"
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b"")) - 1  # header


# -- harvest -----------------------------------------------------------------------------------------
def harvest_site(server: LoopbackServer, follow: int) -> None:
    links = "".join(f'<a href="/list/{n}">{n}</a>' for n in range(follow))
    server.route(f"/root{follow}", body=f"<html><body>{links}</body></html>".encode(), content_type="text/html")


def bench_harvest(server: LoopbackServer, codes: dict[str, Path], follows: list[int]) -> None:
    def list_page(h) -> None:
        n = h.path.rsplit("/", 1)[1]
        reply(h, 200, f'<html><body><a href="/item/{n}">item</a></body></html>'.encode(),
              {"Content-Type": "text/html"})

    server.route("/list/*", handler=list_page)
    server.route("/robots.txt", status=404, body=b"")
    print(f"harvest: one root page of N follow-links, {1000 - 1} of them expanded (max_pages 1,000)")
    print(f"{'code':>8} {'follow-links':>13} {'pass 1 s':>9} {'links':>7} {'peak MiB':>9}")
    for follow in follows:
        harvest_site(server, follow)
        for name, code in codes.items():
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                write_params(folder, {"name": "bench", "harvest": {"root": server.url(f"/root{follow}"),
                                                                   "depth": 2, "follow": "/list/"},
                                      "objects": r"/item/\d+$", "fields": FIELDS},
                             CONCURRENCY=8, PER_HOST=8)
                seconds, peak, code_ = run_measured(code, folder, "--once", "--links-only")
                print(f"{name:>8} {follow:>13,} {seconds:>9.2f} {link_lines(folder):>7,} {peak:>9.0f}"
                      + ("" if code_ == 0 else f"  exit {code_}"), flush=True)


# -- pass 1 of a template ----------------------------------------------------------------------------
def bench_template(server: LoopbackServer, codes: dict[str, Path], values: int) -> None:
    print(f"template pass 1: {values:,} values, --once --links-only")
    print(f"{'code':>8} {'pass 1 s':>9} {'peak MiB':>9} {'links':>11} {'again s':>8} {'again MiB':>10}")
    for name, code in codes.items():
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            write_params(folder, {"name": "bench", "template": server.url("/p/{id}"),
                                  "values": {"id": range(values)}, "fields": FIELDS})
            seconds, peak, code_ = run_measured(code, folder, "--once", "--links-only")
            lines = link_lines(folder)
            again, again_peak, _ = run_measured(code, folder, "--once", "--links-only")  # nothing new: resume
            print(f"{name:>8} {seconds:>9.1f} {peak:>9.0f} {lines:>11,} {again:>8.1f} {again_peak:>10.0f}"
                  + ("" if code_ == 0 else f"  exit {code_}"), flush=True)


# -- pass 2 at the start and at the end of a long link file ------------------------------------------
def write_link_file(folder: Path, url: str, links: int, done: int) -> None:
    """links.txt and links.status as pass 1 and pass 2 write them (status lines without an index, as
    every version reads them)."""
    job = folder / "staging" / "jobs" / "bench"
    job.mkdir(parents=True)
    with open(job / "links.txt", "w") as f:
        f.write("# job bench: object links found by pass 1\n")
        for start in range(0, links, 100_000):
            f.write("".join(f"{url}{n}\t-\ttemplate\n" for n in range(start, min(links, start + 100_000))))
    with open(job / "links.status", "w") as f:
        f.write("# job bench: what pass 2 did with each link\n")
        for start in range(0, done, 100_000):
            f.write("".join(f"2026-01-01T00:00:00Z\tdone\t1\t{url}{n}\t\n"
                            for n in range(start, min(done, start + 100_000))))


def bench_pass2(server: LoopbackServer, codes: dict[str, Path], links: int) -> None:
    def product(h) -> None:
        reply(h, 200, f"<html><body><h1>{h.path}</h1></body></html>".encode(), {"Content-Type": "text/html"})

    server.route("/o/*", handler=product)
    print(f"pass 2: seconds for {SAMPLE:,} objects from a link file of {links:,} links (CONCURRENCY 8)")
    print(f"{'code':>8} {'where':>6} {'done before':>12} {'s per 10,000':>13} {'start-up s':>11}")
    for name, code in codes.items():
        for where, done in (("start", 0), ("end", links - SAMPLE)):
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                write_params(folder, {"name": "bench", "template": server.url("/o/{id}"),
                                      "values": {"id": range(links)}, "fields": FIELDS},
                             CONCURRENCY=8, PER_HOST=8)
                write_link_file(folder, server.url("/o/"), links, done)
                first = len(server.times)
                started = time.monotonic()
                proc = subprocess.Popen([sys.executable, str(code / "run_daemon.py"), "--params",
                                         str(folder / "params.py"), "--once"], cwd=folder,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    while len(server.times) < first + SAMPLE and proc.poll() is None:
                        time.sleep(0.05)
                    times = [t for t, path in server.times[first:first + SAMPLE] if path.startswith("/o/")]
                finally:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGKILL)
                    proc.wait()
                rate = times[-1] - times[0] if len(times) >= 2 else float("nan")
                print(f"{name:>8} {where:>6} {done:>12,} {rate:>13.1f} {times[0] - started if times else 0:>11.1f}",
                      flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="also measure this commit's code (git rev), side by side")
    ap.add_argument("--follow", type=int, nargs="+", default=[1000, 50_000])
    ap.add_argument("--template", type=int, default=10_000_000)
    ap.add_argument("--pass2-links", type=int, default=1_000_000)
    ap.add_argument("--parts", nargs="+", default=["harvest", "template", "pass2"])
    args = ap.parse_args()
    server = LoopbackServer().start()
    with ExitStack() as stack:
        codes = {}
        if args.before:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            codes["before"] = export(args.before, tmp)
        codes["now"] = ROOT
        try:
            if "harvest" in args.parts:
                bench_harvest(server, codes, args.follow)
            if "template" in args.parts:
                bench_template(server, codes, args.template)
            if "pass2" in args.parts:
                bench_pass2(server, codes, args.pass2_links)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
