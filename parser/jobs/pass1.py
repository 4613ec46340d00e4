"""Pass 1 of a two-pass job on the daemon's worker loop: a template expanded into the link file when
the job is due, or a harvest whose pages are work items of the scheduler (parser/fetch/scheduler.py), each
page's object links appended to the link file as it comes back, where pass 2 finds them at once.
"""
from __future__ import annotations

import logging
import time
from datetime import UTC, date, datetime
from functools import partial

from linkgen.harvest import PageResult, fetch_harvest_page
from linkgen.linkfile import Link, Mark
from linkgen.templates import expand, expand_urls, open_end

from ..fetch.scheduler import Work
from .job_context import JobContext
from .job_files import JobFiles
from .job_run import JobRun

log = logging.getLogger("parser")
TEMPLATE_CHUNK = 10_000


class Pass1:
    def __init__(self, ctx: JobContext):
        self.ctx = ctx

    def step(self, files: JobFiles, run: JobRun) -> None:
        """Main thread, each turn: expand the template or start the harvest when due (--once: once a
        run), and hand the harvest's next pages to the scheduler."""
        ctx = self.ctx
        due = ctx.pace.pass1_due(files, run, ctx.clock())  # forever, --once, --once in a group (job_pace.py)
        if files.harvest is None:
            if due:
                self.expand_template(files, scheduled=True)
            run.pass1_done()
            return
        harvest = files.harvest
        if not harvest.active:
            if not due:
                return
            harvest.start(len(files.links))
            run.harvest_began(time.monotonic())
        elif not run.harvest_timed:
            log.info("%s  pass 1: resuming harvest run %d (%d pages done)", files.job.name, harvest.run,
                     harvest.pages_done)
            run.harvest_began(time.monotonic())
        run.pass1_done()
        if run.given_up:
            return
        room = ctx.window - ctx.scheduler.waiting(run.pages) - ctx.scheduler.running_for(run.pages)
        spec = harvest.spec
        for url, depth in harvest.take(max(room, 0), held_for=ctx.host_slots.key_held_for):
            ctx.scheduler.add(Work(url=url, owner=run.pages,
                                   run=partial(fetch_harvest_page, url, depth, spec, fetcher=ctx.fetcher,
                                               host_slots=ctx.host_slots, robots=ctx.robots, delay=files.job.delay),
                                   absorb=partial(self._page_done, files, run),
                                   failed=partial(self._page_crashed, files, run, url, depth)))
        if harvest.finished():
            self._end_harvest(files, run)
        elif ctx.pace.waits_for_holds and not harvest.taken and harvest.waiting:
            # Only pages on held hosts are left: --once waits for them within its budget.
            ctx.hold_or_give_up(files, run, harvest.level_waiting(ctx.host_slots.key_held_for), "pages",
                                harvest.waiting)

    def _page_crashed(self, files: JobFiles, run: JobRun, url: str, depth: int, exc: BaseException) -> None:
        """A bug in a worker fails that page, not the daemon."""
        log.error("internal error harvesting %s: %r", url, exc)
        self._page_done(files, run, PageResult(url=url, depth=depth, error=f"internal error: {exc!r}"))

    def _page_done(self, files: JobFiles, run: JobRun, result: PageResult) -> None:
        """Main thread: one harvest page back from its worker."""
        job, harvest, links, url = files.job, files.harvest, files.links, result.url
        assert harvest is not None, "a harvest job's page"
        if result.held or (result.error and self.ctx.stop.is_set() and result.retry_after is None):
            harvest.release(url)  # not sent, or cut short by the stop: fetched when the run goes on
            return
        if result.retry_after is not None:
            attempts = harvest.refused(result)
            self.ctx.refusal(files, url, f"harvest: {result.error}", attempts,
                             "dead" if harvest.out_of_attempts(url) else "refused")
            if not harvest.out_of_attempts(url):
                return  # still queued: asked again when the hold ends
        links.add(harvest.links_of(result))  # the links first: a page is marked done only after
        harvest.record(result)
        if result.error and result.retry_after is None:
            self.ctx.error(files, url, f"harvest: {result.error}")
        self.ctx.show(f"{job.name}: pass 1: {harvest.pages_done} pages fetched, {len(links)} links")
        if harvest.finished() and not self.ctx.stop.is_set():
            self._end_harvest(files, run)

    def _end_harvest(self, files: JobFiles, run: JobRun) -> None:
        job, harvest, links = files.job, files.harvest, files.links
        if harvest is None or not harvest.active:
            return
        new = len(links) - harvest.links_before
        summary = (f"{harvest.pages_done} pages fetched ({harvest.failed} failed), {len(links)} links"
                   f"{links.where}, {new} new")
        if harvest.stopped_at_max:
            summary += f"; stopped at max_pages ({harvest.spec.max_pages})"
        files.pass1_finished(self.ctx.clock())  # before 'end': a crash between them only ends an empty run again
        harvest.end(summary)
        self.ctx.end_progress()
        log.info("%s  pass 1 (harvest run %d): %s  %.2f s", job.name, harvest.run, summary,
                 run.harvest_ended(time.monotonic()))
        self.ctx.say(files, f"pass 1 (harvest): {summary}")

    def expand_template(self, files: JobFiles, *, scheduled: bool) -> int:
        """Add the template's links to the link file; return how many were new."""
        job, links = files.job, files.links
        template = job.template
        assert template is not None, "a template job (a harvest job has no template)"
        started, before = time.monotonic(), len(links)
        today = datetime.fromtimestamp(self.ctx.clock(), UTC).date()
        probes: list[str] = []
        pending_seen = 0
        most = self.ctx.max_objects  # None: the whole template
        if job.stop_after_misses is None:
            # A closed template: streamed to the file in chunks, checked against the file in order,
            # never held whole (ten million links cost no more memory than ten thousand).
            def enough(pending: int) -> bool:
                nonlocal pending_seen
                pending_seen = pending
                return most is not None and pending > most  # only the first links pass 2 would fetch are needed
            links.add_template(expand_urls(template, job.values, today=today),
                               chunk=TEMPLATE_CHUNK, enough=enough if most is not None else None)
        else:
            batch: list[Link] = []
            for made in expand(template, job.values, today=today, stop_after_misses=job.stop_after_misses,
                               is_good=lambda url: links.status(url) == "done"):
                batch.append(Link(made.url, None, "template"))
                if made.probe:
                    probes.append(made.url)
                if most is not None:
                    pending_seen += made.url not in links or links.status(made.url) == "pending"
                    if pending_seen > most:
                        break
                if len(batch) >= TEMPLATE_CHUNK:
                    links.add(batch)
                    batch = []
            links.add(batch)
        new = len(links) - before
        reopened = 0
        if scheduled:
            # The misses that ended an open range are asked again each time pass 1 runs: new ids appear.
            # A miss may be a 404 (gone) or a page where no field matched, given up after its retries.
            missed = [u for u in probes if links.status(u) in ("gone", "dead")]
            missed = list(dict.fromkeys(missed + self._open_end_misses(files, today)))
            links.mark(Mark(u, "reopen", "end of an open range: asked again") for u in missed)
            reopened = len(missed)
            files.pass1_finished(self.ctx.clock())
            log.info("%s  pass 1 (template): %d links in the file, %d new%s  %.2f s", job.name, len(links), new,
                     f", {reopened} misses at the end of the range asked again" if reopened else "",
                     time.monotonic() - started)
            self.ctx.say(files, f"pass 1 (template): {len(links)} links, {new} new"
                         + (f" (expanded only as far as {most + 1} links pending)"
                            if most is not None and pending_seen > most else ""))
        elif new:
            log.info("%s  pass 1 (template): %d more %s past the last confirmed one", job.name, new,
                     "link" if new == 1 else "links")
        return new + reopened

    def _open_end_misses(self, files: JobFiles, today: date) -> list[str]:
        """The links of a date range's open end (no `to`: up to today) from the previous pass 1's
        period on that were gone or given up: asked before they were published, so asked again."""
        previous = files.pass1_at
        since = datetime.fromtimestamp(previous, UTC).date() if previous > 0 else today
        narrowed = open_end(files.job.values, min(since, today), today)
        template = files.job.template
        if narrowed is None or template is None:
            return []
        links = files.links
        return [u for u in expand_urls(template, narrowed, today=today)
                if u in links and links.status(u) in ("gone", "dead")]
