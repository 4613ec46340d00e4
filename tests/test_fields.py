"""Every field as the feed meant it (issue 8), and dates that sort as they should (issue 9): feeds in
the shapes real ones have, served from 127.0.0.1 through the daemon (rows read from SQLite, lines from
the logs) or through parse_body where a daemon run adds nothing."""
from __future__ import annotations

import json
from html import escape

from parser.adapters import feed, parse_body
from parser.adapters.json_api import timestamp
from parser.adapters.source_view import JsonApi
from parser.settings.params import Source
from tests.process import stop, wait_for

# The identity of a record is another piece of work (issue 8, "Identity"): these tests key records by
# their guid, so that entries without a link are not merged whatever the default becomes.
BY_GUID = ["source", "guid"]


def parse(body: bytes | str, *, content_type: str = "application/rss+xml",
          url: str = "https://www.example.org/r/python/.rss", protocol: str = "feed", api=None):
    source = Source(name="s", url=url, max_items=50, protocol=protocol, api=api)
    data = body.encode("utf-8") if isinstance(body, str) else body
    return parse_body(source, data, url=url, headers={"Content-Type": content_type},
                      fetched="2026-12-01T00:00:00Z")


def by_title(rows: list[dict]) -> dict[str, dict]:
    return {r["title"]: r for r in rows}


# -- guid and link ------------------------------------------------------------------------------
# Reddit's feeds are Atom whose <id> is a bare "t3_..." thing id; feedparser resolved it against the
# feed's address. Bluesky bridges write <link uri="at://...">https://...</link>.
REDDIT = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:media="http://search.yahoo.com/mrss/">
<category term="python" label="r/python"/><updated>2020-05-17T21:28:48+00:00</updated>
<id>/r/python/.rss</id><link rel="self" href="https://www.reddit.com/r/python/.rss" type="application/atom+xml"/>
<link rel="alternate" href="https://www.reddit.com/r/python/" type="text/html"/><title>Python</title>
<entry><author><name>/u/someone</name><uri>https://www.reddit.com/user/someone</uri></author>
<category term="python" label="r/python"/><content type="html">&lt;p&gt;text&lt;/p&gt;</content>
<id>t3_glvkc5</id><link href="https://www.reddit.com/r/Python/comments/glvkc5/a_post/"/>
<updated>2020-05-17T21:20:14+00:00</updated><published>2020-05-17T21:20:14+00:00</published>
<title>A post</title></entry>
</feed>"""

RSS_IDS = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Mixed</title><link>https://example.org/</link><description>d</description>
<item><title>Permalink guid, no link</title><guid>https://example.org/posts/1</guid></item>
<item><title>Opaque guid</title><guid isPermaLink="false">https://example.org/?p=2</guid></item>
<item><title>Relative-looking guid</title><guid>post-3</guid></item>
<item><title>Bluesky</title><link uri="at://did:plc:abc/app.bsky.feed.post/3kx">https://bsky.app/profile/a.b/post/3kx</link>
<guid isPermaLink="false">at://did:plc:abc/app.bsky.feed.post/3kx</guid></item>
<item><title>Only an at link</title><link>at://did:plc:abc/app.bsky.feed.post/4ky</link><guid>at-4</guid></item>
</channel></rss>"""


def test_guids_stay_as_written_and_only_real_http_links_are_stored(server, project):
    # Before: guid 'https://127.0.0.1:PORT/r/python/t3_glvkc5' (the feed's address glued on), the opaque
    # `https://example.org/?p=2` guid stored as the link, 'post-3' and 'at://...' turned into links.
    server.route("/r/python/.rss", body=REDDIT.encode(), content_type="application/atom+xml")
    server.route("/mixed.xml", body=RSS_IDS.encode())
    project.write_params(SOURCES=[{"name": "reddit", "url": server.url("/r/python/.rss")},
                                  {"name": "mixed", "url": server.url("/mixed.xml")}], UNIQUE_FIELDS=BY_GUID)
    project.run("--once", check=True)
    rows = by_title(project.rows())
    assert len(rows) == 6
    assert rows["A post"]["guid"] == "t3_glvkc5"
    assert rows["A post"]["link"] == "https://www.reddit.com/r/Python/comments/glvkc5/a_post/"
    assert (rows["Permalink guid, no link"]["guid"], rows["Permalink guid, no link"]["link"]) == \
        ("https://example.org/posts/1", "https://example.org/posts/1")  # an RSS permalink IS the link
    assert (rows["Opaque guid"]["guid"], rows["Opaque guid"]["link"]) == ("https://example.org/?p=2", None)
    assert (rows["Relative-looking guid"]["guid"], rows["Relative-looking guid"]["link"]) == ("post-3", None)
    assert rows["Bluesky"]["link"] == "https://bsky.app/profile/a.b/post/3kx"
    assert rows["Bluesky"]["guid"] == "at://did:plc:abc/app.bsky.feed.post/3kx"
    assert rows["Only an at link"]["link"] is None  # no link is NULL, never a made-up one


def test_an_atom_id_is_no_link():
    # An Atom <id> names the entry; it is no address to open (before: `tag:` and http ids became the link).
    body = """<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
    <entry><title>tag id</title><id>tag:example.org,2020:1</id></entry>
    <entry><title>http id</title><id>https://example.org/ids/2</id></entry></feed>"""
    records = parse(body, content_type="application/atom+xml").records
    assert [(r["guid"], r["link"]) for r in records] == [("tag:example.org,2020:1", ""),
                                                          ("https://example.org/ids/2", "")]


# -- title ---------------------------------------------------------------------------------------
TITLES = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Blog</title><link>https://example.org/</link><description>d</description>
<item><title>Why &amp;lt;template&amp;gt; beats innerHTML</title><link>https://example.org/1</link></item>
<item><title>Use &lt;br&gt; sparingly</title><link>https://example.org/2</link></item>
<item><title>Tom &amp;amp; Jerry &lt;b&gt;live&lt;/b&gt;</title><link>https://example.org/3</link></item>
</channel></rss>"""
ATOM_TITLES = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Blog</title>
<entry><title type="html">Why &amp;lt;template&amp;gt; beats innerHTML</title><id>a1</id>
<link href="https://example.org/a1"/></entry>
<entry><title type="text">Use &lt;br&gt; sparingly</title><id>a2</id><link href="https://example.org/a2"/></entry>
<entry><title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">An <em>xhtml</em> title</div></title>
<id>a3</id><link href="https://example.org/a3"/></entry>
</feed>"""


def test_titles_are_decoded_exactly_once(server, project):
    # Before: 'Why beats innerHTML' (the decoded <template> read as a tag) and 'Use sparingly'.
    server.route("/rss.xml", body=TITLES.encode())
    server.route("/atom.xml", body=ATOM_TITLES.encode(), content_type="application/atom+xml")
    project.write_params(SOURCES=[{"name": "rss", "url": server.url("/rss.xml")},
                                  {"name": "atom", "url": server.url("/atom.xml")}])
    project.run("--once", check=True)
    titles = {(r["source"], r["title"]) for r in project.rows()}
    assert titles == {("rss", "Why <template> beats innerHTML"), ("rss", "Use <br> sparingly"),
                      ("rss", "Tom & Jerry live"),
                      ("atom", "Why <template> beats innerHTML"), ("atom", "Use <br> sparingly"),
                      ("atom", "An xhtml title")}


def test_json_titles_are_plain_text_unless_they_look_like_html():
    feed = """{"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": [
      {"id": "1", "url": "https://example.org/1", "title": "Use <br> sparingly"},
      {"id": "2", "url": "https://example.org/2", "title": "Tom &amp; Jerry"}]}"""
    assert [r["title"] for r in parse(feed, content_type="application/feed+json").records] == \
        ["Use <br> sparingly", "Tom & Jerry"]
    api = JsonApi(items="data")
    answer = '{"data": [{"id": 1, "title": "a <template> b"}, {"id": 2, "title": "x &lt;y&gt;"}]}'
    records = parse(answer, content_type="application/json", protocol="json_api", api=api).records
    assert [r["title"] for r in records] == ["a <template> b", "x <y>"]


# -- author --------------------------------------------------------------------------------------
AUTHORS = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel><title>A</title>
<link>https://example.org/</link><description>d</description>
<item><title>two creators</title><link>https://example.org/1</link><dc:creator>Ann Lee</dc:creator>
<dc:creator>Bob Ray</dc:creator></item>
<item><title>empty creator</title><link>https://example.org/2</link><author>jane@example.org (Jane Doe)</author>
<dc:creator/></item>
<item><title>mail only</title><link>https://example.org/3</link><author>jane@example.org</author></item>
</channel></rss>"""
ATOM_AUTHORS = """<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<entry><title>two authors</title><id>x1</id><link href="https://example.org/x1"/>
<author><name>Ann Lee</name><email>ann@example.org</email></author><author><name>Bob Ray</name></author></entry>
<entry><title>no name</title><id>x2</id><link href="https://example.org/x2"/>
<author><email>only@example.org</email></author></entry></feed>"""


# As rss-parser's encoding.rss (jn.pt) writes every description: text, then an escaped FeedBurner pixel;
# and UOL's (uolNoticias.rss): an escaped <img align="left"> before the text. No end tag, no entity.
PIXEL = '<img src="http://feeds.feedburner.com/~r/jn/ultimas/~4/x1" height="1" width="1" alt=""/>'
UOL = '<img align="left" src="http://img.uol.example/2.jpg" border="0" >Texto da UOL'
PIXEL_RSS = f"""<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>JN</title>
<link>http://www.jn.pt/</link><description>d</description>
<item><title>one</title><link>http://www.jn.pt/1</link>
<description>Texto da noticia.{escape(PIXEL)}</description></item>
<item><title>two</title><link>http://www.jn.pt/2</link>
<description>{escape(UOL)}</description></item>
<item><title>three</title><link>http://www.jn.pt/3</link><description>Linha um&lt;br&gt;linha dois</description></item>
<item><title>four</title><link>http://www.jn.pt/4</link><description>if a &lt; b and c &gt; d</description></item>
</channel></rss>"""


def test_a_description_with_only_an_img_or_a_br_is_html():
    records = parse(PIXEL_RSS).records
    assert [(r["summary"], r["content"]) for r in records] == [
        ("Texto da noticia.", 'Texto da noticia.<img src="http://feeds.feedburner.com/~r/jn/ultimas/~4/x1" '
                              'height="1" width="1" alt="">'),
        ("Texto da UOL", '<img src="http://img.uol.example/2.jpg">Texto da UOL'),
        ("Linha um linha dois", "Linha um<br>linha dois"),
        ("if a < b and c > d", "")]  # no tag at all: the characters
    items = [{"id": str(i), "url": f"https://j.example/{i}", "summary": f"Texto {i}.{PIXEL}"} for i in (1, 2)]
    feed = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": items})
    api = parse(json.dumps({"data": items}), content_type="application/json", protocol="json_api",
                api=JsonApi(items="data"))
    for record in [*parse(feed, content_type="application/feed+json").records, *api.records]:
        assert record["summary"] == f"Texto {record['guid']}." and "<img" not in record["summary"]


def test_every_author_by_name(server, project):
    # Before: 'Bob Ray' (the last dc:creator), '' (the empty dc:creator erased Jane), 'Bob Ray' again.
    server.route("/rss.xml", body=AUTHORS.encode())
    server.route("/atom.xml", body=ATOM_AUTHORS.encode(), content_type="application/atom+xml")
    project.write_params(SOURCES=[{"name": "rss", "url": server.url("/rss.xml")},
                                  {"name": "atom", "url": server.url("/atom.xml")}])
    project.run("--once", check=True)
    authors = {r["title"]: r["author"] for r in project.rows()}
    assert authors == {"two creators": "Ann Lee, Bob Ray", "empty creator": "Jane Doe",
                       "mail only": "jane@example.org", "two authors": "Ann Lee, Bob Ray",
                       "no name": "only@example.org"}


# -- published -----------------------------------------------------------------------------------
DATES = {
    "fr": ("mer, 16 nov 2022 00:38:15 +0100", "2022-11-15T23:38:15Z"),
    "de": ("Mi, 16 Nov 2022", "2022-11-16T00:00:00Z"),
    "es": ("mié, 16 nov 2022", "2022-11-16T00:00:00Z"),
    "ru": ("Ср, 16 ноя 2022 00:38:15 +0300", "2022-11-15T21:38:15Z"),
    "ja": ("2022年11月16日 00:38", "2022-11-16T00:38:00Z"),
    "pt": ("qua, 16 de novembro de 2022 10:00:00 -0300", "2022-11-16T13:00:00Z"),
    "en-est": ("Wed, 16 Nov 2022 00:38:15 EST", "2022-11-16T05:38:15Z"),
    "feb-30": ("2022-02-30T10:00:00Z", ""),
    "month-13": ("2022-13-01", ""),
    "rfc-feb-30": ("Wed, 30 Feb 2022 10:00:00 GMT", ""),
}


def dated_feed() -> bytes:
    items = "".join(f"<item><title>{name}</title><guid isPermaLink=\"false\">{name}</guid>"
                    f"<pubDate>{text}</pubDate></item>" for name, (text, _) in DATES.items())
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>D</title>'
            f"<link>https://example.org/</link><description>d</description>{items}</channel></rss>").encode()


def test_dates_in_other_languages_impossible_dates_and_zoneless_dates(server, project):
    # Before: fr, de, es, ru, ja, pt empty; feb-30 stored as 2022-03-02, month-13 as 2023-01-01; and
    # nothing said that zoneless dates were taken as UTC.
    server.route("/d.xml", body=dated_feed())
    project.write_params(SOURCES=[{"name": "dated", "url": server.url("/d.xml"), "interval": 0.3}],
                         UNIQUE_FIELDS=BY_GUID, FLUSH_INTERVAL=0.3)
    daemon = project.start()
    try:
        wait_for(lambda: [new for _, new, _ in project.polls("dated")].count(0) >= 2, "two more polls of the same feed")
    finally:
        assert stop(daemon) == 0
    published = {r["title"]: r["published"] for r in project.rows()}
    assert published == {name: iso or None for name, (_, iso) in DATES.items()}  # no date: NULL
    # de, es and ja give no zone: said once for the source, not at every poll.
    assert project.log().count("dated  dates without a time zone are taken as UTC") == 1
    assert "time zone" not in project.log("errors.log")


def test_zoned_dates_say_nothing():
    body = ('<rss version="2.0"><channel><title>t</title><item><title>x</title><guid>g</guid>'
            "<pubDate>Wed, 16 Nov 2022 00:38:15 +0000</pubDate></item></channel></rss>")
    parsed = parse(body)
    assert parsed.records[0]["published"] == "2022-11-16T00:38:15Z" and parsed.notes == []


def test_years_before_1000_have_four_digits_and_sort_before_later_ones():
    # Before: '999-01-01T00:00:00Z', which sorts after '2026-...'.
    body = """<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
    <entry><title>old</title><id>o</id><updated>0999-01-01T00:00:00Z</updated></entry>
    <entry><title>new</title><id>n</id><updated>2026-01-01T00:00:00Z</updated></entry></feed>"""
    published = [r["published"] for r in parse(body, content_type="application/atom+xml").records]
    assert published == ["0999-01-01T00:00:00Z", "2026-01-01T00:00:00Z"]
    assert max(published) == "2026-01-01T00:00:00Z"  # "newest first" orders by this text


def test_json_api_times_in_each_unit_are_read_up_to_the_year_9999():
    # Before: 1e11 seconds (5138-11-16) was read as milliseconds (1973-03-03); 1.7e15 µs gave ''.
    same = "2023-11-14T22:13:20Z"
    assert [timestamp(v) for v in (1_700_000_000, 1_700_000_000_000, 1_700_000_000_000_000,
                                   1_700_000_000_000_000_000, "1700000000000")] == [same] * 5
    assert timestamp(100_000_000_000) == "5138-11-16T09:46:40Z"
    assert timestamp(253_402_300_799) == "9999-12-31T23:59:59Z"          # the last second, in seconds
    assert timestamp(253_402_300_799_999) == "9999-12-31T23:59:59Z"      # and in milliseconds
    assert timestamp(-86_400) == "1969-12-31T00:00:00Z"
    assert timestamp(10 ** 30) == ""



# A date with a part missing, as feeds write them: each takes nothing from the day it is read on.
PARTIAL_DATES = {
    "year-month": ("2024-03", "2024-03-01T00:00:00Z"),      # the 1st, as feedparser reads it
    "month-year": ("March 2024", "2024-03-01T00:00:00Z"),
    "year-month-time": ("2024-03 10:30", "2024-03-01T10:30:00Z"),
    "year": ("2024", "2024-01-01T00:00:00Z"),              # 1 January, as feedparser reads it
    "no-year": ("5 March", None),
    "time": ("10:30", None),
    "weekday": ("Tuesday", None),
    "no-year-time": ("05/20 7:03 am", None),
    "digits": ("20240315", "2024-03-15T00:00:00Z"),
}


def test_a_date_with_a_part_missing_takes_nothing_from_today():
    # Before: dateutil (and feedparser, the fallback) filled the missing year, month or day in from today:
    # '2024-03' was 2024-03-07 on 7 December and 2024-03-08 the day after, '10:30' today at 10:30, so an
    # entry keyed by its date was stored again every day and an `updated` of that kind was an edit daily.
    items = "".join(f"<item><title>{name}</title><guid>{name}</guid><pubDate>{text}</pubDate>"
                    f"<atom:updated>{text}</atom:updated></item>" for name, (text, _) in PARTIAL_DATES.items())
    body = ('<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>t</title>'
            f"{items}</channel></rss>")
    source = Source(name="s", url="https://example.org/f", max_items=50)
    slow = feed.parse(body.encode(), url=source.url, headers={}, source=source, fetched="2026-12-01T00:00:00Z")
    wanted = {name: iso or "" for name, (_, iso) in PARTIAL_DATES.items()}
    for records in (parse(body).records, slow.records):  # the fast path, and the feedparser path
        assert {r["title"]: r["published"] for r in records} == wanted
        assert {r["title"]: r["updated"] for r in records} == wanted


def test_a_json_api_date_of_eight_digits_is_the_date_a_feed_reads():
    # Before: "20240315" in a JSON API was seconds since the epoch, 1970-08-23; in a feed, 2024-03-15.
    in_a_feed = parse('<rss version="2.0"><channel><title>t</title><item><title>x</title><guid>g</guid>'
                      "<pubDate>20240315</pubDate></item></channel></rss>").records[0]["published"]
    assert timestamp("20240315") == in_a_feed == "2024-03-15T00:00:00Z"
    assert timestamp(20240315) == "1970-08-23T06:18:35Z"     # a JSON number is a time since the epoch
    assert timestamp("20241399") == "1970-08-23T06:36:39Z"   # no day as YYYYMMDD: seconds
    assert timestamp("1710460800") == "2024-03-15T00:00:00Z"  # ten digits: seconds

# -- charset -------------------------------------------------------------------------------------
PORTUGUESE = """<?xml version="1.0"?>
<rss version="2.0"><channel><title>Notícias</title><link>https://example.com.br/</link>
<description>Últimas notícias</description><language>pt-br</language>
<item><title>Ação</title><link>https://example.com.br/1</link></item>
<item><title>Não é possível</title><link>https://example.com.br/2</link></item>
<item><title>Atenção à saúde</title><link>https://example.com.br/3</link></item>
</channel></rss>"""


def test_undeclared_western_text_is_read_as_windows_1252(server, project):
    # Before: 'Aēćo' (read as cp1257, Baltic), 'Năo é possível' (cp1250).
    server.route("/pt.xml", body=PORTUGUESE.encode("cp1252"), content_type="text/xml")
    project.write_params(SOURCES=[{"name": "pt", "url": server.url("/pt.xml")}])
    project.run("--once", check=True)
    assert {r["title"] for r in project.rows()} == {"Ação", "Não é possível", "Atenção à saúde"}
    assert "read as cp1252 (the document's language 'pt')" in project.log("errors.log")


def test_without_a_language_a_tie_goes_to_windows_1252():
    body = '<?xml version="1.0"?><rss><channel><title>Café</title><item><title>Não é possível</title>' \
           "<guid>1</guid></item></channel></rss>"
    assert parse(body.encode("cp1252"), content_type="text/xml").records[0]["title"] == "Não é possível"


# -- whitespace before the prolog ------------------------------------------------------------------
def test_a_blank_line_before_the_xml_declaration_is_a_normal_feed(server, project):
    # Before: stored, but errors.log said "feed is malformed (XML or text declaration not at start of
    # entity)" at every poll.
    body = b"\n  \n" + TITLES.encode()
    server.route("/blank.xml", body=body)
    project.write_params(SOURCES=[{"name": "blank", "url": server.url("/blank.xml")}])
    project.run("--once", check=True)
    project.run("--once", check=True)
    assert len(project.rows()) == 3
    assert project.log("errors.log") == ""
    assert parse(body).kind == "rss20"

