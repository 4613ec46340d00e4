"""An object page under MAX_BYTES whose one text node is over libxml2's 10-million-character limit:
through the real daemon, the field is stored whole (and so is every field after it), never cut."""
from __future__ import annotations

from tests.conftest import link_statuses

BIG = 10_500_000  # characters in one text node: over libxml2's limit without huge_tree


def huge_page() -> bytes:
    return (b"<html><head><title>t</title></head><body><h1>Big object</h1><div id='body'>"
            + b"x" * BIG + b"</div><p id='after'>the field after it</p></body></html>")


def test_a_text_node_over_ten_million_characters_is_stored_whole(server, project):
    server.route("/obj/big", body=huge_page(), content_type="text/html; charset=utf-8")
    small = b"<html><body><h1>Small</h1><div id='body'>b</div><p id='after'>a</p></body></html>"
    server.route("/obj/small", body=small, content_type="text/html")
    project.write_params(MAX_BYTES=16 * 1024 * 1024, FLUSH_INTERVAL=3600,
                         LINK_JOBS=[{"name": "objects", "template": server.url("/obj/{name}"),
                                     "values": {"name": ["big", "small"]},
                                     "fields": {"title": "//h1", "body": "//div[@id='body']",
                                                "after": "//p[@id='after']"}}])
    run = project.run("--once")
    assert run.returncode == 0, run.stderr

    rows = {r["url"].rsplit("/", 1)[1]: r for r in project.rows("objects")}
    assert rows["small"]["after"] == "a"
    # Either the whole field is stored, or the link is not done and errors.log says why: never a cut field.
    if "big" in rows:
        assert len(rows["big"]["body"]) == BIG and rows["big"]["body"] == "x" * BIG
        assert rows["big"]["after"] == "the field after it" and rows["big"]["title"] == "Big object"
    else:
        assert link_statuses(project.staging, "objects")[server.url("/obj/big")] != "done"
        assert server.url("/obj/big") in project.log("errors.log")
    assert "big" in rows  # what this code does: MAX_BYTES bounds the page, so its text is read whole
