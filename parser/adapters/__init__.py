"""Protocol adapters: each turns one kind of body into records of the one shape (record.RECORD_FIELDS).

An adapter is a function `parse(body, *, url, headers, source, fetched) -> Parsed`. Nothing
downstream of it knows which protocol a record came from.

parse_body is the one dispatch point. It chooses by what the source's protocol says its bodies are
(parser/protocols.py): "json" bodies (json_api, webhook) are JSON read by the source's `items` and
`map`; "feed" bodies (feed, websub) are feeds whose format is detected from the Content-Type and the
body itself
(an XML root element for RSS/Atom/RDF, a JSON Feed `version` for JSON Feed), and Parsed.kind says
what was found ("rss20", "atom10", "jsonfeed11", ...). RSS, RDF and Atom are read by xmlfeed (lxml);
what it cannot read goes to feedparser (feed), and the kind then ends in FALLBACK so the log shows it.
Every record then passes sanitize.finish_record: safe HTML in `content`, `title` capped.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..cpu_slots import one_per_core


@dataclass
class Parsed:
    records: list[dict]
    # Problems that did not stop the parse (a truncated feed kept what parsed): one line each.
    warnings: list[str] = field(default_factory=list)
    kind: str = ""  # what was found, for the log: "rss20", "atom10", ...
    next_url: str | None = None  # json_api with a `next` path: the address of the following page
    # Facts about the source worth a line in parser.log once per run (not errors): "dates without a
    # time zone are taken as UTC".
    notes: list[str] = field(default_factory=list)
    home: str = ""  # the feed's own page (RSS channel link, Atom alternate, JSON Feed home_page_url)
    feed_url: str | None = None  # the source's address was an HTML page; this feed it links to was read


FALLBACK = " via feedparser"  # the end of Parsed.kind when the fast path handed the body to feedparser


@one_per_core  # CPU work: more parsing threads than cores only make the main thread wait (cpu_slots.py)
def parse_body(source, body: bytes, *, url: str, headers, fetched: str, limit: int | None = None) -> Parsed:
    """Pick the adapter for `source` and parse one fetched body into records.

    `limit`: keep only the `limit` newest entries (see `newest`); a feed read by the fast path then
    normalizes and sanitizes only those. None keeps every entry the adapter keeps."""
    # Imported here: adapters import Parsed from this module.
    from ..protocols import protocol_of
    from ..sanitize import finish_record
    from . import feed, json_api, jsonfeed, xmlfeed
    parsed = None
    if protocol_of(source).body == "json":
        parsed = json_api.parse(body, url=url, headers=headers, source=source, fetched=fetched)
    elif looks_like_json(body, headers):
        parsed = jsonfeed.parse(body, url=url, headers=headers, source=source, fetched=fetched)
    elif body.strip():
        parsed = xmlfeed.parse(body, url=url, headers=headers, source=source, fetched=fetched, limit=limit)
    if parsed is None:
        parsed = feed.parse(body, url=url, headers=headers, source=source, fetched=fetched)
        if parsed.records:
            parsed.kind += FALLBACK
    if limit is not None and len(parsed.records) > limit:
        parsed.records = newest(parsed.records, limit)
    parsed.records = [finish_record(r) for r in parsed.records]
    return parsed


def looks_like_json(body: bytes, headers: Mapping[str, str]) -> bool:
    """A JSON media type, or (servers often say text/plain or nothing) a body that opens with '{'."""
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    mime = content_type.split(";")[0].strip().lower()
    if mime.endswith("/json") or mime.endswith("+json"):
        return True
    head = body[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{") and not mime.endswith("xml")


def newest(records: list[dict], limit: int) -> list[dict]:
    """The `limit` newest records: by date when every record has one, else in the source's order.
    Applied by parser/poll.py to what a poll takes, never to pushed records."""
    return select_newest(records, [r["published"] for r in records], limit)


def select_newest(items: list, dates: list[str], limit: int) -> list:
    """`newest` over anything with a UTC ISO date each (the fast path picks entries before reading them)."""
    if len(items) > limit and all(dates):
        order = sorted(range(len(items)), key=dates.__getitem__, reverse=True)
        return [items[i] for i in order[:limit]]
    return items[:limit]
