"""This version started on projects each released version left (tests/upgrade/make_release_fixtures.py ran
the releases' own code): after a `--once` (a staging CSV holding only the old header), after a kill with a
poll staged and not flushed, and after a kill in the middle of a flush; on SQLite and PostgreSQL. After
the upgrade the tables hold, column by column, what a new project of this version stores from the same
polls (ASIDE: the columns that say when this machine did something, and the search index's): nothing
damaged, lost or stored twice; the upgraded project's search finds every entry.
"""
from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import Project
from tests.upgrade.make_release_fixtures import (
    DATABASES,
    RELEASES,
    SCENARIOS,
    copy_fixture,
    params,
    serve,
)

# The columns compared: every column of the table but these, which say when this machine did something.
ASIDE = {"id", "fetched", "changed", "stored", "search"}  # search: the index's column (PostgreSQL)
OLD_ADDRESS = re.compile(r"http://127\.0\.0\.1:\d+")
# The feed versions each scenario's release polled before the upgrade; the upgrade polls feed 2 then.
POLLED_BEFORE = {"once": [1], "killed_staged": [1, 2], "killed_mid_flush": [1, 2]}


def rows(url: str, table: str = "items") -> list[dict]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            found = [dict(row._mapping) for row in conn.execute(sa.text(f"select * from {table} order by guid"))]
    finally:
        engine.dispose()
    return [{k: v for k, v in row.items() if k not in ASIDE} for row in found]


@contextmanager
def database(pg_base: str | None, folder: Path) -> Iterator[str]:
    """A database URL for one project: an SQLite file in `folder`, or a new PostgreSQL database."""
    if pg_base is None:
        yield f"sqlite:///{folder / 'db' / 'items.db'}"
        return
    import psycopg
    admin = psycopg.connect(pg_base, autocommit=True)
    name = f"parser_test_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield "postgresql+psycopg://" + f"{pg_base.rpartition('/')[0]}/{name}".split("://", 1)[1]
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def load_dump(fixture: Path, url: str) -> None:
    import psycopg
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute((fixture / "dump.sql").read_text("utf-8"))


def upgraded(version: str, scenario: str, db: str, folder: Path, db_url: str, server) -> Project:
    """The release's project copied into `folder`, moved to `server`'s address and `db_url`."""
    copy_fixture(version, scenario, db, folder)
    if db == "postgresql":
        load_dump(folder, db_url)
    old = OLD_ADDRESS.search((folder / "params.py").read_text("utf-8")).group(0)
    new = server.url("/").rstrip("/")
    for path in (folder / "params.py", folder / "staging" / "state.json"):  # the same project at a new address
        path.write_text(path.read_text("utf-8").replace(old, new), encoding="utf-8")
    params_py = folder / "params.py"
    text = re.sub(r"DB_URL = .*", f"DB_URL = {db_url!r}", params_py.read_text("utf-8"))
    params_py.write_text(text + "SEARCH = True\n", "utf-8")  # its index built from the release's rows
    return Project(folder)


def fresh(folder: Path, db_url: str, server, polls: list[int]) -> Project:
    """A new project of this version that made the same polls, one `--once` each."""
    folder.mkdir()
    project = Project(folder)
    project.params.write_text(params(server.url("/feed.xml"), db_url, 3600), encoding="utf-8")
    for version in polls:
        serve(server, version)
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr + project.log("errors.log")
    return project


@pytest.mark.parametrize("db", DATABASES)
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("version", sorted(RELEASES))
def test_an_upgraded_project_stores_what_a_new_one_does(tmp_path, server, version, scenario, db, request):
    pg_base = None
    if db == "postgresql":
        pg_base = request.getfixturevalue("pg_url")
    with database(pg_base, tmp_path / "old") as old_url, database(pg_base, tmp_path / "new") as new_url:
        project = upgraded(version, scenario, db, tmp_path / "old", old_url, server)
        serve(server, 2)
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr + project.log("critical.log") + project.log("errors.log")
        assert "set aside" not in project.log("errors.log")  # nothing quarantined
        assert not list(project.staging.glob("staging.flushing-*.csv"))  # every batch loaded
        fresh(tmp_path / "new", new_url, server, [*POLLED_BEFORE[scenario], 2])
        expected = rows(new_url)
        got = rows(old_url)
        assert [r["guid"] for r in got] == [f"news-{n}" for n in range(1, 7)]  # nothing lost, none twice
        for want, have in zip(expected, got, strict=True):
            assert have == want, {k: (have[k], want[k]) for k in want if have.get(k) != want[k]}
        # The search index was built at the start from the rows the release stored (and kept since).
        found = project.run("search", "entry", "--format", "jsonl")
        assert found.returncode == 0 and len(found.stdout.splitlines()) == 6, found.stderr
