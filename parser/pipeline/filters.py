"""A source's keep and block rules (Miniflux's): regular expressions on an entry's title, link, author,
summary or content, compiled once when the settings are read (parser/sources/source_options.py).

An entry is dropped when any `block` pattern matches one of its fields, or, when the source has `keep`
patterns, when none of them matches (block wins over keep). The feed pass applies the rules to each
poll's and each push's records after they are normalized (the fields as stored) and before the
uniqueness check (parser/feeds/feed_pass.py): a dropped entry is never staged nor hashed, so a rule
changed later lets it in. Patterns are Python `re`, searched anywhere in the field, case-insensitive
(`(?-i:...)` makes a part of one case-sensitive).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from ..core.problems import did_you_mean

FILTER_FIELDS = ("title", "link", "author", "summary", "content")

Rules = tuple[tuple[str, re.Pattern[str]], ...]  # (field, compiled pattern), in the order given


def compile_rules(raw: Any) -> Rules:
    """A `keep` or `block` value ({"title": "python|rust", "summary": "python"}) compiled; ValueError
    saying what is wrong with it, in a settings message's words."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"must be a dict of entry field -> regular expression, like {{'title': 'sponsored|advert'}}"
                         f" (fields: {', '.join(FILTER_FIELDS)}), got {type(raw).__name__} {raw!r}")
    rules = []
    for field, pattern in raw.items():
        if field not in FILTER_FIELDS:
            hint = did_you_mean(field, FILTER_FIELDS) or f"fields: {', '.join(FILTER_FIELDS)}"
            raise ValueError(f"{field!r} is not an entry field a rule can match ({hint})")
        if not isinstance(pattern, str):
            raise ValueError(f"{field}: the pattern must be a string (a regular expression), got {pattern!r}")
        if not pattern:
            raise ValueError(f"{field}: an empty pattern matches every entry; give a regular expression")
        try:
            rules.append((field, re.compile(pattern, re.IGNORECASE)))
        except (re.error, OverflowError, RecursionError) as exc:  # the last two: a pattern nested too deep
            raise ValueError(f"{field}: {pattern!r} is not a regular expression: {exc}") from None
    return tuple(rules)


def _matches(rules: Rules, record: Mapping[str, Any]) -> bool:
    return any(pattern.search(record.get(field) or "") for field, pattern in rules)


class Split(NamedTuple):
    records: list        # the kept records, in their order
    keys: list | None    # their keys, when the records came with keys (parser/pipeline/first_read.py)
    blocked: int         # the records dropped


@dataclass(frozen=True)
class EntryFilter:
    """One source's rules; the empty filter (NO_FILTER) keeps every entry."""
    keep: Rules = ()
    block: Rules = ()

    def __bool__(self) -> bool:
        return bool(self.keep or self.block)

    def blocked(self, record: Mapping[str, Any]) -> bool:
        """Whether the rules drop this record."""
        if _matches(self.block, record):
            return True
        return bool(self.keep) and not _matches(self.keep, record)

    def split(self, records: Sequence[Mapping[str, Any]], keys: Sequence[str] | None = None) -> Split:
        """The records the rules keep (with their keys, when given alongside), and how many were dropped."""
        if not self:
            return Split(list(records), None if keys is None else list(keys), 0)
        kept = [not self.blocked(record) for record in records]
        return Split([r for r, k in zip(records, kept, strict=True) if k],
                     None if keys is None else [key for key, k in zip(keys, kept, strict=True) if k],
                     kept.count(False))


NO_FILTER = EntryFilter()


def over_age(records: Sequence[Mapping[str, Any]], age: float | None, now: float,
             keys: Sequence[str] | None = None) -> tuple[list, list | None, int]:
    """The records (with their keys, when given alongside) whose `published` (else `fetched`) is within `age`
    seconds of `now`, and how many were older: those would be deleted by the next pass, so they are not
    staged at all (nor hashed). None: every record kept."""
    if age is None:
        return list(records), None if keys is None else list(keys), 0
    cutoff = datetime.fromtimestamp(now - age, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # as records hold times
    kept = [(r.get("published") or r.get("fetched") or cutoff) >= cutoff for r in records]
    return ([r for r, k in zip(records, kept, strict=True) if k],
            None if keys is None else [key for key, k in zip(keys, kept, strict=True) if k], kept.count(False))
