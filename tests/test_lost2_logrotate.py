"""logrotate's default `create` (issue 27, case 9): the log files are renamed to NAME.1 and new empty ones
made. Before, the daemon wrote on into parser.log.1 (or a deleted file) for as long as it ran, SIGHUP or
not. Now a line goes to the file at the path: the daemon notices the rename at its next line, and a
SIGHUP lets go of every old file, even one that gets no line (critical.log)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for

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
