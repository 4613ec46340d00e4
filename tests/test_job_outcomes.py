"""What a pass-2 worker hands back (parser/jobs/outcomes.py) and what a job's run state does with it
(parser/jobs/job_run.py), without a server: a failed fetch sorted into one outcome, and JobRun's
transitions (a held link parked, refused links kept, the counts handed over and begun again)."""
from __future__ import annotations

from linkgen.frontier import HostFrontier
from parser.core.errors import FetchError
from parser.fetch.host_slots import HostSlots
from parser.jobs.job_context import url_of
from parser.jobs.job_run import JobRun
from parser.jobs.outcomes import (
    Abandoned,
    Barred,
    Failed,
    Fetched,
    Gone,
    Held,
    ObjectOutcome,
    Refused,
)
from parser.jobs.pass2 import NoObjectPageError, fetch_failure


def test_a_failed_fetch_is_one_outcome():
    assert fetch_failure(FetchError("HTTP 404", status=404, permanent=True), stopping=False) == Gone("HTTP 404")
    assert fetch_failure(FetchError("HTTP 410", status=410, permanent=True), stopping=False) == Gone("HTTP 410")
    off = NoObjectPageError("redirected to /", status=200, permanent=True)
    assert fetch_failure(off, stopping=False) == Gone("redirected to /")
    robots = FetchError("disallowed by robots.txt", permanent=True)
    assert fetch_failure(robots, stopping=False) == Barred("disallowed by robots.txt")
    busy = FetchError("HTTP 503", status=503, retry_after=30.0)
    assert fetch_failure(busy, stopping=False) == Refused("HTTP 503")
    assert fetch_failure(busy, stopping=True) == Refused("HTTP 503")  # the server's answer, stop or not
    assert fetch_failure(FetchError("HTTP 500", status=500), stopping=False) == Failed("HTTP 500")
    assert fetch_failure(FetchError("HTTP 404", status=404, permanent=True), stopping=True) == Abandoned()


def run_of(held: frozenset[str] = frozenset()) -> JobRun:
    """A job's run as the runner makes it (parser/jobs/runner.py), over real host slots with `held` held."""
    slots = HostSlots(1)
    for host in held:
        slots.hold(host, 30.0)
    return JobRun("shop", HostFrontier(slots.key_held_for, url_of=url_of))


def test_a_held_link_waits_apart_and_others_are_staged():
    run = run_of(frozenset({"http://held.test:80"}))
    run.back(ObjectOutcome("http://held.test/p/1", 0, None, Held()))
    done = ObjectOutcome("http://free.test/p/2", 1, None, Fetched({"url": "http://free.test/p/2"}, "", "", "d"))
    run.back(done)
    assert run.parked_count == 1 and run.parked_urls() == ["http://held.test/p/1"]
    assert run.has_ready
    assert run.take_ready() == [done]
    assert not run.has_ready


def test_refused_links_stay_parked_and_the_others_are_let_go():
    run = run_of(frozenset({"http://busy.test:80"}))
    refused = ObjectOutcome("http://busy.test/p/1", 0, None, Refused("HTTP 429"))
    failed = ObjectOutcome("http://free.test/p/2", 1, None, Failed("HTTP 500"))
    run.settled([refused, failed], again=[(0, "http://busy.test/p/1")])
    assert run.parked_count == 1
    assert run.take_tried() == 2
    assert run.take_tried() == 0


def test_counts_are_handed_over_once():
    run = run_of()
    assert not run.has_counts
    run.sent_out(100.0)
    run.sent_out(105.0)  # the summary's time starts with the first link since the last
    run.count("new", 0)
    assert run.has_counts  # a tally with a key counted, as the summary's `if tally` has always read it
    run.count("done")
    run.count_empty(["price", "price", "sku"])
    assert not run.summary_due(130.0, 60.0) and run.summary_due(160.0, 60.0)
    tally, empty, started = run.take_counts()
    assert (tally["done"], tally["new"], dict(empty), started) == (1, 0, {"price": 2, "sku": 1}, 100.0)
    assert not run.has_counts and run.sent == 2
    assert run.take_counts()[2] == 0.0
