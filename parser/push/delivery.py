"""What the listener does with a pushed body once its sender is trusted, for every pushed protocol
(webhook deliveries, WebSub pushes): read it with the source's adapter and keep its records in the
durable inbox, or refuse it with the answer the sender gets (400: it will never read; 503: it could
not be stored now, so the sender keeps it and sends it again)."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..adapters import Parsed, looks_like_json, parse_body
from ..adapters.source_view import SourceView
from ..core import logs
from ..core.errors import ParseError, StorageError
from ..core.record import now_iso
from ..pipeline.inbox import Inbox
from .listener import MAX_JSON_DEPTH, RefusalLog, Reply, json_too_deep


@dataclass
class Taken:
    """A pushed body taken: its records (None when `key` was taken before), or the refusal to answer."""
    parsed: Parsed | None = None
    refusal: Reply | None = None


@dataclass(frozen=True)
class Arrival:
    """One pushed body as the listener took it."""
    content_type: str
    url: str  # where the listener took it, for the log lines
    key: str | None  # its delivery key (parser/pipeline/inbox.py): a key taken before is not kept twice
    what: str  # what errors.log calls it ("webhook delivery 17", "WebSub push")
    peer: str  # who sent it
    base: str | None = None  # what its relative links are read against (a WebSub push: its topic); else `url`


@dataclass(frozen=True)
class Desk:
    """Where a pushed body's records go: the inbox, the refusals' log, and the clock they are stamped by."""
    inbox: Inbox
    refusals: RefusalLog
    clock: Callable[[], float] = time.time


def take(source: SourceView, body: bytes, arrival: Arrival, desk: Desk) -> Taken:
    """Parse `body` as `source`'s protocol reads it and keep the records under its delivery key."""
    name, url, what, peer = source.name, arrival.url, arrival.what, arrival.peer
    content_type, refusals = arrival.content_type, desk.refusals
    try:
        if looks_like_json(body, {"content-type": content_type}) and json_too_deep(body):
            raise ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        parsed = parse_body(source, body, url=arrival.base or url, headers={"content-type": content_type},
                            fetched=now_iso(desk.clock))
    except (ParseError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, ParseError) else "nested too deep to read"
        refusals.note(name, url, "400", f"{what} from {peer} refused (400): {why}")
        return Taken(refusal=Reply(400, f"{why}\n"))
    for warning in parsed.warnings:  # the delivery was read and is kept: a warning, as a poll's
        logs.error_line(name, url, warning, level=logging.WARNING)
    try:
        if not desk.inbox.accept(name, arrival.key, parsed.records):
            return Taken()
    except StorageError as exc:
        refusals.note(name, url, "503", f"{what} not kept (503): {exc}")
        return Taken(refusal=Reply(503, "cannot store it now; retry later\n"))
    return Taken(parsed=parsed)
