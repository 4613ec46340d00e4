"""UNIQUE_WINDOW: the hash file forgets hashes older than the window (parser/pipeline/hash_window.py).

In-process on an injected clock: which lines a compaction drops, the marks it keeps, what the check
finds after it; a kill -9 at each step of the rewrite (a real one, in a child process); the setting's
errors; and the daemon, whose flush compacts and whose `status` shows the file's size and span."""
from __future__ import annotations

import hashlib
import json
import resource
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from parser.core.errors import SettingsError, StorageError
from parser.pipeline.dedup import HashFile
from parser.pipeline.hash_window import MARK_EVERY, SLACK, Mark, read_marks
from parser.pipeline.sink import open_sink
from parser.settings.params import load_settings
from tests.conftest import ROOT
from tests.feeds import numbered_items, rss

DAY = 86400
START = 1_780_000_000.0  # 2026-05-28, the first day's hashes
LINE = 57                # a sha224 digest and its newline


def is_new(check, digest_: str) -> bool:
    """One digest asked as a poll asks a batch."""
    return digest_ in check.unseen([digest_])


def digest(n: int) -> str:
    return hashlib.sha224(str(n).encode()).hexdigest()


class Clock:
    def __init__(self, now: float = START):
        self.now = now

    def __call__(self) -> float:
        return self.now


def days_of_hashes(folder: Path, clock: Clock, days: int, per_day: int = 10,
                   window: float | None = 10 * DAY) -> HashFile:
    """A hash file written day by day, `per_day` hashes a day (day d's are digest(d * per_day + i)),
    saved at the end of each day as a flush would; the clock stops at the start of day `days`."""
    check = HashFile(folder / "hashes.txt", 56, window=window, clock=clock)
    for day in range(days):
        check.add(digest(day * per_day + i) for i in range(per_day))
        check.save()
        clock.now += DAY
    return check


def lines_of(folder: Path) -> list[str]:
    return (folder / "hashes.txt").read_text().splitlines()


def test_the_lines_older_than_the_window_are_dropped_and_the_marks_counted_from_the_new_first_line(tmp_path):
    clock = Clock()
    check = days_of_hashes(tmp_path, clock, 20)  # days 0..19; now is day 20
    assert read_marks(tmp_path / "hashes.marks") == [Mark(10 * (d + 1), START + d * DAY) for d in range(20)]

    done = check.compact()
    # Older than 10 days at day 20: the hashes marked by day 9's mark and before (days 0..9).
    assert (done.dropped, done.kept, done.bytes_before, done.bytes_after) == (100, 100, 200 * LINE, 100 * LINE)
    assert done.said() == "dropped 100 older than 10d (kept 100, file 0.01 MB -> 0.01 MB)"
    assert lines_of(tmp_path) == [digest(n) for n in range(100, 200)]
    assert read_marks(tmp_path / "hashes.marks") == [Mark(10 * (d - 9), START + d * DAY) for d in range(10, 20)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hashes.bloom", "hashes.marks", "hashes.txt"]

    # The check still finds every kept hash, no longer a dropped one, and appends to the new file.
    assert check.unseen([digest(n) for n in range(0, 200, 7)]) == {digest(n) for n in range(0, 100, 7)}
    check.add([digest(1000)])
    check.close()
    again = HashFile(tmp_path / "hashes.txt", 56, window=10 * DAY, clock=clock)
    assert lines_of(tmp_path)[-1] == digest(1000) and len(lines_of(tmp_path)) == 101
    assert again.unseen([digest(5), digest(150), digest(1000)]) == {digest(5)}
    assert again.compact() is None  # the oldest mark is day 10: not a day past the window yet
    again.close()


def test_a_compaction_waits_until_the_oldest_hashes_are_a_day_past_the_window(tmp_path):
    clock = Clock()
    check = days_of_hashes(tmp_path, clock, 3, window=2 * DAY)  # marks at days 0, 1, 2; now is day 3
    assert clock.now == START + 2 * DAY + SLACK  # the day-0 mark is just the window and a day old
    assert check.compact() is None and len(lines_of(tmp_path)) == 30
    clock.now += 1  # now past it: what is older than the window goes, days 0 and 1
    assert check.compact().dropped == 20 and lines_of(tmp_path)[0] == digest(20)
    assert check.compact() is None  # the next one a day later at the soonest
    check.close()


def test_the_filter_keeps_a_few_dropped_hashes_and_is_rebuilt_when_they_are_half_of_it(tmp_path):
    clock = Clock()
    check = days_of_hashes(tmp_path, clock, 30, window=27 * DAY)  # now day 30: days 0..2 are past the window
    assert check.compact().dropped == 30
    assert len(check.bloom) == 300  # the three days dropped stay in it: cheaper than a rebuild ...
    assert is_new(check, digest(0)) and not is_new(check, digest(30))  # ... and the file still decides
    check.window = 5 * DAY
    assert check.compact().kept == 50
    assert len(check.bloom) == 50  # more than half of it dropped: rebuilt from the file
    assert is_new(check, digest(30)) and not is_new(check, digest(250)) and not is_new(check, digest(299))
    check.close()
    # The filter saved after a compaction covers the new file: a restart reads nothing again.
    assert json.loads((tmp_path / "hashes.bloom.json").read_text()) == {"covers_bytes": 50 * LINE}


def test_marks_are_hourly_never_go_back_and_never_count_lines_the_file_lost(tmp_path):
    clock = Clock()
    check = HashFile(tmp_path / "hashes.txt", 56, clock=clock)
    check.add([digest(1)])
    check.save()
    check.add([digest(2)])
    clock.now += MARK_EVERY - 1
    check.save()  # within the hour: no mark; line 2 counts as written now until the next one
    clock.now -= 2 * DAY  # the wall clock set back: no mark until it has passed the last one by an hour
    check.save()
    clock.now += 2 * DAY + 1
    check.add([digest(3)])
    check.save()
    assert read_marks(tmp_path / "hashes.marks") == [Mark(1, START), Mark(3, START + MARK_EVERY)]
    check.close()

    # A power cut took back the last line (or an operator cut the file): the mark counting it goes.
    (tmp_path / "hashes.txt").write_text(digest(1) + "\n" + digest(2) + "\n")
    reopened = HashFile(tmp_path / "hashes.txt", 56, clock=clock)
    assert read_marks(tmp_path / "hashes.marks") == [Mark(1, START)]
    reopened.close()

    # A damaged marks file is read up to the damage and written back whole, so later marks are read.
    (tmp_path / "hashes.marks").write_text(f"1 {int(START)}\nnot a mark\n2 {int(START) + 9}\n3 12")
    again = HashFile(tmp_path / "hashes.txt", 56, clock=Clock(START + DAY))
    again.add([digest(3)])
    again.save()
    assert read_marks(tmp_path / "hashes.marks") == [Mark(1, START), Mark(3, START + DAY)]
    again.close()


def test_a_hash_file_of_an_older_version_is_marked_as_written_now(tmp_path):
    (tmp_path / "hashes.txt").write_text("".join(digest(n) + "\n" for n in range(5)))
    clock = Clock()
    check = HashFile(tmp_path / "hashes.txt", 56, window=DAY, clock=clock)
    check.save()  # nothing new, yet the lines found get their mark: their age is counted from now on
    assert read_marks(tmp_path / "hashes.marks") == [Mark(5, START)]
    clock.now += 2 * DAY
    assert check.compact() is None
    clock.now += 1
    assert check.compact().dropped == 5
    check.close()


# A kill -9 at each step of the rewrite, in a child process; then a start (finish_compaction).
KILL = """
import os, signal, sys
from pathlib import Path
from parser.pipeline.dedup import HashFile
folder, step, now, window = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
check = HashFile(folder / "hashes.txt", 56, window=window, clock=lambda: now)
check.compact(lambda name: name == step and os.kill(os.getpid(), signal.SIGKILL))
"""
STEPS = ["new files written", "decided", "renamed hashes.marks", "renamed hashes.txt", "done"]


@pytest.mark.parametrize("step", STEPS)
def test_a_kill_at_any_step_of_the_rewrite_loses_no_recent_hash_and_leaves_a_whole_file(tmp_path, step):
    clock = Clock()
    days_of_hashes(tmp_path, clock, 20).close()
    # Appended after the filter's last save (a daemon killed before its flush): the saved filter lacks them.
    unsaved = [digest(n) for n in range(1000, 1150)]
    with open(tmp_path / "hashes.txt", "a") as f:
        f.write("".join(d + "\n" for d in unsaved))
    done = subprocess.run([sys.executable, "-c", KILL, str(tmp_path), step, str(clock.now), str(10 * DAY)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr

    check = HashFile(tmp_path / "hashes.txt", 56, window=10 * DAY, clock=clock)  # a start after the kill
    lines = lines_of(tmp_path)
    # The old file (killed before the decision) or the new one, whole; never a mix, never a recent loss.
    assert lines == [digest(n) for n in range(0 if step == "new files written" else 100, 200)] + unsaved
    assert not check.unseen([*(digest(n) for n in range(100, 200)), *unsaved])
    assert not [p.name for p in tmp_path.iterdir() if p.suffix in (".new", ".compacting")]
    # The marks match the file: the compaction done (again) leaves what an uninterrupted one leaves.
    check.compact()
    assert lines_of(tmp_path) == [digest(n) for n in range(100, 200)] + unsaved
    assert read_marks(tmp_path / "hashes.marks") == [Mark(10 * (d - 9), START + d * DAY) for d in range(10, 20)]
    assert check.unseen([digest(0), digest(99), digest(100)]) == {digest(0), digest(99)}
    check.close()


def test_a_rewrite_cut_off_before_its_decision_is_thrown_away_at_start(tmp_path):
    clock = Clock()
    days_of_hashes(tmp_path, clock, 3).close()
    before = (tmp_path / "hashes.txt").read_bytes()
    (tmp_path / "hashes.txt.new").write_bytes(before[LINE * 10: LINE * 15 + 9])  # a kill mid-copy
    HashFile(tmp_path / "hashes.txt", 56, clock=clock).close()
    assert (tmp_path / "hashes.txt").read_bytes() == before and not (tmp_path / "hashes.txt.new").exists()


def test_a_compaction_that_fails_leaves_the_old_files(tmp_path):
    clock = Clock()
    check = days_of_hashes(tmp_path, clock, 20)
    before = (tmp_path / "hashes.txt").read_bytes()
    # A full disk, as the process meets it: a file size limit below the new file's size.
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (40 * LINE, limit[1]))
    try:
        with pytest.raises(StorageError, match="File too large: its old hashes stay until the next compaction"):
            check.compact()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
        signal.signal(signal.SIGXFSZ, ignored)
    assert (tmp_path / "hashes.txt").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hashes.bloom", "hashes.bloom.json", "hashes.marks",
                                                         "hashes.txt"]
    check.add([digest(1000)])  # the appends go on
    check.close()
    assert lines_of(tmp_path)[-1] == digest(1000)


# -- the setting -------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["'400'", "'-1d'", "'soon'", "400", "'0d'", "'1d12'"])
def test_a_bad_window_is_a_settings_error_naming_it(tmp_path, value):
    (tmp_path / "params.py").write_text(f"UNIQUE_WINDOW = {value}\n")
    with pytest.raises(SettingsError, match=r"UNIQUE_WINDOW: must be a time (with its unit|above 0)"):
        load_settings(tmp_path / "params.py")


def test_a_window_with_a_bloom_filter_is_refused_naming_both_settings(tmp_path):
    (tmp_path / "params.py").write_text("UNIQUE_WINDOW = '400d'\nDEDUP = 'bloom'\n")
    with pytest.raises(SettingsError, match=r"UNIQUE_WINDOW: applies to the hash file of DEDUP = \"hashfile\", "
                                            r"but DEDUP is 'bloom'"):
        load_settings(tmp_path / "params.py")


@pytest.mark.parametrize("value, seconds", [("'400d'", 400 * DAY), ("'12h'", 43200), ("'30m'", 1800),
                                            ("'90s'", 90), ("'2 days'", 2 * DAY), ("None", None)])
def test_a_window_is_read_in_seconds(tmp_path, value, seconds):
    (tmp_path / "params.py").write_text(f"UNIQUE_WINDOW = {value}\n")
    assert load_settings(tmp_path / "params.py").unique_window == seconds


def test_a_jobs_hash_file_has_the_window_too(tmp_path):
    settings = SimpleNamespace(dedup="hashfile", hash="sha224", unique_window=3 * DAY)
    sink = open_sink(settings, table="books", columns=["url", "fetched", "title"], unique_fields=("url",),
                     staging_dir=tmp_path)
    assert sink.dedup.window == 3 * DAY
    sink.close()


# -- the daemon --------------------------------------------------------------------------------------
def status(project, *args: str) -> str:
    done = project.run("status", *args, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_daemon_drops_old_hashes_at_a_flush_and_status_shows_the_file(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    first = project.run("--once")
    assert first.returncode == 0, first.stderr
    assert len(project.rows()) == 3
    # As if those three were written 500 days and a minute ago (the minute: the mark is in whole seconds
    # of the daemon's clock, and a status within the same second could read a fraction under 500 days).
    marks = project.staging / "hashes.marks"
    lines, at = marks.read_text().split()
    assert lines == "3"
    marks.write_text(f"3 {int(at) - 500 * DAY - 60}\n")

    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}], UNIQUE_WINDOW="400d")
    text = status(project)
    assert "hashes items: 3, 0.00 MB, span 500d00h since " in text and text.rstrip().count("window 400d") == 1
    files = json.loads(status(project, "--json"))["hashes"]
    assert files["window"] == "400d" and files["window_seconds"] == 400 * DAY
    assert files["files"][0]["bytes"] == 3 * LINE and files["files"][0]["hashes"] == 3
    assert 500 * DAY <= files["files"][0]["span_seconds"] < 500 * DAY + 600

    second = project.run("--once")
    assert second.returncode == 0, second.stderr
    assert (project.staging / "hashes.txt").read_bytes() == b""  # the 3 hashes past 400d dropped, none kept
    # The entries still in the feed are known from its last poll (staging/known.tsv, parser/pipeline/last_polls.py):
    # they are neither read nor staged again, this run or the next.
    assert project.polls("a")[-1] == (3, 0, 0) and project.last_flush()["already"] == 0
    third = project.run("--once")
    assert third.returncode == 0, third.stderr
    assert project.polls("a")[-2:] == [(3, 0, 0), (3, 0, 0)] and len(project.rows()) == 3
    # Without that memory (known.tsv lost), they are staged again and the database refuses them.
    (project.staging / "known.tsv").unlink()
    fourth = project.run("--once")
    assert fourth.returncode == 0, fourth.stderr
    assert project.polls("a")[-1] == (3, 3, 0)  # staged again
    assert (project.last_flush()["rows"], project.last_flush()["already"]) == (0, 3) and len(project.rows()) == 3
    assert "hashes items: 3, 0.00 MB, span " in status(project)  # staged again: written now
    assert json.loads(status(project, "--json"))["hashes"]["files"][0]["span_seconds"] < 600
