"""The staging CSV: whole records only, rotation for the flush, repair after a crash."""
from __future__ import annotations

import csv
import io
import shutil
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from parser.pipeline import staging as staging_module
from parser.pipeline.staging import StagingFile, read_rows, repair_torn_tail
from tests.feeds import numbered_items, rss
from tests.process import lock_sqlite

COLUMNS = ("hash", "title", "summary")


def test_rows_with_commas_quotes_and_newlines_survive(tmp_path):
    staging = StagingFile(tmp_path / "staging.csv", COLUMNS)
    rows = [{"hash": "h1", "title": 'a, "b"', "summary": "line 1\nline 2\r\nline 3"},
            {"hash": "h2", "title": "Кириллица 中文", "summary": ""}]
    assert staging.append(rows) == 2
    assert list(read_rows(staging.path)) == rows
    with open(staging.path, newline="", encoding="utf-8") as f:
        assert next(csv.reader(f)) == list(COLUMNS)


def test_rotate_moves_rows_to_a_batch_and_leaves_an_empty_staging_file(tmp_path):
    staging = StagingFile(tmp_path / "staging.csv", COLUMNS)
    assert staging.rotate() is None  # nothing staged, nothing to flush
    staging.append([{"hash": "h1", "title": "t", "summary": "s"}])
    batch = staging.rotate()
    assert batch is not None and [r["hash"] for r in read_rows(batch)] == ["h1"]
    assert list(read_rows(staging.path)) == []
    staging.append([{"hash": "h2", "title": "t", "summary": "s"}])
    second = staging.rotate()
    assert staging.batches() == [batch, second]
    assert staging.pending_rows() == 2


def test_a_torn_last_record_is_cut_and_whole_ones_kept(tmp_path):
    staging = StagingFile(tmp_path / "staging.csv", COLUMNS)
    staging.append([{"hash": "h1", "title": "one", "summary": "multi\nline"}])
    whole = staging.path.read_bytes()
    for torn in ['"h2","tw', '"h2","two","multi\n', '"h2","two"\n', '"h2","two",']:
        staging.path.write_bytes(whole + torn.encode())
        assert repair_torn_tail(staging.path) == len(torn.encode())
        assert staging.path.read_bytes() == whole
    reopened = StagingFile(staging.path, COLUMNS)
    assert reopened.repaired == 0 and [r["hash"] for r in read_rows(staging.path)] == ["h1"]


def test_a_torn_header_leaves_an_empty_file_that_gets_a_new_header(tmp_path):
    path = tmp_path / "staging.csv"
    path.write_bytes(b'"hash","ti')
    staging = StagingFile(path, COLUMNS)
    assert path.read_bytes() == b""
    staging.append([{"hash": "h1", "title": "t", "summary": "s"}])
    assert [r["hash"] for r in read_rows(path)] == ["h1"]


def test_a_file_with_other_columns_becomes_a_batch_of_its_own(tmp_path):
    old = StagingFile(tmp_path / "staging.csv", ("hash", "title"))
    old.append([{"hash": "h1", "title": "old"}])
    new = StagingFile(tmp_path / "staging.csv", COLUMNS)
    [batch] = new.batches()
    assert list(read_rows(batch)) == [{"hash": "h1", "title": "old"}]
    new.append([{"hash": "h2", "title": "t", "summary": "s"}])
    assert [r["summary"] for r in read_rows(new.path)] == ["s"]


# A batch file copied beside the real one (`staging.flushing-<ns> (copy).csv`, a file manager's paste)
# is no batch the daemon named: it is left alone with a warning, and the start goes on (issue 27, case 11).
# Before, every start failed on it with `ValueError: invalid literal for int()`: a restart loop.
def test_a_pasted_copy_of_a_batch_file_is_left_alone_with_a_warning(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}], DB_TIMEOUT=0.5)
    blocker = lock_sqlite(project.db_path)  # the flush fails: the records stay in a batch file
    try:
        failed = project.run("--once")
    finally:
        blocker.rollback()
        blocker.close()
    assert failed.returncode == 1, failed.stderr
    [batch] = project.staging.glob("staging.flushing-*.csv")
    copy = batch.with_name(f"{batch.stem} (copy).csv")
    shutil.copyfile(batch, copy)  # what a file manager's copy and paste makes

    for _run in range(2):  # every start, not only the first: no restart loop
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr
        assert "invalid literal" not in proc.stderr + project.log("critical.log")
    assert sorted(r["link"] for r in project.rows()) == [f"http://example.com/item/{n}" for n in (1, 2, 3)]
    assert copy.exists() and not batch.exists()  # the daemon's own batch loaded; the copy untouched
    warned = [line for line in project.log().splitlines() if copy.name in line]
    assert len(warned) == 2 and all("WARNING" in line and "left alone" in line for line in warned)
    assert "rename it" in warned[0]
PIECES = ('"a"', '"b""c"', '""', '"x\ny"', ",", "\n", "\r\n", '"', " ", '"h1","one","s"\n', '"h2","","x\n"\n',
          "\n\n", '"d"""', "zz")


@settings(max_examples=300, deadline=None)
@given(st.booleans(), st.lists(st.sampled_from(PIECES), max_size=30), st.integers(1, 40))
def test_the_repair_reading_only_the_end_cuts_where_reading_every_line_does(header, pieces, tail):
    """repair_torn_tail reads the file's last TAIL_BYTES a line at a time (more while they tell too little):
    whatever the tail's size, the file is cut where a scan of every line cuts it."""
    data = (b'"hash","title","summary"\n' if header else b"") + "".join(pieces).encode()
    everything = _whole_length(data, 1 << 30)
    assert _whole_length(data, tail) == everything


def _whole_length(data: bytes, tail: int) -> int | str:
    with patch.object(staging_module, "TAIL_BYTES", tail):
        try:
            return staging_module._whole_records_length(io.BytesIO(data))
        except IndexError as exc:  # a header of no field (a file that is only a newline): the same either way
            return repr(exc)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from('a"\',\n\r\x00 =é\t\u2028'), max_size=12), min_size=1, max_size=6))
def test_a_staged_line_is_what_the_csv_module_writes_and_reads_back_as_its_cells(cells):
    """csv_line writes a record by hand (str.replace: the csv writer was most of a first poll's staging): byte
    for byte what csv.writer writes with QUOTE_ALL, and the csv module reads the cells back unchanged."""
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(cells)
    line = staging_module.csv_line(cells)
    assert line == buffer.getvalue()
    assert next(csv.reader(io.StringIO(line, newline=""), strict=True)) == cells
