"""JSON Feed 1.0 and 1.1 (https://jsonfeed.org/version/1.1) into records; feedparser 6 does not read it."""
from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..core.errors import ParseError
from ..core.record import (
    AdapterRecord,
    Enclosure,
    Record,
    clean_text,
    html_to_text,
    looks_like_html,
    summary_text,
    title_text,
    utc_iso,
)
from ..core.urls import entry_link
from .parsed import FeedInfo, Parsed
from .sanitize import absolute_url, language_tag
from .source_view import SourceView

VERSION_PREFIX = "https://jsonfeed.org/version/"
# A bare version number in place of the spec's URL: written by some generators, read as JSON Feed.
BARE_VERSIONS = {"1": VERSION_PREFIX + "1", "1.0": VERSION_PREFIX + "1", "1.1": VERSION_PREFIX + "1.1"}


def version_of(document: Any) -> str | None:
    """The JSON Feed version URL of a decoded document, or None when it is not a JSON Feed."""
    if isinstance(document, Mapping):
        version = document.get("version")
        if isinstance(version, str) and version.startswith(VERSION_PREFIX):
            return version
        bare = str(version).strip() if isinstance(version, (str, int, float)) else ""
        if bare in BARE_VERSIONS:  # "1.1", and the number 1.1 too
            return BARE_VERSIONS[bare]
    return None


def kind_of(version: str) -> str:
    """'jsonfeed10' / 'jsonfeed11', in the style of feedparser's 'rss20' / 'atom10'."""
    number = version[len(VERSION_PREFIX):].strip("/") or "1"
    if "." not in number:
        number += ".0"
    return "jsonfeed" + number.replace(".", "")


def parse(body: bytes, *, url: str, headers: Mapping[str, str], source: SourceView, fetched: str) -> Parsed:
    """Parse a JSON Feed body; raise ParseError when it is not JSON or not a JSON Feed."""
    document = load_json(body)
    version = version_of(document)
    if version is None:
        raise ParseError("JSON without a JSON Feed version (https://jsonfeed.org/version/1.1); "
                         "for another JSON answer set the source's protocol to 'json_api'")
    parsed = parse_document(document, source=source, fetched=fetched, url=url)
    if version != document["version"]:  # a note: parser.log says it once per source and run
        parsed = replace(parsed, notes=[*parsed.notes, f"JSON Feed version {json.dumps(document['version'])} is "
                                        f"not the spec's URL ({version}); read as JSON Feed"])
    return parsed


def parse_document(document: Mapping[str, Any], *, source: SourceView, fetched: str, url: str = "") -> Parsed:
    items = document.get("items")
    if not isinstance(items, list):
        raise ParseError("JSON Feed without an items list")
    feed_author = _authors(document)
    # What the items' relative addresses are relative to: the feed's home page, else its own address
    # (feed_url, else where it was fetched from), each resolved against the next.
    base = _resolved(_text(document.get("feed_url")), url) or url
    base = _resolved(_text(document.get("home_page_url")), base) or base
    info = FeedInfo(title=title_text(_text(document.get("title"))),
                    link=absolute_url(_text(document.get("home_page_url")), base),
                    description=html_to_text(_text(document.get("description"))),
                    language=language_tag(_text(document.get("language"))))
    records: list[Record] = []
    skipped = 0
    for item in items:
        if isinstance(item, Mapping):
            records.append(_record(item, feed_author, source.name, fetched, base, info.language))
        else:
            skipped += 1
    warnings = [f"JSON Feed: skipped {skipped} items that are not objects"] if skipped else []
    return Parsed(records=records, warnings=warnings, kind=kind_of(version_of(document) or VERSION_PREFIX),
                  home=_text(document.get("home_page_url")), feed=info)


def _resolved(value: str, base: str) -> str:
    return absolute_url(value, base if base.startswith(("http://", "https://")) else "")


def load_json(body: bytes) -> Any:
    """Decode a JSON body (UTF-8, with or without a BOM, or UTF-16/32 as RFC 8259 allows)."""
    if not body.strip():
        raise ParseError("empty body")
    try:
        return json.loads(body)  # bytes: json detects the UTF encoding itself
    except (ValueError, UnicodeDecodeError) as exc:
        raise ParseError(f"not valid JSON: {str(exc)[:150]}") from None


def _record(item: Mapping[str, Any], feed_author: str, source_name: str, fetched: str, base: str = "",
            feed_language: str = "") -> AdapterRecord:
    link = _text(item.get("url")) or _text(item.get("external_url"))
    guid = _text(item.get("id"))  # 1.0 feeds sometimes give a number; the spec says a string
    if not link and guid.startswith(("http://", "https://")):
        link = guid
    link = entry_link(link)  # parser/pipeline/identity.py decides what of it identifies; javascript: is none
    summary = _text(item.get("summary"))
    content = _text(item.get("content_html"))
    if not content and _text(item.get("content_text")):
        content = _paragraphs(_text(item.get("content_text")))
    if not content and looks_like_html(summary):  # plain text by the spec; HTML written there all the same
        content = summary
    updated = utc_iso(_text(item.get("date_modified")))
    published = utc_iso(_text(item.get("date_published"))) or updated
    tags = item.get("tags")
    return {
        "source": source_name,
        "guid": guid or link,
        "link": link,
        "title": title_text(_text(item.get("title"))),  # plain text by the spec; HTML only if it looks so
        "author": _authors(item) or feed_author,
        "published": published,
        "updated": updated,
        "summary": summary_text(summary),
        "content": content,
        "categories": [_text(t) for t in tags] if isinstance(tags, list) else [],
        "enclosures": _attachments(item.get("attachments")),
        "image": _text(item.get("image")) or _text(item.get("banner_image")),
        "comments": "",  # JSON Feed has no comments address
        "language": language_tag(_text(item.get("language")) or feed_language),
        "fetched": fetched,
        # The item's own page, else the feed's: what its content's relative links (and its attachments')
        # are relative to (finish_record resolves them).
        "base": _resolved(link, base) or base,
    }


def _attachments(value: Any) -> list[Enclosure]:
    """JSON Feed attachments (url, mime_type, size_in_bytes) as enclosures; finish_record checks them."""
    if not isinstance(value, list):
        return []
    return [{"url": _text(a.get("url")), "type": _text(a.get("mime_type")), "length": a.get("size_in_bytes")}
            for a in value if isinstance(a, Mapping)]


def _authors(obj: Mapping[str, Any]) -> str:
    """1.1 has `authors` (a list), 1.0 has `author` (one object): names joined with commas."""
    people = obj.get("authors")
    if not isinstance(people, list):
        people = [obj.get("author")]
    names = [html_to_text(p.get("name")) for p in people if isinstance(p, Mapping)]
    return ", ".join(n for n in names if n)


def _paragraphs(text: str) -> str:
    """content_text is plain text: escape it and keep its blank-line paragraphs."""
    blocks = [b.strip() for b in text.replace("\r\n", "\n").split("\n\n")]
    return "".join(f"<p>{html.escape(b).replace(chr(10), '<br>')}</p>" for b in blocks if b)


def _text(value: Any) -> str:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return clean_text(value).strip()
    return ""
