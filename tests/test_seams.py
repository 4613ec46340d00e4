"""The seams between the rooms (issue 28, points 2 and 3), held where a type checker alone does not hold
them: the poll's result is a value, SHARED is read once, the loop reaches no part of a collector, and
the polls' counters are counted in one place, so daemon.json and the "polled:" line cannot disagree."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from parser.adapters import parse_body
from parser.core.runinfo import RunInfo
from parser.feeds.poll_outcome import PollOutcome
from parser.feeds.poll_stats import PollStats
from parser.settings.params import Source
from parser.sources.state import SourceState
from tests.feeds import rss

ROOT = Path(__file__).resolve().parent.parent
PARSER = ROOT / "parser"


SOURCE = Source(name="seams", url="http://127.0.0.1:1/feed")


def test_a_polls_result_cannot_be_changed_after_the_adapter():
    parsed = parse_body(SOURCE, rss([{"title": "one", "link": "http://127.0.0.1:1/a"}]),
                        url="http://127.0.0.1:1/feed", headers={}, fetched="2026-12-06T00:00:00Z")
    assert [r["title"] for r in parsed.records] == ["one"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.records = []  # type: ignore[misc]  # what this test is about
    outcome = PollOutcome(source=SOURCE, seconds=0.1, parsed=parsed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.blocked = 3  # type: ignore[misc]


# Where SHARED may be read: the one choice (parser/group/parts.py), the group's own modules, the settings
# that define it, and `status` (another command, which shows the group's view).
SHARED_READERS = {"group", "settings"}
SHARED_READ = re.compile(r"\b(?:settings|s)\.shared\b(?!_)|from \.+group\.shared")


def test_shared_is_chosen_in_one_place():
    found = []
    for path in sorted(PARSER.rglob("*.py")):
        rel = path.relative_to(PARSER)
        if rel.parts[0] in SHARED_READERS or rel.as_posix() == "operate/status.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SHARED_READ.search(line):
                found.append(f"parser/{rel.as_posix()}:{number}: {line.strip()}")
    assert not found, "SHARED read outside parser/group/parts.py:\n" + "\n".join(found)


def test_the_loop_reaches_no_part_of_the_feed_pass():
    """The daemon and the flush call the feed pass's own methods (and the loop the Collector calls);
    they never reach through it into its recorder, schedule or poller, nor set its attributes."""
    found = []
    for name in ("daemon.py", "flush_all.py"):
        for number, line in enumerate((PARSER / name).read_text().splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"\bfeeds\.\w+\.\w+", code) or re.search(r"\bfeeds\.\w+\s*=[^=]", code):
                found.append(f"parser/{name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_polled_line_is_the_runs_totals_since_the_last_one():
    run_info = RunInfo(pid=1, started="2026-12-06T00:00:00Z", params="params.py")
    now = [100.0]
    stats = PollStats(run_info, clock=lambda: now[0])
    a, b = SourceState(), SourceState()
    stats.answered(a, 0.0, "a", body_bytes=500, not_modified=False)
    stats.staged(a, 0.0, new=3, duplicates=2, blocked=1)
    stats.answered(b, 0.0, "b", body_bytes=0, not_modified=True)
    stats.failed(b, 0.0, "b")
    now[0] = 130.0
    line = stats.since_last()
    assert (line.polls, line.sources, line.new, line.duplicates, line.not_modified, line.errors, line.seconds) == \
        (3, 2, 3, 2, 1, 1, 30.0)
    assert {k: run_info.totals[k] for k in ("polls", "new", "duplicates", "not_modified", "errors", "fetch_bytes")} \
        == {"polls": 3, "new": 3, "duplicates": 2, "not_modified": 1, "errors": 1, "fetch_bytes": 500}
    assert a.totals == {"polls": 1, "bytes": 500, "new": 3, "duplicates": 2, "blocked": 1}
    assert b.totals == {"polls": 2, "bytes": 0, "not_modified": 1, "errors": 1}
    stats.mark()
    stats.answered(a, 0.0, "a", body_bytes=10, not_modified=False)
    line = stats.since_last()
    assert (line.polls, line.sources, line.new, line.seconds) == (1, 1, 0, 0.0)
    assert run_info.totals["polls"] == 4  # the run's totals go on: the line counts from its mark


# The sink's and the fetcher's own modules (and the job's sink, a Sink grown) may use their parts; no other.
SINK_OWNERS = {"pipeline/sink.py", "pipeline/intake.py", "pipeline/flusher.py", "jobs/job_sink.py", "fetch/http.py"}
REACH = re.compile(r"\b(?:sink|fetcher)\.\w+\.\w+|\bfetcher\.\w+\s*=[^=]")


def test_no_module_reaches_through_a_sink_or_the_fetcher():
    """Callers ask a sink (or the fetcher) for what they need through its own methods (sink.check_history(db),
    sink.table_spec(), sink.compact_hashes(), fetcher.hold_crawl()); none reaches into its history, hashes,
    staging file or host slots, nor replaces a part of it after it is built."""
    found = []
    for path in sorted(PARSER.rglob("*.py")):
        rel = path.relative_to(PARSER).as_posix()
        if rel in SINK_OWNERS:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if REACH.search(line.split("#")[0]):
                found.append(f"parser/{rel}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
