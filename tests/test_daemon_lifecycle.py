"""The daemon as a long-running process: forever mode, signals, the folder lock, failures over
time, log rotation, table migration, declared charsets."""
from __future__ import annotations

import json
import signal
import sqlite3
import time

import pytest

from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for


def test_forever_mode_polls_on_interval_flushes_and_stops_cleanly_on_sigterm(server, project):
    server.route("/f.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "f", "url": server.url("/f.xml")}], POLL_INTERVAL=0.5,
                         FLUSH_INTERVAL=0.5)
    daemon = project.start()
    try:
        wait_for(lambda: len(project.rows()) == 2, "the first two items stored")
        server.route("/f.xml", body=rss(numbered_items(1, 4)))  # the feed grows while we run
        wait_for(lambda: len(project.rows()) == 4, "the two new items stored")
        server.route("/f.xml", body=rss(numbered_items(1, 5)))
        wait_for(lambda: "new 1" in project.log(), "the fifth item staged")
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=30)
    assert code == 0
    assert sorted(r["title"] for r in project.rows()) == sorted(f"Item {n}" for n in range(1, 6))
    assert server.hits["/f.xml"] >= 3
    assert project.last_flush()["why"] == "stop"  # the SIGTERM's flush was made (daemon.json)


def test_sigterm_during_a_slow_fetch_still_flushes_what_was_staged(server, project):
    server.route("/fast.xml", body=rss(numbered_items(1, 3)))
    server.route("/slow.xml", body=rss(numbered_items(10, 1)), delay=20)
    project.write_params(SOURCES=[{"name": "fast", "url": server.url("/fast.xml")},
                                  {"name": "slow", "url": server.url("/slow.xml")}],
                         FLUSH_INTERVAL=3600, TIMEOUT=30, DEADLINE=60)
    daemon = project.start()
    wait_for(lambda: project.staged_rows() == 3, "the fast source staged")
    started = time.monotonic()
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0
    assert time.monotonic() - started < 15
    assert len(project.rows()) == 3


def test_sigusr2_writes_every_threads_stack_to_stderr_and_the_daemon_goes_on(server, project):
    """What an operator asks of a daemon that seems stuck: its stacks, without stopping it."""
    server.route("/slow.xml", body=rss(numbered_items(1, 2)), delay=20)
    project.write_params(SOURCES=[{"name": "slow", "url": server.url("/slow.xml")}], TIMEOUT=30,
                         DEADLINE=60, FLUSH_INTERVAL=3600)
    daemon = project.start()
    try:
        wait_for(lambda: server.hits.get("/slow.xml") == 1, "a fetch in flight")
        daemon.send_signal(signal.SIGUSR2)  # the handler is set before the first poll
    finally:
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=30)
        stderr = daemon.stderr.read()
    assert code == 0, stderr  # without a handler SIGUSR2 ends a process (-12)
    assert "most recent call first" in stderr
    assert stderr.count("Thread 0x") >= 2  # the main thread and the fetch in flight at least


def test_a_second_daemon_on_the_same_staging_folder_refuses_and_names_the_holder(server, project):
    server.route("/l.xml", body=rss(numbered_items(1, 1)))
    project.write_params(SOURCES=[{"name": "l", "url": server.url("/l.xml")}], POLL_INTERVAL=60)
    first = project.start()
    try:
        wait_for(lambda: (project.staging / "daemon.lock").exists() and "l  new 1" in project.log(),
                 "the first daemon at work")
        second = project.run("--once")
        assert second.returncode == 1
        assert f"is in use by process {first.pid}" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)
    assert project.run("--once").returncode == 0  # the lock went with the process


def test_a_failing_source_is_marked_dead_after_five_failures_and_the_others_go_on(server, project):
    server.route("/ok.xml", body=rss(numbered_items(1, 1)))
    server.route("/broken.xml", status=500, body=b"oops", content_type="text/plain")
    project.write_params(SOURCES=[{"name": "ok", "url": server.url("/ok.xml")},
                                  {"name": "broken", "url": server.url("/broken.xml")}])
    for _ in range(5):
        assert project.run("--once").returncode == 0
    polled = [(r["outcome"], r["status"]) for r in project.rows("runs") if r["source"] == "broken"]
    assert polled == [("error", 500)] * 5 and project.outcomes("ok") == ["new"] + ["unchanged"] * 4
    broken = json.loads((project.staging / "state.json").read_text(encoding="utf-8"))["broken"]
    assert (broken["dead"], broken["failures"]) == (True, 5)
    assert "marked dead after 5 failures in a row" in project.log("errors.log")  # what the operator is told
    assert len(project.rows()) == 1
    server.route("/broken.xml", body=rss(numbered_items(7, 1)))
    project.run("--once", check=True)  # --once ignores the backoff: the source is never forgotten
    broken = json.loads((project.staging / "state.json").read_text(encoding="utf-8"))["broken"]
    assert (broken["dead"], broken["failures"], project.outcomes("broken")[-1]) == (False, 0, "new")  # back
    assert len(project.rows()) == 2


def test_logs_rotate_by_size(server, project):
    server.route("/r.xml", body=rss(numbered_items(1, 1)))
    project.write_params(SOURCES=[{"name": "r", "url": server.url("/r.xml")}], LOG_MAX_BYTES=300, LOG_BACKUPS=2)
    for _ in range(4):
        project.run("--once", check=True)
    assert (project.logs / "parser.log.1").exists()
    assert not (project.logs / "parser.log.3").exists()


def test_a_column_missing_from_an_existing_table_is_added(server, project):
    project.db_path.parent.mkdir(parents=True)
    con = sqlite3.connect(project.db_path)
    con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, hash VARCHAR(128) UNIQUE NOT NULL, source TEXT,"
                " link TEXT, title TEXT)")
    con.execute("INSERT INTO items (hash, source, link, title) VALUES ('old', 'x', 'http://e/1', 'Old row')")
    con.commit()
    con.close()
    server.route("/m.xml", body=rss([{"title": "New row", "link": "http://e/2", "author": "me@example.com (Me)"}]))
    project.write_params(SOURCES=[{"name": "m", "url": server.url("/m.xml")}])
    project.run("--once", check=True)
    rows = project.rows()
    assert [r["title"] for r in rows] == ["Old row", "New row"]
    assert rows[1]["author"] == "Me" and rows[0]["author"] is None


@pytest.mark.parametrize("encoding, declared_in", [("gbk", "header"), ("windows-1251", "prolog"),
                                                   ("windows-1251", "header")])
def test_a_declared_charset_decodes_right(server, project, encoding, declared_in):
    title = "新闻标题 测试" if encoding == "gbk" else "Новости дня: проверка"
    body = rss([{"title": title, "link": "http://example.com/n"}], encoding=encoding, prolog=declared_in == "prolog")
    content_type = f"application/rss+xml; charset={encoding}" if declared_in == "header" else "application/rss+xml"
    server.route("/enc.xml", body=body, content_type=content_type)
    project.write_params(SOURCES=[{"name": "enc", "url": server.url("/enc.xml")}])
    project.run("--once", check=True)
    assert [r["title"] for r in project.rows()] == [title]


# SIGHUP while the daemon is still starting (issue 27, case 10). Until params.py was read SIGHUP had
# its default action: the daemon died without a line, and systemd counts death by SIGHUP as clean, so
# Restart=on-failure left it down. Now a SIGHUP at start is taken as a reload once the daemon runs.
# A params.py that is slow to read for real: it says it is being read, then waits for the test's file
# (within the 10 s a start allows), as a file with 5,000 sources, or one waiting on a share, would be.
SLOW_PARAMS = """\
import pathlib, time
here = pathlib.Path(__file__).parent
(here / "reading").touch()
give_up_at = time.monotonic() + 8  # not "deadline": a lowercase setting's name is refused
while not (here / "go").exists() and time.monotonic() < give_up_at:
    time.sleep(0.02)
"""


def test_sighup_while_params_py_is_read_at_start_is_a_reload_not_death(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SLOW_PARAMS, SOURCES=[{"name": "a", "url": server.url("/a.xml")}], FLUSH_INTERVAL=0.3)
    proc = project.start()
    try:
        wait_for(lambda: (project.folder / "reading").exists() or proc.poll() is not None, "params.py being read")
        proc.send_signal(signal.SIGHUP)  # while the start still waits in params.py
        (project.folder / "go").touch()

        def reloaded() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the daemon died on a SIGHUP at start: exit {proc.returncode}, "
                                     f"parser.log {project.log()!r}")
            return "read again" in project.log()
        wait_for(reloaded, "the reload the SIGHUP asked for")
        log = project.log()
        assert "params: SIGHUP during start-up:" in log
        assert log.index("started:") < log.index("SIGHUP during start-up")
        wait_for(lambda: len(project.rows()) == 2, "a's items stored")
    finally:
        code = stop(proc)
    assert code == 0


def test_a_daemon_started_with_its_stop_signals_blocked_still_stops_on_sigterm(server, project):
    """A signal mask is inherited across exec: a parent that starts the daemon from a thread blocking
    SIGTERM (multiprocessing blocks it while it spawns its resource tracker) hands the daemon a SIGTERM
    that stays pending, and `systemctl stop` or a test's stop() then waits until the kill. The daemon
    unblocks its stop and reload signals at start."""
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}], FLUSH_INTERVAL=0.3)
    blocked = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    proc = project.start(preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, blocked))
    try:
        wait_for(lambda: proc.poll() is not None or len(project.rows()) == 2, "a's items stored")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: proc.poll() is not None or "read again" in project.log(), "the reload SIGHUP asks for")
    finally:
        code = stop(proc)
    assert code == 0
    # Stopped by the SIGTERM, through its stop: the stop's flush made and daemon.json's last save says stopped.
    info = json.loads((project.staging / "daemon.json").read_text(encoding="utf-8"))
    assert info["running"] is False and info["last_flush"]["why"] == "stop"
