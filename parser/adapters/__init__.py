"""Protocol adapters: each turns one kind of body into records of the one shape (record.Record).

An adapter is a function `parse(body, *, url, headers, source, fetched) -> Parsed` (Parsed in
adapters/parsed.py); `source` is the SourceView of parser/adapters/source_view.py. Nothing downstream of it
knows which protocol a record came from. The fast path (xmlfeed) also reads a body in two steps, `scan`
(the kept entries' ids) then Scan.read (the chosen entries whole), so that the intake decides which
entries a poll reads (parser/pipeline/first_read.py); every other adapter's Parsed is a Scan too (scan_of).

scans and parse_body are the one dispatch point, and ADAPTERS its one table: by what the source's protocol says
its bodies are (SourceView.body_kind, from parser/sources/protocols.py), the adapters that may read them, tried
in order. "json" bodies (json_api, webhook) are JSON read by the source's `items` and `map`; "feed"
bodies (feed, websub) are feeds whose format is detected from the Content-Type and the body itself
(a JSON Feed `version` for JSON Feed, an XML root element for RSS/Atom/RDF), and Parsed.kind says
what was found ("rss20", "atom10", "jsonfeed11", ...). RSS, RDF and Atom are read by xmlfeed (lxml);
what it cannot read goes to feedparser (feed), and the kind then ends in FALLBACK so the log shows it.
Every record then passes sanitize.finish_record: safe HTML in `content`, `title` capped.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from ..core.cpu_slots import one_per_core
from ..core.errors import ParseError
from ..core.record import Record, record_digest
from . import feed, json_api, jsonfeed, xmlfeed
from .parsed import FALLBACK, FeedInfo, Parsed, Scan, newest, scan_of, select_newest
from .sanitize import finish_record, stored_link
from .source_view import SourceView

__all__ = ["ADAPTERS", "FALLBACK", "Adapter", "FeedInfo", "Parsed", "Scan", "finished", "looks_like_json", "newest",
           "parse_body", "scans", "select_newest"]


def looks_like_json(body: bytes, headers: Mapping[str, str]) -> bool:
    """A JSON media type, or (servers often say text/plain or nothing) a body that opens with '{'."""
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    mime = content_type.split(";")[0].strip().lower()
    if mime.endswith("/json") or mime.endswith("+json"):
        return True
    head = body[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{") and not mime.endswith("xml")


def _any_body(body: bytes, headers: Mapping[str, str]) -> bool:
    return True


def _not_blank(body: bytes, headers: Mapping[str, str]) -> bool:
    return bool(body.strip())


@dataclass(frozen=True)
class Adapter:
    """One way of reading a body. `parse` returns its records, raises ParseError when the body is not
    what it reads, or returns None to hand the body to the next adapter of its kind; `scan`, where the
    adapter has one (the fast path), reads only as far as the entries' ids and the newest `limit`."""
    name: str
    parse: Callable[..., Parsed | None]
    reads: Callable[[bytes, Mapping[str, str]], bool] = _any_body  # asked at all for this body?
    scan: Callable[..., Scan | None] | None = None
    fallback: bool = False  # reads what an adapter before it handed on: its kind ends in FALLBACK


# Body kind (a protocol row's `body`) -> its adapters, tried in order; the first that is asked and
# returns a Parsed has read the body.
ADAPTERS: dict[str, tuple[Adapter, ...]] = {
    "json": (Adapter("json_api", json_api.parse),),
    "feed": (Adapter("jsonfeed", jsonfeed.parse, reads=looks_like_json),
             Adapter("xmlfeed", xmlfeed.parse, reads=_not_blank, scan=xmlfeed.scan),
             Adapter("feedparser", feed.parse, fallback=True)),
}


def _not_markup(body: bytes, headers: Mapping[str, str]) -> ParseError | None:
    """For a body the last feed reader refused: when it is no markup at all and the server named a type
    that is no XML (text/plain, application/octet-stream), that type is what the operator needs; the
    reader's `<unknown>:2:0: syntax error` says nothing to them. None otherwise."""
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    mime = content_type.split(";")[0].strip().lower()
    if not mime or any(word in mime for word in ("xml", "rss", "atom", "rdf", "html")):
        return None
    head = body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head or head.startswith(b"<"):  # an empty body says so; broken markup, where it breaks
        return None
    return ParseError(f"not a feed: {mime}")


def scans(source: SourceView, body: bytes, *, url: str, headers: Mapping[str, str], fetched: str,
          limit: int | None = None, ids: bool = False) -> Iterator[Scan]:
    """The body as each of its kind's adapters that reads it scans it, in turn: the caller reads the entries
    it wants (Scan.read) and goes on to the next Scan only when that read hands the body on (None).
    `limit`: only the `limit` newest entries are kept (see `newest`): the one place a body's entries are
    cut to a source's max_items. `ids`: each kept entry's ids and digest in Scan.ids (identity first).
    Raises ParseError when the adapter that reads the body refuses it."""
    for adapter in ADAPTERS[source.body_kind]:
        if not adapter.reads(body, headers):
            continue
        try:
            if adapter.scan is not None:
                found = adapter.scan(body, url=url, headers=headers, source=source, fetched=fetched, limit=limit,
                                     ids=ids)
            else:
                parsed = adapter.parse(body, url=url, headers=headers, source=source, fetched=fetched)
                if parsed is not None and adapter.fallback and parsed.records:
                    parsed = replace(parsed, kind=parsed.kind + FALLBACK)
                found = None if parsed is None else scan_of(parsed, limit, _ids if ids else None)
        except ParseError:
            plainly = _not_markup(body, headers) if adapter.fallback else None
            if plainly is None:
                raise
            raise plainly from None
        if found is not None:
            yield found
    # the last adapter of every kind reads whatever it is given, and its read hands nothing on
    raise AssertionError(f"no adapter of kind {source.body_kind!r} read the body")


def _ids(record: Record) -> dict[str, str]:
    # The link as finish_record will store it: identity keys, and the first read keeps, this one.
    return {"source": str(record.get("source") or ""), "guid": str(record.get("guid") or ""),
            "link": stored_link(record.get("link")), "digest": record_digest(record)}


def finished(parsed: Parsed) -> Parsed:
    """Every record as stored (sanitize.finish_record): safe HTML in `content`, `title` capped."""
    return replace(parsed, records=[finish_record(r) for r in parsed.records])


@one_per_core  # CPU work: more parsing threads than cores only make the main thread wait (cpu_slots.py)
def parse_body(source: SourceView, body: bytes, *, url: str, headers: Mapping[str, str], fetched: str,
               limit: int | None = None) -> Parsed:
    """Parse one fetched body of `source` into records, by the first of its kind's adapters that reads it.

    `limit`: keep only the `limit` newest entries (see `newest`); a feed read by the fast path then
    normalizes and sanitizes only those. None keeps every entry the adapter keeps."""
    for scan in scans(source, body, url=url, headers=headers, fetched=fetched, limit=limit):
        parsed = scan.read()
        if parsed is not None:
            return finished(parsed)
    raise AssertionError("scans ends in a read")  # unreachable: scans raises when no adapter reads it
