"""params.py itself as the fault: a wrong type or a missing driver, sys.exit() and its kin, a file whose
import blocks; and a log folder that cannot be written. At start each settings fault is exit 2 with
one stderr line naming it and nothing created; on SIGHUP a refused reload, the daemon going on and
its final flush still made. A full log folder is said on stderr, and its lines go there."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from parser.core.errors import SettingsError
from parser.settings.params import DEFAULTS, settings_from_dict
from parser.settings.read import SettingsRead, read_settings
from tests.feeds import numbered_items, rss
from tests.process import wait_for
from tests.test_storage_faults import file_size_limit, mount_tmpfs

MiB = 1 << 20
TEMPLATE_JOB = ("LINK_JOBS = [{'name': 'j', 'template': 'http://127.0.0.1/{n}', 'fields': {'t': '//h1'}, "
                "'values': {'n': %s}}]\n")


# -- at start: exit 2, one line naming the setting, nothing created -------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("STAGING_DIR = 'sta\\0ging'\n", "STAGING_DIR: must be a folder path"),
    ("FLUSH_INTERVAL = float('inf')\n", "FLUSH_INTERVAL: must be at most 315,360,000 seconds"),
    ("MAX_BYTES = 10**30\n", "MAX_BYTES: must be at most 2,147,483,647"),
    ("USER_AGENT = 'bot\\r\\nX-Evil: 1'\n", "USER_AGENT: must be a non-empty string without line breaks"),
    ("SOURCES = [{'name': 'a', 'url': 'http://[::1/feed'}]\n", "SOURCES[0] ('a'): url must be an http(s) URL"),
    ("SOURCES = [{'name': 'a', 'url': 'http://x/', 'interval': 10**400}]\n",
     "SOURCES[0] ('a'): interval must be at most 315,360,000 seconds"),
    (TEMPLATE_JOB % "{'from': 1, 'to': 10**30}", "template gives 1,000,000,000,000,000,000,000,000,000,000 links"),
    ("LINK_JOBS = [{'name': ['j'], 'template': 'http://127.0.0.1/{n}', 'values': {'n': [1]},\n"
     "              'fields': {'t': '//h1'}}]\n", "LINK_JOBS[0]: name must be a table name"),
    ("LINK_JOBS = [{'name': 'j', 'template': 'http://127.0.0.1/{n}', 'values': {'n': [1]}, 'fields': {'t': '//h1'},"
     " 'delay': 10**400}]\n", "LINK_JOBS[0] ('j'): delay must be at most 315,360,000 seconds"),
])
def test_a_value_of_a_wrong_type_or_size_is_named(tmp_path, text, expected):
    params = tmp_path / "params.py"
    params.write_text(text, encoding="utf-8")
    with pytest.raises(SettingsError) as refused:
        read_settings(params)
    assert expected in str(refused.value)


@pytest.mark.parametrize("text, expected", [
    ("LOG_DIR = 5\n", "LOG_DIR: must be a folder path, got 5"),
    ("STAGING_DIR = ['staging']\n", "STAGING_DIR: must be a folder path, got ['staging']"),
    ("DB_URL = 'sqllite:///db/items.db'\n", "DB_URL: sqllite:// is no database SQLAlchemy knows"),
    ("DB_URL = 'mysql://user:secret@db.example/items'\n",
     "DB_URL: mysql:// needs the Python module MySQLdb, which is not installed here"),
    ("POLL_INTERVAL = 10**400\n", "POLL_INTERVAL: must be at most 315,360,000 seconds (ten years)"),
    (TEMPLATE_JOB % "range(1, 10**30)", "LINK_JOBS[0] ('j'): template gives 999,999,999,999,999,999,999,999,999,999 "
                                        "links, more than 10,000,000"),
    # the last net: a value no check foresaw still names the file, without a traceback
    ("class Odd:\n    def __eq__(self, other):\n        raise RuntimeError('no comparing me')\n"
     "    __hash__ = object.__hash__\nDEDUP = Odd()\n",
     "params.py: a value could not be read: RuntimeError: no comparing me"),
    # case 12: params.py that leaves
    ("import sys\nsys.exit(0)\n", "params.py: called sys.exit(0) (line 2); a params file only sets values"),
    ("raise SystemExit(3)\n", "params.py: called sys.exit(3) (line 1)"),
    ("raise KeyboardInterrupt\n", "params.py: does not import (line 1): KeyboardInterrupt"),
], ids=lambda x: x[:40] if isinstance(x, str) else None)
def test_a_bad_params_file_of_any_kind_is_exit_2_with_one_line_and_nothing_created(project, text, expected):
    project.params.write_text(text, encoding="utf-8")
    proc = project.run("--once", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "secret" not in proc.stderr  # DB_URL's password is never quoted back
    assert sorted(p.name for p in project.folder.iterdir()) == ["params.py"]


WEIRD = [None, True, -1, 10**30, 10**400, 1.5, float("inf"), float("nan"), "", "a\0b", "http://[x", b"x", [],
         ["x"], [None], {}, {"a": 1}, range(10**30), object(), 1j]


def test_every_setting_given_every_wrong_type_is_a_settings_error(tmp_path):
    """In-process, every setting and a source's and a job's keys: only SettingsError ever comes out."""
    params = tmp_path / "params.py"
    source = {"name": "a", "url": "http://127.0.0.1/x"}
    job = {"name": "j", "template": "http://127.0.0.1/{n}", "values": {"n": [1]}, "fields": {"t": "//h1"}}
    tried = 0
    for value in WEIRD:
        cases = [{name: value} for name in DEFAULTS]
        cases += [{"SOURCES": [{**source, key: value}]} for key in ("name", "url", "interval", "max_items", "hub")]
        cases += [{"LINK_JOBS": [{**job, key: value}]} for key in ("name", "interval", "delay", "values")]
        cases.append({"LINK_JOBS": [{**job, "values": {"n": value}}]})
        for values in cases:
            tried += 1
            try:
                settings_from_dict(values, params)
            except SettingsError:
                pass
            except Exception as exc:  # noqa: BLE001 -- the point: name what got through
                pytest.fail(f"{values!r:.120}: {type(exc).__name__}: {exc}")
    assert tried > 600


# -- a params.py that blocks ----------------------------------------------------------------------------
def blocking_params(tmp_path: Path) -> tuple[Path, Path]:
    """A params.py that says it started (a file) and then waits until another file appears."""
    started, go = tmp_path / "read-started", tmp_path / "go"
    path = tmp_path / "slow" / "params.py"
    path.parent.mkdir()
    path.write_text(f"import os, time\nopen({str(started)!r}, 'w').close()\n"
                    f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.01)\nPOLL_INTERVAL = 60\n",
                    encoding="utf-8")
    return path, go


def test_a_read_that_outlasts_its_limit_is_refused_and_never_waited_on(tmp_path):
    path, go = blocking_params(tmp_path)
    now = [100.0]
    read = SettingsRead(path, limit=10, clock=lambda: now[0])
    try:
        wait_for(lambda: (tmp_path / "read-started").exists(), "the read under way")
        now[0] = 109.0
        assert read.result() is None  # still within the limit: the caller goes on
        now[0] = 110.0
        with pytest.raises(SettingsError, match="took longer than 10 s to read, so it was not used; is it waiting on "
                                                "the network"):
            read.result()
    finally:
        go.touch()
    assert read.done.wait(10)


def test_at_start_a_params_file_that_blocks_past_the_limit_is_a_settings_error(tmp_path):
    path, go = blocking_params(tmp_path)
    try:
        with pytest.raises(SettingsError, match="took longer than 0.3 s to read"):
            read_settings(path, limit=0.3)
    finally:
        go.touch()
    settings = read_settings(path, limit=10)  # the same file, let through: read as usual
    assert settings.poll_interval == 60


# -- on SIGHUP: refused, the daemon goes on, SIGTERM still flushes --------------------------------------
def start_polling(server, project):
    """A daemon polling one feed every 0.3 s, flushing only at its stop (so rows prove the final flush)."""
    server.route("/a.xml", body=rss(numbered_items(1, 3, host="a.example")))
    source = {"name": "a", "url": server.url("/a.xml"), "interval": 0.3}
    project.write_params(SOURCES=[source], POLL_INTERVAL=3600, FLUSH_INTERVAL=3600)
    proc = project.start()
    wait_for(lambda: project.staged_rows() == 3, "the first poll staged")
    return proc


def still_polls(server, proc) -> None:
    hits = server.hits["/a.xml"]
    wait_for(lambda: server.hits["/a.xml"] >= hits + 3 or proc.poll() is not None, "polls after the SIGHUP")
    assert proc.poll() is None, f"the daemon stopped on SIGHUP: exit {proc.returncode}\n{proc.stderr.read()}"
    assert server.hits["/a.xml"] >= hits + 3


def refused_on_sighup(project, proc, text: str) -> str:
    """Rewrite params.py, SIGHUP, and return the errors.log line that refuses it."""
    project.params.write_text(text, encoding="utf-8")
    before = project.log("errors.log").count("SIGHUP: refused")
    proc.send_signal(signal.SIGHUP)
    wait_for(lambda: project.log("errors.log").count("SIGHUP: refused") > before or proc.poll() is not None,
             "the refusal in errors.log")
    assert proc.poll() is None, f"the daemon stopped on SIGHUP: exit {proc.returncode}\n{proc.stderr.read()}"
    return project.log("errors.log").splitlines()[-1]


def stopped_with_rows(project, proc) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert sorted(r["link"] for r in project.rows()) == [f"http://a.example/item/{n}" for n in (1, 2, 3)]
    stopped = project.last_flush()  # daemon.json: the stop's flush went through
    assert stopped["why"] == "stop" and stopped["ok"] is True, stopped
    assert project.log("critical.log") == ""


def finish(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=30)


@pytest.mark.parametrize("text, expected", [
    ("LOG_DIR = 5\n", "LOG_DIR: must be a folder path, got 5"),
    ("DB_URL = 'sqllite:///db/items.db'\n", "DB_URL: sqllite:// is no database SQLAlchemy knows"),
    ("import sys\nsys.exit(0)\n", "called sys.exit(0) (line 2)"),
    ("raise KeyboardInterrupt\n", "does not import (line 1): KeyboardInterrupt"),
], ids=["wrong-type", "no-such-driver", "sys.exit(0)", "KeyboardInterrupt"])
def test_sighup_with_a_bad_params_file_is_refused_and_the_daemon_goes_on(server, project, text, expected):
    proc = start_polling(server, project)
    try:
        line = refused_on_sighup(project, proc, text)
        assert "SIGHUP: refused, the running settings stay" in line and expected in line
        still_polls(server, proc)
        stopped_with_rows(project, proc)
    finally:
        finish(proc)


def test_sighup_with_a_params_file_that_blocks_holds_neither_the_loop_nor_the_stop(server, project, tmp_path):
    proc = start_polling(server, project)
    started, fifo = tmp_path / "read-started", tmp_path / "never-written.fifo"
    os.mkfifo(fifo)
    try:
        # As a params.py waiting on the network would: its read never ends by itself.
        project.params.write_text(f"open({str(started)!r}, 'w').close()\nopen({str(fifo)!r}).read()\n",
                                  encoding="utf-8")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: started.exists(), "the daemon reading params.py again")
        polls = project.log().count("a  new 0")
        still_polls(server, proc)
        wait_for(lambda: project.log().count("a  new 0") > polls, "poll lines in parser.log")
        stopped_with_rows(project, proc)  # SIGTERM during the read: stops with its final flush
    finally:
        finish(proc)


# -- a log folder that cannot be written ---------------------------------------------------------------
@pytest.mark.parametrize("how", ["rlimit", "tmpfs"])
def test_a_full_log_folder_is_said_once_on_stderr_and_its_lines_go_there(server, project, how):
    """rlimit: parser.log already past RLIMIT_FSIZE (EFBIG on every write; the staging files and the
    database stay under it). tmpfs: the log folder on a full tmpfs (ENOSPC; needs mount rights)."""
    server.route("/a.xml", body=rss(numbered_items(1, 3, host="a.example")))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}], LOG_MAX_BYTES=100 * MiB)
    preexec, mounted = None, False
    if how == "tmpfs":
        mounted = mount_tmpfs(project.logs, "64k")
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (not root, or no mount rights); the rlimit case covers it")
        (project.logs / "filler").write_bytes(b"\0" * 64 * 1024)
    else:
        project.logs.mkdir()
        (project.logs / "parser.log").write_bytes(b"older lines\n" * 100_000)  # 1.2 MB, past the limit
        preexec = file_size_limit(1 * MiB)
    try:
        done = subprocess.run(project.command("--once"), capture_output=True, text=True, timeout=120,
                              cwd=project.folder, preexec_fn=preexec)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(project.logs)], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert len(project.rows()) == 3  # only the logs were full: collecting went on
    reason = "No space left on device" if how == "tmpfs" else "File too large"
    said = f"cannot write {project.logs / 'parser.log'}: {reason}; its messages go to stderr until it can"
    assert done.stderr.count(said) == 1, done.stderr
    assert "Traceback" not in done.stderr and "Logging error" not in done.stderr
    assert "a  new 3  duplicates 0" in done.stderr  # parser.log's lines, kept on stderr
    assert "flush (once): 3 rows written to items" in done.stderr
