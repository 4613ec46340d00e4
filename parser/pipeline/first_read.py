"""Identity first: a poll's entries keyed before they are read whole, so that a steady poll
normalizes and sanitizes only its new entries (a changed feed of 50 entries has 1-3 new ones).

Runs where the body is parsed (a parse process, parser/core/cpu_pool.py, or a fetching thread): the
adapter hands over each kept entry's ids (source, guid, link); the entries are keyed by the same
rules as parser/pipeline/identity.py uses for whole records; an entry whose key the source's last
poll already checked (`known`: a subset of what the uniqueness check holds) is left unread and counted
as a duplicate. The others are read whole and come back with their keys, which the sink then checks
(parser/pipeline/sink.py select_new) without keying them again. Where a key depends on more than the
ids (an entry with neither guid nor link, keyed by its content; UNIQUE_FIELDS naming other fields),
every entry is read whole and keyed here as the sink would: the same keys, only the work is elsewhere.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..adapters import Parsed, parse_body
from ..adapters.source_view import SourceView
from ..core.record import Record, clean_text, record_digest, safe_record
from .identity import Identity
from .known import short_key

# A table's rule of identity: (UNIQUE_FIELDS, HASH, table).
KeyRule = tuple[str | Sequence[str], str, str]
# One per table rule in each process, shared by its threads: its canonical-link cache lives on.
_IDENTITIES: dict[tuple[str | tuple[str, ...], str, str], Identity] = {}


def identity_for(unique_fields: str | Sequence[str], algorithm: str, table: str = "items") -> Identity:
    rule = (unique_fields if isinstance(unique_fields, str) else tuple(unique_fields), algorithm, table)
    identity = _IDENTITIES.get(rule)
    if identity is None:
        identity = _IDENTITIES[rule] = Identity(unique_fields, algorithm, table=table)
    return identity


def read_new(source: SourceView, body: bytes, *, url: str, headers: Mapping[str, str], fetched: str,
             limit: int, known: Mapping[str, str] | None, rule: KeyRule, feed_urls: tuple[str, ...]) -> Parsed:
    """parse_body of one polled body, its records keyed (Parsed.keys) and those whose key `known`
    holds with the same digest left unread (Parsed.known); every entry's digest in Parsed.digests.
    `known`: short key -> digest of the source's last poll (parser/pipeline/known.py), None when nothing is
    known of it (every entry read). `rule`: (UNIQUE_FIELDS, HASH, table) of the sink it goes to;
    `feed_urls`: the feed's addresses that the sink takes as its own (with the home page the body gives).
    Raises ParseError as parse_body does."""
    identity = identity_for(*rule)
    said: list[tuple[bool, str]] = []  # identity's lines, for the daemon's log
    # What select chose, for the records once read: "keys" and "known" (as Parsed holds them), and
    # each chosen entry's ids as identity stores them, and the digests of all.
    chosen: dict[str, list[str]] = {}
    chosen_ids: list[dict[str, str]] = []
    chosen_digests: dict[str, str] = {}

    def select(ids: list[dict[str, str]], home: str) -> list[bool]:
        said.clear()  # asked again when the fast path handed the body on after asking
        chosen.clear()
        chosen_ids.clear()
        chosen_digests.clear()
        # As the sink would see them: sanitize.finish_record's clean_text, then safe_record.
        digests = [one.get("digest", "") for one in ids]
        stubs = [safe_record({name: clean_text(value) for name, value in one.items() if name != "digest"})
                 for one in ids]
        identified = identity.identify(stubs, (home, *feed_urls), said) if identity.keyed_by_ids() else None
        if identified is None or identified.by_content:
            said.clear()  # keyed again below, from the whole records
            return [True] * len(ids)
        previous = known or {}
        wanted = [not digest or previous.get(short_key(key)) != digest
                  for key, digest in zip(identified.keys, digests, strict=True)]
        chosen_digests.update((key, digest) for key, digest in zip(identified.keys, digests, strict=True) if digest)
        chosen["keys"] = [key for key, want in zip(identified.keys, wanted, strict=True) if want]
        chosen["known"] = [key for key, want in zip(identified.keys, wanted, strict=True) if not want]
        chosen_ids.extend(stub for stub, want in zip(identified.records, wanted, strict=True) if want)
        return wanted

    parsed = parse_body(source, body, url=url, headers=headers, fetched=fetched, limit=limit, select=select)
    if "keys" in chosen:
        records: list[Record] = [{**record, "link": stub["link"], "guid": stub["guid"]}  # as identity stores them
                                 for record, stub in zip(parsed.records, chosen_ids, strict=True)]
        return replace(parsed, records=records, keys=chosen["keys"], known=chosen["known"],
                       digests=dict(chosen_digests), said=said)
    # keyed by more than the ids: every record was read, and is keyed here from the whole record
    identified = identity.identify([safe_record(r) for r in parsed.records], (parsed.home, *feed_urls), said)
    return replace(parsed, records=identified.records, keys=identified.keys, said=said,
                   digests={key: record_digest(r) for key, r in zip(identified.keys, identified.records, strict=True)})
