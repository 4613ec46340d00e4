"""The typed seams of issue 19: what the stages below the settings read of a source (SourceView),
the record shape every adapter returns (record.Record), and the one table of adapters by body kind."""
from __future__ import annotations

import json

import pytest

from parser.adapters import ADAPTERS, parse_body
from parser.adapters.source_view import JsonApi, SourceView
from parser.core.record import RECORD_FIELDS, Record
from parser.settings.params import Source
from parser.sources.protocols import PROTOCOLS

RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
<item><title>One</title><link>https://example.org/1</link><guid>1</guid></item></channel></rss>"""
JSON_FEED = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                        "items": [{"id": "1", "url": "https://example.org/1", "title": "One"}]}).encode()
API = json.dumps({"data": [{"id": 1, "url": "https://example.org/1", "title": "One"}]}).encode()


def view_members() -> set[str]:
    return {name for name, value in vars(SourceView).items() if isinstance(value, property)}


def test_the_settings_source_is_a_source_view():
    """Every member of the view is a Source's (a member added to one and not the other fails here),
    and a Source's body kind is its protocol row's."""
    assert {"name", "url", "body_kind", "max_items", "api", "auth", "rate", "full_text"} <= view_members()
    for name, row in PROTOCOLS.items():
        source = Source(name="s", url="https://example.org/", protocol=name)
        assert all(hasattr(source, member) for member in view_members())
        assert source.body_kind == row.body


def test_every_body_kind_has_its_adapters_and_the_last_reads_any_body():
    assert {row.body for row in PROTOCOLS.values()} == set(ADAPTERS)
    for adapters in ADAPTERS.values():
        assert adapters[-1].reads(b"", {}), "the last adapter of a kind is asked of every body"


@pytest.mark.parametrize("protocol, body, kind", [
    ("feed", RSS, "rss20"), ("feed", JSON_FEED, "jsonfeed11"), ("json_api", API, "json")])
def test_every_adapter_returns_records_of_the_one_shape(protocol, body, kind):
    api = JsonApi(items="data") if protocol == "json_api" else None
    source = Source(name="s", url="https://example.org/feed", protocol=protocol, api=api)
    parsed = parse_body(source, body, url=source.url, headers={}, fetched="2026-12-01T00:00:00Z")
    assert parsed.kind == kind
    assert [tuple(r) for r in parsed.records] == [RECORD_FIELDS]
    assert RECORD_FIELDS == tuple(Record.__annotations__)
    assert parsed.records[0]["link"] == "https://example.org/1" and parsed.records[0]["source"] == "s"
