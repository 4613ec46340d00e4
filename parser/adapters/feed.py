"""RSS 0.9x/1.0/2.0 and Atom through feedparser, into records."""
from __future__ import annotations

import io
import re
import time
from collections.abc import Mapping
from typing import Any

import feedparser

from ..charset import to_utf8
from ..errors import ParseError
from ..record import clean_text, html_to_text, safe_text, utc_iso
from ..urls import canonical_url
from . import Parsed, newest

TITLE_MAX = 500
# The end of one entry, and the end of the whole document, in any namespace prefix.
_ENTRY_END = re.compile(rb"</(?:[\w.-]+:)?(?:item|entry)\s*>", re.IGNORECASE)
# A character reference can name a lone surrogate (&#xDC80;); feedparser's loose parser then raises
# while encoding it, and the whole feed would be lost for one character.
_CHAR_REF = re.compile(rb"&#(?:[xX]0*([0-9a-fA-F]{1,8})|0*([0-9]{1,10}));")
_ROOT_END = re.compile(rb"</(?:[\w.-]+:)?(?:rss|feed|rdf)\s*>\s*$", re.IGNORECASE)


def parse(body: bytes, *, url: str, headers: Mapping[str, str], source: Any, fetched: str) -> Parsed:
    """Parse a feed body; raise ParseError when it is not a feed at all."""
    if not body.strip():
        raise ParseError("empty body")
    response_headers = {k.lower(): v for k, v in headers.items()}
    response_headers.setdefault("content-location", url)  # base for relative links
    content_type = response_headers.get("content-type", "")
    # The encoding is decided once, here (see parser/charset.py); feedparser then reads plain UTF-8.
    decoded = to_utf8(body, content_type)
    feed_headers = dict(response_headers)
    if decoded.encoding:
        body = decoded.body
        feed_headers["content-type"] = "application/xml; charset=utf-8"
    body = _CHAR_REF.sub(_no_surrogate_ref, body)
    # A BytesIO, never the bytes themselves: feedparser treats a bare string as a path or URL to open.
    feed = feedparser.parse(io.BytesIO(body), response_headers=feed_headers)
    entries = list(feed.get("entries", []))
    problem = _bozo_text(feed)
    if not entries:
        if problem or not feed.get("version"):
            raise ParseError(_not_a_feed(content_type, body, problem))
        return Parsed(records=[], kind=feed.get("version", ""), warnings=decoded.warnings)
    warnings = list(decoded.warnings)
    if problem and not _harmless(feed):
        whole = _whole_entries(body, len(entries))
        if whole < len(entries):
            warnings.append(f"feed is cut short ({problem}); kept the {whole} entries that parsed whole, "
                            f"dropped {len(entries) - whole} incomplete")
            entries = entries[:whole]
        else:
            warnings.append(f"feed is malformed ({problem}); kept the {len(entries)} entries that parsed")
    records = [_record(e, source.name, fetched) for e in entries]
    records = newest(records, source.max_items)
    return Parsed(records=records, warnings=warnings, kind=feed.get("version", "") or "feed")


def _whole_entries(body: bytes, parsed: int) -> int:
    """How many of the `parsed` entries are whole. A body cut short (its root element never closes)
    can end inside its last entry, whose fields are then partial: a link cut in half would be stored
    for good. Elsewhere the loose parser's entries are all taken as whole."""
    if _ROOT_END.search(body[-256:]):
        return parsed
    return min(parsed, len(_ENTRY_END.findall(body)))


def _record(entry: Mapping[str, Any], source_name: str, fetched: str) -> dict:
    """One entry as a record (RECORD_FIELDS). feedparser gives strings, lists of dicts and struct_times,
    but never trust the shape: whatever an entry holds, this returns text and never raises."""
    link = _alternate_link(entry)
    guid = clean_text(_text(entry.get("id")))
    if not link and guid.startswith(("http://", "https://")):
        link = guid
    link = canonical_url(link)
    published = ""
    for key in ("published_parsed", "updated_parsed", "created_parsed"):
        if entry.get(key):
            published = utc_iso(entry[key]) if isinstance(entry[key], (time.struct_time, str)) else ""
            break
    if not published:  # feedparser could not read the date; dateutil is more forgiving
        raw = _text(entry.get("published")) or _text(entry.get("updated"))
        published = utc_iso(raw) if raw else ""
    return {
        "source": source_name,
        "guid": guid or link,
        "link": link,
        "title": html_to_text(_text(entry.get("title")))[:TITLE_MAX],
        "author": html_to_text(_text(entry.get("author"))),
        "published": published,
        "summary": html_to_text(_text(entry.get("summary"))),
        "content": _content(entry),
        "fetched": fetched,
    }


def _no_surrogate_ref(match: re.Match) -> bytes:
    hexa, decimal = match.groups()
    code = int(hexa, 16) if hexa else int(decimal)
    return b"&#xFFFD;" if 0xD800 <= code <= 0xDFFF else match.group(0)


def _text(value: Any) -> str:
    """A field's text: strings (lone surrogates replaced: no database stores them), numbers; else ''."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return ""


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _alternate_link(entry: Mapping[str, Any]) -> str:
    """The entry's rel="alternate" link; feedparser's `link` can be an enclosure that came later."""
    for link in _dicts(entry.get("links")):
        if _text(link.get("rel", "alternate")) == "alternate" and _text(link.get("href")):
            return _text(link["href"])
    return _text(entry.get("link"))


def _content(entry: Mapping[str, Any]) -> str:
    """The entry's full content as (feedparser-sanitized) HTML, preferring an HTML part."""
    parts = _dicts(entry.get("content"))
    for part in parts:
        if "html" in _text(part.get("type")):
            return clean_text(_text(part.get("value")))
    return clean_text(_text(parts[0].get("value"))) if parts else ""


def _bozo_text(feed: Mapping[str, Any]) -> str:
    if not feed.get("bozo"):
        return ""
    exc = feed.get("bozo_exception")
    text = str(exc) if exc else "malformed"
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _harmless(feed: Mapping[str, Any]) -> bool:
    """feedparser flags a charset it had to guess or override; the entries are right all the same."""
    exc = feed.get("bozo_exception")
    return type(exc).__name__ in ("CharacterEncodingOverride", "NonXMLContentType")


def _not_a_feed(content_type: str, body: bytes, problem: str) -> str:
    mime = content_type.split(";")[0].strip().lower()
    head = body[:512].lstrip().lower()
    if mime in ("text/html", "application/xhtml+xml") or head.startswith((b"<!doctype html", b"<html")):
        return f"not a feed: {mime or 'an HTML page'}"
    if problem:
        return f"not a feed: {problem}"
    return f"not a feed: {mime}" if mime else "not a feed"
