"""SIGHUP while the daemon is still starting (issue 27, case 10). Until params.py was read SIGHUP had
its default action: the daemon died without a line, and systemd counts death by SIGHUP as clean, so
Restart=on-failure left it down. Now a SIGHUP at start is taken as a reload once the daemon runs."""
from __future__ import annotations

import signal

from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for

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
    assert "stopped" in project.log().splitlines()[-1]
