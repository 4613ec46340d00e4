"""Shared fixtures: a loopback HTTP server, a throwaway project folder that runs the real daemon,
the corpus folder, and a PostgreSQL database per test."""
from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.server import LoopbackServer

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("PARSER_CORPUS", ROOT.parent / "shared" / "corpus"))


# How pytest-xdist (`make test`: -n, --dist loadscope) shares the tests out; in one process (-n 0, or a
# plain pytest) nothing here applies.
SHARED_FIXTURE = re.compile(r"""@pytest\.fixture\(scope=["'](module|class|package)["']""")
# A file whose tests load the machine so much that two of them at once would measure each other, not
# the daemon (tests/test_listener_abuse.py: 1,100 connections, 100 x 10 MiB bodies): `pytestmark =
# pytest.mark.one_worker` keeps them on one worker, one after another.
ONE_WORKER = re.compile(r"""^pytestmark = .*pytest\.mark\.one_worker""", re.MULTILINE)


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker, the slow tests are handed out first, so the quick ones fill the
    workers at the end instead of one slow test running alone. A stable sort: every worker collects
    the same order, as it must."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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

    def log(self, name: str = "parser.log") -> str:
        path = self.logs / name
        return path.read_text(encoding="utf-8") if path.exists() else ""


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
