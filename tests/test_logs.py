"""What the daemon writes for a person or a log shipper, through the real process: a level on every
line, LOG_FORMAT "json", each event once in a terminal, progress apart from log lines, and no
flush line when there was nothing to flush."""
from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

from parser.core.runinfo import load_run_info
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.shop import HARVEST_FIELDS, Shop

LINE_START = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (INFO|WARNING|ERROR|CRITICAL)  ")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")


def run_in_a_terminal(project, *args: str, timeout: float = 120) -> tuple[int, str]:
    """The daemon with its stderr on a pseudo-terminal, as when started by hand; what the terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(project.command(*args), stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL,
                            cwd=project.folder)
    os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=30), shown.decode("utf-8", "replace").replace("\r\n", "\n")


def test_every_line_has_a_level_and_an_error_shows_once_in_a_terminal(server, project):
    server.route("/ok.xml", body=rss(numbered_items(1, 2)))
    server.route("/gone.xml", status=404)
    project.write_params(SOURCES=[{"name": "ok", "url": server.url("/ok.xml")},
                                  {"name": "gone", "url": server.url("/gone.xml")}])
    code, terminal = run_in_a_terminal(project, "--once")
    assert code == 0, terminal
    assert terminal.count("HTTP 404 Not Found") == 1, terminal  # errors.log's line; not parser.log's again
    assert "ok  new 2" in terminal  # the poll lines are there too on a terminal
    for name in ("parser.log", "errors.log"):
        lines = project.log(name).splitlines()
        assert lines and all(LINE_START.match(line) for line in lines), lines
    assert " ERROR  gone  " in project.log("errors.log")
    assert "gone  error  HTTP 404 Not Found" in project.log()  # parser.log keeps its own line


def test_log_format_json_writes_one_object_a_line(server, project):
    server.route("/ok.xml", body=rss(numbered_items(1, 2)))
    server.route("/broken.xml", status=500)
    project.write_params(SOURCES=[{"name": "ok", "url": server.url("/ok.xml")},
                                  {"name": "broken", "url": server.url("/broken.xml")}], LOG_FORMAT="json")
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in project.log().splitlines()]
    assert all(set(e) >= {"time", "level", "log", "message"} for e in events)
    # A failed poll is a WARNING (errors.log has it as an ERROR); every other line before the last is INFO.
    assert {e["level"] for e in events[:-1] if not e["message"].startswith("broken  error")} == {"INFO"}
    assert [e["level"] for e in events if e["message"].startswith("broken  error")] == ["WARNING"]
    # The last line counts the failed sources, a warning: under cron it reaches the mail.
    assert (events[-1]["level"], events[-1]["message"]) == ("WARNING", "done: 1 of 2 sources polled failed "
                                                            "(errors.log says why)")
    assert events[0]["message"] == f"params: {project.params}"
    assert any(e["message"].startswith("ok  new 2") for e in events)
    errors = [json.loads(line) for line in project.log("errors.log").splitlines()]
    assert len(errors) == 1
    assert errors[0]["level"] == "ERROR" and errors[0]["log"] == "errors"
    assert errors[0]["source"] == "broken" and errors[0]["url"] == server.url("/broken.xml")
    assert errors[0]["description"] == "HTTP 500 Internal Server Error"
    assert json.loads(proc.stderr.splitlines()[0])["level"] == "ERROR"  # the console speaks JSON too


def test_log_format_is_validated(project):
    project.write_params(LOG_FORMAT="xml")
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "LOG_FORMAT: must be one of 'text', 'json', got 'xml'" in proc.stderr


def flushes(project) -> int:
    """The flushes the running daemon has done, from its daemon.json (0 before the first)."""
    info = load_run_info(project.staging / "daemon.json")
    return int(info["totals"]["flushes"]) if info else 0


def test_no_flush_line_when_an_interval_had_nothing_to_flush(server, project):
    server.route("/f.xml", body=rss(numbered_items(1, 1)), etag='"v1"')
    project.write_params(SOURCES=[{"name": "f", "url": server.url("/f.xml")}], POLL_INTERVAL=3600,
                         FLUSH_INTERVAL=0.2)
    proc = project.start()
    try:
        wait_for(lambda: "flush (interval): 1 rows written" in project.log(), "the one row flushed")
        flushed = flushes(project)
        # Seven interval flushes more with nothing staged, as daemon.json counts them (each flush saves it).
        wait_for(lambda: flushes(project) >= flushed + 7, "seven flushes with nothing to write")
    finally:
        assert stop(proc) == 0
    log = project.log()
    assert log.count("flush (interval)") == 1, log
    assert "0 rows written" not in log.replace("flush (stop): 0 rows written", "")


def test_progress_lines_never_run_into_log_lines(server, project):
    Shop(server, lists=6, items_per_list=8, item_delay=0.05)
    project.write_params(LINK_JOBS=[{"name": "shop", "harvest": {"root": server.url("/"), "follow": r"/list/",
                                                                  "depth": 3},
                                     "objects": r"/item/\d+$", "fields": HARVEST_FIELDS}], CONCURRENCY=2)
    code, terminal = run_in_a_terminal(project, "--once")
    assert code == 0, terminal
    assert "shop: pass 2:" in terminal  # a progress line was drawn
    assert "HTTP 404" in terminal  # and log lines came while it was
    for stamp in STAMP.finditer(terminal):
        before = terminal[:stamp.start()]
        assert before == "" or before.endswith(("\n", "\r\x1b[K")), \
            f"a log line starts after {before[-80:]!r}"


# logrotate's default `create` (issue 27, case 9): the log files are renamed to NAME.1 and new empty ones
# made. Before, the daemon wrote on into parser.log.1 (or a deleted file) for as long as it ran, SIGHUP or
# not. Now a line goes to the file at the path: the daemon notices the rename at its next line, and a
# SIGHUP lets go of every old file, even one that gets no line (critical.log).
LOGS = ("parser.log", "errors.log", "critical.log")


def rotate(folder: Path) -> None:
    """What logrotate does with `create` and no postrotate script: rename, then a new empty file."""
    for name in LOGS:
        os.replace(folder / name, folder / f"{name}.1")
        (folder / name).touch()


def open_files(pid: int) -> list[str]:
    """What `ls -l /proc/PID/fd` (or lsof) shows the daemon holding open."""
    held = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            held.append(os.readlink(fd))
        except OSError:
            pass  # closed meanwhile
    return held


def test_logs_rotated_by_logrotate_create_are_written_at_their_path(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    source = {"name": "a", "url": server.url("/a.xml"), "interval": 0.3}
    project.write_params(SOURCES=[source], FLUSH_INTERVAL=0.3)
    proc = project.start()
    try:
        wait_for(lambda: project.log().count("a  ") >= 2 or proc.poll() is not None, "a few polls logged")
        rotate(project.logs)

        # No signal: the next poll's line is in the new parser.log, not in parser.log.1.
        wait_for(lambda: "a  " in project.log(), "a poll's line in the new parser.log", timeout=15)
        assert "params:" in project.log("parser.log.1")  # what came before the rotation stayed there

        # SIGHUP with a bad params.py: its lines in the new files, and no old file held open any more.
        project.params.write_text("SOURCES = 'not a list'\n", encoding="utf-8")
        proc.send_signal(signal.SIGHUP)
        # errors.log's line is written first, then parser.log's (parser/operate/reload.py): both waited for
        wait_for(lambda: "SIGHUP: refused" in project.log("errors.log") and "SIGHUP" in project.log(),
                 "the refusal in the new errors.log and parser.log")
        assert "SIGHUP" not in project.log("parser.log.1") + project.log("errors.log.1")
        held = [path for path in open_files(proc.pid) if ".log" in path]
        assert not [path for path in held if path.endswith((".1", "(deleted)"))], held
    finally:
        code = stop(proc)
    assert code == 0
    assert "stopped on signal" in project.log() and "stopped on signal" not in project.log("parser.log.1")
