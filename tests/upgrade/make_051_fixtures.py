"""Re-create the upgrade fixtures: project folders written by the released parser 0.5.1 itself (commit
04bfd87), for tests/test_upgrade_051.py to start this version on.

    python tests/upgrade/make_051_fixtures.py [--pg-url postgresql://postgres@127.0.0.1:5432/test]

It checks out 0.5.1 in a temporary git worktree, serves a feed and a shop on 127.0.0.1, and runs 0.5.1's
daemon `--once` twice per database: first on 6 entries (2 without a date) and a two-pass job of 8 objects
(1 without a price), flushed; then on 2 more entries with the database's write lock held by another
connection, so that they stay in 0.5.1's staging files (exit 1). What is kept, per database, in
tests/upgrade/fixtures_051/<sqlite|postgresql>/: params.py, staging/ (hash files, state, staged batches),
and the database (SQLite: db/items.db; PostgreSQL: dump.sql, made by pg_dump --inserts). Bloom filters are kept
gzipped (hashes.bloom.gz): copy_fixture un-gzips them.
"""
from __future__ import annotations

import argparse
import gzip
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from pprint import pformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from tests.feeds import rss  # noqa: E402
from tests.server import LoopbackServer  # noqa: E402
from tests.shop import HARVEST_FIELDS, Shop  # noqa: E402
from tests.upgrade.make_release_fixtures import copy_unpacked  # noqa: E402

RELEASE = "04bfd87"  # 0.5.1
OUT = HERE / "fixtures_051"
SOURCE, JOB = "news", "shop"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def entries(count: int) -> list[dict]:
    """Entries 1..count, newest first; every third one without a date (0.5.1 stored '' for it)."""
    return [{"title": f"Entry {n}", "link": f"http://example.org/news/{n}", "guid": f"news-{n}",
             "description": f"Body of entry {n}", "author": "ed@example.org" if n % 2 else "",
             "date": None if n % 3 == 0 else T0 + timedelta(hours=n)} for n in range(count, 0, -1)]


def params(server: LoopbackServer, db_url: str) -> str:
    """The project's params.py, as the tests write it again with their own server's address."""
    job = {"name": JOB, "harvest": {"root": server.url("/"), "follow": r"/list/", "depth": 3},
           "objects": r"/item/\d+$", "fields": HARVEST_FIELDS}
    return (f"SOURCES = {[{'name': SOURCE, 'url': server.url('/feed.xml')}]!r}\n"
            f"LINK_JOBS = {pformat([job], width=100)}\nDB_URL = {db_url!r}\nDB_TIMEOUT = 1\n")


def run_old(release: Path, folder: Path) -> subprocess.CompletedProcess:
    check = subprocess.run([sys.executable, "-c", "import parser; print(parser.__file__, parser.__version__)"],
                           cwd=release, capture_output=True, text=True, check=True)
    assert check.stdout.startswith(str(release)) and "0.5.1" in check.stdout, check.stdout
    return subprocess.run([sys.executable, str(release / "run_daemon.py"), "--params", str(folder / "params.py"),
                           "--once"], cwd=folder, capture_output=True, text=True, timeout=120)


def make(release: Path, folder: Path, db_url: str, hold_lock) -> None:
    """Two --once runs of 0.5.1 in `folder`: one flushed, one whose flush waits on `hold_lock`'s lock."""
    server = LoopbackServer().start()
    try:
        Shop(server)
        server.route("/feed.xml", body=rss(entries(6), title="News of the day"), content_type="application/rss+xml")
        folder.mkdir(parents=True)
        (folder / "params.py").write_text(params(server, db_url), encoding="utf-8")
        first = run_old(release, folder)
        assert first.returncode == 0, first.stderr
        server.route("/feed.xml", body=rss(entries(8), title="News of the day"), content_type="application/rss+xml")
        with hold_lock():
            second = run_old(release, folder)
        assert second.returncode == 1, (second.returncode, second.stderr)  # the 2 new entries stay staged
    finally:
        server.stop()
    shutil.rmtree(folder / "logs", ignore_errors=True)
    for bloom in folder.rglob("*.bloom"):  # 3.6 MB of mostly zeros each: kept as 4 KB of gzip
        with open(bloom, "rb") as f, gzip.GzipFile(bloom.with_name(bloom.name + ".gz"), "wb", mtime=0) as out:
            shutil.copyfileobj(f, out)
        bloom.unlink()


def sqlite_fixture(release: Path, out: Path) -> None:
    folder = out / "sqlite"

    class Held:
        def __enter__(self):
            self.con = sqlite3.connect(folder / "db" / "items.db", isolation_level=None)
            self.con.execute("BEGIN EXCLUSIVE")

        def __exit__(self, *exc):
            self.con.execute("ROLLBACK")
            self.con.close()
    make(release, folder, "sqlite:///db/items.db", Held)


def postgresql_fixture(release: Path, out: Path, base: str) -> None:
    import psycopg
    folder = out / "postgresql"
    admin = psycopg.connect(base, autocommit=True)
    name = f"parser_fixture_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{base.rpartition('/')[0]}/{name}"

    class Held:
        def __enter__(self):
            self.con = psycopg.connect(url)
            self.con.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")

        def __exit__(self, *exc):
            self.con.rollback()
            self.con.close()
    try:
        make(release, folder, "postgresql+psycopg://" + url.split("://", 1)[1], Held)
        dump = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "--inserts", url], capture_output=True,
                              text=True, check=True).stdout
        # pg_dump 17.6 and later fence the dump with psql's \restrict: not SQL, and not needed to load it.
        (folder / "dump.sql").write_text("".join(line for line in dump.splitlines(keepends=True)
                                                 if not line.startswith("\\")), encoding="utf-8")
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def copy_fixture(name: str, to: Path) -> Path:
    """The fixture `name` ("sqlite" or "postgresql") copied into `to`, its Bloom filters un-gzipped."""
    return copy_unpacked(OUT / name, to)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        release = Path(tmp) / "parser-0.5.1"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(release), RELEASE], check=True,
                       capture_output=True)
        try:
            shutil.rmtree(args.out, ignore_errors=True)
            sqlite_fixture(release, args.out)
            postgresql_fixture(release, args.out, args.pg_url)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(release)], check=False)
    print(f"fixtures written to {args.out}")


if __name__ == "__main__":
    main()
