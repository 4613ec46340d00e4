"""Protocol adapters: each turns one kind of body into records of the one shape (record.RECORD_FIELDS).

An adapter is a function `parse(body, *, url, headers, source, fetched) -> Parsed`. Nothing
downstream of it knows which protocol a record came from.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Parsed:
    records: list[dict]
    # Problems that did not stop the parse (a truncated feed kept what parsed): one line each.
    warnings: list[str] = field(default_factory=list)
    kind: str = ""  # what was found, for the log: "rss20", "atom10", ...


def parse_body(source, body: bytes, *, url: str, headers, fetched: str) -> Parsed:
    """Pick the adapter for `source` and parse one fetched body into records."""
    from . import feed  # imported here: adapters import Parsed from this module
    return feed.parse(body, url=url, headers=headers, source=source, fetched=fetched)
