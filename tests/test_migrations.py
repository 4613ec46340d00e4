"""The one chain of schema steps (db/migrations.py): each step runs once per database, in one transaction
with its record row, even when several daemons start at once; a database a newer version changed is
refused at start (exit 2) with nothing written; and a role that may write rows but not create tables
stores them once the tables exist (nothing is created or altered on a flush)."""
from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
import sqlalchemy as sa

from db import migrations
from tests.conftest import Project
from tests.feeds import rss
from tests.upgrade.make_051_fixtures import entries

FEED = "/feed.xml"


def rows(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def sa_url(pg_url: str) -> str:
    return "postgresql+psycopg://" + pg_url.split("://", 1)[1]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chain.db'}"
    return sa_url(request.getfixturevalue("pg_url"))


def feed_project(project, server, count: int, db_url: str | None = None, **params) -> None:
    server.route(FEED, body=rss(entries(count), title="Morning news"))
    project.write_params(SOURCES=[{"name": "morning", "url": server.url(FEED)}],
                         **({"DB_URL": db_url} if db_url else {}), **params)


def test_the_steps_run_once_when_eight_daemons_start_together_on_a_new_database(db_url):
    engines = [sa.create_engine(db_url, connect_args={"timeout": 30} if db_url.startswith("sqlite") else {})
               for _ in range(8)]
    ran: list[list[int]] = []
    errors: list[BaseException] = []

    def start(engine: sa.Engine) -> None:
        try:
            ran.append(migrations.run(engine))
        except BaseException as exc:  # noqa: BLE001 (collected for the assertion below)
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(engine,)) for engine in engines]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for engine in engines:
            engine.dispose()
    assert errors == []
    alone = [s.number for s in migrations.STEPS if not s.group]
    assert sorted(n for numbers in ran for n in numbers) == alone  # each step run by one of them
    assert [n for n, in rows(db_url, "select step from parser_migrations order by step")] == alone
    assert {"items", "sources", "parser_schema"} <= set(sa.inspect(sa.create_engine(db_url)).get_table_names())


def test_two_daemons_started_at_once_on_one_new_postgresql_database_both_store(tmp_path, server, pg_url):
    url = sa_url(pg_url)
    one, two = tmp_path / "one", tmp_path / "two"
    projects = []
    for folder in (one, two):
        folder.mkdir()
        project = Project(folder)
        feed_project(project, server, 3, url)
        projects.append(project)
    procs = [project.start("--once") for project in projects]
    for proc in procs:
        proc.wait(timeout=120)
    for project, proc in zip(projects, procs, strict=True):
        assert proc.returncode == 0, project.log("errors.log") + project.log("critical.log")
    assert rows(url, "select count(*) from items")[0][0] == 3  # one row per entry, whoever flushed it
    assert [n for n, in rows(url, "select step from parser_migrations order by step")] == \
        [s.number for s in migrations.STEPS if not s.group]
    said = sum(project.log().count("database: step 3 of") for project in projects)
    assert said == 1  # the items' step ran in one daemon only


def test_a_step_is_one_transaction_with_its_record_row_and_the_next_start_completes_it(db_url):
    """An index already named as the items' table's would be (a user's object) makes step 3 fail midway:
    its table is not left made, the record does not say the step ran, the steps before it are kept."""
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE TABLE mine (x integer)"))
            conn.execute(sa.text("CREATE INDEX items_published ON mine (x)"))
        with pytest.raises(sa.exc.SQLAlchemyError, match="items_published"):
            migrations.run(engine)
        assert [n for n, in rows(db_url, "select step from parser_migrations order by step")] == [1, 2]
        assert not sa.inspect(engine).has_table("items")
        with engine.begin() as conn:
            conn.execute(sa.text("DROP INDEX items_published"))
        rest = [s.number for s in migrations.STEPS if s.number > 2 and not s.group]
        assert migrations.run(engine) == rest
        assert [n for n, in rows(db_url, "select step from parser_migrations order by step")] == [1, 2, *rest]
        assert migrations.run(engine) == []  # once
    finally:
        engine.dispose()


def test_a_database_a_newer_version_changed_is_refused_at_start_and_nothing_is_written(project, server):
    feed_project(project, server, 3)
    first = project.run("--once")
    assert first.returncode == 0, first.stderr + project.log("errors.log")
    con = sa.create_engine(f"sqlite:///{project.db_path}")
    with con.begin() as conn:  # as a version with one more step would leave it
        conn.execute(sa.text("INSERT INTO parser_migrations VALUES (:n, 'a later step', '2030-01-01T00:00:00Z')"),
                     {"n": migrations.LATEST + 1})
    con.dispose()
    server.route(FEED, body=rss(entries(5), title="Morning news"))  # two more entries to store
    before = project.db_path.read_bytes()
    proc = project.run("--once")
    assert proc.returncode == 2, proc.stderr
    critical = project.log("critical.log")
    assert f"at step {migrations.LATEST + 1}" in critical and f"knows steps 1 to {migrations.LATEST}" in critical
    assert project.db_path.read_bytes() == before
    assert not project.db_path.with_name("items.db-wal").exists() and \
        not project.db_path.with_name("items.db-journal").exists()
    assert len(project.rows()) == 3


def test_a_role_that_may_write_rows_but_not_create_tables_stores_them(tmp_path, project, server, pg_url):
    """PostgreSQL 15's default: the daemon's role holds SELECT/INSERT/UPDATE/DELETE and the sequences,
    no CREATE on the schema; the tables were made by their owner, at this version."""
    feed_project(project, server, 3, sa_url(pg_url))
    first = project.run("--once")  # the owner (the test's superuser) makes the tables
    assert first.returncode == 0, first.stderr + project.log("errors.log")
    role = f"parser_writer_{uuid.uuid4().hex[:10]}"  # roles are the cluster's: one per test
    database = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"')
        admin.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        admin.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}"')
        admin.execute(f'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    try:
        as_role = sa_url(pg_url).replace("postgres@", f"{role}@", 1)
        feed_project(project, server, 6, as_role)  # three more entries, stored by the role
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr + project.log("errors.log")
        assert "permission denied" not in project.log("errors.log")
        assert rows(sa_url(pg_url), "select count(*) from items")[0][0] == 6
        assert rows(sa_url(pg_url), "select count(*) from sources where last_status = 200")[0][0] == 1
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')


def test_a_group_daemon_refuses_a_database_a_newer_version_changed_and_writes_nothing(project, server, pg_url):
    url = sa_url(pg_url)
    feed_project(project, server, 3, url, SHARED=True)
    first = project.run("--once")
    assert first.returncode == 0, first.stderr + project.log("errors.log")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO parser_migrations VALUES (%s, 'a later step', now())", (migrations.LATEST + 1,))
    server.route(FEED, body=rss(entries(5), title="Morning news"))

    def everything() -> dict[str, list[tuple]]:
        names = sa.inspect(sa.create_engine(url)).get_table_names()
        return {name: sorted(map(repr, rows(url, f"select * from {name}"))) for name in names}

    before = everything()
    proc = project.run("--once")
    assert proc.returncode == 2, proc.stderr
    assert f"at step {migrations.LATEST + 1}" in project.log("critical.log")
    assert everything() == before


def test_a_step_a_role_may_not_run_is_exit_2_saying_to_start_once_as_the_owner(project, server, pg_url):
    """As after an upgrade that adds a step, started as the writing role: refused at start with what to
    do (not every flush failing), the step neither done nor recorded."""
    url = sa_url(pg_url)
    feed_project(project, server, 3, url)
    first = project.run("--once")
    assert first.returncode == 0, first.stderr + project.log("errors.log")
    last = migrations.STEPS[-1]
    role = f"parser_writer_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"DELETE FROM parser_migrations WHERE step = {last.number}")  # as the older version left it
        admin.execute("ALTER TABLE items DROP COLUMN stored")  # what the last step adds
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        admin.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{role}"')
        admin.execute(f'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    try:
        feed_project(project, server, 3, url.replace("postgres@", f"{role}@", 1))
        proc = project.run("--once")
        assert proc.returncode == 2, proc.stderr
        critical = project.log("critical.log")
        assert f"refused schema step {last.number}" in critical
        assert "permission denied" in critical or "must be owner" in critical  # PostgreSQL's words for each
        assert "start the daemon once as the tables' owner" in critical
        assert last.number not in {n for n, in rows(url, "select step from parser_migrations")}
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
