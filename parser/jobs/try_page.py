"""`parser-daemon try JOB URL`, a two-pass job's selectors tried on one page (as Scrapy's shell): the page
fetched as the job's pass 2 fetches it (fetch_object_page: the user agent, a harvest's robots.txt and allowed
domains, the host's delay, and a pause the host asked the job for, kept in the job's state.json), then
each field with its value and whether its selector matched.

Nothing is written: no link file, staging, hash, state or database; robots.txt is read into memory only.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from linkgen.politeness import Robots

from ..adapters.extract import blank_values, compile_selector, extract_fields
from ..adapters.field_types import typed_values
from ..core.errors import printable
from ..core.jsonfile import read_object
from ..fetch.host_slots import HostSlots
from ..fetch.http import Fetcher
from ..settings.link_jobs import LinkJob
from ..settings.params import Settings
from .job_files import job_folder
from .pass2 import fetch_object_page

VALUE_WIDTH = 100  # characters of a field's value shown: enough to recognise it, a line on a wide terminal


@dataclass(frozen=True)
class Field:
    name: str
    selector: str
    value: str
    matched: bool  # the page gives it another text than a blank page does (parser/adapters/extract.py)


@dataclass(frozen=True)
class Tried:
    url: str                  # the final address, after redirects
    status: int
    content_type: str
    size: int                 # bytes of the body
    seconds: float
    fields: tuple[Field, ...]


def try_page(settings: Settings, job: LinkJob, url: str, *, clock: Callable[[], float] = time.time) -> Tried:
    """Fetch `url` as `job`'s pass 2 would and extract its fields. FetchError when the page could not be
    fetched (refused by robots.txt, its host held, an HTTP error), ParseError when it is no HTML page."""
    slots = HostSlots(settings.per_host)
    fetcher = Fetcher(user_agent=settings.user_agent, timeout=settings.timeout, deadline=settings.deadline,
                      max_bytes=settings.max_bytes, max_redirects=settings.max_redirects,
                      per_host=settings.per_host, pool_size=1, slots=slots)
    try:
        _hold_as_the_job_would(job, settings, slots, clock())
        started = time.monotonic()
        response, doc = fetch_object_page(job, url, fetcher=fetcher, host_slots=slots,
                                          robots=Robots(fetcher, settings.user_agent, clock=clock, gate=slots))
        seconds = time.monotonic() - started
    finally:
        fetcher.close()
    assert doc is not None, "asked without a revisit, so never a 304"
    selectors = {name: compile_selector(selector) for name, selector in job.fields.items()}
    extracted = extract_fields(doc, selectors, blank_values(selectors))
    values, _warnings = typed_values(job.types, extracted.values)  # as pass 2 stages them ('' when not converted)
    fields = tuple(Field(name, job.fields[name], value, name in extracted.matched) for name, value in values.items())
    return Tried(url=response.url, status=response.status, content_type=response.headers.get("content-type", ""),
                 size=len(response.body), seconds=seconds, fields=fields)


def _hold_as_the_job_would(job: LinkJob, settings: Settings, slots: HostSlots, now: float) -> None:
    """A pause a host asked the job for (Retry-After, kept in its state.json) holds this request too."""
    holds = (read_object(job_folder(settings.staging_dir, job.name) / "state.json") or {}).get("holds")
    for host, until in (holds.items() if isinstance(holds, dict) else ()):
        if isinstance(until, (int, float)) and until > now:
            slots.hold(host, until - now)


def format_tried(job: LinkJob, asked: str, tried: Tried) -> str:
    """The page's line, a line a field (FIELD, MATCHED, VALUE; an unmatched one with its selector) and
    what pass 2 would do with the page."""
    kind = tried.content_type.split(";")[0].strip() or "no content type"
    lines = [f"job {job.name}: GET {asked}: {tried.status}, {kind}, {tried.size:,} bytes, {tried.seconds:.2f} s"]
    if tried.url != asked:
        lines.append(f"redirected to {tried.url}")
    width = max(len("FIELD"), *(len(field.name) for field in tried.fields))
    lines.append(f"{'FIELD':<{width}}  MATCHED  VALUE")
    for field in tried.fields:
        value = _shown(field.value) or "-"
        if not field.matched:
            value += f"  (selector {field.selector})"
        lines.append(f"{field.name:<{width}}  {'yes' if field.matched else 'no':<7}  {value}")
    matched = sum(field.matched for field in tried.fields)
    lines.append(f"{matched} of {len(tried.fields)} fields matched; nothing was written")
    if not matched:
        lines.append("no field matched: pass 2 would not store this page and would ask it again later "
                     "(an error or maintenance page, or selectors that do not fit the site)")
    return printable("\n".join(lines)) + "\n"


def _shown(value: str) -> str:
    """A value on one line: several matches joined by ' | ' and counted, cut to VALUE_WIDTH characters."""
    parts = value.split("\n")
    text = " | ".join(parts)
    if len(text) > VALUE_WIDTH:
        text = text[:VALUE_WIDTH - 1] + f"… ({len(value):,} characters)"
    return text + (f"  ({len(parts)} matches)" if len(parts) > 1 else "")
