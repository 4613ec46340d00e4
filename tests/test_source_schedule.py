"""parser/sources/source_schedule.py on a real state.json: which source is due when (spread over its interval
when there are more sources than workers, the same way after a restart), and state.json written in
batches, not per poll."""
from __future__ import annotations

import json

from parser.settings.params import Source
from parser.sources.source_schedule import SAVE_EVERY, SourceSchedule, spread_offset


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def sources(n: int, interval: float = 60.0) -> list[Source]:
    return [Source(name=f"feed{i}", url=f"http://127.0.0.{i % 50 + 1}/f{i}.xml", interval=interval) for i in range(n)]


def test_more_sources_than_workers_are_spread_over_their_interval_and_a_restart_keeps_the_spread(tmp_path):
    clock = Clock()
    schedule = SourceSchedule(tmp_path / "state.json", clock, workers=8)
    schedule.load(sources(600), lambda s: s.interval, spread=True)
    due_now = schedule.due(clock.now)
    assert len(due_now) < 30  # not all 600 at the same second
    seconds = {}
    for second in range(60):
        clock.now = 1_000_000.0 + second + 1
        seconds[second] = len(schedule.due(clock.now))
    assert len(due_now) + sum(seconds.values()) == 600
    assert max(seconds.values()) < 30 and min(seconds.values()) > 0  # about 10 a second, every second
    for source in sources(600):
        assert 0 <= spread_offset(source.name, 60.0) < 60.0
    # The same in every process (crc32 of the name, not hash(), whose seed changes per run): a
    # restarted daemon puts each source back at its second.
    assert (spread_offset("feed0", 60.0), spread_offset("feed1", 60.0)) == (42.65340692829341, 45.69931116420776)


def test_as_many_sources_as_workers_are_all_due_at_once(tmp_path):
    clock = Clock()
    schedule = SourceSchedule(tmp_path / "state.json", clock, workers=8)
    schedule.load(sources(8), lambda s: s.interval, spread=True)
    assert len(schedule.due(clock.now)) == 8


def test_a_source_is_due_again_after_done_at_the_time_its_state_says(tmp_path):
    clock = Clock()
    schedule = SourceSchedule(tmp_path / "state.json", clock, workers=8)
    feeds = sources(3)
    schedule.load(feeds, lambda s: s.interval, spread=True)
    taken = schedule.due(clock.now)
    assert schedule.due(clock.now) == []  # out until done
    for source in taken:
        state = schedule.state(source)
        state.succeeded(clock.now, interval=source.interval, status=200)
        schedule.done(source, state)
    assert schedule.next_due() == clock.now + 60
    clock.now += 60
    assert sorted(s.name for s in schedule.due(clock.now)) == ["feed0", "feed1", "feed2"]


def test_state_json_is_written_in_batches_and_always_when_forced(tmp_path):
    clock = Clock()
    path = tmp_path / "state.json"
    schedule = SourceSchedule(path, clock, workers=8)
    feeds = sources(3)
    schedule.load(feeds, lambda s: s.interval, spread=False)
    for source in schedule.due(clock.now):
        state = schedule.state(source)
        state.answered(f'"{source.name}"', None, new=0)  # the poll's validators
        schedule.done(source, state)
        schedule.save()  # after every poll, as the daemon asks: only the first writes
    assert schedule.saves == 1
    assert schedule.save() is False  # nothing changed since
    schedule.changed()
    assert schedule.save() is False  # changed, but SAVE_EVERY has not passed
    assert schedule.save(force=True) is True  # a flush or the stop
    saved = json.loads(path.read_text())
    assert {name: s["etag"] for name, s in saved.items()} == {f"feed{i}": f'"feed{i}"' for i in range(3)}
    assert SAVE_EVERY >= 1.0
