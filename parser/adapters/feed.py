"""RSS 0.9x/1.0/2.0 and Atom through feedparser, into records."""
from __future__ import annotations

import io
import re
import time
from collections.abc import Mapping
from typing import Any

import feedparser

from ..core.dates import looks_iso, read_date, utc_iso, writes_year
from ..core.errors import ParseError
from ..core.record import (
    AdapterRecord,
    Enclosure,
    Record,
    clean_text,
    looks_like_html,
    plain_text,
    safe_text,
    summary_text,
    title_text,
)
from ..core.urls import entry_link
from ..fetch.charset import to_utf8
from .parsed import FeedInfo, Parsed
from .sanitize import absolute_url, enclosure_length, language_tag
from .source_view import SourceView

# feedparser resolves an RSS <guid> (and an Atom <id>) against the feed's address when it may be a
# permalink, turning `t3_glvkc5` into `https://example.org/r/t3_glvkc5`: an id that changes with the
# feed's address and a link that does not exist. Ids are kept exactly as written; every other
# element (links, images) is still resolved.
feedparser.mixin._FeedParserMixin.can_be_relative_uri = (
    feedparser.mixin._FeedParserMixin.can_be_relative_uri - {"id"})

TITLE_MAX = 500
# The end of one entry, and the end of the whole document, in any namespace prefix.
_ENTRY_END = re.compile(rb"</(?:[\w.-]+:)?(?:item|entry)\s*>", re.IGNORECASE)
# A character reference can name a lone surrogate (&#xDC80;); feedparser's loose parser then raises
# while encoding it, and the whole feed would be lost for one character.
_CHAR_REF = re.compile(rb"&#(?:[xX]0*([0-9a-fA-F]{1,8})|0*([0-9]{1,10}));")
_ROOT_END = re.compile(rb"</(?:[\w.-]+:)?(?:rss|feed|rdf)\s*>\s*$", re.IGNORECASE)
# `<link uri="at://...">https://...</link>`: feedparser takes a `uri` attribute as the href and
# drops the text; a non-http uri is removed so the http text is the link.
_LINK_URI = re.compile(rb"""(<link\b[^>]*?)\s+uri\s*=\s*(?:"(?!https?:)[^"]*"|'(?!https?:)[^']*')([^>]*(?<!/)>)""",
                       re.IGNORECASE)
_MAIL_THEN_NAME = re.compile(r"^\S+@\S+\s*\((?P<name>[^()]+)\)$")
_NAME_THEN_MAIL = re.compile(r"^(?P<name>[^<>]+?)\s*<\S+@\S+>$")
NO_ZONE_NOTE = "dates without a time zone are taken as UTC"


def parse(body: bytes, *, url: str, headers: Mapping[str, str], source: SourceView, fetched: str) -> Parsed:
    """Parse a feed body; raise ParseError when it is not a feed at all."""
    if not body.strip():
        raise ParseError("empty body")
    response_headers = {k.lower(): v for k, v in headers.items()}
    response_headers.setdefault("content-location", url)  # base for relative links
    content_type = response_headers.get("content-type", "")
    # The encoding is decided once, here (see parser/fetch/charset.py); feedparser then reads plain UTF-8.
    decoded = to_utf8(body, content_type)
    feed_headers = dict(response_headers)
    if decoded.encoding:
        # A blank line before `<?xml` is a fatal error to an XML parser, and feedparser's loose
        # fallback then reports every poll as malformed; as UTF-8 the whitespace is safe to drop.
        body = decoded.body.lstrip(b" \t\r\n")
        body = body if body.startswith(b"<?xml") else decoded.body
        feed_headers["content-type"] = "application/xml; charset=utf-8"
    if b"uri" in body:
        body = _LINK_URI.sub(rb"\1\2", body)
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
        entries = keep_whole_entries(entries, body, problem, warnings)
    rss = not str(feed.get("version", "")).startswith("atom")
    notes: set[str] = set()
    info = _feed_info(feed.get("feed", {}))
    base = response_headers["content-location"]
    records: list[Record] = [_record(e, source.name, fetched, rss=rss, notes=notes, base=base,
                                     feed_language=info.language) for e in entries]
    return Parsed(records=records, warnings=warnings, kind=feed.get("version", "") or "feed", notes=sorted(notes),
                  home=_text(feed.get("feed", {}).get("link")), feed=info)


def keep_whole_entries(entries: list, body: bytes, problem: str, warnings: list[str]) -> list:
    """The entries of a malformed body that parsed whole, with a warning saying what was kept. Both
    parse paths (this one and xmlfeed) apply this one rule."""
    whole = _whole_entries(body, len(entries))
    if whole < len(entries):
        warnings.append(f"feed is cut short ({problem}); kept the {whole} entries that parsed whole, "
                        f"dropped {len(entries) - whole} incomplete")
        return entries[:whole]
    warnings.append(f"feed is malformed ({problem}); kept the {len(entries)} entries that parsed")
    return entries


def _whole_entries(body: bytes, parsed: int) -> int:
    """How many of the `parsed` entries are whole. A body cut short (its root element never closes)
    can end inside its last entry, whose fields are then partial: a link cut in half would be stored
    for good. Elsewhere the loose parser's entries are all taken as whole."""
    if _ROOT_END.search(body[-256:]):
        return parsed
    return min(parsed, len(_ENTRY_END.findall(body)))


def _record(entry: Mapping[str, Any], source_name: str, fetched: str, *, rss: bool = True,
            notes: set[str] | None = None, base: str = "", feed_language: str = "") -> AdapterRecord:
    """One entry as a record (RECORD_FIELDS); a date without a zone adds NO_ZONE_NOTE to `notes`.
    feedparser gives strings, lists of dicts and struct_times, but never trust the shape: whatever an
    entry holds, this returns text and never raises."""
    guid = clean_text(_text(entry.get("id"))).strip()  # as the feed wrote it (ids are not resolved: see top)
    link = _alternate_link(entry)
    if not link and rss and entry.get("guidislink") and _is_http(guid):
        link = guid  # an RSS <guid> is a permalink unless isPermaLink="false"; Atom ids never are
    link = entry_link(link)  # parser/pipeline/identity.py decides what of it identifies; javascript: is none
    published, zoned = _published(entry)
    if not zoned and notes is not None:
        notes.add(NO_ZONE_NOTE)
    links = _dicts(entry.get("links"))
    return {
        "source": source_name,
        "guid": guid or link,
        "link": link,
        "title": _detail_text(entry, "title")[:TITLE_MAX],
        "author": _authors(entry),
        "published": published,
        "updated": _updated(entry),
        "summary": _detail_text(entry, "summary"),
        "content": _content(entry, rss),
        "categories": [_text(t.get("term")) or _text(t.get("label")) for t in _dicts(entry.get("tags"))],
        "enclosures": _enclosures(links, _dicts(entry.get("media_content")), base),
        "image": _image(entry, base),
        "comments": absolute_url(_text(entry.get("comments")), base) or next(
            (absolute_url(_text(x.get("href")), base) for x in links
             if _text(x.get("rel")) == "replies" and "html" in _text(x.get("type"))), ""),
        "language": language_tag(_entry_language(entry) or feed_language),
        "fetched": fetched,
        "base": base,
    }


def _updated(entry: Mapping[str, Any]) -> str:
    """The entry's own <updated> (dc:date, dcterms:modified) as UTC ISO 8601. Read from the dict itself:
    feedparser's `entry.get("updated")` answers with `published` when there is no updated."""
    raw = _text(dict.get(entry, "updated") if isinstance(entry, dict) else None).strip()
    read = read_date(raw) if raw else None
    if read is not None and read.iso:
        return read.iso
    parsed = dict.get(entry, "updated_parsed") if isinstance(entry, dict) else None
    taken = raw and isinstance(parsed, time.struct_time) and not looks_iso(raw) and writes_year(raw, parsed.tm_year)
    return utc_iso(parsed) if taken else ""


def _enclosures(links: list[Mapping[str, Any]], media: list[Mapping[str, Any]], base: str) -> list[Enclosure]:
    """RSS <enclosure> and Atom rel="enclosure" links (feedparser's `enclosures`), then media:content."""
    found: list[Enclosure] = [
        {"url": absolute_url(_text(x.get("href")), base), "type": _text(x.get("type")).strip(),
         "length": enclosure_length(_text(x.get("length")))} for x in links if _text(x.get("rel")) == "enclosure"]
    found += [{"url": absolute_url(_text(m.get("url")), base), "type": _text(m.get("type")).strip(),
               "length": enclosure_length(_text(m.get("filesize")))} for m in media]
    return found


def _image(entry: Mapping[str, Any], base: str) -> str:
    """media:thumbnail's url, else itunes:image's href."""
    for thumbnail in _dicts(entry.get("media_thumbnail")):
        url = absolute_url(_text(thumbnail.get("url")), base)
        if url:
            return url
    image = dict.get(entry, "image") if isinstance(entry, dict) else None
    return absolute_url(_text(image.get("href")), base) if isinstance(image, Mapping) else ""


def _entry_language(entry: Mapping[str, Any]) -> str:
    """The xml:lang in effect at the entry (feedparser keeps it in each detail), else its dc:language."""
    for detail in (entry.get("title_detail"), entry.get("summary_detail"), *_dicts(entry.get("content"))):
        if isinstance(detail, Mapping) and _text(detail.get("language")).strip():
            return _text(detail.get("language")).strip()
    return _text(dict.get(entry, "language") if isinstance(entry, dict) else None).strip()


def _feed_info(channel: Mapping[str, Any]) -> FeedInfo:
    """The feed's own title, site, description (feedparser's subtitle) and language."""
    title = _detail_text(channel, "title")[:TITLE_MAX] if channel.get("title") else ""
    description = _detail_text(channel, "subtitle") if channel.get("subtitle") else ""
    return FeedInfo(title=title, link=_text(channel.get("link")), description=description,
                    language=language_tag(_text(channel.get("language"))))


def _published(entry: Mapping[str, Any]) -> tuple[str, bool]:
    """The entry's date (published, else updated, else created) as UTC ISO 8601, and False when the
    text had no zone (UTC was assumed).

    Our reader (parser/core/dates.py) goes first: it knows day and month names in other languages, refuses
    impossible days that feedparser rolls over (2022-02-30 as March 2), and tells a missing zone.
    feedparser's own parse is the fallback for the rarer formats it knows (Korean, Greek, Hungarian)."""
    for key in ("published", "updated", "created"):
        raw = _text(entry.get(key)).strip()
        if not raw:
            continue
        read = read_date(raw)
        if read.iso:
            return read.iso, read.zoned
        parsed = entry.get(f"{key}_parsed")
        if isinstance(parsed, time.struct_time) and not looks_iso(raw) and writes_year(raw, parsed.tm_year):
            return utc_iso(parsed), True
        # no date here (or an impossible one): the next key, as when it is missing
    return "", True


def _detail_text(entry: Mapping[str, Any], name: str) -> str:
    """A title or summary as text, decoded once by its type: feedparser says text/html for Atom
    type="html" and for RSS text that looks like HTML, text/plain for text whose entities it already
    decoded."""
    detail = entry.get(f"{name}_detail")
    kind = _text(detail.get("type")) if isinstance(detail, Mapping) else ""
    read = title_text if name == "title" else summary_text  # a summary or subtitle: a description
    return read(_text(entry.get(name)), "html" if "html" in kind else "text" if kind else "guess")


def _authors(entry: Mapping[str, Any]) -> str:
    """Every author's name (the e-mail only when no name is given), joined with ", "."""
    people = _dicts(entry.get("authors"))
    names = [_person(_text(p.get("name")), _text(p.get("email"))) for p in people]
    if not any(names):
        names = [_person(_text(entry.get("author")), "")]
    return ", ".join(dict.fromkeys(n for n in names if n))


def _person(name: str, email: str) -> str:
    """'jane@x.org (Jane Doe)' and 'Jane Doe <jane@x.org>' are Jane Doe; an address alone stays."""
    name = plain_text(name)
    match = _MAIL_THEN_NAME.match(name) or _NAME_THEN_MAIL.match(name)
    if match:
        name = match.group("name").strip()
    return name or plain_text(email)


def _is_http(url: str) -> bool:
    return url.lower().startswith(("http://", "https://"))


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
    """The entry's first http(s) rel="alternate" link; feedparser's `link` can be an enclosure that
    came later, or the guid copied (handled by the caller). Other schemes (at://, tag:) are no link."""
    for link in _dicts(entry.get("links")):
        href = _text(link.get("href")).strip()
        if _text(link.get("rel", "alternate")) == "alternate" and _is_http(href):
            return href
    return ""


def _content(entry: Mapping[str, Any], rss: bool = True) -> str:
    """The entry's full content as (feedparser-sanitized) HTML, preferring an HTML part; without one,
    a summary that is HTML (Atom type html/xhtml; RSS text that reads as HTML, feedparser's guess)."""
    parts = _dicts(entry.get("content"))
    for part in parts:
        if "html" in _text(part.get("type")):
            return clean_text(_text(part.get("value")))
    if parts:
        return clean_text(_text(parts[0].get("value")))
    detail = entry.get("summary_detail")
    kind = _text(detail.get("type")) if isinstance(detail, Mapping) else ""
    value = _text(entry.get("summary"))
    # RSS: markup written unescaped (feedparser says xhtml) is HTML; escaped text is HTML when it reads so,
    # guessed on the text as the feed gave it (feedparser's HTML writes a bare "&" as "&amp;").
    if "html" in kind and (not rss or "xhtml" in kind or looks_like_html(value.replace("&amp;", "&"))):
        return clean_text(value)
    return ""


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
