"""The one record shape every protocol adapter produces, and the small helpers that fill it."""
from __future__ import annotations

import calendar
import hashlib
import re
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import lxml.html
from dateutil import parser as dateparser

# The columns of the `items` table, in order; `hash` is added by the uniqueness check.
RECORD_FIELDS = ("source", "guid", "link", "title", "author", "published", "summary", "content", "fetched")

_SPACES = re.compile(r"\s+")
# Characters XML and most databases cannot hold; feeds carry them more often than one would hope.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def record_hash(row: Mapping[str, Any], fields: Iterable[str], algorithm: str) -> str:
    """Hex digest over the chosen fields; the unit separator keeps ("ab","c") apart from ("a","bc")."""
    joined = "\x1f".join(str(row.get(f) or "") for f in fields)
    return hashlib.new(algorithm, joined.encode("utf-8", "surrogatepass")).hexdigest()


_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0b, 0x0c, *range(0x0e, 0x20), 0x7f])


def clean_text(value: Any) -> str:
    """A string with control characters removed (they break CSV readers and PostgreSQL)."""
    if value is None:
        return ""
    text = str(value)
    if len(text) > 1024:
        # Long text (a post's content): three passes in C beat the pattern's per-character loop
        # three times over. UTF-8 never holds these bytes inside a multi-byte character.
        raw = text.encode("utf-8", "surrogatepass")
        kept = raw.translate(None, _CONTROL_BYTES)
        if len(kept) != len(raw):
            text = kept.decode("utf-8", "surrogatepass")
        return text.replace("\ud800", "")
    return _CONTROL.sub("", text).replace("\ud800", "")


def html_to_text(value: Any) -> str:
    """Plain text from a fragment that may hold HTML or entities, with whitespace collapsed."""
    text = clean_text(value)
    if "<" in text or "&" in text:
        try:
            text = lxml.html.fragment_fromstring(text, create_parent="div").text_content()
        except Exception:  # lxml refuses some fragments; fall back to dropping tags by pattern
            text = re.sub(r"<[^>]*>", " ", text)
    return _SPACES.sub(" ", clean_text(text)).strip()


def utc_iso(value: Any) -> str:
    """UTC ISO 8601 ('2024-05-20T08:30:00Z') from a struct_time, datetime, epoch number or date text.

    Naive times are taken as UTC; anything unreadable gives ''.
    """
    if value is None or value == "":
        return ""
    try:
        if isinstance(value, time.struct_time):
            dt = datetime.fromtimestamp(calendar.timegm(value), UTC)
        elif isinstance(value, datetime):
            dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = value / 1000 if abs(value) > 1e11 else value  # milliseconds since the epoch
            dt = datetime.fromtimestamp(seconds, UTC)
        else:
            dt = dateparser.parse(str(value))
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=UTC)
        return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError, TypeError, ArithmeticError):
        return ""


def now_iso(clock=time.time) -> str:
    return utc_iso(float(clock()))
