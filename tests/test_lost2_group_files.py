"""Issue 27 case 6: SHARED = True with one machine on an older params.py. Its file lacking a source
is not the group's decision: the daemons whose file lists it keep polling it, and every daemon's
log says the files disagree."""
from __future__ import annotations

import time

import pytest

from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.test_shared_daemons import poll_times, start

INTERVAL = 1.0


def machine(tmp_path, name: str, pg_url: str, server, sources: list[str]) -> Project:
    project = Project(tmp_path / name)
    project.folder.mkdir()
    project.write_params(DB_URL=pg_url, SHARED=True, SHARED_LEASE=3, TIMEOUT=1, DEADLINE=1.2, CONCURRENCY=3,
                         FLUSH_INTERVAL=1, POLL_INTERVAL=INTERVAL,
                         SOURCES=[{"name": s, "url": server.url(f"/{s}.xml")} for s in sources])
    return project


@pytest.mark.postgres
def test_a_daemon_on_an_older_params_py_does_not_stop_a_source_the_others_list(server, tmp_path, pg_url):
    for name in ("f0", "f1"):
        server.route(f"/{name}.xml", body=rss(numbered_items(1, 2, host=f"{name}.example")))
    new = machine(tmp_path, "new", pg_url, server, ["f0", "f1"])
    old = machine(tmp_path, "old", pg_url, server, ["f0"])  # restarted before the deploy reached it
    procs = []
    try:
        procs.append(start(new))
        wait_for(lambda: "/f1.xml" in poll_times(server), "the first poll of f1")
        procs.append(start(old))
        joined = time.monotonic()

        def polls_of_f1_since() -> int:
            return sum(1 for t in poll_times(server)["/f1.xml"] if t > joined)

        # Before the fix the older file disabled f1 in the group's table: never polled again.
        wait_for(lambda: polls_of_f1_since() >= 3, "f1 polled by the group after the older daemon joined", 20)
        # errors.log's lines are written first, then parser.log's (parser/group/shared.py): both waited for
        wait_for(lambda: "f1" in old.log("errors.log") and "files disagree" in old.log(),
                 "the older daemon's errors.log naming f1", 10)
        assert "other running daemons' params.py enable 1 source (f1)" in old.log("errors.log")
        assert "the running daemons' params.py files disagree" in old.log()
        # The daemon whose file has it says so too, in its own log, once it notices the newcomer.
        wait_for(lambda: "this params.py enables 1 source (f1)" in new.log("errors.log")
                 and "files disagree" in new.log(), "the other daemon's errors.log naming f1", 10)
    finally:
        assert [stop(p) for p in procs] == [0] * len(procs)


@pytest.mark.postgres
def test_a_source_no_running_daemon_lists_is_disabled(server, tmp_path, pg_url):
    import psycopg
    for name in ("f0", "f1"):
        server.route(f"/{name}.xml", body=rss(numbered_items(1, 2, host=f"{name}.example")))
    first = machine(tmp_path, "m", pg_url, server, ["f0", "f1"])
    assert first.run("--once").returncode == 0
    first.write_params(DB_URL=pg_url, SHARED=True, SHARED_LEASE=3, TIMEOUT=1, DEADLINE=1.2, POLL_INTERVAL=INTERVAL,
                       SOURCES=[{"name": "f0", "url": server.url("/f0.xml")}])  # f1 removed everywhere
    assert first.run("--once").returncode == 0
    with psycopg.connect(pg_url) as con:
        rows = dict(con.execute("SELECT name, enabled FROM parser_sources").fetchall())
    assert rows == {"f0": True, "f1": False}
    assert "disagree" not in first.log()  # alone: nothing to disagree with
