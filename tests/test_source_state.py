"""A source's state transitions (parser/sources/state.py SourceState): a failure and its backoff, a Retry-After
hold, a success, a permanent redirect, a changed interval and an operator's reset, each on an
injected clock (`now` is a plain number), in-process: no daemon, no network."""
from __future__ import annotations

from parser.core.dates import iso
from parser.core.record import RECORD_LAYOUT
from parser.sources.state import GONE_EVERY, MAX_BACKOFF, RETRY_AFTER_MAX, SourceState, load_state, on_disk

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
HOUR = 3600.0


def failed(state: SourceState, now: float = NOW, *, interval: float = 600.0, dead_after: int = 3,
           status: int | None = 502) -> str | None:
    return state.failed(now, interval=interval, dead_after=dead_after, error="HTTP 502 Bad Gateway", status=status)


def test_a_failure_below_dead_after_asks_again_after_the_interval():
    """Guards: failures before DEAD_AFTER are counted and said in the state (for `status`), the next
    poll is due one interval on, and the source is not marked."""
    state = SourceState(url="https://a.example/feed")
    assert failed(state) is None
    assert (state.failures, state.dead, state.last_status) == (1, False, 502)
    assert state.last_outcome == "error: HTTP 502 Bad Gateway"
    assert state.last_poll == iso(NOW)
    assert (state.next_due, state.delay) == (NOW + 600.0, 600.0)


def test_the_dead_after_th_failure_marks_the_source_dead_once_and_doubles_its_wait():
    """Guards DEAD_AFTER: the DEAD_AFTER-th failure in a row returns "dead" (said once by the caller),
    the next ones return nothing; from then on each failure doubles the wait."""
    state = SourceState()
    marks = [failed(state, NOW + i) for i in range(5)]
    assert marks == [None, None, "dead", None, None]
    assert state.dead
    assert state.delay == 600.0 * 2 ** 3  # the 5th failure, DEAD_AFTER 3: 2 ** (5 - 3 + 1)
    assert state.next_due == NOW + 4 + state.delay


def test_the_backoff_stops_doubling_at_24_hours_or_the_interval_when_longer():
    """Guards the cap: a dead source is asked at least every MAX_BACKOFF (24 h); a source whose own
    interval is longer keeps its interval."""
    state = SourceState()
    for _ in range(30):
        failed(state)
    assert state.delay == MAX_BACKOFF == 24 * HOUR
    weekly = SourceState()
    for _ in range(30):
        failed(weekly, interval=7 * 24 * HOUR)
    assert weekly.delay == 7 * 24 * HOUR


def test_a_410_gone_is_asked_every_6_hours_and_marked_gone_at_dead_after():
    """Guards 410 Gone: before DEAD_AFTER it is asked again after 6 h at the soonest (not its interval),
    and the DEAD_AFTER-th 410 marks it "gone" rather than "dead"."""
    state = SourceState()
    assert failed(state, status=410) is None
    assert state.delay == GONE_EVERY == 6 * HOUR
    assert failed(state, status=410) is None
    assert failed(state, status=410) == "gone"
    slow = SourceState()
    failed(slow, status=410, interval=12 * HOUR)
    assert slow.delay == 12 * HOUR  # a longer interval stays


def test_a_parse_error_has_no_status():
    """Guards last_status: an error without an HTTP answer (a parse error) leaves no status."""
    state = SourceState(last_status=200)
    failed(state, status=None)
    assert state.last_status is None


def test_a_retry_after_holds_the_source_and_puts_its_next_poll_off():
    """Guards the Retry-After hold: not_before is now plus the server's wait, the hold is kept for
    pull_back, and the next poll is due no sooner than the hold ends."""
    state = SourceState()
    failed(state)
    assert state.hold_for(NOW, 3 * HOUR) == 3 * HOUR
    assert (state.not_before, state.hold) == (NOW + 3 * HOUR, 3 * HOUR)
    assert (state.next_due, state.delay) == (NOW + 3 * HOUR, 3 * HOUR)
    assert state.hold_left(NOW + HOUR) == 2 * HOUR
    assert state.hold_left(NOW + 4 * HOUR) == 0.0


def test_a_short_retry_after_does_not_shorten_a_longer_backoff_and_a_long_one_is_capped():
    """Guards the hold's bounds: a wait shorter than the backoff leaves the backoff; a wait over
    RETRY_AFTER_MAX (24 h) is cut to it."""
    state = SourceState()
    failed(state, interval=2 * HOUR)
    state.hold_for(NOW, 60.0)
    assert (state.not_before, state.next_due, state.delay) == (NOW + 60.0, NOW + 2 * HOUR, 2 * HOUR)
    greedy = SourceState()
    failed(greedy)
    assert greedy.hold_for(NOW, 30 * 24 * HOUR) == RETRY_AFTER_MAX
    assert greedy.not_before == NOW + RETRY_AFTER_MAX


def test_a_success_clears_the_failures_and_says_how_many_it_ended():
    """Guards recovery: an answer after failures returns their number (the caller says "back after N
    failures"), clears them and the dead flag, and is due again one interval on."""
    state = SourceState()
    for _ in range(4):
        failed(state)
    assert state.succeeded(NOW + 10, interval=900.0, status=200) == 4
    assert (state.failures, state.dead, state.last_status) == (0, False, 200)
    assert state.last_success == state.last_poll == iso(NOW + 10)
    assert (state.next_due, state.delay) == (NOW + 10 + 900.0, 900.0)
    assert state.succeeded(NOW + 20, interval=900.0, status=304) == 0


def test_a_success_at_the_own_address_marks_it_as_serving_a_feed_but_a_discovered_feed_does_not():
    """Guards was_feed (issue 18): only an answer from the configured address (no feed_url) shows
    that address serves a feed, so an HTML page from it later is never searched for feeds."""
    own = SourceState(url="https://a.example/")
    own.succeeded(NOW, interval=600.0, status=200)
    assert own.was_feed and not own.may_discover()
    found = SourceState(url="https://a.example/", feed_url="https://a.example/feed.xml")
    found.succeeded(NOW, interval=600.0, status=200)
    assert not found.was_feed


def test_staged_entries_are_counted_and_the_last_new_entry_kept():
    """Guards the status counters: new and duplicate entries go to the totals and the hour's history;
    the time of the last new entry moves only when there was one."""
    state = SourceState()
    state.staged(NOW, new=0, duplicates=5)
    assert state.last_new is None
    state.staged(NOW + 60, new=2, duplicates=1)
    assert state.last_new == iso(NOW + 60)
    assert state.totals == {"new": 2, "duplicates": 6}
    assert state.hourly == [[iso(NOW)[:13], 2, 0]]


def test_a_permanent_redirect_moves_the_source_only_when_seen_twice_in_a_row():
    """Guards "Sources that move": one 301/308 is noted, not followed; the same target on the next poll
    moves the source for good (moved_to); a poll without it forgets the first."""
    state = SourceState(url="https://old.example/feed")
    assert state.redirected("https://new.example/feed") == "once"
    assert state.address() == "https://old.example/feed"
    assert state.redirected("") == ""
    assert state.redirect_seen == ""
    assert state.redirected("https://new.example/feed") == "once"
    assert state.redirected("https://new.example/feed") == "moved"
    assert (state.moved_to, state.redirect_seen) == ("https://new.example/feed", "")
    assert state.address() == "https://new.example/feed"


def test_a_redirect_to_another_target_starts_counting_again():
    """Guards "twice in a row": two redirects to different places are two first sightings."""
    state = SourceState(url="https://old.example/feed")
    assert state.redirected("https://one.example/feed") == "once"
    assert state.redirected("https://two.example/feed") == "once"
    assert state.moved_to == ""


def test_a_discovered_feed_that_moves_moves_the_feed_not_the_page():
    """Guards a redirect of a discovered feed: feed_url follows it, moved_to (the page's) stays empty."""
    state = SourceState(url="https://a.example/", feed_url="https://a.example/feed.xml")
    state.redirected("https://cdn.example/feed.xml")
    assert state.redirected("https://cdn.example/feed.xml") == "moved"
    assert (state.feed_url, state.moved_to) == ("https://cdn.example/feed.xml", "")


def test_a_changed_interval_counts_a_shorter_one_from_now():
    """Guards SIGHUP: a shorter interval brings the next poll forward to now plus it; a longer one
    leaves the poll already planned."""
    state = SourceState(next_due=NOW + 6 * HOUR)
    state.rescheduled(NOW, HOUR)
    assert state.next_due == NOW + HOUR
    state.rescheduled(NOW, 12 * HOUR)
    assert state.next_due == NOW + HOUR


def test_reset_clears_failures_and_hold_forgets_the_discovery_and_is_due_now():
    """Guards `reset SOURCE`: failures, the dead flag and a Retry-After hold go, the feed found on
    the page goes with its validators and was_feed (forget_discovery), and the source is due now;
    validators of the configured address itself stay."""
    state = SourceState(url="https://a.example/", feed_url="https://a.example/comments.xml", etag='"c"',
                        was_feed=True, next_due=NOW + 9 * HOUR)
    for _ in range(5):
        failed(state)
    state.hold_for(NOW, HOUR)
    state.reset(NOW + 1)
    assert (state.failures, state.dead, state.not_before) == (0, False, 0.0)
    assert (state.feed_url, state.etag, state.was_feed) == ("", None, False)
    assert state.next_due == NOW + 1
    assert state.may_discover()
    own = SourceState(url="https://b.example/feed", etag='"b"', was_feed=True)
    own.reset(NOW)
    assert own.etag == '"b"'


def test_validators_saved_under_an_older_record_layout_are_not_sent_after_an_upgrade():
    """Guards RECORD_LAYOUT: a state saved by a version whose records had fewer columns (0.6.0 and older wrote
    no layout) loads without its validators, so the first poll is a 200 that fills the new columns; a state
    saved by this version keeps them, and saves the layout it holds them under."""
    saved_by_051 = {"url": "https://a.example/feed", "etag": '"v1"', "last_modified": "Sun, 01 Mar 2026 12:00:00 GMT",
                    "failures": 0, "last_success": "2026-03-01T12:00:00Z"}
    old = load_state(saved_by_051)
    assert (old.etag, old.last_modified, old.layout) == (None, None, RECORD_LAYOUT)
    assert (old.url, old.last_success) == ("https://a.example/feed", "2026-03-01T12:00:00Z")  # the rest is kept
    current = load_state({**saved_by_051, "layout": RECORD_LAYOUT})
    assert (current.etag, current.last_modified) == ('"v1"', "Sun, 01 Mar 2026 12:00:00 GMT")
    assert on_disk(load_state(on_disk(current)))["layout"] == RECORD_LAYOUT
