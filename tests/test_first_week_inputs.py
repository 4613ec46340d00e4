"""Issue 21, a new user's first inputs: `--dry-run | jq` reads JSON lines only (the `#` comments go
to stderr), and a source url without a scheme (`127.0.0.1:8901/feed.xml`) is a settings error that
says which URL was meant, while real file paths keep working."""
from __future__ import annotations

import json

from tests.feeds import numbered_items, rss


def test_dry_run_stdout_is_json_lines_only_and_the_comments_go_to_stderr(server, project):
    server.route("/d.xml", body=rss(numbered_items(1, 2)))
    server.route("/bad.xml", status=500)
    project.write_params(SOURCES=[{"name": "d", "url": server.url("/d.xml")},
                                  {"name": "bad", "url": server.url("/bad.xml")}])
    proc = project.run("--dry-run")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)  # what `| jq` reads
    assert sorted(json.loads(line)["title"] for line in lines) == ["Item 1", "Item 2"]
    comments = [line for line in proc.stderr.splitlines() if line.startswith("#")]
    assert "# d: 2 records, 2 new would be staged" in comments
    assert any(line.startswith("# bad: error: HTTP 500") for line in comments)


def test_a_url_without_a_scheme_is_a_settings_error_that_says_which_url_was_meant(server, project):
    server.route("/feed.xml", body=rss(numbered_items(1, 1)))
    no_scheme = server.url("/feed.xml").removeprefix("http://")  # 127.0.0.1:PORT/feed.xml
    project.write_params(SOURCES=[{"name": "local", "url": no_scheme},
                                  {"name": "org", "url": "example.org/feed.xml"},
                                  {"name": "port", "url": "localhost:8901"}])
    proc = project.run("--once")
    assert proc.returncode == 2, proc.stderr
    assert f"SOURCES[0] ('local'): url: no scheme: did you mean \"http://{no_scheme}\"?" in proc.stderr
    assert "SOURCES[1] ('org'): url: no scheme: did you mean \"http://example.org/feed.xml\"?" in proc.stderr
    assert "SOURCES[2] ('port'): url: no scheme: did you mean \"http://localhost:8901\"?" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not project.db_path.exists() and not project.staging.exists()  # nothing created
    assert server.hits.get("/feed.xml") is None


def test_file_sources_keep_working_even_where_a_path_looks_like_a_host(project):
    """A relative path that exists (even one named like a host), `./feeds/x.xml` and a file:// URL are
    files, read as before."""
    for relative, first in (("example.org/feed.xml", 1), ("feeds/x.xml", 11), ("abs/y.xml", 21)):
        path = project.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rss(numbered_items(first, 1)))
    project.write_params(SOURCES=[{"name": "hostlike", "url": "example.org/feed.xml"},
                                  {"name": "dotted", "url": "./feeds/x.xml"},
                                  {"name": "uri", "url": (project.folder / "abs" / "y.xml").as_uri()}])
    project.run("--once", check=True)
    assert sorted((r["source"], r["title"]) for r in project.rows()) == [
        ("dotted", "Item 11"), ("hostlike", "Item 1"), ("uri", "Item 21")]
