"""parser/pipeline/identity.py on its own: keys by link are the hashes UNIQUE_FIELDS = ["link"] always wrote
(upgrade), and its shortcut to the canonical link agrees with urls.canonical_url on any URL."""
from __future__ import annotations

from hypothesis import given

from parser.core.record import record_hash
from parser.core.urls import canonical_url
from parser.pipeline.identity import Identity
from tests.test_properties import FAST, urls


def record(source: str, link: str, guid: str = "", **more) -> dict:
    """A record as the adapters give it: the link exact (canonically spelled), the guid defaulting to it."""
    exact = canonical_url(link, exact=True)
    return {"source": source, "guid": guid or exact, "link": exact, "title": "", "published": "",
            "summary": "", **more}


@FAST
@given(urls)
def test_the_canonical_link_of_an_exact_link_is_the_canonical_link_of_the_original(url):
    identity = Identity("auto", "sha224")
    assert identity._plain(canonical_url(url, exact=True)) == canonical_url(url)


@FAST
@given(urls)
def test_an_entry_whose_link_names_it_alone_has_the_key_unique_fields_link_gave(url):
    identity = Identity("auto", "sha224")
    old = record_hash({"link": canonical_url(url)}, ["link"], "sha224")  # as 9f8182b staged it
    identified = identity.identify([record("s", url, guid="some-guid")], feed_links=["http://feed.example/"])
    if canonical_url(url) and canonical_url(url) != "http://feed.example/":
        assert identified.keys == [old]
        assert identified.records[0]["link"] == canonical_url(url)
    else:
        assert identified.keys != [old]


def test_within_source_keys_never_meet_another_sources():
    identity = Identity(["link"], "sha224")
    a = identity.identify([record("a", "", guid="1"), record("a", "", summary="x")]).keys
    b = identity.identify([record("b", "", guid="1"), record("b", "", summary="x")]).keys
    assert len(set(a + b)) == 4
