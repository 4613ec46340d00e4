"""Shared fixtures: a loopback HTTP server, a throwaway project folder that runs the real daemon,
the corpus folder, and a PostgreSQL database per test."""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path

import pytest

from tests.server import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("PARSER_CORPUS", ROOT.parent / "shared" / "corpus"))


# How pytest-xdist (`make test`: -n, --dist loadscope) shares the tests out; in one process (-n 0, or a
# plain pytest) nothing here applies.
SHARED_FIXTURE = re.compile(r"""@pytest\.fixture\(scope=["'](module|class|package)["']""")
# A file whose tests load the machine so much that anything beside them would measure the machine,
# not the daemon (tests/test_listener_abuse.py: 1,100 connections, 100 x 10 MiB bodies): `pytestmark =
# pytest.mark.one_worker`. `make test` (tests/suite.py) runs the suite without them on its workers,
# then them alone, in one process (--one-worker-files=skip, then =only); a plain `pytest -n 4` keeps
# them on one worker, one after another, while the other workers go on.
ONE_WORKER = re.compile(r"""^pytestmark = .*pytest\.mark\.one_worker""", re.MULTILINE)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--one-worker-files", choices=("run", "skip", "only"), default="run",
                     help="the files marked one_worker: run them with the rest (default), leave them out "
                          "(skip), or run only them (only); make test's two phases (tests/suite.py)")


def pytest_report_header(config: pytest.Config) -> str | None:
    which = config.getoption("one_worker_files")
    if which == "skip":
        return "one_worker files: left out (make test runs them next, alone)"
    if which == "only":
        return "one_worker files only, in one process (make test's second phase)"
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """--dist loadscope, our way: the tests of a file that defines a module- or class-scoped fixture
    (a daemon run whose results many tests read), or is marked one_worker, go to one worker, so that
    run happens once, or those tests one at a time; every other test goes to whichever worker is free,
    on its own. (--dist loadgroup would do the same from xdist_group marks, but pytest 9.2 broke it:
    pytest-xdist issue 1386.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        shares: dict[str, bool] = {}

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path not in self.shares:
                source = config.rootpath / path
                text = source.read_text("utf-8") if source.is_file() else ""
                self.shares[path] = bool(SHARED_FIXTURE.search(text) or ONE_WORKER.search(text))
            return path if self.shares[path] else nodeid
    return SharedFixtureScheduling(config, log)


@pytest.hookimpl(tryfirst=True)  # before -m and -k deselect: they count only the phase's tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--one-worker-files: a phase's tests kept, the others' dropped (not reported as deselected: they
    are the other phase's, not left out by the user's -m or -k). In a pytest-xdist worker, the slow
    tests are handed out first, so the quick ones fill the workers at the end instead of one slow test
    running alone. A stable sort: every worker collects the same order, as it must."""
    which = config.getoption("one_worker_files")
    if which != "run":
        items[:] = [item for item in items if (item.get_closest_marker("one_worker") is not None) == (which == "only")]
    if "PYTEST_XDIST_WORKER" in os.environ:
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _children() -> dict[int, str]:
    """This process's child processes still running: pid -> command line."""
    me, found = os.getpid(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
            if int(fields[1]) == me and fields[0] != "Z":
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue  # ended meanwhile
    return found


@pytest.fixture(autouse=True)
def _stop_what_the_test_started():
    """Every process a test started and left running (it failed before its stop, or forgot it) is
    stopped when the test ends: SIGTERM, as the daemon's service manager would, then SIGKILL after
    10 s; a warning names it. The processes of the Python running the tests (multiprocessing's resource
    tracker, a pool's forkserver) and those a wider fixture started before this test are left alone."""
    before = set(_children())
    yield
    left = {pid: cmd for pid, cmd in _children().items()
            if pid not in before and "from multiprocessing" not in cmd}
    if not left:
        return
    for pid in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    waiting = set(left)
    while waiting and time.monotonic() < deadline:
        waiting = {pid for pid in waiting if not _reaped(pid)}
        time.sleep(0.05)
    for pid in waiting:
        _signal(pid, signal.SIGKILL)
        _reaped(pid, block=True)
    warnings.warn(f"the test left {len(left)} process(es) running, stopped now: "
                  + "; ".join(f"{pid} {cmd[:120]}" for pid, cmd in left.items()), stacklevel=1)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reaped(pid: int, block: bool = False) -> bool:
    """Whether child `pid` has ended (and is reaped now, unless its Popen reaped it first)."""
    try:
        done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


@pytest.fixture
def server():
    srv = LoopbackServer().start()
    yield srv
    srv.stop()


def corpus_dir(*parts: str) -> Path:
    """A folder of ../shared/corpus, or skip the test saying where it was looked for."""
    path = CORPUS.joinpath(*parts)
    if not path.is_dir():
        pytest.skip(f"corpus folder {path} is absent (set PARSER_CORPUS to its location)")
    return path


class Project:
    """A project folder with its own params.py; runs run_daemon.py as a user would."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.params = folder / "params.py"
        self.db_path = folder / "db" / "items.db"
        self.staging = folder / "staging"
        self.logs = folder / "logs"

    def write_params(self, text: str = "", **settings) -> Path:
        lines = [text] if text else []
        settings.setdefault("DB_URL", "sqlite:///db/items.db")
        for name, value in settings.items():
            lines.append(f"{name} = {value!r}")
        self.params.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return self.params

    def command(self, *args: str) -> list[str]:
        return [sys.executable, str(ROOT / "run_daemon.py"), "--params", str(self.params), *args]

    def run(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout,
                              cwd=self.folder)
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        return proc

    def start(self, *args: str, preexec_fn=None) -> subprocess.Popen:
        return subprocess.Popen(self.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=self.folder, preexec_fn=preexec_fn)

    def rows(self, table: str = "items", where: str = "") -> list[dict]:
        if not self.db_path.exists():
            return []
        con = sqlite3.connect(self.db_path)
        con.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in con.execute(f"SELECT * FROM {table} {where} ORDER BY id")]
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()

    def polls(self, source: str, db_url: str | None = None) -> list[tuple[int, int, int]]:
        """(entries read, new, changed) of each poll of `source` in the runs table, oldest first: what a
        poll did, as its parser.log line says it. From the project's SQLite file, or from `db_url`'s database."""
        if db_url is None or db_url.startswith("sqlite"):
            return [(r["entries"], r["new"], r["changed"]) for r in self.rows("runs") if r["source"] == source]
        import psycopg
        with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as con:
            return [tuple(r) for r in con.execute(
                "SELECT entries, new, changed FROM runs WHERE source = %s ORDER BY id", (source,))]

    def outcomes(self, source: str) -> list[str]:
        """What each poll of `source` came to in the runs table, oldest first: "new", "unchanged", "not
        modified" (a 304) or "error"."""
        return [r["outcome"] for r in self.rows("runs") if r["source"] == source]

    def harvest_pages(self, job: str) -> tuple[int, dict[str, str]]:
        """The job's current (or last) harvest run: its number, and each page it fetched -> "ok" or what
        failed, from the job's harvest.log (what pass 1's parser.log summary counts)."""
        text = (self.staging / "jobs" / job / "harvest.log").read_text(encoding="utf-8")
        lines = [line.split("\t") for line in text.splitlines() if not line.startswith("#")]
        run = next(int(parts[1]) for parts in lines if parts[0] == "run")
        return run, {parts[1]: parts[2] for parts in lines if parts[0] == "done"}

    def staged_rows(self) -> int:
        """Records waiting in the staging CSV and its batch files, read as the flush reads them."""
        total = 0
        for path in self.staging.glob("staging*.csv"):
            with open(path, newline="", encoding="utf-8") as f:
                total += sum(1 for _ in csv.DictReader(f))
        return total

    def last_flush(self) -> dict:
        """daemon.json's last flush: {"rows" inserted, "already" stored, "ok", "why", ...}, what its parser.log
        line says."""
        return json.loads((self.staging / "daemon.json").read_text(encoding="utf-8"))["last_flush"]

    def log(self, name: str = "parser.log") -> str:
        path = self.logs / name
        return path.read_text(encoding="utf-8") if path.exists() else ""


def link_statuses(staging: Path, job: str) -> dict[str, str]:
    """URL -> its last status in the job's status log (STAGING_DIR/jobs/JOB/links.status)."""
    out = {}
    for line in (staging / "jobs" / job / "links.status").read_text(encoding="utf-8").splitlines():
        if not line.startswith("#") and line.count("\t") >= 3:
            parts = line.split("\t")
            out[parts[3]] = parts[1]
    return out


def group_runs(pg_url: str) -> list[dict]:
    """The runs table of a group's PostgreSQL database, oldest first: a row per poll or job pass, with the
    daemon ("host:pid") that ran it."""
    import psycopg
    from psycopg.rows import dict_row
    with psycopg.connect(pg_url, row_factory=dict_row) as con:
        return con.execute("SELECT * FROM runs ORDER BY id").fetchall()


def daemon_name(proc: subprocess.Popen) -> str:
    """What the runs table calls a daemon of a group run by this test (parser/group/parts.py)."""
    return f"{socket.gethostname()}:{proc.pid}"


def machines(tmp_path: Path, n: int, **params) -> list[Project]:
    """n machines of one project: the same params.py, each in its own folder (its own staging)."""
    projects = []
    for i in range(n):
        project = Project(tmp_path / f"machine{i}")
        project.folder.mkdir()
        project.write_params(**params)
        projects.append(project)
    return projects


@pytest.fixture
def project(tmp_path) -> Project:
    return Project(tmp_path)


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database for one test; skipped (or failed, in CI) when none is reachable."""
    base = os.environ.get("PARSER_TEST_PG_URL")
    required = os.environ.get("PARSER_REQUIRE_PG") == "1"
    if not base:
        if required:
            pytest.fail("PARSER_REQUIRE_PG=1 but PARSER_TEST_PG_URL is not set")
        pytest.skip("PostgreSQL tests need PARSER_TEST_PG_URL (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    import psycopg
    conninfo = base.replace("postgresql+psycopg://", "postgresql://")
    try:
        admin = psycopg.connect(conninfo, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        if required:
            pytest.fail(f"PostgreSQL at {base} is unreachable: {exc}")
        pytest.skip(f"PostgreSQL at {base} is unreachable: {str(exc).strip()[:200]}")
    name = f"parser_test_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    prefix, _, _ = conninfo.rpartition("/")
    yield f"{prefix}/{name}"
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()
