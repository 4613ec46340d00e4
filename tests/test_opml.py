"""SOURCES_OPML through the real daemon: a feed reader's export becomes sources beside SOURCES, and
a name clash, a missing file or a broken file is a settings error naming the file and line."""
from __future__ import annotations

from xml.sax.saxutils import quoteattr

from tests.feeds import numbered_items, rss


def opml(outlines: str) -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<opml version="2.0">\n<head><title>My feeds</title></head>\n'
            f"<body>\n{outlines}\n</body>\n</opml>\n")


def feed_outline(title: str, url: str) -> str:
    return f"<outline type=\"rss\" text={quoteattr(title)} title={quoteattr(title)} xmlUrl={quoteattr(url)}/>"


def test_opml_outlines_become_sources_beside_sources(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2, host="a.example")))
    server.route("/b.xml", body=rss(numbered_items(1, 1, host="b.example")))
    server.route("/c.xml", body=rss(numbered_items(1, 1, host="c.example")))
    (project.folder / "feeds.opml").write_text(opml(
        f'<outline text="Tech">\n  {feed_outline("Alpha blog", server.url("/a.xml"))}\n</outline>\n'
        f'{feed_outline("Beta news", server.url("/b.xml"))}\n'
        '<outline text="A note without a feed"/>'), encoding="utf-8")
    project.write_params(SOURCES=[{"name": "gamma", "url": server.url("/c.xml")}], SOURCES_OPML="feeds.opml")
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    by_source: dict[str, int] = {}
    for row in project.rows():
        by_source[row["source"]] = by_source.get(row["source"], 0) + 1
    assert by_source == {"Alpha blog": 2, "Beta news": 1, "gamma": 1}
    assert project.polls("Alpha blog") == [(2, 2, 0)]  # polled under its OPML title


def test_a_name_clash_with_sources_is_a_settings_error(server, project):
    (project.folder / "feeds.opml").write_text(opml(
        f'{feed_outline("ok", "https://ok.example/feed")}\n{feed_outline("gamma", "https://x.example/feed")}'),
        encoding="utf-8")
    project.write_params(SOURCES=[{"name": "gamma", "url": "https://c.example/feed"}], SOURCES_OPML="feeds.opml")
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "SOURCES_OPML (feeds.opml line 6, 'gamma'): name clash: SOURCES already has a source named 'gamma'" \
        in proc.stderr
    assert not project.db_path.exists()


def test_a_missing_or_broken_opml_file_is_a_settings_error(project):
    project.write_params(SOURCES_OPML="nowhere.opml")
    proc = project.run("--once")
    assert proc.returncode == 2 and "SOURCES_OPML: file does not exist" in proc.stderr
    (project.folder / "broken.opml").write_text("<opml><body><outline xmlUrl='x'></body>", encoding="utf-8")
    project.write_params(SOURCES_OPML="broken.opml")
    proc = project.run("--once")
    assert proc.returncode == 2 and "broken.opml is not well-formed XML" in proc.stderr


def test_duplicate_titles_in_the_opml_file_become_unique_names(server, project):
    """Another reader's export with two feeds under one title runs as is; one feed listed twice is polled once."""
    server.route("/a.xml", body=rss(numbered_items(1, 2, host="a.example")))
    server.route("/b.xml", body=rss(numbered_items(1, 1, host="b.example")))
    (project.folder / "feeds.opml").write_text(opml(
        f'<outline text="Tech">\n  {feed_outline("News", server.url("/a.xml"))}\n</outline>\n'
        f'<outline text="World">\n  {feed_outline("News", server.url("/b.xml"))}\n'
        f'  {feed_outline("News", server.url("/a.xml"))}\n</outline>'), encoding="utf-8")
    project.write_params(SOURCES_OPML="feeds.opml")
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    assert sorted((r["source"], r["link"]) for r in project.rows()) == [
        ("News", "http://a.example/item/1"), ("News", "http://a.example/item/2"),
        ("News (2)", "http://b.example/item/1")]
    assert server.hits["/a.xml"] == 1
    log = project.log()
    assert "feeds.opml line 9, 'News'): the title is taken by another feed; this one is named 'News (2)'" in log
    assert "feeds.opml line 10, 'News'): the same feed as feeds.opml line 6; polled once" in log


def test_export_opml_round_trips_through_the_importer(project, tmp_path, monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", "x")  # the webhook source's secret: needed to read the settings
    sources = [{"name": "alpha", "url": "https://a.example/feed.xml", "tags": ["tech", "daily"]},
               {"name": "beta & co", "url": "https://b.example/rss?x=1&y=2"},
               {"name": "hook", "protocol": "webhook", "path": "/hook", "secret_env": "HOOK_SECRET"}]
    (project.folder / "more.opml").write_text(opml(feed_outline("gamma", "https://c.example/atom")), encoding="utf-8")
    project.write_params(SOURCES=sources, SOURCES_OPML="more.opml")
    proc = project.run("export-opml", "-o", str(tmp_path / "out.opml"), check=True)
    assert "3 feed sources written" in proc.stderr
    exported = (tmp_path / "out.opml").read_text(encoding="utf-8")
    assert '<opml version="2.0">' in exported and "hook" not in exported  # webhooks are not feeds

    # Read back as the only sources of another project: the same names, addresses and tags.
    other = project.folder / "other"
    other.mkdir()
    (other / "params.py").write_text(f"SOURCES_OPML = {str(tmp_path / 'out.opml')!r}\n", encoding="utf-8")
    from parser.settings.params import load_settings
    back = {s.name: (s.url, s.tags) for s in load_settings(other / "params.py").sources}
    assert back == {"alpha": ("https://a.example/feed.xml", ("tech", "daily")),
                    "beta & co": ("https://b.example/rss?x=1&y=2", ()),
                    "gamma": ("https://c.example/atom", ())}
    stdout = project.run("export-opml", check=True).stdout  # no -o: standard output
    assert stdout.count("<outline ") == 4  # three feeds and the folder "tech"
