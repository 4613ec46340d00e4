"""What a record holds (issue 26, point 1): `content` the entry's HTML body (an RSS description or Atom
summary that is HTML when there is no content element) with every link absolute; `updated`,
`categories`, `enclosures`, `image`, `comments`, `language`; and the feed's own title, site,
description and language (Parsed.feed). Feeds in the shapes real publishers write: a blog's RSS with
HTML in <description>, a podcast, an Atom blog with categories and a replies link, a JSON Feed."""
from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from parser.adapters import FeedInfo, parse_body
from parser.core.errors import ParseError
from parser.settings.params import Source
from tests.conftest import corpus_dir
from tests.process import free_port

FETCHED = "2026-01-01T00:00:00Z"

# A WordPress-style blog feed with no content:encoded: the description holds the post's HTML, links
# and an image relative to the site.
BLOG_RSS = b"""<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel>
  <title>Notes &amp; Letters</title>
  <link>https://blog.example/</link>
  <description>A blog about &lt;em&gt;letters&lt;/em&gt;</description>
  <language>en-GB</language>
  <item>
    <title>On typefaces</title>
    <link>https://blog.example/2024/typefaces</link>
    <guid isPermaLink="false">post-17</guid>
    <pubDate>Mon, 20 May 2024 08:30:00 GMT</pubDate>
    <dc:date>2024-05-21T10:00:00+02:00</dc:date>
    <category>Design</category><category>Type</category><category>Design</category>
    <dc:subject>Printing</dc:subject>
    <comments>/2024/typefaces#comments</comments>
    <description>&lt;p&gt;Read &lt;a href="/2024/serifs"&gt;the serifs post&lt;/a&gt; first.&lt;/p&gt;
      &lt;p&gt;&lt;img src="img/specimen.png" alt="specimen"&gt;&lt;/p&gt;</description>
  </item>
  <item>
    <title>Plain words</title>
    <link>https://blog.example/2024/plain</link>
    <description>Just text, and R&amp;D.</description>
  </item>
</channel>
</rss>"""

PODCAST = b"""<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd"
     xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:media="http://search.yahoo.com/mrss/">
<channel>
  <title>The Workshop</title>
  <link>https://pod.example/</link>
  <language>de</language>
  <itunes:image href="https://pod.example/cover.jpg"/>
  <item>
    <title>Episode 12: Glue</title>
    <guid>https://pod.example/12</guid>
    <pubDate>Tue, 04 Jun 2024 05:00:00 +0000</pubDate>
    <enclosure url="https://cdn.pod.example/ep12.mp3" length="48213120" type="audio/mpeg"/>
    <itunes:image href="/art/ep12.jpg"/>
    <itunes:keywords>glue, wood,  joinery</itunes:keywords>
    <content:encoded><![CDATA[<p>Show notes: <a href="notes/12">links</a></p>]]></content:encoded>
  </item>
  <item>
    <title>Episode 11: Saws</title>
    <guid>https://pod.example/11</guid>
    <enclosure url="/media/ep11.mp3" length="" type="audio/mpeg"/>
    <media:group>
      <media:content url="https://cdn.pod.example/ep11.mp4" type="video/mp4" fileSize="99000"/>
      <media:thumbnail url="https://cdn.pod.example/ep11.jpg"/>
    </media:group>
  </item>
</channel>
</rss>"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="en" xml:base="https://atom.example/blog/">
  <title type="html">Atom &amp;lt;Notes&amp;gt;</title>
  <subtitle>Short posts</subtitle>
  <link rel="alternate" type="text/html" href="https://atom.example/"/>
  <id>tag:atom.example,2024:feed</id>
  <updated>2024-06-02T12:00:00Z</updated>
  <entry xml:lang="fr">
    <title>Bonjour</title>
    <id>tag:atom.example,2024:1</id>
    <link rel="alternate" href="posts/bonjour"/>
    <link rel="replies" type="text/html" href="posts/bonjour#comments"/>
    <link rel="replies" type="application/atom+xml" href="posts/bonjour/comments.atom"/>
    <link rel="enclosure" type="application/pdf" length="2048" href="files/bonjour.pdf"/>
    <category term="greetings" label="Greetings"/>
    <category term="fr"/>
    <category label="Only a label"/>
    <published>2024-06-01T09:00:00+02:00</published>
    <updated>2024-06-02T09:00:00+02:00</updated>
    <summary type="html">&lt;p&gt;A &lt;a href="posts/hello"&gt;greeting&lt;/a&gt;&lt;/p&gt;</summary>
  </entry>
  <entry>
    <title>Plain summary</title>
    <id>tag:atom.example,2024:2</id>
    <link href="posts/plain"/>
    <updated>2024-06-02T10:00:00Z</updated>
    <summary>Text &lt;b&gt; with brackets &amp;amp; an entity</summary>
  </entry>
</feed>"""

JSON_FEED = {
    "version": "https://jsonfeed.org/version/1.1",
    "title": "JSON Notes",
    "home_page_url": "https://json.example/",
    "feed_url": "https://json.example/feed.json",
    "description": "Notes in JSON",
    "language": "es",
    "items": [
        {"id": "1", "url": "https://json.example/posts/1",
         "content_html": '<p>See <a href="../about">about</a> <img src="pics/a.png"></p>',
         "date_published": "2024-06-01T10:00:00Z", "date_modified": "2024-06-03T10:00:00+02:00",
         "tags": ["notes", "json", "notes"], "image": "/pics/1.jpg",
         "attachments": [{"url": "/files/1.mp3", "mime_type": "audio/mpeg", "size_in_bytes": 1234},
                         {"url": "https://cdn.json.example/1.ogg", "mime_type": "audio/ogg"}]},
        {"id": "2", "summary": "<p>An <a href=\"/x\">HTML</a> summary</p>", "language": "ca",
         "banner_image": "https://json.example/banner.png"},
    ],
}


def parse(body: bytes, url: str, **kwargs):
    source = Source(name="s", url=url, max_items=50)
    return parse_body(source, body, url=url, headers={}, fetched=FETCHED, **kwargs)


def test_an_rss_description_that_is_html_is_the_content_with_its_links_absolute():
    parsed = parse(BLOG_RSS, "https://blog.example/feed/")
    first, second = parsed.records
    assert first["content"] == ('<p>Read <a href="https://blog.example/2024/serifs">the serifs post</a> first.</p>\n'
                                '      <p><img src="https://blog.example/feed/img/specimen.png" alt="specimen"></p>')
    assert first["summary"] == "Read the serifs post first."  # summary stays plain text
    assert first["categories"] == ["Design", "Type", "Printing"]
    assert first["comments"] == "https://blog.example/2024/typefaces#comments"
    assert (first["published"], first["updated"]) == ("2024-05-20T08:30:00Z", "2024-05-21T08:00:00Z")
    assert first["language"] == "en-GB"  # the channel's, the item saying none
    assert (first["enclosures"], first["image"]) == ([], "")
    assert second["content"] == "" and second["summary"] == "Just text, and R&D."  # plain text is no HTML
    assert parsed.feed == FeedInfo(title="Notes & Letters", link="https://blog.example/",
                                   description="A blog about letters", language="en-GB")


def test_a_podcast_has_its_enclosures_image_and_keywords():
    first, second = parse(PODCAST, "https://pod.example/rss").records
    assert first["enclosures"] == [{"url": "https://cdn.pod.example/ep12.mp3", "type": "audio/mpeg",
                                    "length": 48213120}]
    assert first["image"] == "https://pod.example/art/ep12.jpg"
    assert first["categories"] == ["glue", "wood", "joinery"]
    assert first["content"] == '<p>Show notes: <a href="https://pod.example/notes/12">links</a></p>'
    assert first["language"] == "de"
    assert second["enclosures"] == [
        {"url": "https://pod.example/media/ep11.mp3", "type": "audio/mpeg", "length": None},
        {"url": "https://cdn.pod.example/ep11.mp4", "type": "video/mp4", "length": 99000}]
    assert second["image"] == "https://cdn.pod.example/ep11.jpg"


def test_atom_categories_replies_language_and_an_html_summary_as_content():
    parsed = parse(ATOM, "https://atom.example/feed.atom")
    first, second = parsed.records
    assert first["categories"] == ["greetings", "fr", "Only a label"]
    assert first["comments"] == "https://atom.example/blog/posts/bonjour#comments"  # the HTML replies link
    assert first["enclosures"] == [{"url": "https://atom.example/blog/files/bonjour.pdf",
                                    "type": "application/pdf", "length": 2048}]
    assert first["language"] == "fr"
    assert (first["published"], first["updated"]) == ("2024-06-01T07:00:00Z", "2024-06-02T07:00:00Z")
    assert first["content"] == '<p>A <a href="https://atom.example/blog/posts/hello">greeting</a></p>'
    assert first["summary"] == "A greeting"
    # An untyped Atom summary is text (RFC 4287): no content made of it, whatever it looks like.
    assert second["content"] == "" and second["language"] == "en"
    assert parsed.feed == FeedInfo(title="Atom <Notes>", link="https://atom.example/", description="Short posts",
                                   language="en")


@pytest.mark.parametrize("path", ["fast", "feedparser"])
def test_both_xml_paths_give_the_same_new_fields(path):
    """The feedparser path (parse_body's fallback) reads the same fields as the fast path."""
    from parser.adapters import feed
    from parser.adapters.sanitize import finish_record
    for body, url in ((BLOG_RSS, "https://blog.example/feed/"), (PODCAST, "https://pod.example/rss"),
                      (ATOM, "https://atom.example/feed.atom")):
        fast = parse(body, url)
        if path == "fast":
            assert not fast.kind.endswith("via feedparser")
            continue
        slow = feed.parse(body, url=url, headers={}, source=Source(name="s", url=url), fetched=FETCHED)
        slow_records = [finish_record(r) for r in slow.records]
        for a, b in zip(fast.records, slow_records, strict=True):
            for field in ("updated", "categories", "enclosures", "image", "comments", "language"):
                assert a[field] == b[field], (url, field)
            assert bool(a["content"]) == bool(b["content"]), url
        assert slow.feed == fast.feed


def test_a_json_feed_has_attachments_tags_and_absolute_links():
    parsed = parse(json.dumps(JSON_FEED).encode(), "https://json.example/feed.json")
    first, second = parsed.records
    assert first["content"] == ('<p>See <a href="https://json.example/about">about</a> '
                                '<img src="https://json.example/posts/pics/a.png"></p>')
    assert first["categories"] == ["notes", "json"]
    assert first["enclosures"] == [
        {"url": "https://json.example/files/1.mp3", "type": "audio/mpeg", "length": 1234},
        {"url": "https://cdn.json.example/1.ogg", "type": "audio/ogg", "length": None}]
    assert first["image"] == "https://json.example/pics/1.jpg"
    assert (first["updated"], first["language"]) == ("2024-06-03T08:00:00Z", "es")
    # No content_html: an HTML summary is the content, its links against the feed's home page.
    assert second["content"] == '<p>An <a href="https://json.example/x">HTML</a> summary</p>'
    assert second["summary"] == "An HTML summary"
    assert (second["image"], second["language"]) == ("https://json.example/banner.png", "ca")
    assert parsed.feed == FeedInfo(title="JSON Notes", link="https://json.example/", description="Notes in JSON",
                                   language="es")


def test_a_json_api_map_names_the_new_fields():
    from parser.adapters import json_api
    from parser.adapters.sanitize import finish_record
    item = {"id": 7, "permalink": "https://api.example/p/7", "labels": [{"name": "a"}, "b"],
            "files": [{"href": "/f/7.zip", "mime_type": "application/zip", "size": "10"}],
            "modified": 1717200000, "cover": {"url": "/c/7.png"}, "body": '<a href="/q">q</a>'}
    mapping = {"link": "permalink", "categories": "labels", "enclosures": "files", "updated": "modified",
               "image": "cover", "content": "body"}
    record = finish_record(json_api.record_from(item, mapping, "api", FETCHED))
    assert record["categories"] == ["a", "b"]
    assert record["enclosures"] == [{"url": "https://api.example/f/7.zip", "type": "application/zip", "length": 10}]
    assert record["updated"] == "2024-06-01T00:00:00Z"
    assert record["image"] == "https://api.example/c/7.png"
    assert record["content"] == '<a href="https://api.example/q">q</a>'


def test_fewer_empty_contents_over_the_200_corpus_feeds():
    """The issue's count: records with an empty `content` as a poll reads the 200 benchmark feeds
    (MAX_ITEMS 50). 1,852 of 4,028 at 78f13c7 (the issue counted 1,843 of 4,016); 887 now, each for one
    of two reasons, held exactly (the corpus is fixed): the entry has no description at all (48, in 8
    feeds), or its description is plain text (839, in 44 feeds), whose text is the summary. Whether a
    description is HTML is the guess feedparser makes; tests/test_fastpath_diff.py holds that both
    paths agree on it entry by entry."""
    folder = corpus_dir("fastfeedparser", "benchmark_data")
    total = 0
    empty: Counter = Counter()
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        try:
            records = parse(path.read_bytes(), "http://127.0.0.1/feed.xml", limit=50).records
        except ParseError:
            continue
        total += len(records)
        empty.update("plain-text description" if r["summary"] else "no description"
                     for r in records if not r["content"])
    assert total == 4028
    assert empty == {"no description": 48, "plain-text description": 839}


def test_the_daemon_stages_the_lists_as_json_text(server, project):
    """End to end: the database is down, so the run's records stay in the staging files (staging.csv,
    or the batch the failed flush took aside), where the lists are JSON text."""
    server.route("/feed.xml", body=PODCAST.replace(b"https://pod.example/", server.url("/").encode()),
                 content_type="application/rss+xml")
    project.write_params(SOURCES=[{"name": "pod", "url": server.url("/feed.xml")}],
                         DB_URL=f"postgresql://parser@127.0.0.1:{free_port()}/items", TIMEOUT=2)
    proc = project.run("--once")
    assert proc.returncode == 1, proc.stderr  # the final flush fails: the records stay staged
    rows = {}
    for staged in Path(project.staging).glob("staging*.csv"):  # staging.csv, and the batch being flushed
        with staged.open(encoding="utf-8", newline="") as f:
            rows.update({row["guid"]: row for row in csv.DictReader(f)})
    episode = rows[server.url("/12")]
    assert json.loads(episode["categories"]) == ["glue", "wood", "joinery"]
    assert json.loads(episode["enclosures"]) == [
        {"url": "https://cdn.pod.example/ep12.mp3", "type": "audio/mpeg", "length": 48213120}]
    assert episode["image"] == server.url("/art/ep12.jpg")
    assert episode["language"] == "de"
    assert json.loads(rows[server.url("/11")]["enclosures"])[0] == {
        "url": server.url("/media/ep11.mp3"), "type": "audio/mpeg", "length": None}
