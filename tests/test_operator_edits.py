"""Files an operator opens and saves by hand: the staging CSV (an editor's last line without its line
end, a BOM, CRLF line ends, an empty last line, Excel's "CSV UTF-8"), state.json (a `null` where a
number belongs, a file that is no object), hashes.txt with Windows line ends; and a full disk under
the state write. Every record reaches the database once, and each oddity gets a line that says what
was found and what was done (issue 18, cases 1, 15 and 16)."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from db.store import Database
from parser.core import logs
from parser.core.errors import StorageError
from parser.core.record import RECORD_FIELDS, RECORD_LAYOUT, record_hash
from parser.pipeline.dedup import open_uniqueness
from parser.pipeline.sink import Sink, SinkFiles, UniqueRule
from parser.pipeline.staging import repair_torn_tail
from parser.sources.source_schedule import SourceSchedule
from parser.sources.state import SourceState
from tests.feeds import numbered_items, rss

ALGORITHM = "sha224"


@pytest.fixture
def log_dir(tmp_path):
    """parser.log and errors.log of the in-process code under test, in tmp_path/logs."""
    folder = tmp_path / "logs"
    logs.setup(folder, console=False)
    yield folder
    logs.setup(None, console=False)


def record(n: int) -> dict:
    link = f"http://example.com/item/{n}"
    fields = {f: "" for f in RECORD_FIELDS}
    fields.update(source="a", guid=link, link=link, title=f"Item {n}", content=f"<p>{n}</p>\n<p>more</p>",
                  published="2026-11-01T12:00:00Z", fetched=f"2026-11-01T12:00:0{n}Z")
    return fields


def open_items_sink(staging: Path) -> Sink:
    return Sink(table="items", columns=RECORD_FIELDS, unique=UniqueRule(["link"], "hashfile", ALGORITHM),
                files=SinkFiles(staging))


def flush_and_read(sink: Sink, folder: Path) -> list[dict]:
    """Flush the sink into folder/items.db and return the table's rows, as a user reads them."""
    db = Database(f"sqlite:///{folder / 'items.db'}")
    try:
        sink.flush(db)
    finally:
        db.close()
        sink.close()
    con = sqlite3.connect(folder / "items.db")
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM items ORDER BY id")]
    finally:
        con.close()


def assert_stored_once(rows: list[dict], numbers: range) -> None:
    """Each item exactly once, every column as staged (a glued row would carry a neighbour's hash)."""
    assert Counter(r["link"] for r in rows) == Counter(record(n)["link"] for n in numbers)
    for row in rows:
        n = int(row["link"].rsplit("/", 1)[1])
        assert (row["title"], row["fetched"]) == (f"Item {n}", record(n)["fetched"])
        assert row["hash"] == record_hash(record(n), ["link"], ALGORITHM)


# -- case 1: the staging CSV saved by an editor ---------------------------------------------------------
def test_a_csv_saved_without_its_last_line_end_while_running_gets_the_next_record_on_a_line_of_its_own(
        tmp_path, log_dir):
    staging = tmp_path / "staging"
    sink = open_items_sink(staging)
    sink.stage([record(1), record(2)])
    path = staging / "staging.csv"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # an editor's save, while the daemon runs
    sink.stage([record(3)])
    assert_stored_once(flush_and_read(sink, tmp_path), range(1, 4))
    assert "staging.csv ended without a line end (saved so by an editor?): added one" in \
        (log_dir / "parser.log").read_text()


def _no_last_line_end(data: bytes) -> bytes:
    return data.rstrip(b"\n")


def _crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def _excel_csv_utf8(data: bytes) -> bytes:
    """As Excel's "CSV UTF-8" saves: a BOM, quotes only where needed, CRLF line ends."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(csv.reader(io.StringIO(data.decode(), newline="")))
    return b"\xef\xbb\xbf" + out.getvalue().encode()


EDITOR_SAVES = {
    "no last line end": _no_last_line_end,
    "BOM": lambda data: b"\xef\xbb\xbf" + data,
    "CRLF": _crlf,
    "CRLF, no last line end": lambda data: _no_last_line_end(_crlf(data)).rstrip(b"\r"),
    "an empty last line": lambda data: data + b"\n",
    "Excel CSV UTF-8": _excel_csv_utf8,
    "Excel CSV UTF-8, no last line end": lambda data: _excel_csv_utf8(data).rstrip(b"\r\n"),
}


@pytest.mark.parametrize("save", list(EDITOR_SAVES))
def test_a_csv_saved_by_an_editor_while_stopped_is_loaded_whole_and_nothing_doubled(tmp_path, log_dir, save):
    staging = tmp_path / "staging"
    sink = open_items_sink(staging)
    sink.stage([record(1), record(2)])
    sink.close()
    path = staging / "staging.csv"
    path.write_bytes(EDITOR_SAVES[save](path.read_bytes()))

    restarted = open_items_sink(staging)
    staged = restarted.stage([record(1), record(2), record(3)])  # the feed again: 1 and 2 are known
    assert [r["link"] for r in staged.new] == [record(3)["link"]]
    assert_stored_once(flush_and_read(restarted, tmp_path), range(1, 4))
    assert "repaired" not in (log_dir / "parser.log").read_text()  # nothing was torn, nothing cut


def test_a_record_a_kill_cut_just_before_its_line_end_is_whole_kept_and_stored_once(tmp_path, log_dir):
    """The crash case the editor's looks like: the record's bytes are all there (its hash was not yet
    written). It is kept, so it is stored even when the feed no longer serves it, and once when it does."""
    staging = tmp_path / "staging"
    sink = open_items_sink(staging)
    sink.stage([record(1), record(2)])
    sink.close()
    path = staging / "staging.csv"
    whole = path.read_bytes()
    sink.staging.append([{"hash": record_hash(record(3), ["link"], ALGORITHM), **record(3)}])
    path.write_bytes(path.read_bytes()[:-1])  # killed before the last byte, the hash never written
    assert path.read_bytes().startswith(whole)

    restarted = open_items_sink(staging)
    restarted.stage([record(4)])  # item 3 has left the feed
    assert_stored_once(flush_and_read(restarted, tmp_path), range(1, 5))
    assert "staging.csv ended without a line end" in (log_dir / "parser.log").read_text()
    again = open_items_sink(staging)
    assert again.stage([record(3)]).new  # ... and comes back: its hash was never written
    assert_stored_once(flush_and_read(again, tmp_path), range(1, 5))


WHOLE = b'"hash","title","summary"\n"h1","one","multi\nline"\n'


@pytest.mark.parametrize("tail", [
    b'"h2","tw',                # inside a field
    b'"h2","two","multi\n',     # after a line break inside a field
    b'"h2","two",',             # after the last comma: reads as three fields, the last empty
    b'"h2","two",""',           # after the doubled quote opening `"hi"`: reads as empty
    b'"h2","two","say ""hi"',   # inside the doubled quote of `say "hi"`: reads as `say "hi`
])
def test_a_torn_tail_that_reads_as_a_whole_row_is_still_cut(tmp_path, tail):
    path = tmp_path / "staging.csv"
    path.write_bytes(WHOLE + tail)
    assert repair_torn_tail(path) == len(tail)
    assert path.read_bytes() == WHOLE


@pytest.mark.parametrize("tail", [b'"h2","two","s"', b'h2,two,s', b'"h2","two","multi\nline"', b"\n\n"])
def test_a_whole_tail_without_its_line_end_is_kept(tmp_path, tail):
    path = tmp_path / "staging.csv"
    path.write_bytes(WHOLE + tail)
    assert repair_torn_tail(path) == 0
    assert path.read_bytes() == WHOLE + tail


# -- case 15: state.json edited by hand ---------------------------------------------------------------
def schedule_on(path: Path, sources) -> SourceSchedule:
    schedule = SourceSchedule(path, clock=lambda: 1_000_000.0, workers=4)
    schedule.load(sources, lambda source: 3600.0, spread=False)
    return schedule


@pytest.mark.parametrize("field, value", [
    ("next_due", None), ("not_before", None), ("failures", None), ("failures", True), ("next_due", "soon"),
    ("etag", 5), ("hourly", [["2026-11-01T12", None, 0]]), ("totals", {"polls": None}),
])
def test_a_damaged_field_is_named_with_its_source_and_reset_and_the_rest_kept(tmp_path, log_dir, field, value):
    from parser.settings.params import Source
    path = tmp_path / "state.json"
    sources = [Source(name="a", url="http://127.0.0.1/a.xml"), Source(name="b", url="http://127.0.0.1/b.xml")]
    good = {"url": "http://127.0.0.1/a.xml", "etag": '"v1"', "failures": 2, "next_due": 999_000.0,
            "layout": RECORD_LAYOUT}  # as this version saves it: its validators are kept
    path.write_text(json.dumps({"a": {**good, field: value}, "b": {"url": "http://127.0.0.1/b.xml",
                                                                    "failures": 1}}))
    schedule = schedule_on(path, sources)
    assert sorted(s.name for s in schedule.due(1_000_000.0)) == ["a", "b"]  # not a TypeError
    state = schedule.states["a"]
    assert getattr(state, field) == getattr(SourceState(), field)
    kept = {k: v for k, v in good.items() if k != field}
    assert {k: getattr(state, k) for k in kept} == kept
    assert schedule.states["b"].failures == 1
    errors = (log_dir / "errors.log").read_text()
    assert f"a  http://127.0.0.1/a.xml  state.json: {field} is {json.dumps(value)}" in errors
    assert "reset to" in errors and "b  " not in errors
    state.count(1_000_000.0, polls=1, new=1)  # what the next poll does with it


def test_a_source_entry_that_is_no_object_is_reported_and_started_afresh(tmp_path, log_dir):
    from parser.settings.params import Source
    path = tmp_path / "state.json"
    path.write_text('{"a": null, "b": {"failures": 3, "url": "http://127.0.0.1/b.xml"}}')
    schedule = schedule_on(path, [Source(name="a", url="http://127.0.0.1/a.xml"),
                                  Source(name="b", url="http://127.0.0.1/b.xml")])
    assert schedule.states["b"].failures == 3
    assert "a    state.json: its state is null, not an object: the source starts afresh" in \
        (log_dir / "errors.log").read_text()


def test_hand_edited_nulls_are_reported_and_reset_and_status_and_a_run_use_the_rest(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2)), etag='"a1"')
    server.route("/b.xml", body=rss(numbered_items(1, 2, host="b.example")))
    a, b = server.url("/a.xml"), server.url("/b.xml")
    project.write_params(SOURCES=[{"name": "a", "url": a}, {"name": "b", "url": b}])
    project.staging.mkdir()
    (project.staging / "state.json").write_text(json.dumps({
        "a": {"url": a, "etag": '"a1"', "next_due": None, "failures": None, "last_poll": "2026-11-01T12:00:00Z",
              "layout": RECORD_LAYOUT},
        "b": {"url": b, "not_before": None}}))

    shown = project.run("status")
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^a .* feed ", shown.stdout, re.M) and re.search(r"^b .* feed ", shown.stdout, re.M)

    done = project.run("--once")
    assert done.returncode == 0, done.stderr
    errors = project.log("errors.log")
    assert "a  " + a + "  state.json: next_due is null, not a number: reset to 0.0" in errors
    assert "a  " + a + "  state.json: failures is null, not a whole number: reset to 0" in errors
    assert "b  " + b + "  state.json: not_before is null, not a number: reset to 0.0" in errors
    assert project.outcomes("a") == ["not modified"]  # its ETag, the rest of its entry, was used
    assert len(project.rows()) == 2  # b's two items
    saved = json.loads((project.staging / "state.json").read_text())
    assert isinstance(saved["a"]["next_due"], float) and saved["b"]["not_before"] == 0.0


def test_a_state_file_that_is_not_an_object_is_moved_aside_and_read_as_empty(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    project.staging.mkdir()
    (project.staging / "state.json").write_text("[]")

    shown = project.run("status")
    assert shown.returncode == 0, shown.stderr

    done = project.run("--once")
    assert done.returncode == 0, done.stderr
    assert (project.staging / "state.json.bad").read_text() == "[]"
    assert (f"state.json  {project.staging / 'state.json'}  {project.staging / 'state.json'} holds [], not an "
            "object of sources: moved aside to state.json.bad") in project.log("errors.log")
    assert len(project.rows()) == 2
    assert "a" in json.loads((project.staging / "state.json").read_text())


# -- case 16: hashes.txt with Windows line ends, a full disk under the state write ------------------------
def digest(n: int) -> str:
    return record_hash(record(n), ["link"], ALGORITHM)


@pytest.mark.parametrize("saved", [b"\r\n", b"bom"])
def test_a_hash_file_saved_with_windows_line_ends_or_a_bom_is_converted_and_every_digest_kept(
        tmp_path, log_dir, saved):
    path = tmp_path / "hashes.txt"
    if saved == b"bom":
        path.write_bytes(b"\xef\xbb\xbf" + "".join(digest(n) + "\n" for n in (1, 2)).encode())
    else:
        path.write_bytes("".join(digest(n) + "\r\n" for n in (1, 2)).encode())
    check = open_uniqueness("hashfile", tmp_path, ALGORITHM)
    try:
        assert check.unseen([digest(1), digest(2), digest(3)]) == {digest(3)}
        check.add([digest(3)])
    finally:
        check.close()
    assert path.read_bytes() == "".join(digest(n) + "\n" for n in (1, 2, 3)).encode()
    assert "hashes.txt had Windows line ends or a BOM (saved by an editor?): rewritten" in \
        (log_dir / "parser.log").read_text()


def test_a_dry_run_on_a_hash_file_with_windows_line_ends_says_so(tmp_path):
    (tmp_path / "hashes.txt").write_bytes((digest(1) + "\r\n").encode())
    with pytest.raises(StorageError, match=r"Windows line ends \(CRLF\) or a BOM.*without --dry-run"):
        open_uniqueness("hashfile", tmp_path, ALGORITHM, read_only=True)


@pytest.mark.parametrize("written, shown, stored", [("state.tmp", "state.json", 2),  # after the --once flush
                                                    ("daemon.json.tmp", "daemon.json", 0)])  # at start
def test_a_full_disk_under_the_state_files_is_called_a_full_disk(server, project, written, shown, stored):
    """/dev/full answers every write with ENOSPC, as a full disk does: the state file's temporary file
    is made a link to it, so the staging CSV and the database are written and the state is not."""
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    project.staging.mkdir()
    os.symlink("/dev/full", project.staging / written)

    done = project.run("--once")
    assert done.returncode == 1
    said = (f"stopped: disk full: cannot write {project.staging / shown} (No space left on device); "
            "free space on that disk, then start the daemon again: nothing staged is lost")
    assert said in project.log("critical.log")
    assert said in done.stderr
    assert "unexpected error" not in done.stderr
    assert len(project.rows()) == stored
