"""The last step of every adapter: stored `content` is HTML cut down to a safe whitelist, `title`
at most TITLE_MAX characters of plain text, every field a string.

feedparser already sanitizes RSS and Atom; JSON Feed, JSON APIs, webhooks and extracted full text
arrive as whatever the sender wrote, so the rule is applied here to every record alike. nh3 (the
Ammonia sanitizer, in Rust) parses HTML the way browsers do, which a pattern never will.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, cast

import nh3

from ..core.record import LIST_FIELDS, RECORD_FIELDS, Record, clean_text, plain_text, safe_text

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


def safe_html(value: Any, base: str = "") -> str:
    """HTML reduced to SAFE_TAGS/SAFE_ATTRIBUTES; script and style elements go with their content.
    With `base`, relative links and image sources are resolved against it (in the same pass)."""
    if value is None or value == "":
        return ""
    cleaner = _cleaner(base if base.startswith(("http://", "https://")) else "")
    text = value if isinstance(value, str) else str(value)
    try:
        cleaned = cleaner.clean(text)
    except UnicodeEncodeError:  # a lone surrogate (JSON's "\udc80"): nh3 takes UTF-8 only
        cleaned = cleaner.clean(safe_text(text))
    # Control characters are taken out of what nh3 gives back, not of what it is given: it turns a
    # reference such as &#1; into the character itself. One pass, over the shorter text.
    return clean_text(cleaned).strip()


@lru_cache(maxsize=256)  # one per feed address in use: a Cleaner is built once, not per entry
def _cleaner(base: str) -> nh3.Cleaner:
    return nh3.Cleaner(tags=set(SAFE_TAGS), attributes={k: set(v) for k, v in SAFE_ATTRIBUTES.items()},
                       url_schemes=set(SAFE_SCHEMES), link_rel=None, strip_comments=True,
                       url_relative=("rewrite_with_base", base) if base else None)


def finish_record(record: Mapping[str, Any]) -> Record:
    """The record as it is stored: every field present (text, or a list for LIST_FIELDS), title capped,
    content sanitized. A record's optional `base` (not stored) is the address its content's relative
    links are relative to."""
    out: dict[str, Any] = {}
    for name in RECORD_FIELDS:
        value = record.get(name)
        if name == "content":
            out[name] = safe_html(value, str(record.get("base") or ""))
        elif name in LIST_FIELDS:
            out[name] = _clean_list(value)
        else:
            out[name] = clean_text(value)
    # The adapter has read the title as text already (record.title_text: HTML decoded once, by its
    # declared or guessed type); reading it as HTML again here would drop a `<template>` it decoded.
    out["title"] = plain_text(out["title"])[:TITLE_MAX]
    return cast(Record, out)


def _clean_list(value: Any) -> list:
    """A list field with its text made safe: strings cleaned and blanks dropped, dicts' strings cleaned."""
    if not value:
        return []
    items = value if isinstance(value, list) else [value]
    cleaned: list = []
    for item in items:
        if isinstance(item, dict):
            cleaned.append({k: clean_text(v).strip() if isinstance(v, str) else v for k, v in item.items()})
        elif (text := plain_text(item)):
            cleaned.append(text)
    return cleaned
