"""Fields still wrong on real feeds (issue 21): undeclared ISO-8859-1 text, iTunes-only authors and
summaries, an Atom text construct with a media type, a JSON Feed with a bare version number. Through
parse_body as a poll calls it, and one --once of the daemon for what the log says."""
from __future__ import annotations

import json

import pytest

from parser.adapters import FALLBACK, parse_body
from parser.settings.params import Source

URL = "http://feeds.example/podcast.xml"
SOURCE = Source(name="real", url=URL)


def parse(body: bytes | str, *, content_type: str = "application/rss+xml", source: Source = SOURCE):
    data = body.encode("utf-8") if isinstance(body, str) else body
    return parse_body(source, data, url=URL, headers={"Content-Type": content_type}, fetched="2026-12-01T00:00:00Z")


def rss_item(item: str, namespaces: str = "") -> str:
    return (f'<?xml version="1.0"?><rss version="2.0" {namespaces}><channel><title>Banco</title>'
            f'<link>http://feeds.example/</link><item>{item}</item></channel></rss>')


# -- no charset declared, bytes not UTF-8 ----------------------------------------------------------
@pytest.mark.parametrize("text", ["Veja as simulações", "Simulações de crédito e cotações",
                                  "Novas simulações do orçamento"])
def test_undeclared_latin1_portuguese_is_read_as_windows_1252(text):
    # No charset in the header nor in the prolog, no <language>: charset_normalizer scores cp775 or
    # cp1257 as coherent as cp1252 ("simulań§es", "simulaēões"); windows-1252 reads it with no more chaos.
    body = rss_item(f"<title>{text}</title><link>http://feeds.example/1</link>"
                    f"<description>{text}</description>").encode("iso-8859-1")
    parsed = parse(body, content_type="application/xml")
    [record] = parsed.records
    assert record["title"] == text
    assert record["summary"] == text
    assert any("read as cp1252" in w for w in parsed.warnings), parsed.warnings


@pytest.mark.parametrize("codec", ["cp1251", "koi8_r"])
def test_undeclared_cyrillic_keeps_the_detected_code_page(codec):
    text = "Новости экономики: правительство утвердило бюджет на следующий год"
    body = rss_item(f"<title>{text}</title><link>http://feeds.example/1</link>"
                    f"<description>{text}. Подробности в статье.</description>").encode(codec)
    [record] = parse(body, content_type="application/xml").records
    assert record["title"] == text


# -- iTunes author and summary as fallbacks --------------------------------------------------------
# Apple's podcast spec has declared its namespace with several spellings; feedparser matches any case.
@pytest.mark.parametrize("namespace", ["http://www.itunes.com/dtds/podcast-1.0.dtd",
                                       "http://www.itunes.com/DTDs/PodCast-1.0.dtd",
                                       "https://www.itunes.com/DTDs/PodCast-1.0.dtd"])
def test_itunes_author_and_summary_stand_in_for_missing_ones(namespace):
    body = rss_item("<title>Episode 1</title><link>http://feeds.example/1</link><guid>ep-1</guid>"
                    "<itunes:author>Jane Host</itunes:author>"
                    "<itunes:summary>An episode about &lt;things&gt; &amp; stuff</itunes:summary>",
                    f'xmlns:itunes="{namespace}"')
    parsed = parse(body)
    assert not parsed.kind.endswith(FALLBACK), parsed.kind
    [record] = parsed.records
    assert record["author"] == "Jane Host"
    assert record["summary"] == "An episode about <things> & stuff"  # itunes:summary is plain text


def test_itunes_author_and_summary_do_not_replace_the_items_own():
    body = rss_item("<title>Episode 2</title><link>http://feeds.example/2</link><author>ann@example.org (Ann)</author>"
                    "<description>The real summary</description>"
                    "<itunes:author>Jane Host</itunes:author><itunes:summary>Other</itunes:summary>",
                    'xmlns:itunes="http://www.itunes.com/DTDs/PodCast-1.0.dtd"')
    [record] = parse(body).records
    assert (record["author"], record["summary"]) == ("Ann", "The real summary")


# -- Atom title with an unknown media type ----------------------------------------------------------
def test_atom_title_with_a_media_type_is_kept_as_text():
    # RFC 4287 3.1.1: a text construct is text, html or xhtml; "application/x-custom" is a writer's
    # mistake, not base64 ("Quarterly report 2026" base64-decoded is garbage).
    body = ('<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>F</title><id>urn:f</id>'
            '<entry><id>urn:1</id><title type="application/x-custom">Quarterly report 2026</title>'
            '<summary type="application/x-custom">Sales &amp; costs</summary>'
            '<content type="application/octet-stream">SGVsbG8gd29ybGQ=</content>'
            '<link href="http://feeds.example/1"/><updated>2026-01-01T00:00:00Z</updated></entry></feed>')
    parsed = parse(body, content_type="application/atom+xml")
    assert not parsed.kind.endswith(FALLBACK), parsed.kind
    [record] = parsed.records
    assert record["title"] == "Quarterly report 2026"
    assert record["summary"] == "Sales & costs"
    assert "Hello world" in record["content"]  # content of another media type is base64 (4.1.3.3)


def test_atom_title_that_is_base64_of_text_is_still_decoded():
    # feedparser's own cases (wellformed/atom10/entry_title_base64.xml): a real base64 value of UTF-8 text.
    body = ('<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>F</title><id>urn:f</id>'
            '<entry><id>urn:1</id><title type="application/octet-stream">\n  RXhhbXBsZSA8Yj5BdG9tPC9iPg==\n</title>'
            '<link href="http://feeds.example/1"/><updated>2026-01-01T00:00:00Z</updated></entry></feed>')
    [record] = parse(body, content_type="application/atom+xml").records
    assert record["title"] == "Example <b>Atom</b>"  # as feedparser reads it: decoded text, not HTML


# -- JSON Feed with a bare version -------------------------------------------------------------------
def json_feed(version, ident: str) -> bytes:
    return json.dumps({"version": version, "title": "J", "items": [
        {"id": ident, "url": f"https://example.org/{ident}", "title": f"Item {ident}",
         "content_text": "Body"}]}).encode()


@pytest.mark.parametrize("version, kind", [("1", "jsonfeed10"), ("1.0", "jsonfeed10"), ("1.1", "jsonfeed11"),
                                           (1.1, "jsonfeed11")])
def test_json_feed_with_a_bare_version_is_read(version, kind):
    parsed = parse(json_feed(version, "a"), content_type="application/feed+json")
    assert parsed.kind == kind
    assert [r["title"] for r in parsed.records] == ["Item a"]
    assert parsed.notes == [f"JSON Feed version {json.dumps(version)} is not the spec's URL "
                            f"(https://jsonfeed.org/version/{kind[-2]}{'.1' if kind.endswith('11') else ''}); "
                            "read as JSON Feed"]


def test_json_feed_with_another_version_is_still_refused():
    for version in ("2", "https://example.org/version/1", None):
        with pytest.raises(Exception, match="JSON Feed version"):
            parse(json_feed(version, "a"), content_type="application/feed+json")


def test_bare_json_feed_version_through_the_daemon_stored_and_said_once_per_source(server, project):
    server.route("/one.json", body=json_feed("1", "one"), content_type="application/json")
    server.route("/eleven.json", body=json_feed("1.1", "eleven"), content_type="application/feed+json")
    project.write_params(SOURCES=[{"name": "one", "url": server.url("/one.json")},
                                  {"name": "eleven", "url": server.url("/eleven.json")}])
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    assert sorted(r["title"] for r in project.rows()) == ["Item eleven", "Item one"]
    log = project.log()
    assert log.count("one  JSON Feed version \"1\" is not the spec's URL") == 1, log
    assert log.count("eleven  JSON Feed version \"1.1\" is not the spec's URL") == 1, log
    assert "JSON Feed version" not in project.log("errors.log")
