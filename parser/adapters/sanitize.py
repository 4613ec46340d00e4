"""The last step of every adapter: stored `content` is HTML cut down to a safe whitelist, `title`
at most TITLE_MAX characters of plain text, every field a string.

feedparser already sanitizes RSS and Atom; JSON Feed, JSON APIs, webhooks and extracted full text
arrive as whatever the sender wrote, so the rule is applied here to every record alike. nh3 (the
Ammonia sanitizer, in Rust) parses HTML the way browsers do, which a pattern never will.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, cast
from urllib.parse import urljoin

import nh3

from ..core.record import LIST_FIELDS, RECORD_FIELDS, Record, clean_text, plain_text, safe_text
from ..core.urls import foreign_scheme
from .nesting import MAX_DEPTH, flattened, nesting_depth

TITLE_MAX = 500

# Text structure, links and images; no scripts, styles, forms, frames or event handlers.
SAFE_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "dd", "del", "div", "dl", "dt",
    "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd",
    "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "sup",
    "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "u", "ul",
})
SAFE_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "time": {"datetime"},
    "blockquote": {"cite"},
    "q": {"cite"},
    "ol": {"start"},
}
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
CHEAP_TAGS = 2048  # tags nh3 parses fast however they nest (2,048 unclosed <div>: 13 ms; bounded_nesting)


def safe_html(value: Any, base: str = "") -> str:
    """HTML reduced to SAFE_TAGS/SAFE_ATTRIBUTES; script and style elements go with their content.
    With `base`, relative links and image sources are resolved against it (in the same pass)."""
    if value is None or value == "":
        return ""
    text = value if isinstance(value, str) else str(value)
    if "<" not in text and "&" not in text and not text.startswith("\ufeff"):
        return _text_as_html(text)
    cleaner = _cleaner(base if base.startswith(("http://", "https://")) else "")
    text = bounded_nesting(text)
    try:
        cleaned = cleaner.clean(text)
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\udc80"): nh3 takes UTF-8 only
        cleaned = cleaner.clean(safe_text(text))
    # Control characters are taken out of what nh3 gives back, not of what it is given: it turns a
    # reference such as &#1; into the character itself. One pass, over the shorter text.
    return clean_text(cleaned).strip()


def _text_as_html(text: str) -> str:
    """What safe_html's nh3 makes of a value with no "<" and no "&" (no tag, no reference): the text as
    html5ever reads and serializes it (line ends as LF, ">" and U+00A0 escaped), without parsing it. A
    leading byte order mark, which html5ever drops, is left to nh3 (tests/test_sanitize_text.py holds
    the two to the same output)."""
    text = safe_text(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return clean_text(text).replace(">", "&gt;").replace("\xa0", "&nbsp;").strip()


def bounded_nesting(html: str) -> str:
    """`html`, or its text alone when it nests deeper than nesting.MAX_DEPTH: nh3's parse costs the square
    of the nesting (150,000 unclosed <div>, 750 KB: 39 s), and no person's page nests that deep. Up to
    CHEAP_TAGS start tags nothing is looked at: even nested all the way down, nh3 takes 13 ms for them, and
    the estimate's scan of every long post was half of a first poll's parse over the corpus. Start tags, not
    every "<": only a start tag opens an element, and a post's end tags are about half its tags (51 of the
    corpus's bodies went to the estimate, 13 now)."""
    # Every "<" first, in one pass: most values hold fewer than CHEAP_TAGS of them, and then the end
    # tags need no second pass (the two counts were 3 % of the corpus's parse).
    if len(html) <= CHEAP_TAGS:  # fewer characters than CHEAP_TAGS: fewer tags
        return html
    tags = html.count("<")
    if tags > CHEAP_TAGS and tags - html.count("</") > CHEAP_TAGS and nesting_depth(html) > MAX_DEPTH:
        return flattened(html)
    return html


@lru_cache(maxsize=256)  # one per feed address in use: a Cleaner is built once, not per entry
def _cleaner(base: str) -> nh3.Cleaner:
    return nh3.Cleaner(tags=set(SAFE_TAGS), attributes={k: set(v) for k, v in SAFE_ATTRIBUTES.items()},
                       url_schemes=set(SAFE_SCHEMES), link_rel=None, strip_comments=True,
                       url_relative=("rewrite_with_base", base) if base else None)


def finish_record(record: Mapping[str, Any]) -> Record:
    """The record as it is stored: every field present (text, or a list for LIST_FIELDS), title capped,
    content sanitized, the address fields (URL_FIELDS, enclosures' urls) absolute http(s) or "", the
    link "" when it names another scheme (javascript:, data:). A record's optional `base` (not stored)
    is the address its relative links are relative to."""
    base = str(record.get("base") or "")
    out: dict[str, Any] = {}
    for name, rule in _FIELD_RULES:
        value = record.get(name)
        out[name] = clean_text(value) if rule is None else rule(value, base)
    # The adapter has read the title as text already (record.title_text: HTML decoded once, by its
    # declared or guessed type); reading it as HTML again here would drop a `<template>` it decoded.
    out["title"] = plain_text(out["title"])[:TITLE_MAX]
    return cast(Record, out)


def stored_link(value: Any) -> str:
    """An entry's link as stored: the adapters' own rule (urls.entry_link) held for every record, so
    that no protocol stores a javascript: or data: address as a link."""
    link = clean_text(value)
    return "" if foreign_scheme(link) else link


# Fields that hold one address: kept absolute (a relative one resolved against the record's base).
URL_FIELDS = frozenset({"image", "comments"})


def absolute_url(value: str, base: str = "") -> str:
    """`value` as an absolute http(s) address: resolved against `base` when relative; "" when it is
    none (a `data:` or `javascript:` address, a relative one with no base to resolve it against)."""
    value = value.strip() if value else ""
    if not value:
        return ""
    if not value[:8].lower().startswith(("http://", "https://")):
        if not base:
            return ""
        try:
            value = urljoin(base, value)
        except ValueError:  # "http://[::1" and its kind: no address
            return ""
        if not value[:8].lower().startswith(("http://", "https://")):
            return ""
    return value


def _url_field(value: Any, base: str) -> str:
    return absolute_url(clean_text(value), base)


def _list_field(value: Any, base: str) -> list:
    return _clean_list(value)


def _link_field(value: Any, base: str) -> str:
    return stored_link(value)


def _field_rule(name: str) -> Callable[[Any, str], Any] | None:
    """How finish_record stores field `name`, given its value and the record's base; None: as text."""
    if name == "content":
        return safe_html
    if name == "enclosures":
        return _clean_enclosures
    if name in LIST_FIELDS:
        return _list_field
    if name in URL_FIELDS:
        return _url_field
    if name == "link":
        return _link_field
    return None


def enclosure_length(value: Any) -> int | None:
    """An enclosure's size in bytes: a whole number as the source wrote it, else None (unknown)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    text = str(value or "").strip()
    return int(text) if text.isdigit() and len(text) < 19 else None


def language_tag(value: str) -> str:
    """A language as feeds write it ("en-us", "fr", "pt_BR"), with feedparser's one repair: "_" -> "-"."""
    return value.strip().replace("_", "-") if value else ""


def _clean_enclosures(value: Any, base: str) -> list:
    """Enclosures as {"url", "type", "length"}: url absolute (one without an address is dropped), type
    text, length an int or None; each url once, in the source's order."""
    if not value:
        return []
    cleaned: list = []
    seen: set[str] = set()
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str):
            item = {"url": item}
        if not isinstance(item, Mapping):
            continue
        url = absolute_url(clean_text(item.get("url")), base)
        if url and url not in seen:
            seen.add(url)
            cleaned.append({"url": url, "type": plain_text(item.get("type")),
                            "length": enclosure_length(item.get("length"))})
    return cleaned


def _clean_list(value: Any) -> list:
    """A list of text (categories): each plain text, blanks dropped, each once, in the source's order."""
    if not value:
        return []
    items = value if isinstance(value, list) else [value]
    cleaned = (plain_text(item) for item in items if isinstance(item, (str, int, float)) and not isinstance(item, bool))
    return list(dict.fromkeys(text for text in cleaned if text))


# Each stored field with its rule, in the stored order: decided once, not per record.
_FIELD_RULES = tuple((name, _field_rule(name)) for name in RECORD_FIELDS)
