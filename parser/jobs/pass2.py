"""Pass 2 of a two-pass job on the daemon's worker loop: each pending link of the link file fetched
once as a work item of the scheduler, its fields extracted, one record per object staged through the
job's sink, then the link marked. Links are read lazily from the file (at most CONCURRENCY of a job's
objects wait for a worker), also while a harvest appends to it; a held host's links wait apart
(linkgen.frontier.HostFrontier) until the hold ends. A worker hands back what became of its link as a
value (parser/jobs/outcomes.py); the main thread turns it into the link's mark and count (Pass2._mark).

With the job's `refresh`, a done link due again (linkgen/linkfile.py) is fetched with its ETag and
Last-Modified: a 304, or a page whose fields have the digest of the last visit, is unchanged (it waits
twice as long next time, up to 8 times); a changed one is staged as an update of its row (the flush
changes the row and sets `changed`, db/upsert.py) and waits `refresh` again; a 404/410 (or a harvest's
link redirected off its object pages) at two visits in a row marks its row gone (parser/jobs/job_sink.py);
any other failure leaves it done, asked after its wait.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections import Counter
from functools import partial

from lxml.html import HtmlElement

from linkgen.harvest import in_domains
from linkgen.linkfile import MAX_ATTEMPTS, Mark, Revisit
from linkgen.politeness import HostHeldError, Robots, polite_get

from ..adapters.extract import extract_fields
from ..adapters.field_types import typed_values
from ..core import logs
from ..core.dates import iso
from ..core.errors import FetchError, ParseError
from ..core.record import now_iso
from ..core.runs import Run
from ..core.urls import canonical_url, redact_url
from ..fetch.host_slots import HostSlots
from ..fetch.http import Fetcher, FetchResult
from ..fetch.pages import parse_html
from ..fetch.scheduler import Work
from ..pipeline.sink import Batch
from ..settings.link_jobs import LinkJob
from .job_context import JobContext
from .job_files import JobFiles
from .job_run import JobRun
from .outcomes import (
    Abandoned,
    Barred,
    Failed,
    Fetched,
    Gone,
    Held,
    ObjectOutcome,
    Refused,
    Result,
    Unchanged,
    Unmatched,
)
from .pass1 import Pass1

log = logging.getLogger("parser")
SUMMARY_EVERY = 60.0       # seconds: a busy pass 2 says what it did at least this often
REVISITED = ("revisited", "same", "missed", "kept")  # the marks of a done link fetched again


class NoObjectPageError(FetchError):
    """A harvest job's link redirected to an address its `objects` pattern does not match (a product gone,
    sent to the home page): that page is not the object, so it is no more stored than a 404's page is."""


def fetch_object_page(job: LinkJob, url: str, *, fetcher: Fetcher, host_slots: HostSlots, robots: Robots,
                      revisit: Revisit | None = None) -> tuple[FetchResult, HtmlElement | None]:
    """One object page of `job` as pass 2 asks for it (and `try JOB URL`): the job's delay for its host, a
    harvest's robots.txt and allowed domains for redirects; its document tree, None for a 304 (a `revisit`
    asks conditionally). FetchError (HostHeldError: nothing sent, the host is held; NoObjectPageError: a
    harvest's link redirected off its object pages), ParseError when it is no HTML page."""
    harvest = job.harvest
    response = polite_get(url, fetcher=fetcher, host_slots=host_slots, delay=job.delay,
                          robots=robots if harvest else None,
                          may_follow=(lambda target: in_domains(target, harvest.allowed_domains)) if harvest else None,
                          etag=revisit.etag if revisit else None, last_modified=revisit.modified if revisit else None)
    # The final address is judged, not each hop: http to https, or an old address to the object's new one,
    # may pass through another page on the way.
    if harvest and response.url != url and not re.search(harvest.objects, canonical_url(response.url)):
        raise NoObjectPageError(f"redirected to {redact_url(response.url)}, which the job's objects pattern does "
                                "not match: not the object's page", status=response.status, permanent=True)
    if response.not_modified:
        return response, None
    return response, parse_html(response.body, content_type=response.headers.get("content-type", ""))


def fields_digest(values: dict[str, str]) -> str:
    """What a revisit compares to tell a changed object from an unchanged one: its fields, not its page
    (an advert or a clock on the page is no change of the object)."""
    return hashlib.blake2b(json.dumps(values, sort_keys=True, ensure_ascii=False).encode(), digest_size=8).hexdigest()


def fetch_failure(exc: FetchError, *, stopping: bool) -> Result:
    """What a failed fetch of an object page was, by what pass 2 does with its link. A refusal with
    Retry-After is the server's answer even while stopping; any other failure then may be the stop's."""
    if exc.retry_after is not None:
        return Refused(str(exc))
    if stopping:
        return Abandoned()
    # 404/410 are permanent failures (parser/fetch/http.py), and so is a redirect off the object pages.
    if exc.status in (404, 410) or isinstance(exc, NoObjectPageError):
        return Gone(str(exc))
    if exc.permanent:
        return Barred(str(exc))
    return Failed(str(exc))


def pass_row(job: str, tally: Counter[str], tried: int, failed: int, seconds: float) -> Run:
    """A pass 2 (the objects fetched since the last summary) as a row of the `runs` table (core/runs.py):
    "error" when every link it fetched failed."""
    new, changed = tally["new"], tally["changed"]
    visits = tried + tally["revisited"]
    if new or changed:
        outcome = "new"
    elif visits and failed + tally["kept"] >= visits:
        outcome = "error"
    else:
        outcome = "unchanged"
    failures = failed + tally["kept"]
    return Run(job, iso(time.time() - seconds), round(seconds, 3), outcome, entries=visits, new=new, changed=changed,
               error=f"{failures} of {visits} links failed (errors.log names each)" if failures else None)


def coverage_key(job: LinkJob) -> str:
    """The job's key in the stats' field coverage (parser/core/coverage.py)."""
    return f"job/{job.name}"


class Pass2:
    def __init__(self, ctx: JobContext, pass1: Pass1):
        self.ctx = ctx
        self.pass1 = pass1  # an open template range goes on when pass 2 has confirmed its links

    def offer(self, files: JobFiles, run: JobRun) -> None:
        """Hand pending links to the scheduler, at most CONCURRENCY of this job's waiting or running."""
        if run.given_up:
            return
        scheduler = self.ctx.scheduler
        room = self.ctx.window - scheduler.waiting(run.objects) - scheduler.running_for(run.objects)
        run.offered(drained=self._hand_out(files, run, room))

    def _hand_out(self, files: JobFiles, run: JobRun, room: int) -> bool:
        """Up to `room` links to the scheduler. True when no more may go now: none is left to send now, or
        the run fetches only the first max_objects (--dry-run) and has handed them out."""
        most = self.ctx.max_objects
        while room > 0:
            if most is not None and run.sent >= most:
                return True
            item = run.next_link(files.links, retries_at_once=self.ctx.pace.retries_at_once)
            if item is None:
                return True
            index, url = item
            revisit = files.links.revisit(index)  # read here: a worker touches no file
            self.ctx.scheduler.add(Work(url=url, owner=run.objects,
                                        run=partial(self.fetch_object, files, index, url, revisit),
                                        absorb=run.back,
                                        failed=partial(self._object_crashed, run, index, url, revisit)))
            run.sent_out(time.monotonic())
            room -= 1
            if most is not None and run.sent == most \
                    and run.next_link(files.links, retries_at_once=self.ctx.pace.retries_at_once) is not None:
                self.ctx.say(files, f"more than {most} links pending: the dry run fetches the first "
                                    f"{most} and stops there")
        return False

    def _object_crashed(self, run: JobRun, index: int, url: str, revisit: Revisit | None,
                        exc: BaseException) -> None:
        log.error("internal error fetching %s: %r", url, exc)  # a bug in a worker fails that link only
        run.back(ObjectOutcome(url, index, revisit, Failed(f"internal error: {exc!r}")))

    def stage(self, files: JobFiles, run: JobRun) -> None:
        """Main thread: the objects back since the last turn, staged together (one fsync) and marked."""
        ready = run.take_ready()
        if not ready:
            return
        run.settled(ready, again=self._absorb(files, ready, run))
        counts = files.links.counts()
        self.ctx.show(f"{files.job.name}: pass 2: {counts['done']} objects done, {counts['pending']} pending")
        if run.summary_due(time.monotonic(), SUMMARY_EVERY):
            self.summary(files, run)

    def idle(self, run: JobRun) -> bool:
        """Nothing of this job's pass 2 to send now, waiting, running or to stage."""
        return run.drained and not run.has_ready and not self.ctx.scheduler.waiting(run.objects) \
            and not self.ctx.scheduler.running_for(run.objects)

    def when_idle(self, files: JobFiles, run: JobRun) -> None:
        """Nothing to send now and nothing in flight: an open range goes on, the tally is said, and
        --once waits for a held host (within ONCE_WAIT_MAX) or leaves its links for the next run."""
        if not self.idle(run):
            return
        # A run that fetches only the first links (--dry-run) does not go on past them.
        if files.job.stop_after_misses is not None and self.ctx.max_objects is None and run.take_tried():
            if self.pass1.expand_template(files, scheduled=False):
                run.links_added()  # the new links go at the next turn
                return
        harvesting = files.harvest is not None and files.harvest.active and not run.given_up
        if run.has_counts and not harvesting:
            self.summary(files, run)
        if self.ctx.pace.waits_for_holds and run.parked_count and not harvesting and not run.given_up:
            self.ctx.hold_or_give_up(files, run, run.parked_urls(), "links", run.parked_count)

    def summary(self, files: JobFiles, run: JobRun) -> None:
        job = files.job
        tally, empty, started = run.take_counts()
        tried = sum(tally[k] for k in ("done", "gone", "retry", "dead", "refused"))
        counts = files.links.counts()
        empties = ", ".join(f"{name} {n}" for name, n in empty.most_common())
        seconds = time.monotonic() - started
        # A JSON log line (LOG_FORMAT "json") carries the counts as keys of their own.
        fields = logs.fields(job=job.name, fetched=tried, new=tally["new"], duplicates=tally["duplicates"],
                             gone=tally["gone"], retry=tally["retry"], given_up=tally["dead"],
                             refused=tally["refused"], unmatched=tally["unmatched"], pending=counts["pending"],
                             empty_fields=dict(empty), seconds=round(seconds, 3), revisited=tally["revisited"],
                             changed=tally["changed"], unchanged=tally["unchanged"], missed=tally["missed"],
                             gone_rows=tally["gone_rows"], failed=tally["kept"])
        # Each revisit in one bucket of _mark's: they add up to the number revisited.
        revisited = (f"; revisited {tally['revisited']}: {tally['changed']} changed, {tally['unchanged']} unchanged, "
                     f"{tally['missed']} missing (asked once more), {tally['gone_rows']} rows gone, "
                     f"{tally['kept']} failed") if tally["revisited"] else ""
        if revisited and not tried:  # only done links fetched again (`refresh`): what became of them
            log.info("%s  pass 2: %s; %d pending  %.2f s", job.name, revisited[2:], counts["pending"], seconds,
                     extra=fields)
        else:
            log.info("%s  pass 2: %d fetched: %d new, %d duplicates, %d gone (404/410), %d to retry, %d given up%s%s; "
                     "empty fields: %s; %d pending  %.2f s", job.name, tried, tally["new"], tally["duplicates"],
                     tally["gone"], tally["retry"], tally["dead"],
                     (f", {tally['refused']} refused with Retry-After" if tally["refused"] else "")
                     + (f", {tally['unmatched']} where no field matched" if tally["unmatched"] else ""), revisited,
                     empties or "none", counts["pending"], seconds, extra=fields)
        failed = tried - tally["done"]
        self.ctx.runs.add(pass_row(job.name, tally, tried, failed, seconds))
        for drop in self.ctx.stats.coverage.pass_ended(coverage_key(job), job.fields):
            logs.error_line(job.name, job.template or (job.harvest.root if job.harvest else ""), drop.text())
        self.ctx.say(files, f"{tried} links fetched: {tally['done']} records, {tally['new']} new would be staged"
                            + (f", {failed} failed" if failed else ""))
        self.ctx.end_progress()

    def fetch_object(self, files: JobFiles, index: int, url: str, revisit: Revisit | None = None) -> ObjectOutcome:
        """Worker thread: fetch one object page (line `index` of the link file; a `revisit` of a done one
        asks conditionally) and extract its fields. Touches no file."""
        try:
            response, doc = fetch_object_page(files.job, url, fetcher=self.ctx.fetcher, host_slots=self.ctx.host_slots,
                                              robots=self.ctx.robots, revisit=revisit)
        except HostHeldError:
            return ObjectOutcome(url, index, revisit, Held())
        except FetchError as exc:
            return ObjectOutcome(url, index, revisit, fetch_failure(exc, stopping=self.ctx.stop.is_set()))
        except ParseError as exc:
            return ObjectOutcome(url, index, revisit, Failed(str(exc)))
        return ObjectOutcome(url, index, revisit, self._read_object(files, url, response, doc, revisit))

    def _read_object(self, files: JobFiles, url: str, response: FetchResult, doc: HtmlElement | None,
                     revisit: Revisit | None) -> Result:
        """Worker thread: what an object page that was answered gives: its record, or unchanged, or a miss."""
        if doc is None:  # 304: unchanged since the last visit
            assert revisit is not None, "only a revisit asks conditionally"
            return Unchanged(etag=response.etag or revisit.etag, modified=response.last_modified or revisit.modified,
                             digest=revisit.digest)
        extracted = extract_fields(doc, files.selectors, files.blank)
        if not extracted.matched:
            # A 200 that is not the object (maintenance, "not found" in a page frame): stored, it would
            # mark the link done for good; a miss is asked again, and ends an open range.
            return Unmatched(f"no field matched ({', '.join(files.selectors)}): looks like an error or maintenance "
                             "page, not stored (if every page says so, check the job's fields)")
        values, warnings = typed_values(files.job.types, extracted.values)
        digest = fields_digest(values)
        etag, modified = response.etag or "", response.last_modified or ""  # kept with the link, as the digest
        if revisit is not None and revisit.digest == digest:
            return Unchanged(etag=etag, modified=modified, digest=digest)
        record = {"url": url, "fetched": now_iso(self.ctx.clock), **values}
        return Fetched(record, etag=etag, modified=modified, digest=digest, empty=tuple(extracted.empty),
                       warnings=tuple(warnings))

    def _absorb(self, files: JobFiles, ready: list[ObjectOutcome], run: JobRun) -> list[tuple[int | None, str]]:
        """Main thread: stage the records (durably; a revisit's as an update of its row), then mark their
        links; log the failures. Return the refused links (line, URL) that may be asked again (after their
        host's hold)."""
        ready = [o for o in ready if not isinstance(o.result, Abandoned)]
        if not ready:
            return []
        first = [o.result.record for o in ready if isinstance(o.result, Fetched) and o.revisit is None]
        again = [o.result.record for o in ready if isinstance(o.result, Fetched) and o.revisit is not None]
        fresh, updated = files.sink.stage_many([Batch(first), Batch(again, updates=files.updates != "ignore")])
        self.ctx.stats.coverage.count(coverage_key(files.job), first + again, files.job.fields)  # duplicates too
        files.sink.show(fresh.new + updated.new, updated.updates)  # --dry-run prints them; a Sink has staged them
        run.count("new", len(fresh.new) + len(updated.new))
        run.count("duplicates", fresh.duplicates)
        marks = []
        for outcome in ready:
            if isinstance(outcome.result, Fetched):
                for warning in outcome.result.warnings:  # a typed field's text that did not convert: stored as NULL
                    logs.error_line(files.job.name, outcome.url, warning)
            marks.append(self._mark(files, outcome, run))
        again_links: list[tuple[int | None, str]] = []
        for mark, link_state in files.links.mark(marks):
            if mark.status in REVISITED:
                continue
            run.count(link_state.status)
            if mark.status == "done":
                continue
            if mark.status == "refused":
                self.ctx.refusal(files, mark.url, mark.detail, link_state.attempts, link_state.status)
                if link_state.status == "refused":
                    again_links.append((mark.index, mark.url))
                continue
            if link_state.status == "gone":
                then = "not asked again"
            elif link_state.status == "retry":
                then = f"attempt {link_state.attempts} of {MAX_ATTEMPTS}, asked again later"
            else:
                then = f"given up after {link_state.attempts} attempts"
            self.ctx.error(files, mark.url, mark.detail, then)
        return again_links

    def _mark(self, files: JobFiles, outcome: ObjectOutcome, run: JobRun) -> Mark:
        """The mark of a link whose object came back, by what became of it. A first visit is done, refused,
        gone or failed (counted by the link's new status once marked). A revisit (a done link fetched again)
        is changed (staged), unchanged, missed (404/410; the second in a row marks its row gone, noted for the
        flush before the link says so), or kept (any other failure): each counted in one bucket of the
        tally, changed, unchanged, missed, gone_rows or kept, that add up to the number revisited."""
        url, index = outcome.url, outcome.index
        if outcome.revisit is not None:
            run.count("revisited")
        match outcome.result, outcome.revisit:
            case Fetched() as got, None:
                run.count_empty(got.empty)
                return Mark(url, "done", index=index, etag=got.etag, modified=got.modified, digest=got.digest)
            case Refused(error), None:
                return Mark(url, "refused", error, index)
            case Gone(error) | Barred(error), None:
                return Mark(url, "gone", error, index)
            case Unmatched(error), None:
                run.count("unmatched")
                return Mark(url, "failed", error, index)
            case Failed(error), None:
                return Mark(url, "failed", error, index)
            case Fetched() as got, Revisit():
                run.count("changed")
                return Mark(url, "revisited", index=index, etag=got.etag, modified=got.modified, digest=got.digest)
            case Unchanged() as got, Revisit():
                run.count("unchanged")
                return Mark(url, "same", "unchanged", index, got.etag, got.modified, got.digest)
            case Gone(error), Revisit() as last:
                if last.missed:
                    run.count("gone_rows")
                    files.sink.gone(url, self.ctx.clock())  # a dry run's sink writes nothing
                    self.ctx.error(files, url, error or "gone", "gone at two visits in a row: its row is "
                                                                "marked gone (kept, not deleted)")
                else:
                    run.count("missed")
                    self.ctx.error(files, url, error or "gone", "asked once more before its row is marked gone")
                return Mark(url, "missed", error, index, last.etag, last.modified, last.digest)
            case Refused(error) | Barred(error) | Unmatched(error) | Failed(error), Revisit() as last:
                run.count("kept")
                self.ctx.error(files, url, error or "failed",
                               "its row is kept as stored; asked again at its next visit")
                return Mark(url, "kept", error, index, last.etag, last.modified, last.digest)
        raise AssertionError(f"no mark for {outcome.result!r}: a first visit is never unchanged, and held or "
                             "abandoned objects are never marked")
