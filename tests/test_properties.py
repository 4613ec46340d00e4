"""Property tests (hypothesis) for the parts that take a stranger's data:
URL canonicalization, the staging CSV and flush round trip, and the record normalizer fed arbitrary
feedparser-like entries. Example counts stay modest so CI stays fast."""
from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from db.store import Database
from parser.adapters.feed import _record
from parser.adapters.sanitize import finish_record
from parser.core.record import LIST_FIELDS, RECORD_FIELDS
from parser.core.urls import canonical_url
from parser.pipeline.sink import Sink, SinkFiles, UniqueRule
from parser.pipeline.staging import StagingFile

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- URLs ------------------------------------------------------------------------------------------
url_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
hosts = st.one_of(
    st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?(\.[A-Za-z]{2,6}){1,2}", fullmatch=True),
    st.sampled_from(["127.0.0.1", "[::1]", "xn--nxasmq6b.com", "пример.рф", "EXAMPLE.com", "a..b", "-x-.com"]),
    url_text,
)
urls = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda scheme, userinfo, host, port, path, query, fragment:
            f"{scheme}://{userinfo}{host}{port}{path}{query}{fragment}",
        st.sampled_from(["http", "https", "HTTP", "HtTpS", "ftp", "file", "javascript", ""]),
        st.sampled_from(["", "user@", "user:pass@", "@", ":@"]),
        hosts,
        st.one_of(st.just(""), st.integers(0, 99999).map(lambda p: f":{p}"), st.just(":"), st.just(":x")),
        st.one_of(st.just(""), url_text.map(lambda t: "/" + t), st.just("/a/../b/./c//d;jsessionid=1")),
        st.one_of(st.just(""), st.lists(st.tuples(url_text, url_text), max_size=4).map(
            lambda pairs: "?" + "&".join(f"{k}={v}" for k, v in pairs)),
            st.sampled_from(["?utm_source=x&id=1", "?a=1&a=2&b", "?%zz=%", "?=&&=", "?q=%E2%82%AC&b=%20"])),
        st.one_of(st.just(""), url_text.map(lambda t: "#" + t)),
    ),
)


@FAST
@given(urls)
def test_canonical_url_never_raises_and_is_idempotent(url):
    once = canonical_url(url)
    assert isinstance(once, str)
    assert canonical_url(once) == once


@FAST
@given(urls)
def test_a_canonical_http_url_keeps_no_credentials_or_fragment(url):
    once = canonical_url(url)
    if once.startswith(("http://", "https://")) and once != url.strip():
        netloc = once.split("/", 3)[2]
        assert "@" not in netloc and "#" not in once


# -- the staging CSV and the flush -----------------------------------------------------------------
# Any text but NUL (SQLite and PostgreSQL text cannot hold it; parser.core.record.clean_text drops it and
# other control characters on purpose before a record gets here). Surrogates are not text.
cell = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=80)
records = st.lists(st.fixed_dictionaries({f: cell for f in RECORD_FIELDS}), min_size=1, max_size=6)


@SLOW
@given(records)
def test_any_text_survives_staging_and_flush_unchanged(batch):
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        sink = Sink(table="items", columns=RECORD_FIELDS, unique=UniqueRule(RECORD_FIELDS, "hashfile", "sha224"),
                    files=SinkFiles(folder))
        staged = sink.stage(batch)
        sink.save()
        # A restart reads the staging file back: nothing in it may look torn.
        assert StagingFile(folder / "staging.csv", sink.columns).repaired == 0
        db = Database(f"sqlite:///{folder / 'items.db'}")
        try:
            written = sink.flush(db).written
        finally:
            db.close()
            sink.close()
        assert written == len(staged.new)
        con = sqlite3.connect(folder / "items.db")
        con.row_factory = sqlite3.Row
        stored = [dict(r) for r in con.execute("SELECT * FROM items ORDER BY id")]
        con.close()
    expected = [{f: r[f] if r[f] != "" else None for f in RECORD_FIELDS} for r in staged.new]  # "" is NULL
    assert [{f: r[f] for f in RECORD_FIELDS} for r in stored] == expected
    distinct = {tuple(r[f] for f in RECORD_FIELDS) for r in batch}
    assert len(stored) == len(distinct)


# -- the record normalizer -------------------------------------------------------------------------
anything = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=40), st.binary(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6,
)
struct_times = st.one_of(
    st.datetimes().map(lambda d: d.timetuple()),
    st.tuples(*[st.integers(-10**6, 10**6)] * 9).map(time.struct_time),
    anything,
)
texts = st.one_of(st.text(max_size=200), st.sampled_from(["<b>bold</b> &amp; <script>x()</script>", "&#0;",
                                                          "<![CDATA[x]]>", "&#xD800;", "\ud800", "<a", "]]>"]),
                  anything)
links = st.lists(st.one_of(st.fixed_dictionaries({"rel": st.one_of(st.just("alternate"), texts), "href": texts}),
                           st.dictionaries(st.sampled_from(["rel", "href", "type"]), texts), anything), max_size=3)
contents = st.one_of(st.lists(st.one_of(st.fixed_dictionaries({"type": texts, "value": texts}), anything),
                              max_size=3), anything)
entries = st.fixed_dictionaries({}, optional={
    "link": texts, "id": texts, "title": texts, "author": texts, "summary": texts, "published": texts,
    "updated": texts, "published_parsed": struct_times, "updated_parsed": struct_times,
    "created_parsed": struct_times, "content": contents, "links": links,
})


@FAST
@given(entries, st.text(min_size=1, max_size=20))
def test_the_record_normalizer_takes_any_entry(entry, source):
    record = _record(entry, source, "2026-11-01T12:00:00Z")
    assert tuple(name for name in record if name != "base") == RECORD_FIELDS  # base: not stored
    stored = finish_record(record)
    assert tuple(stored) == RECORD_FIELDS
    for name, value in stored.items():
        if name in LIST_FIELDS:  # categories, enclosures: lists, staged as JSON text
            assert isinstance(value, list)
            value = json.dumps(value, ensure_ascii=False)
        assert isinstance(value, str)
        value.encode("utf-8")  # storable: no lone surrogate
        assert "\x00" not in value
