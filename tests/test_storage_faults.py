"""Storage faults: a database that refuses writes or cannot be reached at flush time, a disk that
fills up while appending to the staging CSV, and a second daemon on the same staging folder.
Nothing staged is ever lost: the staging CSV is kept and the next flush loads it."""
from __future__ import annotations

import resource
import signal
import subprocess
import sys
from collections import Counter
from datetime import timedelta

import pytest

from parser.pipeline.dedup import HashFile
from tests.conftest import ROOT
from tests.feeds import BASE_TIME, numbered_items, rss
from tests.process import free_port, lock_sqlite, wait_for

MiB = 1 << 20


def stop(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    return out, err


# -- the database refuses or cannot be reached --------------------------------------------------------
def test_an_unreachable_database_keeps_the_staging_csv_until_a_later_flush(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 4)), etag='"v1"')
    dead_db = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"  # nothing listens on that port
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}], DB_URL=dead_db)

    failed = project.run("--once")
    assert failed.returncode == 1  # --once whose final flush failed
    errors = project.log("errors.log")
    assert "flush" in errors and "127.0.0.1" in errors  # the flush's line names the database it could not reach
    assert "Connection refused" in errors or "connection refused" in errors.lower()
    assert project.staged_rows() == 4

    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])  # the database is back
    again = project.run("--once")
    assert again.returncode == 0, again.stderr
    assert project.rows("runs")[-1]["outcome"] == "not modified"  # nothing new fetched: the rows come from staging
    assert Counter(r["link"] for r in project.rows()) == Counter(f"http://example.com/item/{n}" for n in range(1, 5))
    assert project.staged_rows() == 0
    assert list(project.staging.glob("staging.flushing-*.csv")) == []


def test_a_database_refusing_writes_is_retried_by_the_next_flush_of_the_same_daemon(server, project):
    """Another process holds SQLite's write lock: flushes fail until it lets go, then the next one loads
    everything. As root the file's permissions would not stop us; a lock stops anyone."""
    server.route("/a.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml"), "interval": 0.3}],
                         FLUSH_INTERVAL=0.5, POLL_INTERVAL=0.3)
    blocker = lock_sqlite(project.db_path)
    proc = project.start()
    try:
        wait_for(lambda: "records kept in staging for the next flush" in project.log("errors.log"),
                 "a failed flush", timeout=60)
        assert "database is locked" in project.log("errors.log")
        assert project.staged_rows() == 3
        server.route("/a.xml", body=rss(numbered_items(1, 5)))  # two more while the database is away
        wait_for(lambda: project.staged_rows() == 5, "the two new items staged", timeout=30)
        blocker.execute("ROLLBACK")
        blocker.close()
        wait_for(lambda: len(project.rows()) == 5, "the retried flush", timeout=30)
    finally:
        out, err = stop(proc)
    assert proc.returncode == 0, err
    assert Counter(r["link"] for r in project.rows()) == Counter(f"http://example.com/item/{n}" for n in range(1, 6))
    assert project.staged_rows() == 0
    assert project.log("critical.log") == ""


# -- the disk fills up ---------------------------------------------------------------------------------
def big_feed(source: int, items: int = 20, size: int = 40_000) -> bytes:
    """`items` entries of about `size` bytes each, so a few sources fill a small disk."""
    return rss([{"title": f"Source {source} item {n}", "link": f"http://big.example/{source}/{n}",
                 "date": BASE_TIME + timedelta(minutes=n), "description": f"{source}-{n} " + "x" * size}
                for n in range(items)])


def mount_tmpfs(folder, size: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def file_size_limit(limit: int):
    """For preexec_fn: files of the child cannot grow past `limit`. SIGXFSZ ignored, so the write
    fails with EFBIG instead of killing the process."""
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("how", ["tmpfs", "rlimit"])
def test_a_disk_that_fills_while_appending_leaves_a_whole_staging_file(server, project, how):
    """tmpfs: STAGING_DIR on a 3 MiB tmpfs (needs root and mount rights: skipped without them).
    rlimit: RLIMIT_FSIZE of 3 MiB in the child, the way to run it anywhere."""
    sources = []
    for s in range(6):  # about 0.8 MB of staged records each; answered 0.3 s apart, so each is staged alone
        server.route(f"/big{s}.xml", body=big_feed(s), delay=0.3)  # (polls back together share one append)
        sources.append({"name": f"big{s}", "url": server.url(f"/big{s}.xml")})
    project.write_params(SOURCES=sources, CONCURRENCY=1, FLUSH_INTERVAL=3600)
    mounted = False
    preexec = None
    if how == "tmpfs":
        mounted = mount_tmpfs(project.staging, "3m")
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (not root, or no mount rights); the rlimit case covers it")
    else:
        preexec = file_size_limit(3 * MiB)
    try:
        full = subprocess.run(project.command("--once"), capture_output=True, text=True, timeout=120,
                              cwd=project.folder, preexec_fn=preexec)
        assert full.returncode == 1
        critical = project.log("critical.log")
        reason = "No space left on device" if how == "tmpfs" else "File too large"
        assert f"stopped: cannot append to {project.staging / 'staging.csv'}: {reason}" in critical
        kept = project.staged_rows()
        assert 0 < kept < 120 and kept % 20 == 0  # whole sources only: the failed append was taken back
        if mounted:
            subprocess.run(["mount", "-o", "remount,size=64m", str(project.staging)], check=True)
        again = project.run("--once")  # space is back
        assert again.returncode == 0, again.stderr
        assert "repaired" not in project.log()  # nothing torn was left behind
        links = Counter(r["link"] for r in project.rows())
        assert links == Counter(f"http://big.example/{s}/{n}" for s in range(6) for n in range(20))
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(project.staging)], capture_output=True)


def test_a_disk_that_fills_while_pass_1_appends_leaves_a_whole_link_file(server, project):
    """links.txt grows past RLIMIT_FSIZE half-way through a chunk of a template's links: the part
    that fit is taken back, the daemon stops saying why, and the next run appends the rest to a file
    that needs no repair, each link once."""
    values = 50_000  # about 2 MiB of link lines, appended in chunks of 10,000 (about 0.4 MiB)
    project.write_params(LINK_JOBS=[{"name": "big", "template": server.url("/p/{id}"),
                                     "values": {"id": range(values)}, "fields": {"t": "//h1"}}])
    links = project.staging / "jobs" / "big" / "links.txt"
    full = subprocess.run(project.command("--once", "--links-only"), capture_output=True, text=True, timeout=120,
                          cwd=project.folder, preexec_fn=file_size_limit(1 * MiB))
    assert full.returncode == 1, full.stderr
    assert f"cannot append to {links}: File too large" in project.log("critical.log")
    data = links.read_bytes()
    assert len(data) <= MiB and data.endswith(b"\n")  # whole lines only: the failed chunk was taken back
    kept = data.count(b"\n") - 1  # the header
    assert 0 < kept < values and kept % 10_000 == 0

    again = project.run("--once", "--links-only")  # space is back
    assert again.returncode == 0, again.stderr
    assert "repaired" not in project.log()  # nothing torn was left behind
    lines = links.read_text().splitlines()[1:]
    assert [line.split("\t")[0] for line in lines] == [server.url(f"/p/{n}") for n in range(values)]


def test_a_disk_that_fills_while_appending_hashes_leaves_a_whole_hash_file(tmp_path):
    """The hash file (appended by HashFile in the daemon's process) under RLIMIT_FSIZE: the batch that
    does not fit raises StorageError and leaves no part of itself; the file opens again unrepaired and
    takes the next batch once there is room."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from parser.pipeline.dedup import HashFile\n"
        "from parser.core.errors import StorageError\n"
        "hashes = HashFile(Path(sys.argv[1]), 56)\n"
        "hashes.add(f'{n:056x}' for n in range(100))\n"
        "try:\n"
        "    hashes.add(f'{n:056x}' for n in range(100, 200))\n"
        "except StorageError as exc:\n"
        "    print(exc)\n"
        "hashes.close()\n"
    )
    path = tmp_path / "hashes.txt"
    limit = 150 * 57  # room for 150 lines: the second batch of 100 fails half-way
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, preexec_fn=file_size_limit(limit))
    assert done.returncode == 0, done.stderr
    assert f"cannot append to {path}: File too large" in done.stdout
    assert path.read_bytes() == b"".join(f"{n:056x}\n".encode() for n in range(100))

    hashes = HashFile(path, 56)
    assert hashes.repaired == 0
    assert hashes.unseen([f"{n:056x}" for n in (5, 150)]) == {f"{150:056x}"}
    hashes.add(f"{n:056x}" for n in range(100, 200))
    hashes.close()
    assert path.read_bytes() == b"".join(f"{n:056x}\n".encode() for n in range(200))


# -- one daemon per staging folder ------------------------------------------------------------------
def test_a_second_daemon_on_the_same_staging_folder_refuses_naming_the_first(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}], FLUSH_INTERVAL=0.5)
    first = project.start()
    try:
        wait_for(lambda: "started:" in project.log(), "the first daemon to start", timeout=30)
        second = project.run("--once")
        assert second.returncode == 1
        assert f"in use by process {first.pid}" in second.stderr
        assert first.poll() is None  # the first one goes on
    finally:
        stop(first)
    assert first.returncode == 0
    assert len(project.rows()) == 2
    assert project.run("--once").returncode == 0  # once it has stopped, the folder is free


def test_the_lock_of_a_killed_daemon_does_not_block_a_restart(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    first = project.start()
    wait_for(lambda: "started:" in project.log(), "the daemon to start", timeout=30)
    first.kill()
    first.wait(timeout=10)
    again = project.run("--once")
    assert again.returncode == 0, again.stderr
    assert len(project.rows()) == 2

