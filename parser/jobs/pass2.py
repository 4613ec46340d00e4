"""Pass 2 of a two-pass job on the daemon's worker loop: each pending link of the link file fetched
once as a work item of the scheduler, its fields extracted, one record per object staged through the
job's sink, then the link marked. Links are read lazily from the file (at most CONCURRENCY of a job's
objects wait for a worker), also while a harvest appends to it; a held host's links wait apart
(linkgen.frontier.HostFrontier) until the hold ends.

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
from .job_context import JobContext, url_of
from .job_files import JobFiles
from .job_run import JobRun, ObjectOutcome
from .job_sink import JobSink
from .pass1 import Pass1

log = logging.getLogger("parser")
REREAD_EVERY = 1.0         # seconds: the link file is asked again this often for retries that came due
PULL_MAX = 10_000          # links pulled at most per look for one on a host not held
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
        run.drained = False
        most = self.ctx.max_objects
        while room > 0:
            if most is not None and run.handed >= most:
                run.drained = True
                return
            item = self._next_link(files, run)
            if item is None:
                run.drained = True
                return
            index, url = item
            if not run.started:
                run.started = run.said_at = time.monotonic()
            revisit = files.links.revisit(index)  # read here: a worker touches no file
            self.ctx.scheduler.add(Work(url=url, owner=run.objects,
                                        run=partial(self.fetch_object, files, index, url, revisit),
                                        absorb=partial(self._object_done, run),
                                        failed=partial(self._object_crashed, run, index, url, revisit)))
            run.handed += 1
            room -= 1
            if most is not None and run.handed == most and self._next_link(files, run) is not None:
                self.ctx.say(files, f"more than {most} links pending: the dry run fetches the first "
                                    f"{most} and stops there")

    def _next_link(self, files: JobFiles, run: JobRun) -> tuple[int, str] | None:
        """The next link whose host is not held: from the frontier, else pulled from the link file."""
        for _ in range(PULL_MAX):
            item = run.frontier.pop()
            if item is not None:
                return item
            item = self._pull(files, run)
            if item is None:
                return None
            run.frontier.append(item)
        return None

    def _pull(self, files: JobFiles, run: JobRun) -> tuple[int, str] | None:
        """One pending link from the file that is not already ours. The file is asked again when links
        were added (a harvest going on) or, for retries come due, every REREAD_EVERY seconds."""
        while True:
            if run.links is None:
                if len(files.links) == run.seen_links and time.monotonic() - run.asked_at < REREAD_EVERY:
                    return None
                # --once asks again at once for the retries of earlier runs, only on its first look: a link
                # that fails in this run waits for its backoff like any other.
                run.links = files.links.pending(ignore_backoff=self.ctx.once and run.seen_links < 0)
                run.seen_links, run.asked_at = len(files.links), time.monotonic()
                fresh = True
            else:
                fresh = False
            for index, url in run.links:
                if index not in run.mine:
                    run.mine.add(index)
                    return index, url
            run.links = None
            if fresh:
                return None

    def _object_crashed(self, run: JobRun, index: int, url: str, revisit: Revisit | None,
                        exc: BaseException) -> None:
        log.error("internal error fetching %s: %r", url, exc)  # a bug in a worker fails that link only
        run.ready.append(ObjectOutcome(url=url, index=index, error=f"internal error: {exc!r}", revisit=revisit))

    def _object_done(self, run: JobRun, outcome: ObjectOutcome) -> None:
        """Main thread: an object back from its worker; staged with the others of this turn."""
        if outcome.held:
            run.frontier.park((outcome.index, outcome.url))  # not sent: asked when the hold ends
        else:
            run.ready.append(outcome)

    def stage(self, files: JobFiles, run: JobRun) -> None:
        """Main thread: the objects back since the last turn, staged together (one fsync) and marked."""
        ready, run.ready = run.ready, []
        if not ready:
            return
        again = self._absorb(files, ready, run.tally, run.empty)
        for item in again:
            run.frontier.park(item)  # refused with Retry-After: still ours, asked after the hold
        kept = {index for index, _ in again}
        for outcome in ready:
            if outcome.index not in kept:
                run.mine.discard(outcome.index)  # marked; or abandoned, so the file gives it again
        run.tried_since_extend += len(ready)
        counts = files.links.counts()
        self.ctx.show(f"{files.job.name}: pass 2: {counts['done']} objects done, {counts['pending']} pending")
        if run.tally and time.monotonic() - run.said_at >= SUMMARY_EVERY:
            self.summary(files, run)

    def idle(self, run: JobRun) -> bool:
        """Nothing of this job's pass 2 to send now, waiting, running or to stage."""
        return run.drained and not run.ready and not self.ctx.scheduler.waiting(run.objects) \
            and not self.ctx.scheduler.running_for(run.objects)

    def when_idle(self, files: JobFiles, run: JobRun) -> None:
        """Nothing to send now and nothing in flight: an open range goes on, the tally is said, and
        --once waits for a held host (within ONCE_WAIT_MAX) or leaves its links for the next run."""
        if not self.idle(run):
            return
        # A run that fetches only the first links (--dry-run) does not go on past them.
        if files.job.stop_after_misses is not None and run.tried_since_extend and self.ctx.max_objects is None:
            run.tried_since_extend = 0
            if self.pass1.expand_template(files, scheduled=False):
                run.drained = False  # the new links go at the next turn
                return
        harvesting = files.harvest is not None and files.harvest.active and not run.given_up
        if run.tally and not harvesting:
            self.summary(files, run)
        if self.ctx.once and run.frontier.parked_count and not harvesting and not run.given_up:
            self.ctx.hold_or_give_up(files, run, [url_of(i) for i in run.frontier.parked_hosts().values()],
                                     "links", run.frontier.parked_count)

    def summary(self, files: JobFiles, run: JobRun) -> None:
        job, tally = files.job, run.tally
        tried = sum(tally[k] for k in ("done", "gone", "retry", "dead", "refused"))
        counts = files.links.counts()
        empties = ", ".join(f"{name} {n}" for name, n in run.empty.most_common())
        seconds = time.monotonic() - run.started
        # A JSON log line (LOG_FORMAT "json") carries the counts as keys of their own.
        fields = logs.fields(job=job.name, fetched=tried, new=tally["new"], duplicates=tally["duplicates"],
                             gone=tally["gone"], retry=tally["retry"], given_up=tally["dead"],
                             refused=tally["refused"], unmatched=tally["unmatched"], pending=counts["pending"],
                             empty_fields=dict(run.empty), seconds=round(seconds, 3), revisited=tally["revisited"],
                             changed=tally["changed"], unchanged=tally["unchanged"], missed=tally["missed"],
                             gone_rows=tally["gone_rows"], failed=tally["kept"])
        # Each revisit in one bucket of _revisit_mark's: they add up to the number revisited.
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
        self.ctx.say(files, f"{tried} links fetched: {tally['done']} records, {tally['new']} new would be staged"
                            + (f", {failed} failed" if failed else ""))
        self.ctx.end_progress()
        run.tally, run.empty, run.started = Counter(), Counter(), 0.0

    def fetch_object(self, files: JobFiles, index: int, url: str, revisit: Revisit | None = None) -> ObjectOutcome:
        """Worker thread: fetch one object page (line `index` of the link file; a `revisit` of a done one
        asks conditionally) and extract its fields. Touches no file."""
        try:
            response, doc = fetch_object_page(files.job, url, fetcher=self.ctx.fetcher, host_slots=self.ctx.host_slots,
                                       robots=self.ctx.robots, revisit=revisit)
        except HostHeldError:
            return ObjectOutcome(url=url, index=index, held=True, revisit=revisit)
        except FetchError as exc:
            refused = exc.retry_after is not None
            return ObjectOutcome(url=url, index=index, error=str(exc), final=exc.permanent, refused=refused,
                                 abandoned=self.ctx.stop.is_set() and not refused, revisit=revisit,
                                 missed=revisit is not None and (exc.status in (404, 410)
                                                                 or isinstance(exc, NoObjectPageError)))
        except ParseError as exc:
            return ObjectOutcome(url=url, index=index, error=str(exc), revisit=revisit)
        if doc is None:  # 304: unchanged since the last visit
            assert revisit is not None, "only a revisit asks conditionally"
            return ObjectOutcome(url=url, index=index, revisit=revisit, same=True,
                                 etag=response.etag or revisit.etag,
                                 modified=response.last_modified or revisit.modified, digest=revisit.digest)
        extracted = extract_fields(doc, files.selectors, files.blank)
        if not extracted.matched:
            # A 200 that is not the object (maintenance, "not found" in a page frame): stored, it would
            # mark the link done for good; a miss is asked again, and ends an open range.
            return ObjectOutcome(url=url, index=index, unmatched=True, revisit=revisit,
                                 error=f"no field matched ({', '.join(files.selectors)}): looks like an error or "
                                       "maintenance page, not stored (if every page says so, check the job's "
                                       "fields)")
        values, warnings = typed_values(files.job.types, extracted.values)
        digest = fields_digest(values)
        etag, modified = response.etag or "", response.last_modified or ""  # kept with the link, as the digest
        if revisit is not None and revisit.digest == digest:
            return ObjectOutcome(url=url, index=index, revisit=revisit, same=True, etag=etag, modified=modified,
                                 digest=digest)
        record = {"url": url, "fetched": now_iso(self.ctx.clock), **values}
        return ObjectOutcome(url=url, index=index, record=record, empty=extracted.empty, revisit=revisit,
                             warnings=warnings, etag=etag, modified=modified, digest=digest)

    def _absorb(self, files: JobFiles, ready: list[ObjectOutcome], tally: Counter[str],
                empty: Counter[str]) -> list[tuple[int | None, str]]:
        """Main thread: stage the records (durably; a revisit's as an update of its row), then mark their
        links; log the failures. Return the refused links (line, URL) that may be asked again (after their
        host's hold)."""
        ready = [o for o in ready if not o.abandoned]
        if not ready:
            return []
        first = [o.record for o in ready if o.record is not None and o.revisit is None]
        again = [o.record for o in ready if o.record is not None and o.revisit is not None]
        fresh, updated = files.sink.stage_many([Batch(first), Batch(again, updates=files.updates != "ignore")])
        files.sink.show(fresh.new + updated.new, updated.updates)  # --dry-run prints them; a Sink has staged them
        tally["new"] += len(fresh.new) + len(updated.new)
        tally["duplicates"] += fresh.duplicates
        marks = []
        for outcome in ready:
            for warning in outcome.warnings:  # a typed field's text that did not convert: stored as NULL
                logs.error_line(files.job.name, outcome.url, warning)
            if outcome.revisit is not None:
                marks.append(self._revisit_mark(files, outcome, outcome.revisit, tally))
                continue
            tally["unmatched"] += outcome.unmatched
            if outcome.record is not None:
                marks.append(Mark(outcome.url, "done", index=outcome.index, etag=outcome.etag,
                                  modified=outcome.modified, digest=outcome.digest))
                empty.update(outcome.empty)
            elif outcome.refused:
                marks.append(Mark(outcome.url, "refused", outcome.error or "", outcome.index))
            else:
                marks.append(Mark(outcome.url, "gone" if outcome.final else "failed", outcome.error or "",
                                  outcome.index))
        again_links: list[tuple[int | None, str]] = []
        for mark, link_state in files.links.mark(marks):
            if mark.status in REVISITED:
                continue
            tally[link_state.status] += 1
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

    def _revisit_mark(self, files: JobFiles, outcome: ObjectOutcome, revisit: Revisit, tally: Counter[str]) -> Mark:
        """The mark of a done link fetched again: changed (staged), unchanged, missed (404/410; the second in a
        row marks its row gone, noted for the flush before the link says so), or kept (any other failure).
        Each is counted in one bucket of `tally`: changed, unchanged, missed, gone_rows or kept."""
        url, index = outcome.url, outcome.index
        tally["revisited"] += 1
        if outcome.record is not None:
            tally["changed"] += 1
            return Mark(url, "revisited", index=index, etag=outcome.etag, modified=outcome.modified,
                        digest=outcome.digest)
        if outcome.same:
            tally["unchanged"] += 1
            return Mark(url, "same", "unchanged", index, outcome.etag, outcome.modified, outcome.digest)
        kept = dict(etag=revisit.etag, modified=revisit.modified, digest=revisit.digest)
        if outcome.missed:
            if revisit.missed:
                tally["gone_rows"] += 1
                if isinstance(files.sink, JobSink):
                    files.sink.gone(url, self.ctx.clock())
                self.ctx.error(files, url, outcome.error or "gone", "gone at two visits in a row: its row is "
                                                                    "marked gone (kept, not deleted)")
            else:
                tally["missed"] += 1
                self.ctx.error(files, url, outcome.error or "gone", "asked once more before its row is marked gone")
            return Mark(url, "missed", outcome.error or "", index, **kept)
        tally["kept"] += 1
        self.ctx.error(files, url, outcome.error or "failed",
                       "its row is kept as stored; asked again at its next visit")
        return Mark(url, "kept", outcome.error or "", index, **kept)
