"""A wall clock that jumps (set a year ahead, an hour back, by a person or NTP) must not stop polling.

Within a run the daemon schedules by the monotonic clock; across a restart, saved due times further
ahead than their interval (or hold) are pulled back. The daemon's wall clock is moved through the
test hook PARSER_CLOCK_OFFSET_FILE (parser/core/clock.py): a file holding seconds added to the wall clock,
re-read at every call, which the test rewrites while the daemon runs."""
from __future__ import annotations

import json
import time

from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.shop import Shop
from tests.test_twopass_e2e import template_job

YEAR = 365 * 86400


def polls(server, path: str) -> int:
    return server.hits.get(path, 0)


def flush_count(project) -> int:
    """Flushes done so far by the running daemon (an interval flush with nothing to write logs no
    line, so the count comes from staging/daemon.json)."""
    try:
        info = json.loads((project.staging / "daemon.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return int(info.get("totals", {}).get("flushes", 0))


def test_polls_and_flushes_go_on_while_the_wall_clock_jumps(server, project, monkeypatch, tmp_path):
    offset = tmp_path / "clock-offset"
    offset.write_text("0")
    monkeypatch.setenv("PARSER_CLOCK_OFFSET_FILE", str(offset))
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml"), "interval": 1}], FLUSH_INTERVAL=1)
    daemon = project.start()
    try:
        wait_for(lambda: polls(server, "/a.xml") >= 2, "two polls")
        for jump in (YEAR, -3600, 0):  # a year ahead, then an hour behind, then right again
            offset.write_text(str(jump))
            before, flushes = polls(server, "/a.xml"), flush_count(project)
            wait_for(lambda b=before, f=flushes: polls(server, "/a.xml") >= b + 3
                     and flush_count(project) >= f + 2,
                     f"polls and flushes with the clock moved by {jump} s", timeout=20)
    finally:
        assert stop(daemon) == 0
    assert len(project.rows()) == 2


def test_due_times_saved_by_a_clock_that_was_ahead_are_pulled_back_at_restart(server, project):
    """What a run whose wall clock was a year ahead leaves behind (a poll due next year, a Retry-After
    hold until next year, a job's pass 1 'finished' next year): the next run, with the clock right,
    pulls each back to its own interval or hold, says so, and polls."""
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    server.route("/b.xml", body=rss(numbered_items(1, 1, host="b.example")))
    Shop(server)
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml"), "interval": 2},
                                  {"name": "b", "url": server.url("/b.xml"), "interval": 3600}],
                         LINK_JOBS=[template_job(server, values={"from": 1, "to": 2}, interval=2)],
                         FLUSH_INTERVAL=1)
    ahead = time.time() + YEAR
    project.staging.mkdir(parents=True)
    (project.staging / "state.json").write_text(json.dumps({
        "a": {"url": server.url("/a.xml"), "next_due": ahead, "delay": 2},
        "b": {"url": server.url("/b.xml"), "next_due": ahead - 10, "not_before": ahead, "hold": 1,
              "delay": 1}}))
    job = project.staging / "jobs" / "pages"
    job.mkdir(parents=True)
    (job / "state.json").write_text(json.dumps({"pass1_at": ahead, "holds": {}}))
    daemon = project.start()
    try:
        wait_for(lambda: len(project.rows()) == 3 and len(project.rows("pages")) == 2,
                 "both sources and the job's objects stored", timeout=30)
    finally:
        assert stop(daemon) == 0
    log = project.log()
    assert "a  next poll was due in" in log and "b  Retry-After hold ends in" in log
    assert "pages  pass 1 finished" in log
