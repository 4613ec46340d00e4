"""Crash safety of pass 1: the real daemon, in forever mode, harvests a loopback site of a few hundred
objects and is killed with SIGKILL many times: at random moments, and right after its link file grew
(while it writes harvest.log). Then it is restarted until done. At the end:
- links.txt holds every object link exactly once;
- no listing page was fetched again after harvest.log had recorded it as expanded;
- the job's table holds every object exactly once.

A few listing pages first answer 429 with Retry-After, so kills also land around refusals.
PARSER_KILLS sets the number of kills (default 12, 10-20 s in all); PARSER_KILL_SEED repeats a run.
"""
from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter

import pytest

from tests.process import wait_for
from tests.server import reply
from tests.shop import page

CATEGORIES, PAGES, PER_PAGE = 6, 10, 6   # 360 objects on 60 listing pages
OBJECTS = CATEGORIES * PAGES * PER_PAGE
LISTING_DELAY = 0.08                     # seconds per listing page: the harvest spans several lives
REFUSING = ("/cat/2", "/cat/4/p/3", "/cat/6/p/9")  # 429 with Retry-After: 1 at their first request


def serve_site(server, rng: random.Random) -> None:
    server.route("/robots.txt", body=b"User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    server.route("/", content_type="text/html", body=page("Root", [f"/cat/{c}" for c in range(1, CATEGORIES + 1)]))
    n = 0
    for c in range(1, CATEGORIES + 1):
        server.route(f"/cat/{c}", content_type="text/html", delay=LISTING_DELAY,
                     body=page(f"Category {c}", [f"/cat/{c}/p/{k}" for k in range(1, PAGES + 1)]))
        for k in range(1, PAGES + 1):
            mine = [f"/obj/{n + i}" for i in range(1, PER_PAGE + 1)]
            n += PER_PAGE
            # The same object again from another page, with tracking junk: one link in the file.
            other = f"/obj/{rng.randint(1, OBJECTS)}?utm_source=list&utm_medium=x#top"
            server.route(f"/cat/{c}/p/{k}", content_type="text/html", delay=LISTING_DELAY,
                         body=page(f"{c}/{k}", [*mine, other, "/", f"/cat/{c}", "mailto:a@b.c", "/private/x"]))
    for i in range(1, OBJECTS + 1):
        server.route(f"/obj/{i}", content_type="text/html",
                     body=f"<html><body><h1>Object {i}</h1><p class='n'>{i}</p></body></html>".encode())
    for path in REFUSING:  # asked again after the pause, in whichever life that falls
        refuse_first_request(server, path)


def refuse_first_request(server, path: str) -> None:
    route = server.routes[path]
    body, asked = route.body, []

    def handler(h) -> None:
        asked.append(1)
        if len(asked) == 1:
            reply(h, 429, b"busy", {"Content-Type": "text/plain", "Retry-After": "1"})
        else:
            reply(h, 200, body, {"Content-Type": "text/html"})
    route.handler = handler


def harvest_state(folder) -> tuple[int, set[str]]:
    """(run number, pages recorded as expanded) from the job's harvest.log, as the daemon left it."""
    path = folder / "harvest.log"
    run, done = 0, set()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return 0, set()
    for line in text.split("\n")[:-1]:  # a torn last line is no record
        parts = line.split("\t")
        if parts[0] == "run":
            run, done = int(parts[1]), set()
        elif parts[0] == "done" and len(parts) >= 3:
            done.add(parts[1])
    return run, done


def harvest_active(folder) -> bool:
    try:
        lines = (folder / "harvest.log").read_text(encoding="utf-8").rstrip("\n").split("\n")
    except FileNotFoundError:
        return True  # not even started
    return not lines[-1].startswith("end")


def kill_after_link_file_grows(proc: subprocess.Popen, links_path, rng: random.Random) -> str:
    """SIGKILL right after links.txt grew: the daemon is about to write harvest.log for that page."""
    end = time.monotonic() + 3
    size = links_path.stat().st_size if links_path.exists() else 0
    while time.monotonic() < end and proc.poll() is None:
        try:
            now = links_path.stat().st_size
        except FileNotFoundError:
            now = 0
        if now > size and rng.random() < 0.5:
            proc.kill()
            return "after a link file append"
        size = now
        time.sleep(0.0002)
    return kill_at_random(proc, rng)


def kill_at_random(proc: subprocess.Popen, rng: random.Random) -> str:
    time.sleep(rng.uniform(0.3, 1.4))  # ~0.4 s to import, then the harvest and pass 2
    proc.kill()
    return "random"


def stored(db_path) -> list[str]:
    if not db_path.exists():
        return []
    con = sqlite3.connect(db_path)
    try:
        return [r[0] for r in con.execute("SELECT url FROM site")]
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


@pytest.mark.slow
def test_sigkill_during_a_harvest_loses_repeats_and_doubles_nothing(server, project):
    seed = int(os.environ.get("PARSER_KILL_SEED", random.randrange(1 << 30)))
    print(f"\nPARSER_KILL_SEED={seed}")
    rng = random.Random(seed)
    serve_site(server, random.Random(seed))
    project.write_params(
        LINK_JOBS=[{"name": "site", "objects": r"/obj/\d+$", "fields": {"title": "//h1", "n": "css:p.n::text"},
                    "harvest": {"root": server.url("/"), "depth": 3, "follow": r"/cat/"}}],
        CONCURRENCY=4, PER_HOST=2, FLUSH_INTERVAL=0.3, TIMEOUT=5, DEADLINE=10)
    folder = project.staging / "jobs" / "site"
    kills = int(os.environ.get("PARSER_KILLS", 12))
    landed: Counter = Counter()
    snapshots: list[tuple[int, set[str], dict[str, int]]] = []
    for i in range(kills):
        proc = subprocess.Popen(project.command(), cwd=project.folder, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        how = kill_after_link_file_grows(proc, folder / "links.txt", rng) if i % 2 == 0 \
            else kill_at_random(proc, rng)
        proc.wait(timeout=30)
        stderr = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL, f"life {i} ended by itself ({proc.returncode}): {stderr}"
        landed[how] += 1
        run, done = harvest_state(folder)
        landed["in the harvest" if harvest_active(folder) else "after it"] += 1
        snapshots.append((run, done, dict(server.hits)))

    # Restart until done: every object stored, and the harvest run ended.
    started = project.log().count("started:")
    proc = project.start()
    try:
        wait_for(lambda: project.log().count("started:") > started, "the last life to start")
        wait_for(lambda: len(stored(project.db_path)) >= OBJECTS
                 and (folder / "harvest.log").read_text().rstrip("\n").rsplit("\n", 1)[-1].startswith("end"),
                 "the last life to finish the harvest and pass 2", timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    base = server.url("")
    lines = [line.split("\t")[0] for line in (folder / "links.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    expected = {f"{base}/obj/{i}" for i in range(1, OBJECTS + 1)}
    doubled = [u for u, n in Counter(lines).items() if n > 1]
    assert not doubled, f"in the link file more than once: {doubled[:5]}"
    assert set(lines) == expected, \
        f"missing {sorted(expected - set(lines))[:5]}, foreign {sorted(set(lines) - expected)[:5]}"

    final_run, _ = harvest_state(folder)
    assert final_run == 1, "a second harvest run started: the first one's end was lost"
    repeated = []
    for run, done, hits in snapshots:
        for url in done:
            path = url[len(base):]
            if run == final_run and server.hits.get(path, 0) != hits.get(path, 0):
                repeated.append(path)
    assert not repeated, f"expanded again after harvest.log recorded them: {sorted(set(repeated))[:5]}"

    rows = stored(project.db_path)
    assert Counter(rows) == Counter(expected), "the table does not hold every object exactly once"
    assert project.log("critical.log") == ""
    pages = [p for p in server.hits if p == "/" or p.startswith("/cat/")]
    refetched = sum(server.hits[p] for p in pages) - len(pages)
    print(f"{kills} kills ({dict(landed)}); {len(pages)} pages, {refetched} fetched again (in flight at a kill); "
          f"{len(rows)} rows; object fetches {sum(n for p, n in server.hits.items() if p.startswith('/obj/'))}; "
          f"repairs: {project.log().count('torn last line')}")
