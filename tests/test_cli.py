"""The command line as an operator meets it: the installed console script, --version, the params file
of the current folder, and the systemd unit in examples/."""
from __future__ import annotations

import configparser
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from parser import __version__
from parser.cli import build_arguments
from tests.conftest import ROOT
from tests.feeds import numbered_items, rss

UNIT = ROOT / "examples" / "parser.service"


def console_scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]


def rows_in(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT source, link FROM items ORDER BY link").fetchall()
    finally:
        con.close()


def test_version_says_the_package_version():
    proc = subprocess.run([sys.executable, str(ROOT / "run_daemon.py"), "--version"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"parser-daemon {__version__}"


@pytest.mark.slow
def test_pip_install_then_the_console_script_runs_once(tmp_path):
    """pip install . into a fresh virtualenv, then `parser-daemon --params ... --once` from elsewhere."""
    # The venv sees the shared venv's packages through a .pth file, so --no-deps installs only this
    # project (no downloads but the build backend, which pip's build isolation fetches).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    # A copy of the sources: a build writes build/ and *.egg-info beside them.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "staging", "logs", "db", "tests",
                                                             "bench", "__pycache__", "*.egg-info", "build"))
    for package in ("db",):  # the db package itself, without the checkout's database files
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("*.db", "*.db-*", "__pycache__"))
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                              "--no-deps", "--quiet", "--disable-pip-version-check", str(src)],
                             capture_output=True, text=True, timeout=600)
    if install.returncode != 0 and "Could not find a version that satisfies the requirement setuptools" in \
            install.stderr:
        pytest.skip("pip's build isolation could not fetch setuptools (no package index reachable)")
    assert install.returncode == 0, install.stderr
    script = venv / "bin" / "parser-daemon"
    assert script.exists()

    project = tmp_path / "project"
    project.mkdir()
    (project / "feed.xml").write_bytes(rss(numbered_items(1, 3, host="installed.example")))
    (project / "params.py").write_text('SOURCES = [{"name": "local", "url": "feed.xml"}]\n', encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(script), "--params", str(project / "params.py"), "--once"], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert rows_in(project / "db" / "items.db") == [("local", f"http://installed.example/item/{n}") for n in (1, 2, 3)]
    assert list(elsewhere.iterdir()) == []  # relative paths in params.py went beside it, not into the cwd
    # The code that ran is the installed copy, not the checkout's.
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import parser.cli; print(parser.cli.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout
    assert str(site) in where
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, env=env)
    assert version.stdout.strip() == f"parser-daemon {__version__}"
    # The unit file's ExecStart names this very command.
    assert shlex.split(unit_service()["ExecStart"])[0].rsplit("/", 1)[1] in {p.name for p in (venv / "bin").iterdir()}


def test_run_from_another_folder_reads_its_params_py_and_writes_there(tmp_path):
    """`cd myproject && python /path/to/run_daemon.py`: the project is the current folder, not the checkout."""
    (tmp_path / "feed.xml").write_bytes(rss(numbered_items(1, 2, host="here.example")))
    (tmp_path / "params.py").write_text('SOURCES = [{"name": "here", "url": "feed.xml"}]\n', encoding="utf-8")
    checkout_state = {p: p.stat().st_mtime_ns for p in (ROOT / "staging", ROOT / "logs") if p.exists()}
    checkout_db = ROOT / "db" / "items.db"
    db_before = checkout_db.stat().st_mtime_ns if checkout_db.exists() else None
    proc = subprocess.run([sys.executable, str(ROOT / "run_daemon.py"), "--once"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert rows_in(tmp_path / "db" / "items.db") == [("here", "http://here.example/item/1"),
                                                     ("here", "http://here.example/item/2")]
    first = (tmp_path / "logs" / "parser.log").read_text(encoding="utf-8").splitlines()[0]
    assert first.endswith(f"params: {tmp_path / 'params.py'}") and " INFO  " in first
    assert (checkout_db.stat().st_mtime_ns if checkout_db.exists() else None) == db_before
    assert {p: p.stat().st_mtime_ns for p in checkout_state} == checkout_state


def test_without_a_params_py_in_the_current_folder_it_says_so(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "run_daemon.py"), "--once"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "params.py: params file does not exist" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def unit_service() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str  # systemd keys are case-sensitive
    unit.read_string(UNIT.read_text(encoding="utf-8"))
    return unit["Service"]


def test_the_systemd_unit_starts_the_console_script_with_arguments_it_accepts():
    service = unit_service()
    argv = shlex.split(service["ExecStart"])
    assert Path(argv[0]).name in console_scripts()
    args = build_arguments().parse_args(argv[1:])  # exits (SystemExit) on an option we do not have
    assert args.handler.__name__ == "run_daemon" and not args.once
    assert service["Restart"] == "on-failure"
    assert "2" in service["RestartPreventExitStatus"].split()
    assert int(service["TimeoutStopSec"]) >= 120  # the final flush of a large staging file
    assert service["ExecReload"].split()[-2:] == ["-HUP", "$MAINPID"]
