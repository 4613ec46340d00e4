"""The one record shape every protocol adapter produces, and the small helpers that fill it."""
from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, TypeVar, cast

import lxml.html

from .dates import utc_iso  # noqa: F401 (the adapters' date helper, kept importable from here)

# A record of any shape: safe_record hands back the shape it was given.
AnyMapping = TypeVar("AnyMapping", bound=Mapping[str, Any])


class Enclosure(TypedDict):
    """A file the entry carries (a podcast's mp3): RSS <enclosure>, Atom rel="enclosure", media:content,
    JSON Feed attachments. `length` in bytes when the source gives a number, else None."""
    url: str
    type: str
    length: int | None


class Record(TypedDict):
    """One entry of a feed, an API or a push, as every adapter returns it. Text fields are "" when absent
    (the flush stores NULL for ""), lists [] when absent. Dates are UTC ISO 8601 ('2024-05-20T08:30:00Z'):
    `published` and `updated` the entry's, `fetched` the poll's. `content` is the entry's HTML body
    (sanitized, links absolute), `summary` plain text. The order is the staging CSV's and the table's;
    `fetched` stays last (staging.repair_torn_tail relies on a last cell never empty)."""
    source: str
    guid: str
    link: str
    title: str
    author: str
    published: str
    updated: str
    summary: str
    content: str
    categories: list[str]
    enclosures: list[Enclosure]
    image: str
    comments: str
    language: str
    fetched: str


# Fields that hold lists: staged as JSON text, stored as jsonb (PostgreSQL) or JSON text (SQLite).
LIST_FIELDS: frozenset[str] = frozenset({"categories", "enclosures"})
# What an update of an entry compares (parser/pipeline/sink.py): an edit of any of these at the source
# updates the stored row and sets its `changed`.
EDITABLE_FIELDS: tuple[str, ...] = ("title", "content", "summary", "updated")


class AdapterRecord(Record, total=False):
    """A Record before sanitize.finish_record: `base`, when an adapter knows it, is the address the
    content's relative links are relative to (not stored)."""
    base: str


class HashedRecord(Record):
    """A Record as the sink stages it (parser/pipeline/sink.py): with its key in `hash`."""
    hash: str


# A two-pass job's object (parser/jobs/pass2.py): "url", "fetched" and the job's own fields, all text.
ObjectRecord = dict[str, str]
# What the pipeline takes (identity, uniqueness, staging): a Record, or a job's object.
AnyRecord = Record | ObjectRecord
# What the sink stages and --dry-run prints: either of those with its key in "hash".
StagedRecord = HashedRecord | ObjectRecord

# The columns of the `items` table, in order (Record's keys); `hash` is added by the uniqueness check.
RECORD_FIELDS: tuple[str, ...] = tuple(Record.__annotations__)
# The record's shape, numbered: 1 is 0.5.x's ten columns, 2 added updated, categories, enclosures, image,
# comments and language (0.6.0). A release that makes a poll fill a column it did not fill before adds one:
# validators saved under an older layout are not sent (parser/sources/state.py), since a 304 to them would
# leave the new columns empty on every entry already stored.
RECORD_LAYOUT = 2

# Characters XML and most databases cannot hold; feeds carry them more often than one would hope.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")  # _CONTROL or a lone surrogate
_HTMLISH = re.compile(r"</[A-Za-z][\w-]*\s*>|&(?:#\d+|#x[0-9A-Fa-f]+|[A-Za-z][A-Za-z0-9]*);")
# An element that never closes, so that the guess above misses it: a description that is text and a
# tracking pixel (`... <img src="http://feeds.feedburner.com/~r/..." />`) or lines broken by <br>.
_VOID_TAG = re.compile(r"<(?:img|br|hr)(?:\s[^<>]*)?/?>", re.IGNORECASE)
# In a Python str a surrogate code point is always a lone one (a pair is one character): JSON escapes
# like "\udc80" and surrogateescape'd bytes make them. No UTF-8 file and no database can hold one.
_SURROGATES = re.compile("[\ud800-\udfff]")


def record_hash(row: Mapping[str, Any], fields: Iterable[str], algorithm: str) -> str:
    """Hex digest over the chosen fields; the unit separator keeps ("ab","c") apart from ("a","bc")."""
    joined = "\x1f".join(str(row.get(f) or "") for f in fields)
    return hashlib.new(algorithm, joined.encode("utf-8", "surrogatepass")).hexdigest()


CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0b, 0x0c, *range(0x0e, 0x20), 0x7f])


def clean_text(value: Any) -> str:
    """A string with control characters removed (they break CSV readers and PostgreSQL)."""
    if value is None:
        return ""
    text = str(value)
    if len(text) > 1024:
        # Long text (a post's content): passes in C beat the pattern's per-character loop three
        # times over. UTF-8 never holds these bytes inside a multi-byte character.
        try:
            raw = text.encode("utf-8")  # fails on a lone surrogate (see safe_text)
        except UnicodeEncodeError:
            text = safe_text(text)
            raw = text.encode("utf-8")
        kept = raw.translate(None, CONTROL_BYTES)
        return text if len(kept) == len(raw) else kept.decode("utf-8")
    if _UNSAFE.search(text) is None:  # nearly every short text: one scan, nothing to build
        return text
    return safe_text(_CONTROL.sub("", text))


def safe_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so UTF-8 files and databases take it."""
    try:
        text.encode("utf-8")  # the common case, at C speed
        return text
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text)


def safe_record(record: AnyMapping) -> AnyMapping:
    """The record with every text value made safe (lone surrogates -> U+FFFD, NUL dropped): the one
    rule every record passes before it is hashed and staged, whatever produced it. A new dict of the
    same keys, each text still a text: of the type it was given (a Record, a job's object)."""
    texts = "".join(v for v in record.values() if isinstance(v, str))
    if "\x00" not in texts and safe_text(texts) is texts:  # nearly every record: checked at C speed
        return cast(AnyMapping, dict(record))
    return cast(AnyMapping, {k: _without_nul(safe_text(v)) if isinstance(v, str) else v for k, v in record.items()})


def _without_nul(text: str) -> str:
    return text.replace("\x00", "") if "\x00" in text else text


def plain_text(value: Any) -> str:
    """Text that is already plain (its one decoding done): control characters out, whitespace collapsed."""
    # str.split() splits where the pattern \s+ matches (both ask str.isspace): the same text as
    # re.sub(r"\s+", " ", ...).strip(), without a pattern's step per character.
    return " ".join(clean_text(value).split())


def looks_like_html(text: str) -> bool:
    """The guess for a description, summary or body whose type nobody declared (RSS, JSON): a closing
    tag, an entity reference or a void element (`<img ...>`, `<br>`, `<hr>`) makes it HTML. feedparser
    takes every RSS description for HTML; a guess keeps `a < b` the characters it is."""
    return bool(_HTMLISH.search(text)) or ("<" in text and _VOID_TAG.search(text) is not None)


def title_looks_like_html(text: str) -> bool:
    """feedparser's guess for a title whose type nobody declared: a closing tag or an entity reference
    makes it HTML; a lone `<br>` or `a < b` in a title is taken as the characters."""
    return bool(_HTMLISH.search(text))


def title_text(value: Any, kind: str = "guess") -> str:
    """A title decoded exactly once: kind "html" is HTML to read as text, "text" is plain already,
    "guess" (no type given) is HTML only when it looks like HTML (title_looks_like_html)."""
    text = clean_text(value)
    if kind == "html" or (kind == "guess" and title_looks_like_html(text)):
        return html_to_text(text)
    return plain_text(text)


def summary_text(value: Any, kind: str = "guess") -> str:
    """A summary as text, decoded exactly once as title_text does; an untyped one is HTML when it looks
    like a description's HTML (looks_like_html: a lone <img> or <br> counts)."""
    text = clean_text(value)
    if kind == "html" or (kind == "guess" and looks_like_html(text)):
        return html_to_text(text)
    return plain_text(text)


def html_to_text(value: Any) -> str:
    """Plain text from a fragment that may hold HTML or entities, with whitespace collapsed."""
    text = clean_text(value)
    if "<" in text or "&" in text:
        try:
            text = lxml.html.fragment_fromstring(text, create_parent="div").text_content()
        except Exception:  # lxml refuses some fragments; fall back to dropping tags by pattern
            text = re.sub(r"<[^>]*>", " ", text)
    return plain_text(text)


def now_iso(clock: Callable[[], float] = time.time) -> str:
    return utc_iso(float(clock()))


def content_digest(*texts: str) -> str:
    """16 hex characters over what an edit changes (EDITABLE_FIELDS, or an entry's raw text): kept per
    entry beside its key, so a poll re-reads and re-stages only what changed (parser/pipeline/last_polls.py)."""
    joined = "\x1f".join(texts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(joined, digest_size=8).hexdigest()


def record_digest(record: Mapping[str, Any]) -> str:
    """content_digest of a record's EDITABLE_FIELDS."""
    return content_digest(*(str(record.get(name) or "") for name in EDITABLE_FIELDS))
