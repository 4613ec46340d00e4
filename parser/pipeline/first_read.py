"""Identity first: a poll's entries keyed before they are read whole, so that a steady poll
normalizes and sanitizes only its new entries (a changed feed of 50 entries has 1-3 new ones).

Runs where the body is parsed (a parse process, parser/core/cpu_pool.py, or a fetching thread): the
adapter scans the body as far as each kept entry's ids (source, guid, link, digest: parser/adapters/__init__.py
scans), the intake's first look (parser/pipeline/intake.py first_look) keys them by the same rules as
parser/pipeline/identity.py uses for whole records and judges REPEATED those the source's last poll already
had with the same digest, and only the others are read whole. They come back with their keys (Keyed), which
the intake then judges (intake.decide) without keying them again. Where a key depends on more than the ids
(an entry with neither guid nor link, keyed by its content; UNIQUE_FIELDS naming other fields), every entry
is read whole and keyed here as the intake would: the same keys, only the work is elsewhere.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..adapters import Parsed, finished, scans
from ..adapters.parsed import Scan
from ..adapters.source_view import SourceView
from ..core.cpu_slots import one_per_core
from ..core.record import Record, record_digest, safe_record
from .identity import Identity
from .intake import first_look

# A table's rule of identity: (UNIQUE_FIELDS, HASH, table).
KeyRule = tuple[str | Sequence[str], str, str]
# One per table rule in each process, shared by its threads: its canonical-link cache lives on.
_IDENTITIES: dict[tuple[str | tuple[str, ...], str, str], Identity] = {}


@dataclass(frozen=True)
class Keying:
    """Identity first for one poll: the sink's rule, the keys the source's last poll held with their digests,
    and the feed's own addresses as the sink names them."""
    rule: KeyRule  # (UNIQUE_FIELDS, HASH, table)
    last_poll: Mapping[str, str] | None  # short key -> digest of the last poll (parser/pipeline/last_polls.py)
    feed_urls: tuple[str, ...]


@dataclass(frozen=True)
class Keyed:
    """What the first look found of one body, beside its Parsed: each record's key (in the records' order),
    the keys of the entries judged REPEATED (never read), every entry's digest (key -> digest, read or not:
    parser/pipeline/last_polls.py) and identity's lines for the daemon's log ((said once per source?, line))."""
    keys: list[str]
    repeated: list[str]
    digests: dict[str, str]
    log_lines: list[tuple[bool, str]]


def identity_for(unique_fields: str | Sequence[str], algorithm: str, table: str = "items") -> Identity:
    rule = (unique_fields if isinstance(unique_fields, str) else tuple(unique_fields), algorithm, table)
    identity = _IDENTITIES.get(rule)
    if identity is None:
        identity = _IDENTITIES[rule] = Identity(unique_fields, algorithm, table=table)
    return identity


@one_per_core  # CPU work: more parsing threads than cores only make the main thread wait (cpu_slots.py)
def read_new(source: SourceView, body: bytes, *, url: str, headers: Mapping[str, str], fetched: str,
             limit: int, keying: Keying) -> tuple[Parsed, Keyed]:
    """One polled body parsed, its records keyed and those the first look judged REPEATED left unread.
    `keying.last_poll`: short key -> digest of the source's last poll (parser/pipeline/last_polls.py), None
    when nothing is known of it (every entry read); `keying.rule`: (UNIQUE_FIELDS, HASH, table) of the sink
    it goes to; `keying.feed_urls`: the feed's addresses that the sink takes as its own (with the home page
    the body gives). Raises ParseError as parse_body does."""
    identity = identity_for(*keying.rule)
    for scan in scans(source, body, url=url, headers=headers, fetched=fetched, limit=limit,
                      ids=identity.keyed_by_ids()):
        read = _read(scan, identity, keying.last_poll, keying.feed_urls)
        if read is not None:
            return read
    raise AssertionError("scans ends in a read")  # unreachable: scans raises when no adapter reads it


def _read(scan: Scan, identity: Identity, last_poll: Mapping[str, str] | None,
          feed_urls: tuple[str, ...]) -> tuple[Parsed, Keyed] | None:
    """One adapter's scan read as the first look wants; None when the adapter hands the body on."""
    look = first_look(identity, scan.ids, (scan.home, *feed_urls), last_poll)
    if look is not None:
        parsed = scan.read(look.wanted)
        if parsed is None:
            return None
        parsed = finished(parsed)
        chosen = [(key, stub) for key, stub, want in zip(look.keys, look.stored_ids, look.wanted, strict=True) if want]
        records: list[Record] = [{**record, "link": stub["link"], "guid": stub["guid"]}  # as identity stores them
                                 for record, (_, stub) in zip(parsed.records, chosen, strict=True)]
        repeated = [key for key, want in zip(look.keys, look.wanted, strict=True) if not want]
        keyed = Keyed([key for key, _ in chosen], repeated, look.digests, look.log_lines)
        return replace(parsed, records=records), keyed
    # keyed by more than the ids: every record is read, and keyed here from the whole record
    whole = scan.read()
    if whole is None:
        return None
    parsed = finished(whole)
    log_lines: list[tuple[bool, str]] = []
    identified = identity.identify([safe_record(r) for r in parsed.records], (parsed.home, *feed_urls), log_lines)
    return (replace(parsed, records=identified.records),
            Keyed(identified.keys, [], {key: record_digest(r) for key, r in zip(identified.keys, identified.records,
                                                                                strict=True)}, log_lines))
