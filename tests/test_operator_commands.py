"""Issue 21, the operator's commands: a closed stdout ends a command quietly, `poll`/`reset` give each
outcome its own exit code, hints name the command the operator ran, a missing params file says where
and what to do."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parser.operate import control
from tests.conftest import ROOT, Project
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.server import LoopbackServer
from tests.test_check_tag_try import INSTALLED


def run_into_closed_pipe(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run with a standard output whose reader is gone before the first byte, as `cmd | head` ends."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=120)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [("status", "--json"), ("status",), ("export-opml",), ("--dry-run",)],
                         ids=["status-json", "status", "export-opml", "dry-run"])
def test_a_closed_stdout_ends_the_command_quietly_with_0(project: Project, args):
    items = [{**item, "description": "x" * 500} for item in numbered_items(1, 300)]  # 150 kB: written mid-run
    (project.folder / "feed.xml").write_bytes(rss(items))
    project.write_params(SOURCES=[{"name": "local", "url": "feed.xml", "max_items": 300}])
    done = run_into_closed_pipe(project.command(*args), project.folder)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert "unexpected error" not in done.stderr


def test_poll_and_reset_give_each_outcome_its_own_exit_code(project: Project, server: LoopbackServer):
    server.route("/busy.xml", status=503, headers={"Retry-After": "3600"})
    server.route("/gone.xml", status=410, body=b"gone", content_type="text/plain")
    server.route("/ok.xml", body=rss(numbered_items(1, 1)))
    project.write_params(SOURCES=[{"name": n, "url": server.url(f"/{n}.xml"), "interval": 3600}
                                  for n in ("busy", "gone", "ok")])
    proc = project.start()
    try:
        wait_for(lambda: all(line in project.log() for line in ("busy  error", "gone  error", "ok  new 1")),
                 "the first polls")
        held = project.run("poll", "busy", "--wait", "60", timeout=90)
        assert held.returncode == control.REFUSED == 3, held.stderr
        assert "busy is held until " in held.stderr
        gone = project.run("reset", "gone", "--wait", "60", timeout=90)
        assert gone.returncode == control.POLL_FAILED == 4, gone.stderr
        assert gone.stderr.startswith("error: reset gone: ") and "410" in gone.stderr
        fine = project.run("poll", "ok", "--wait", "60", timeout=90)
        assert fine.returncode == 0, fine.stderr
        unknown = project.run("poll", "nosuch", timeout=30)
        assert unknown.returncode == 2
    finally:
        assert stop(proc) == 0
    nobody = project.run("poll", "ok", timeout=30)
    assert nobody.returncode == 1 and "no daemon is running" in nobody.stderr


def test_the_hint_names_the_command_the_operator_ran(tmp_path, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/parser-daemon", "poll", "a"])
    assert control.send(tmp_path, "poll", "a", io.StringIO(), err, params=tmp_path / "params.py") == 1
    assert f"poll once with: parser-daemon --params {tmp_path / 'params.py'} --once --source a" in err.getvalue()
    assert "run_daemon.py" not in err.getvalue()
    monkeypatch.setattr(sys, "argv", [str(ROOT / "run_daemon.py"), "poll", "a"])
    assert control.invoked_as() == "python run_daemon.py"


@pytest.mark.skipif(not INSTALLED.exists(), reason="no installed parser-daemon beside this Python")
def test_the_installed_command_names_itself_in_its_hint(project: Project):
    project.write_params(SOURCES=[{"name": "a", "url": "feed.xml"}])
    done = subprocess.run([str(INSTALLED), "--params", str(project.params), "poll", "a"], capture_output=True,
                          text=True, cwd=project.folder, timeout=60)
    assert done.returncode == 1
    assert f"poll once with: parser-daemon --params {project.params} --once --source a" in done.stderr
    checkout = project.run("poll", "a", timeout=60)  # python run_daemon.py, as a checkout runs it
    assert "poll once with: python run_daemon.py --params " in checkout.stderr


@pytest.mark.parametrize("args", [(), ("status",), ("export-opml",)], ids=["daemon", "status", "export-opml"])
def test_a_missing_params_file_says_its_full_path_and_what_to_do(tmp_path, args):
    done = subprocess.run([sys.executable, str(ROOT / "run_daemon.py"), *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"settings error: {tmp_path / 'params.py'}: params file does not exist; "
                                   "create it, or pass --params PATH (an example is params.py in the checkout)")
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_a_source_added_since_the_daemon_read_params_py_is_refused_with_2_and_says_reload(tmp_path):
    """`reset NAME` on a source no longer (or not yet) in the daemon's run: exit 2, with what to do."""
    from parser.operate.operator_requests import not_polled
    from parser.settings.params import load_settings
    (tmp_path / "params.py").write_text('SOURCES = [{"name": "a", "url": "feed.xml"}]\n', encoding="utf-8")
    settings = load_settings(tmp_path / "params.py")
    said = not_polled("new", settings)
    assert said == ("no source named 'new' in the settings the daemon runs with; if you added it to "
                    f"{tmp_path / 'params.py'} since, reload the daemon first (systemctl reload, or kill -HUP its pid)")


# A failed `poll` says `error:` once.
def test_a_failed_poll_says_error_once(server: LoopbackServer, project: Project):
    server.route("/down.xml", status=500, body=b"oops", content_type="text/plain")
    project.write_params(SOURCES=[{"name": "down", "url": server.url("/down.xml"), "interval": 3600}])
    proc = project.start()
    try:
        wait_for(lambda: "down  error" in project.log(), "the first poll")
        done = project.run("poll", "down", "--wait", "60", timeout=90)
        assert done.returncode == 4, done.stderr
        assert done.stderr.startswith("error: poll down: HTTP 500"), done.stderr
        assert done.stderr.count("error:") == 1, done.stderr
    finally:
        assert stop(proc) == 0
