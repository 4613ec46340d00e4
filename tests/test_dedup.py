"""The uniqueness check: correct answers, files that survive restarts and crashes."""
from __future__ import annotations

import hashlib
import json

import pytest

from parser.core.errors import StorageError
from parser.pipeline import dedup
from parser.pipeline.dedup import HashFile, open_uniqueness


def is_new(check, digest_: str) -> bool:
    """One digest asked as a poll asks a batch."""
    return digest_ in check.unseen([digest_])


def digest(n: int, algorithm: str = "sha224") -> str:
    return hashlib.new(algorithm, str(n).encode()).hexdigest()


def test_hashfile_remembers_across_restarts_and_writes_one_line_per_hash(tmp_path):
    check = open_uniqueness("hashfile", tmp_path, "sha224")
    assert is_new(check, digest(1))
    check.add([digest(1), digest(2)])
    assert not is_new(check, digest(1)) and not is_new(check, digest(2)) and is_new(check, digest(3))
    check.close()
    assert (tmp_path / "hashes.txt").read_text().splitlines() == [digest(1), digest(2)]

    again = open_uniqueness("hashfile", tmp_path, "sha224")
    assert not is_new(again, digest(2)) and is_new(again, digest(3))
    again.close()


def test_bloom_catches_up_with_lines_written_after_it_was_saved(tmp_path):
    check = open_uniqueness("hashfile", tmp_path, "sha224")
    check.add([digest(1)])
    check.save()
    check.add([digest(2)])  # a crash now: the file has the hash, the saved filter does not
    check.file.close()
    again = open_uniqueness("hashfile", tmp_path, "sha224")
    assert not is_new(again, digest(2))
    again.close()


@pytest.mark.parametrize("damage", ["delete", "garbage"])
def test_a_missing_or_damaged_bloom_file_is_rebuilt_from_the_hash_file(tmp_path, damage):
    check = open_uniqueness("hashfile", tmp_path, "sha224")
    check.add([digest(n) for n in range(100)])
    check.close()
    bloom = tmp_path / "hashes.bloom"
    if damage == "delete":
        bloom.unlink()
    else:
        bloom.write_bytes(b"\x00garbage")
    again = open_uniqueness("hashfile", tmp_path, "sha224")
    assert not any(is_new(again, digest(n)) for n in range(100))
    assert is_new(again, digest(100))
    again.close()
    # The rebuilt filter was saved: the next start loads it instead of reading the whole file again.
    assert json.loads((tmp_path / "hashes.bloom.json").read_text()) == {"covers_bytes": 100 * 57}
    assert HashFile(tmp_path / "hashes.txt", 56).dirty is False


def test_a_bloom_false_positive_never_drops_a_new_record(tmp_path, monkeypatch):
    check = open_uniqueness("hashfile", tmp_path, "sha224")
    check.add([digest(n) for n in range(50)])

    class SaysYesToEverything:
        def __contains__(self, key):
            return True

        def add(self, key):
            pass
    check.bloom = SaysYesToEverything()
    monkeypatch.setattr(dedup, "SCAN_BLOCK_LINES", 7)  # several blocks, so alignment across blocks is exercised
    assert all(not is_new(check, digest(n)) for n in range(50))
    assert all(is_new(check, digest(n)) for n in range(50, 80))
    check.file.close()


def test_a_torn_last_line_is_cut_at_start(tmp_path):
    (tmp_path / "hashes.txt").write_text(digest(1) + "\n" + digest(2)[:20])
    check = HashFile(tmp_path / "hashes.txt", 56)
    assert check.repaired == 20
    assert (tmp_path / "hashes.txt").read_text() == digest(1) + "\n"
    assert not is_new(check, digest(1)) and is_new(check, digest(2))
    check.close()


def test_a_hash_file_of_another_algorithm_is_refused_with_advice(tmp_path):
    (tmp_path / "hashes.txt").write_text(digest(1, "sha256") + "\n")
    with pytest.raises(StorageError, match="digests of 64 characters but HASH gives 56"):
        open_uniqueness("hashfile", tmp_path, "sha224")


def test_bloom_mode_keeps_the_filter_alone(tmp_path):
    check = open_uniqueness("bloom", tmp_path, "sha224")
    check.add([digest(1)])
    check.close()
    assert not (tmp_path / "hashes.txt").exists()
    again = open_uniqueness("bloom", tmp_path, "sha224")
    assert not is_new(again, digest(1)) and is_new(again, digest(2))


def test_off_mode_finds_everything_new(tmp_path):
    check = open_uniqueness("off", tmp_path, "sha224")
    check.add([digest(1)])
    assert is_new(check, digest(1))
    assert list(tmp_path.iterdir()) == []


def test_one_batch_is_confirmed_by_one_scan_across_blocks(tmp_path, monkeypatch):
    check = open_uniqueness("hashfile", tmp_path, "sha224")
    check.add([digest(n) for n in range(500)])
    monkeypatch.setattr(dedup, "FIRST_BLOCK_LINES", 4)  # blocks of 4, 8, 16, ... lines
    batch = [digest(0), digest(3), digest(250), digest(499), digest(500), digest(777)]
    assert check.unseen(batch) == {digest(500), digest(777)}
    assert check.unseen([]) == set()
    check.close()
