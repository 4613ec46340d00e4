"""The field rules of "Fields as the feed meant them" (issue 8) on the fast path (adapters/xmlfeed.py),
each on the shape of a real feed, through parse_body as a poll calls it."""
from __future__ import annotations

import pytest

from parser.adapters import FALLBACK, parse_body, xmlfeed
from parser.settings.params import Source
from tests.conftest import corpus_dir

URL = "http://feeds.example/blog/feed.xml"
SOURCE = Source(name="fields", url=URL)
DC = 'xmlns:dc="http://purl.org/dc/elements/1.1/"'


def parsed(body: str, limit: int | None = None):
    result = parse_body(SOURCE, body.encode(), url=URL, headers={}, fetched="2026-01-01T00:00:00Z", limit=limit)
    assert not result.kind.endswith(FALLBACK), result.kind
    return result


def rss(items: str, channel: str = "", namespaces: str = "") -> str:
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0" {namespaces}><channel><title>t</title>'
            f'<link>https://blog.example/</link>{channel}{items}</channel></rss>')


def atom(entries: str) -> str:
    return (f'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
            f'<link rel="alternate" href="https://atom.example/"/>{entries}</feed>')


def test_guid_is_kept_as_given_and_a_non_permalink_guid_is_never_the_link():
    records = parsed(rss('<item><title>a</title><guid isPermaLink="false">t3_glvkc5</guid></item>'
                         '<item><title>b</title><guid isPermaLink="false">https://blog.example/p/2</guid></item>'
                         '<item><title>c</title><guid>https://blog.example/p/3</guid></item>')).records
    assert [(r["guid"], r["link"]) for r in records] == [
        ("t3_glvkc5", ""), ("https://blog.example/p/2", ""),
        ("https://blog.example/p/3", "https://blog.example/p/3")]


def test_the_link_is_the_http_alternate_and_feedburner_orig_link_wins():
    records = parsed(rss('<item><title>a</title><link uri="at://did:plc:x/post/1">https://bsky.example/1</link></item>'
                         '<item><title>b</title><link>https://feedproxy.example/~r/x/1</link>'
                         '<feedburner:origLink>https://blog.example/real</feedburner:origLink></item>'
                         '<item><title>c</title><link>javascript:alert(1)</link></item>',
                         namespaces='xmlns:feedburner="http://rssnamespace.org/feedburner/ext/1.0"')).records
    assert [r["link"] for r in records] == ["https://bsky.example/1", "https://blog.example/real", ""]


def test_content_encoded_is_read_under_the_content_namespace_without_its_last_slash():
    """Podcast feeds declare http://purl.org/rss/1.0/modules/content (no slash); feedparser reads it."""
    for namespace in ("http://purl.org/rss/1.0/modules/content", "https://purl.org/rss/1.0/modules/content"):
        body = rss('<item><title>a</title><guid>g</guid><description>Short</description>'
                   '<content:encoded><![CDATA[<p>Show notes</p>]]></content:encoded></item>',
                   namespaces=f'xmlns:content="{namespace}"')
        (record,) = parsed(body).records
        assert (record["summary"], record["content"]) == ("Short", "<p>Show notes</p>")


def test_title_is_decoded_exactly_once_by_its_type():
    records = parsed(atom('<entry><id>1</id><title type="html">Why &amp;lt;template&amp;gt; beats innerHTML'
                          '</title></entry><entry><id>2</id><title type="text">Use &lt;br&gt; sparingly</title></entry>'
                          '<entry><id>3</id><title type="html">&lt;b&gt;Bold&lt;/b&gt; move</title></entry>')).records
    assert [r["title"] for r in records] == ["Why <template> beats innerHTML", "Use <br> sparingly", "Bold move"]


def test_every_author_is_kept_with_names_before_e_mails():
    atom_records = parsed(atom(
        '<entry><id>1</id><title>a</title><author><name>Ann</name></author><author><name>Bob</name></author></entry>'
        '<entry><id>2</id><title>b</title><author><email>carl@example.org</email></author></entry>')).records
    rss_records = parsed(rss(
        '<item><title>a</title><guid>g1</guid><dc:creator>Dee</dc:creator><dc:creator>Eve</dc:creator></item>'
        '<item><title>b</title><guid>g2</guid><author>fay@example.org (Fay)</author><dc:creator/></item>',
        namespaces=DC)).records
    assert [r["author"] for r in atom_records] == ["Ann, Bob", "carl@example.org"]
    assert [r["author"] for r in rss_records] == ["Dee, Eve", "Fay"]


@pytest.mark.parametrize("written, stored", [
    ("mer, 16 nov 2022 00:38:15 +0100", "2022-11-15T23:38:15Z"),
    ("Mi, 16 Nov 2022", "2022-11-16T00:00:00Z"),
    ("mié, 16 nov 2022", "2022-11-16T00:00:00Z"),
    ("Ср, 16 ноя 2022 00:38:15 +0300", "2022-11-15T21:38:15Z"),
    ("2022年11月16日 00:38", "2022-11-16T00:38:00Z"),
    ("2022-11-16T00:38:15", "2022-11-16T00:38:15Z"),  # no zone: UTC
    ("Wed, 31 Feb 2022 10:00:00 GMT", ""),  # no such day
])
def test_dates_in_other_languages_naive_and_impossible(written, stored):
    records = parsed(rss(f"<item><title>a</title><guid>g</guid><pubDate>{written}</pubDate></item>")).records
    assert records[0]["published"] == stored


def test_relative_links_resolve_against_xml_base_and_the_feed_address_and_content_is_sanitized():
    records = parsed(atom(
        '<entry xml:base="https://atom.example/2026/"><id>1</id><title>a</title><link href="post.html"/>'
        '<content type="html">&lt;p&gt;&lt;a href="../about"&gt;x&lt;/a&gt;&lt;img src="i.png"&gt;'
        '&lt;script&gt;alert(1)&lt;/script&gt;&lt;/p&gt;</content></entry>'
        '<entry><id>2</id><title>b</title><link href="/top"/></entry>')).records
    assert records[0]["link"] == "https://atom.example/2026/post.html"
    assert records[0]["content"] == ('<p><a href="https://atom.example/about">x</a>'
                                     '<img src="https://atom.example/2026/i.png"></p>')
    assert records[1]["link"] == "http://feeds.example/top"


def test_home_is_the_feeds_own_link():
    assert parsed(rss("<item><title>a</title><guid>g</guid></item>")).home == "https://blog.example/"
    assert parsed(atom("<entry><id>1</id><title>a</title></entry>")).home == "https://atom.example/"


def test_a_limit_keeps_the_newest_by_date_or_the_first_in_order():
    dated = "".join(f"<item><title>t{d}</title><guid>g{d}</guid><pubDate>0{d} Jan 2026 10:00:00 GMT</pubDate></item>"
                    for d in (3, 1, 5, 2, 4))
    assert [r["title"] for r in parsed(rss(dated), limit=2).records] == ["t5", "t4"]
    undated = dated.replace("<pubDate>01 Jan 2026 10:00:00 GMT</pubDate>", "")
    assert [r["title"] for r in parsed(rss(undated), limit=2).records] == ["t3", "t1"]


def test_what_the_fast_path_cannot_read_goes_to_feedparser_and_says_so():
    cdf = ('<?xml version="1.0"?><CHANNEL HREF="http://cdf.example/"><ITEM HREF="http://cdf.example/1">'
           '<TITLE>one</TITLE></ITEM></CHANNEL>')
    result = parse_body(SOURCE, cdf.encode(), url=URL, headers={}, fetched="2026-01-01T00:00:00Z")
    assert result.kind.endswith(FALLBACK)
    assert [r["title"] for r in result.records] == ["one"]


# -- long CDATA sections are lifted out before libxml2 reads the document (xmlfeed._prepared) -------
LONG = "x" * 600  # past xmlfeed.LIFT_AT


def test_a_lifted_section_reads_back_as_libxml2_would_have_read_it():
    body = rss(f'<item><title>a</title><guid>g1</guid><description>Intro <![CDATA[<p>{LONG}\r\nnext\rline\x01</p>]]>'
               ' and after</description>'
               f'<content:encoded><![CDATA[<p>one</p>\n{LONG}]]>\n\n<![CDATA[<p>two</p>]]></content:encoded></item>',
               namespaces='xmlns:content="http://purl.org/rss/1.0/modules/content/"')
    (record,) = parsed(body).records
    assert record["summary"] == f"Intro {LONG} next line and after"  # CR LF and CR read as LF; U+0001 left out
    assert record["content"] == f"<p>one</p>\n{LONG}\n\n<p>two</p>"  # the line ends kept, no more, no fewer


def test_a_document_holding_the_placeholder_mark_is_read_whole():
    body = rss(f'<item><title>\ue000 mark</title><guid>g</guid><description><![CDATA[{LONG}]]></description></item>')
    (record,) = parsed(body).records
    assert (record["title"], record["summary"]) == ("\ue000 mark", LONG)


def test_lifting_changes_no_record_of_the_corpus():
    """Every corpus document with a CDATA section parses to the same records, warnings (libxml2's line
    numbers included) and kind whether its long sections are lifted or not."""
    files = [p for p in corpus_dir().rglob("*") if p.is_file() and p.stat().st_size < 4 << 20]
    with_cdata = [p.read_bytes() for p in files]
    with_cdata = [b for b in with_cdata if b"<![CDATA[" in b]
    assert len(with_cdata) > 200  # the corpus as shipped: a smaller one means it moved

    def results(lift_at: int) -> list:
        xmlfeed.LIFT_AT = lift_at
        out = []
        for body in with_cdata:
            try:
                got = parse_body(Source(name="c", url=URL, max_items=1 << 30), body, url=URL, headers={}, fetched="f")
                out.append((got.kind, got.records, got.warnings, got.home))
            except Exception as exc:  # what fails must fail alike
                out.append(repr(exc))
        return out

    default = xmlfeed.LIFT_AT
    try:
        whole, lifted = results(1 << 62), results(0)
    finally:
        xmlfeed.LIFT_AT = default
    assert [i for i, (a, b) in enumerate(zip(whole, lifted, strict=True)) if a != b] == []


def test_no_control_character_is_stored_even_one_the_html_spells_as_a_reference():
    body = rss('<item><title>a</title><guid>g</guid><description>&lt;p&gt;one&amp;#1;two&amp;#x7f;&lt;/p&gt;'
               '</description><content:encoded><![CDATA[<p>three&#2;four</p>]]></content:encoded></item>',
               namespaces='xmlns:content="http://purl.org/rss/1.0/modules/content/"')
    (record,) = parsed(body).records
    assert (record["summary"], record["content"]) == ("onetwo", "<p>threefour</p>")
