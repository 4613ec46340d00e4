"""parser/core/durable.py in-process: the one crash-safe append every append-only file uses. A failed
write (a full disk) is taken back, so the file never holds half a record; a torn tail (a kill -9
mid-write) is cut at start after the last whole record; a file an editor saved without its last line
end gets one in the next append. The kill -9 and RLIMIT_FSIZE tests (test_crash_safety.py,
test_storage_faults.py) prove the same through a process; these pin each case down without one."""
from __future__ import annotations

import errno
import logging
import os

import pytest

from parser.core import durable
from parser.core.errors import StorageError


@pytest.fixture
def disk_fills_after(monkeypatch):
    """`disk_fills_after(n)`: os.write writes at most `n` more bytes, then fails with ENOSPC, as a
    full disk does part-way through a write."""
    real_write = os.write

    def arm(room: int) -> None:
        left = [room]

        def write(fd: int, data) -> int:
            if not left[0]:
                raise OSError(errno.ENOSPC, "No space left on device")
            written = real_write(fd, bytes(data[:left[0]]))
            left[0] -= written
            return written
        monkeypatch.setattr(durable.os, "write", write)
    return arm


def test_append_writes_the_header_once_then_whole_records(tmp_path):
    path = tmp_path / "inbox.jsonl"
    durable.append(path, b"one\n", header=b"head\n")
    durable.append(path, b"two\n", header=b"head\n")
    assert path.read_bytes() == b"head\none\ntwo\n"


def test_a_write_the_disk_cuts_short_is_taken_back_and_says_why(tmp_path, disk_fills_after):
    """Half a record that fit before the disk filled up is cut off again: the file ends where it
    ended before, and the error names the file and the cause."""
    path = tmp_path / "staging.csv"
    durable.append(path, b"kept 1\n")
    disk_fills_after(5)  # "recor" of the next record fits, the rest does not
    with pytest.raises(StorageError, match=f"cannot append to {path}: No space left on device"):
        durable.append(path, b"record 2\n")
    assert path.read_bytes() == b"kept 1\n"


def test_an_open_append_file_takes_a_failed_write_back_too_and_goes_on(tmp_path, disk_fills_after, monkeypatch):
    path = tmp_path / "hashes.txt"
    held = durable.AppendFile(path, header=b"# hashes\n", sync=False)
    held.append(b"aa\n")
    disk_fills_after(1)
    with pytest.raises(StorageError, match="No space left on device"):
        held.append(b"bb\ncc\n")
    assert held.size() == len(b"# hashes\naa\n")
    monkeypatch.undo()  # room again: the next append goes on from the last whole record
    held.append(b"dd\n")
    held.close()
    held.close()  # closing twice is harmless
    assert path.read_bytes() == b"# hashes\naa\ndd\n"


def test_a_torn_tail_is_cut_after_the_last_whole_line_and_logged(tmp_path, caplog):
    path = tmp_path / "deliveries.txt"
    path.write_bytes(b"id-1\nid-2\nid-3 half")  # killed mid-write
    with caplog.at_level(logging.WARNING, logger="parser"):
        dropped = durable.repair_tail(path, durable.whole_lines, what="line")
    assert dropped == len(b"id-3 half")
    assert path.read_bytes() == b"id-1\nid-2\n"
    assert "repaired deliveries.txt: dropped a torn last line (9 bytes)" in caplog.text
    assert durable.repair_tail(path, durable.whole_lines) == 0  # whole now: nothing to do
    assert durable.repair_tail(tmp_path / "absent.txt", durable.whole_lines) == 0


def test_whole_lines_reads_back_past_a_tail_longer_than_its_block(tmp_path):
    """A torn last record bigger than the 64 KiB block read from the end is still found and cut."""
    path = tmp_path / "links.txt"
    torn = b"x" * (3 * 64 * 1024 + 7)
    path.write_bytes(b"first\n" + torn)
    assert durable.whole_length_of(path, durable.whole_lines) == len(b"first\n")
    assert path.stat().st_size == len(b"first\n") + len(torn)  # whole_length_of only reads
    path.write_bytes(torn)
    assert durable.whole_length_of(path, durable.whole_lines) == 0
    assert durable.whole_length_of(tmp_path / "absent.txt", durable.whole_lines) == 0


def test_a_file_saved_without_its_last_line_end_gets_one_before_the_next_record(tmp_path, caplog):
    path = tmp_path / "deliveries.txt"
    path.write_bytes(b"edited by hand")
    with caplog.at_level(logging.INFO, logger="parser"):
        durable.append(path, b"next\n")
    assert path.read_bytes() == b"edited by hand\nnext\n"
    assert "deliveries.txt ended without a line end (saved so by an editor?)" in caplog.text
    other = tmp_path / "quarantine.jsonl"
    other.write_bytes(b"{}")
    durable.end_last_line(other)
    durable.end_last_line(other)  # once is enough: a file that ends its line is left as it is
    durable.end_last_line(tmp_path / "absent.jsonl")
    assert other.read_bytes() == b"{}\n" and not (tmp_path / "absent.jsonl").exists()
