"""The shared sources table (db/coord.py) on the real PostgreSQL: claims with leases, write-back,
take-over after a lease ends, and the upsert from params.py."""
from __future__ import annotations

import threading
import time

import psycopg
import pytest

from db.coord import Claimed, Coordinator
from tests.process import wait_for

pytestmark = pytest.mark.postgres


def sources(n: int, interval: float = 60.0) -> list[tuple[str, str, float, bool]]:
    return [(f"s{i}", f"http://127.0.0.1:9/{i}.xml", interval, True) for i in range(n)]


def row(pg_url: str, name: str) -> dict:
    with psycopg.connect(pg_url) as con:
        cur = con.execute("SELECT *, due_at > now() AS later FROM parser_sources WHERE name = %s", (name,))
        return dict(zip([c.name for c in cur.description], cur.fetchone(), strict=True))


def claimed_when_due(coord: Coordinator, count: int, what: str, lease: float = 30) -> list[Claimed]:
    """What `coord` claims once `count` sources are due for it, asked again until they are (the
    database's clock decides when; a loaded machine only makes the wait longer)."""
    taken: list[Claimed] = []
    wait_for(lambda: len(taken.extend(coord.claim_sources(count - len(taken), lease=lease)) or taken) >= count,
             what, timeout=20)
    return taken


def db_now(coord: Coordinator):
    return coord.execute("SELECT now()")[0][0]


@pytest.fixture
def coords(pg_url):
    made = [Coordinator(pg_url, owner=f"daemon{i}") for i in range(3)]
    made[0].create_schema()
    yield made
    for coord in made:
        coord.close()


def test_two_daemons_claiming_at_once_get_different_sources(coords):
    a, b, _ = coords
    a.sync_sources(sources(10))
    first = {c.name for c in a.claim_sources(6, lease=30)}
    second = {c.name for c in b.claim_sources(6, lease=30)}
    assert len(first) == 6 and len(second) == 4
    assert not first & second
    assert a.claim_sources(10, lease=30) == []  # every one leased: none is due for anyone


def test_a_polled_source_is_due_again_after_its_interval_with_its_state(pg_url, coords):
    a, b, _ = coords
    a.sync_sources(sources(1))
    [claimed] = a.claim_sources(5, lease=30)
    assert a.finish_sources([(claimed.name, {"etag": '"v1"', "failures": 0}, 0.5, 0.0)]) == 1
    stored = row(pg_url, "s0")
    assert stored["lease_owner"] is None and stored["state"] == {"etag": '"v1"', "failures": 0}
    assert (stored["due_at"] - stored["polled_at"]).total_seconds() == 0.5  # due its interval after the poll
    assert b.claim_sources(5, lease=30) == []
    [again] = claimed_when_due(b, 1, "s0 due again for the other daemon")
    assert again.state["etag"] == '"v1"'  # the other daemon polls with the first one's validators


def test_a_dead_daemons_sources_are_taken_over_when_the_lease_ends(pg_url, coords):
    dead, alive, _ = coords
    dead.sync_sources(sources(3, interval=0.5))
    assert len(dead.claim_sources(3, lease=0.5)) == 3  # then "killed": never finishes
    assert alive.claim_sources(3, lease=30) == []
    taken = claimed_when_due(alive, 3, "the dead daemon's three sources after its lease")
    assert {c.name for c in taken} == {"s0", "s1", "s2"}
    # The dead daemon's late write-back (a machine that only froze) must not undo the take-over.
    assert dead.finish_sources([("s0", {"etag": "stale"}, 60.0, 0.0)]) == 0
    assert row(pg_url, "s0")["lease_owner"] == "daemon1"


def test_a_stopping_daemon_gives_its_claims_back(coords):
    a, b, _ = coords
    a.sync_sources(sources(4, interval=0.5))
    a.claim_sources(4, lease=300)
    assert a.release_sources() == 4
    # Not the lease's 300 s: an interval after the release, as if they had been polled (20 s at most).
    assert len(claimed_when_due(b, 4, "the released sources for the other daemon")) == 4


def test_params_upsert_keeps_state_drops_it_on_a_new_url_and_disables_removed_sources(pg_url, coords):
    a, _, _ = coords
    a.sync_sources(sources(3))
    claimed = a.claim_sources(3, lease=30)
    a.finish_sources([(c.name, {"etag": c.name}, 600.0, 0.0) for c in claimed])
    a.sync_sources([("s0", "http://127.0.0.1:9/0.xml", 30.0, True),    # a shorter interval
                    ("s1", "http://127.0.0.1:9/moved.xml", 60.0, True)])  # a new address; s2 removed
    assert row(pg_url, "s0")["state"] == {"etag": "s0"}
    assert row(pg_url, "s0")["later"]  # the shorter interval counts from now: still ahead
    assert row(pg_url, "s1")["state"] == {} and not row(pg_url, "s1")["later"]
    assert row(pg_url, "s2")["enabled"] is False
    assert [c.name for c in a.claim_sources(10, lease=30)] == ["s1"]
    assert [c.name for c in a.claim_sources(10, lease=30, names=["s2"])] == []  # not due yet


def test_the_schema_is_created_once_by_many_daemons_starting_together(pg_url):
    errors: list[BaseException] = []

    def start() -> None:
        coord = Coordinator(pg_url)
        try:
            coord.create_schema()
        except BaseException as exc:  # noqa: BLE001 (collected for the assertion below)
            errors.append(exc)
        finally:
            coord.close()

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_renewed_lease_keeps_a_long_poll_from_the_others(pg_url, coords):
    slow, other, _ = coords
    slow.sync_sources(sources(2, interval=0.1))
    assert len(slow.claim_sources(2, lease=0.5)) == 2
    first_end = row(pg_url, "s0")["lease_until"]
    assert slow.renew_sources(lease=3) == 2
    assert row(pg_url, "s0")["lease_until"] > first_end
    wait_for(lambda: db_now(other) > first_end, "the first lease's end (the database's clock)")
    assert other.claim_sources(2, lease=30) == []  # past the first lease, within the renewed one
    assert len(claimed_when_due(other, 2, "the sources once the renewed lease ends")) == 2


def test_a_retry_after_hold_travels_with_the_source(coords):
    a, b, _ = coords
    a.sync_sources(sources(1))
    [claimed] = a.claim_sources(1, lease=30)
    assert claimed.hold_left == 0.0
    a.finish_sources([(claimed.name, {}, 60.0, 30.0)])  # the server said Retry-After: 30
    taken = b.claim_source("s0", lease=30)  # an operator's `poll` on another machine
    assert taken is not None and 28 < taken.hold_left <= 30


def test_a_sources_rate_budget_is_one_bucket_for_the_group(coords):
    a, b, _ = coords  # "2/s burst 2": two at once, then one every half second, whoever polls
    # The bucket refills on the database's clock while these statements go: a wait is its whole
    # length less the time since the first take, which `elapsed` bounds from above (0.001: rounding).
    started = time.monotonic()

    def elapsed() -> float:
        return time.monotonic() - started + 0.001

    assert a.take_rate("s0", 2, 2.0, max_wait=5) == 0.0
    assert b.take_rate("s0", 2, 2.0, max_wait=5) == 0.0
    third = a.take_rate("s0", 2, 2.0, max_wait=5)
    assert 0.5 - elapsed() <= third <= 0.5
    assert b.take_rate("s0", 2, 2.0, max_wait=0.1) is None  # a full second away: refused, nothing taken
    free_in = b.rate_free_in("s0", 2, 2.0)
    assert 1.0 - elapsed() <= free_in <= 1.0  # had the refused take taken a token: 1.5 less the time
