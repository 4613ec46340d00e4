"""A crash in the middle of a write leaves a torn last line in the staging CSV or the hash file. The
next start cuts it off, says so in parser.log, and the record it belonged to still reaches the
database exactly once (the source serves it again; the database refuses a second copy)."""
from __future__ import annotations

from collections import Counter

import pytest

from parser.core.record import RECORD_FIELDS, record_hash
from parser.pipeline.dedup import HashFile
from parser.pipeline.staging import StagingFile
from tests.feeds import numbered_items, rss

ALGORITHM = "sha224"


def staged_record(n: int) -> dict:
    """Item n as the daemon stages it; `content` has a line break, as feed HTML often does."""
    link = f"http://example.com/item/{n}"
    record = {f: "" for f in RECORD_FIELDS}
    record.update(source="a", guid=link, link=link, title=f"Item {n}",
                  content=f"<p>first line of {n}</p>\n<p>second</p>",
                  published="2026-11-01T12:00:00Z", fetched="2026-11-01T12:00:00Z")
    return {"hash": record_hash(record, ["link"], ALGORITHM), **record}


def write_staged(project, numbers: list[int], *, hashed: list[int]) -> tuple[StagingFile, HashFile]:
    """Stage items by the project's own classes, as a daemon that was then killed would have."""
    staging = StagingFile(project.staging / "staging.csv", ("hash", *RECORD_FIELDS))
    staging.append([staged_record(n) for n in numbers])
    hashes = HashFile(project.staging / "hashes.txt", 56)
    hashes.add(staged_record(n)["hash"] for n in hashed)
    hashes.close()
    return staging, hashes


# Where a crash can cut the last record of the staging CSV: inside a field, just after a line break
# inside a quoted field (the line looks complete there), and inside the last field. A cut just before
# the record's final newline leaves it whole: it is kept (tests/test_operator_edits.py).
TEARS = {
    "mid-field": lambda record: record.index(b"Item 4") + 3,
    "after-newline-in-field": lambda record: record.index(b"</p>\n") + 5,
    "inside-last-field": lambda record: record.rindex(b"T12:00:00Z") + 3,
}


@pytest.mark.parametrize("where", list(TEARS))
def test_a_torn_staging_record_is_cut_at_start_and_its_item_stored_once(server, project, where):
    project.staging.mkdir(parents=True)
    write_staged(project, [1, 2, 3, 4], hashed=[1, 2, 3])  # killed before item 4's hash was written
    path = project.staging / "staging.csv"
    data = path.read_bytes()
    last = data.rindex(b'\n"', 0, len(data) - 1) + 1  # the start of item 4's record
    path.write_bytes(data[:last + TEARS[where](data[last:])])

    server.route("/a.xml", body=rss(numbered_items(1, 5)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr

    assert "repaired staging.csv: dropped a torn last record" in project.log()
    links = Counter(r["link"] for r in project.rows())
    assert links == Counter(f"http://example.com/item/{n}" for n in range(1, 6))
    assert all(r["title"].startswith("Item ") and len(r["title"]) in (6, 7) for r in project.rows())


def test_a_torn_hash_line_is_cut_at_start_and_its_item_stored_once(server, project):
    project.staging.mkdir(parents=True)
    write_staged(project, [1, 2, 3, 4], hashed=[1, 2, 3, 4])
    path = project.staging / "hashes.txt"
    path.write_bytes(path.read_bytes()[:-20])  # killed while writing item 4's hash

    server.route("/a.xml", body=rss(numbered_items(1, 5)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr

    assert "repaired hashes.txt: dropped a torn last line (37 bytes)" in project.log()
    assert Counter(r["link"] for r in project.rows()) == Counter(f"http://example.com/item/{n}" for n in range(1, 6))
    lines = path.read_bytes().split(b"\n")[:-1]
    assert all(len(line) == 56 for line in lines)
    assert len(lines) == len(set(lines)) == 5  # item 4 hashed again, once


def test_whole_files_are_left_alone(server, project):
    project.staging.mkdir(parents=True)
    write_staged(project, [1, 2], hashed=[1, 2])
    server.route("/a.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    project.run("--once", check=True)
    assert "repaired" not in project.log()
    assert len(project.rows()) == 3
    assert project.polls("a") == [(3, 1, 0)]
