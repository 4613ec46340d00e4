"""A DB_URL whose password holds '#', '/' or '?' (issue 27, case 15): urlsplit ends the address at
the first of them, so a redaction by urlsplit finds no '@' and prints the password; SQLAlchemy, which
hands the password to the driver, reads it whole. No log line, command output or file of the project
shows it: the `started:` line, `check`, hashes.json, a flush's error and the SIGHUP line."""
from __future__ import annotations

import json
import signal
from urllib.parse import urlsplit

from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for

PASSWORD = "pa#ss/w?rd"
PIECES = ("pa#ss", "ss/w", "w?rd", "pa%23ss")  # the password, or the part of it urlsplit would leave


def with_password(url: str) -> str:
    """postgresql://postgres@host/db -> postgresql+psycopg://postgres:<PASSWORD>@host/db (trust auth: any
    password is taken)."""
    scheme, rest = url.split("://", 1)
    return f"postgresql+psycopg://{rest.replace('postgres@', f'postgres:{PASSWORD}@', 1)}"


def shown_anywhere(project: Project, *outputs: str) -> list[str]:
    """Each file of the project (params.py aside) or output that holds a piece of the password."""
    found = [f"output {i}" for i, text in enumerate(outputs) if any(p in text for p in PIECES)]
    for path in project.folder.rglob("*"):
        if path.is_file() and path != project.params:
            text = path.read_bytes().decode("utf-8", "replace")
            found += [str(path.relative_to(project.folder))] if any(p in text for p in PIECES) else []
    return found


def test_started_line_check_and_hashes_json_hide_the_password(server, project, pg_url):
    db_url = with_password(pg_url)
    assert "@" not in urlsplit(db_url).netloc  # the premise: urlsplit sees no credentials to hide
    host_and_db = pg_url.split("@", 1)[1]  # 127.0.0.1:5432/parser_test_...
    server.route("/feed.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/feed.xml")}], DB_URL=db_url)
    once = project.run("--once", check=True)
    check = project.run("check", check=True)

    started = [line for line in project.log().splitlines() if "started:" in line]
    assert started and f"database postgresql+psycopg://***@{host_and_db}," in started[-1], started
    assert f"database: postgresql+psycopg://***@{host_and_db} (not connected by check)" in check.stdout
    flushed = json.loads((project.staging / "hashes.json").read_text(encoding="utf-8"))["flushed"]
    assert flushed["database"] == f"postgresql+psycopg://***@{host_and_db}"
    assert shown_anywhere(project, once.stdout, once.stderr, check.stdout, check.stderr) == []


def test_a_failed_flush_names_the_database_without_the_password(server, project):
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    db_url = f"postgresql+psycopg://reader:{PASSWORD}@127.0.0.1:9/elsewhere"  # nothing listens on port 9
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/feed.xml")}], DB_URL=db_url)
    once = project.run("--once")
    errors = project.log("errors.log")
    assert "flush  postgresql+psycopg://***@127.0.0.1:9/elsewhere" in errors, errors
    assert shown_anywhere(project, once.stdout, once.stderr) == []


def test_the_sighup_line_hides_a_new_db_urls_password(server, project):
    server.route("/feed.xml", body=rss(numbered_items(1, 1)))
    source = {"name": "a", "url": server.url("/feed.xml")}
    project.write_params(SOURCES=[source], POLL_INTERVAL=3600)
    proc = project.start()
    try:
        wait_for(lambda: "started:" in project.log(), "the daemon started")
        project.write_params(SOURCES=[source], POLL_INTERVAL=3600,
                             DB_URL=f"postgresql+psycopg://reader:{PASSWORD}@127.0.0.1:9/elsewhere")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP" in project.log(), "the reload line")
        line = next(line for line in project.log().splitlines() if "SIGHUP" in line)
        assert "-> postgresql+psycopg://***@127.0.0.1:9/elsewhere" in line, line
    finally:
        stop(proc)
    assert shown_anywhere(project, *(proc.stderr.read() if proc.stderr else "",)) == []

