"""Re-create the release fixtures: project folders left by each released version itself, in the three
states a user's project is found in when the new version first starts on it, for tests/test_upgrade.py.

    python tests/upgrade/make_release_fixtures.py [--pg-url postgresql://postgres@127.0.0.1:5432/test]
                                                  [--release 0.6.0 ...]

For each release in RELEASES it checks out the release's commit in a temporary git worktree, serves
`feed(...)` on 127.0.0.1 and runs the release's own run_daemon.py (with this machine's python) in a new
project folder, once per database (SQLite, PostgreSQL) and per scenario:

- `once`: `--once` on feed 1 (4 entries): flushed, the staging CSV left holding only its header.
- `killed_staged`: `--once` on feed 1, then the daemon on feed 2 (6 entries, one edited) with a long
  FLUSH_INTERVAL, killed (SIGKILL) once its poll is staged: 2 new records and an edit wait in staging.
- `killed_mid_flush`: `--once` on feed 1, then the daemon on feed 2, the table locked by another
  connection once the poll is staged, killed while its flush waits on the lock: a `staging.flushing-*.csv`
  batch left beside the staging CSV.

What is kept, in tests/upgrade/releases/<version>/<scenario>-<database>/: params.py, staging/ (hash
files gzipped where they are Bloom filters), and the database (SQLite: db/items.db; PostgreSQL: dump.sql,
from pg_dump --inserts). When a new version is released, add it to RELEASES and run this once: the tests
then upgrade from it too, and every older release stays tested.
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.server import LoopbackServer  # noqa: E402

RELEASES = {"0.5.1": "04bfd87", "0.6.0": "02541bc"}
SCENARIOS = ("once", "killed_staged", "killed_mid_flush")
DATABASES = ("sqlite", "postgresql")
OUT = HERE / "releases"
SOURCE = "news"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ETAGS = {1: '"feed-1"', 2: '"feed-2"'}


def feed(version: int) -> bytes:
    """RSS 2.0 whose entries fill every column 0.6.0 added: HTML descriptions, categories, enclosures,
    comments, an image, the channel's language, updated dates. Version 1 has entries 1-4; version 2 adds
    5 and 6 and edits entry 2's title and body."""
    count = 4 if version == 1 else 6
    items = []
    for n in range(count, 0, -1):
        edited = version == 2 and n == 2
        title = f"Entry {n}" + (" (edited)" if edited else "")
        body = f"<p>Body of <b>entry {n}</b>{' and its edit' if edited else ''}.</p>"
        date = T0 + timedelta(hours=n)
        items.append(
            f"<item><title>{escape(title)}</title><link>http://example.org/news/{n}</link>"
            f'<guid isPermaLink="false">news-{n}</guid><description>{escape(body)}</description>'
            f"<author>ed{n}@example.org (Ed {n})</author><category>news</category><category>n{n}</category>"
            f'<enclosure url="http://example.org/audio/{n}.mp3" type="audio/mpeg" length="{1000 * n}"/>'
            f"<comments>http://example.org/news/{n}#comments</comments>"
            f'<media:thumbnail url="http://example.org/img/{n}.jpg"/>'
            f"<pubDate>{format_datetime(date)}</pubDate>"
            f"<atom:updated>{(date + timedelta(minutes=30 if edited else 5)).isoformat()}</atom:updated></item>")
    return ('<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0" '
            'xmlns:media="http://search.yahoo.com/mrss/" xmlns:atom="http://www.w3.org/2005/Atom"><channel>'
            "<title>News of the day</title><link>http://example.org/</link><description>test</description>"
            "<language>en-gb</language>" + "".join(items) + "</channel></rss>").encode("utf-8")


def serve(server: LoopbackServer, version: int) -> None:
    server.route("/feed.xml", body=feed(version), etag=ETAGS[version], content_type="application/rss+xml")


def params(feed_url: str, db_url: str, flush_interval: int) -> str:
    return (f"SOURCES = [{{'name': {SOURCE!r}, 'url': {feed_url!r}}}]\nDB_URL = {db_url!r}\nDB_TIMEOUT = 1\n"
            f"FLUSH_INTERVAL = {flush_interval}\nPOLL_INTERVAL = 2\n")


def command(release: Path, folder: Path, *args: str) -> list[str]:
    return [sys.executable, str(release / "run_daemon.py"), "--params", str(folder / "params.py"), *args]


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")  # the project folder keeps its logs/
        time.sleep(0.05)


def polled(folder: Path) -> bool:
    log = folder / "logs" / "parser.log"
    return log.exists() and f"{SOURCE}  new 2" in log.read_text("utf-8")


def flushing(folder: Path) -> bool:
    return any((folder / "staging").glob("staging.flushing-*.csv"))


def make(release: Path, folder: Path, scenario: str, db_url: str, locked: Callable[[], object]) -> None:
    """One project of `scenario` left in `folder` by the release checked out at `release`."""
    server = LoopbackServer().start()
    try:
        serve(server, 1)
        folder.mkdir(parents=True)
        (folder / "params.py").write_text(params(server.url("/feed.xml"), db_url, 3600), encoding="utf-8")
        first = subprocess.run(command(release, folder, "--once"), cwd=folder, capture_output=True, text=True,
                               timeout=120)
        assert first.returncode == 0, first.stderr
        if scenario == "once":
            return
        serve(server, 2)
        if scenario == "killed_mid_flush":
            (folder / "params.py").write_text(params(server.url("/feed.xml"), db_url, 3), encoding="utf-8")
        daemon = subprocess.Popen(command(release, folder), cwd=folder, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: polled(folder), "the poll of feed 2 to be staged")
            if scenario == "killed_staged":
                os.kill(daemon.pid, signal.SIGKILL)
            else:
                with locked():
                    wait_for(lambda: flushing(folder), "the flush to begin")
                    os.kill(daemon.pid, signal.SIGKILL)
                    daemon.wait()
        finally:
            daemon.kill()
            daemon.wait()
    finally:
        server.stop()
        shutil.rmtree(folder / "logs", ignore_errors=True)
        for bloom in folder.rglob("*.bloom"):  # megabytes of mostly zeros each: kept as kilobytes of gzip
            with open(bloom, "rb") as f, gzip.GzipFile(bloom.with_name(bloom.name + ".gz"), "wb", mtime=0) as out:
                shutil.copyfileobj(f, out)
            bloom.unlink()
        for leftover in [*folder.rglob("*.lock"), *folder.rglob("*.tmp")]:
            leftover.unlink()


def sqlite_project(release: Path, folder: Path, scenario: str) -> None:
    @contextmanager
    def locked() -> Iterator[None]:
        con = sqlite3.connect(folder / "db" / "items.db", isolation_level=None)
        con.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            con.execute("ROLLBACK")
            con.close()
    make(release, folder, scenario, "sqlite:///db/items.db", locked)


def postgresql_project(release: Path, folder: Path, scenario: str, base: str) -> None:
    import psycopg
    admin = psycopg.connect(base, autocommit=True)
    name = f"parser_fixture_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{base.rpartition('/')[0]}/{name}"

    @contextmanager
    def locked() -> Iterator[None]:
        con = psycopg.connect(url)
        con.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            con.rollback()
            con.close()
    try:
        make(release, folder, scenario, "postgresql+psycopg://" + url.split("://", 1)[1], locked)
        dump = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "--inserts", url], capture_output=True,
                              text=True, check=True).stdout
        # pg_dump 17.6 and later fence the dump with psql's \restrict: not SQL, and not needed to load it.
        (folder / "dump.sql").write_text("".join(line for line in dump.splitlines(keepends=True)
                                                 if not line.startswith("\\")), encoding="utf-8")
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def fixture(version: str, scenario: str, database: str) -> Path:
    return OUT / version / f"{scenario}-{database}"


def copy_fixture(version: str, scenario: str, database: str, to: Path) -> Path:
    """A fixture copied into `to`, its Bloom filters un-gzipped."""
    return copy_unpacked(fixture(version, scenario, database), to)


def copy_unpacked(folder: Path, to: Path) -> Path:
    """A fixture's folder copied into `to`, its Bloom filters un-gzipped (they are kept gzipped)."""
    shutil.copytree(folder, to, dirs_exist_ok=True)
    for packed in to.rglob("*.bloom.gz"):
        with gzip.open(packed, "rb") as f, open(packed.with_suffix(""), "wb") as out:
            shutil.copyfileobj(f, out)
        packed.unlink()
    return to


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--release", action="append", choices=sorted(RELEASES), help="default: every release")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for version in args.release or RELEASES:
            checkout = Path(tmp) / f"parser-{version}"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout),
                            RELEASES[version]], check=True, capture_output=True)
            try:
                shutil.rmtree(OUT / version, ignore_errors=True)
                for scenario in SCENARIOS:
                    sqlite_project(checkout, fixture(version, scenario, "sqlite"), scenario)
                    postgresql_project(checkout, fixture(version, scenario, "postgresql"), scenario, args.pg_url)
                    print(f"{version} {scenario}: made")
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
    print(f"fixtures written to {OUT}")


if __name__ == "__main__":
    main()
