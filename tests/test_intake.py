"""The intake (parser/pipeline/intake.py): each entry gets one verdict, decided in one place, and the poll's
JSON log line says how many entries got each."""
from __future__ import annotations

import json
from collections import Counter

from parser.core.record import record_digest
from parser.pipeline.dedup import open_uniqueness
from parser.pipeline.identity import Identity
from parser.pipeline.intake import Batch, Verdict, decide
from parser.pipeline.last_polls import short_key
from tests.feeds import numbered_items, rss


def record(n: int, title: str | None = None) -> dict:
    return {"source": "s", "guid": f"g{n}", "link": f"http://example.com/{n}", "title": title or f"Item {n}"}


def test_each_record_gets_one_verdict_and_only_the_staged_ones_are_kept(tmp_path):
    identity = Identity("auto", "sha224")
    dedup = open_uniqueness("hashfile", tmp_path, "sha224")
    stored = [record(1), record(2), record(3)]
    stored_keys = identity.identify(stored).keys
    dedup.add(stored_keys)
    # The source's last poll: item 1 as it was, item 2 before an edit; item 3 not in it (a kill before the save).
    previous = {short_key(stored_keys[0]): record_digest(stored[0]), short_key(stored_keys[1]): "0" * 16}
    polled = [record(1), record(2, "Item 2, edited"), record(3), record(4), record(4)]
    staged = decide(Batch(polled, repeated=5, previous=previous, updates=True), dedup, identity)
    assert staged.verdicts == Counter({Verdict.NEW: 1, Verdict.EDITED: 1, Verdict.RECHECKED: 1,
                                       Verdict.DUPLICATE: 2, Verdict.REPEATED: 5})
    assert [r["title"] for r in staged.new] == ["Item 4"]
    assert [r["title"] for r in staged.updates] == ["Item 2, edited", "Item 3"]
    assert (staged.changed, staged.duplicates) == (1, 2 + 5 + 1)  # a recheck is counted with the duplicates
    # Without updates asked (UPDATES "ignore"), a record stored before is a duplicate whatever changed.
    ignored = decide(Batch(polled, previous=previous, updates=False), dedup, identity)
    assert ignored.verdicts == Counter({Verdict.NEW: 1, Verdict.DUPLICATE: 4})
    assert all(v.staged == (v in (Verdict.NEW, Verdict.EDITED, Verdict.RECHECKED)) for v in Verdict)


def test_the_poll_line_says_each_entrys_verdict_and_an_edit_reaches_its_row(server, project):
    items = numbered_items(1, 3)
    server.route("/feed.xml", body=rss(items))
    project.write_params(SOURCES=[{"name": "s", "url": server.url("/feed.xml")}], LOG_FORMAT="json")
    project.run("--once", check=True)
    items[0] = {**items[0], "title": "Item 3, edited", "description": "Edited body"}
    server.route("/feed.xml", body=rss(items))
    project.run("--once", check=True)
    polls = [e for e in map(json.loads, project.log().splitlines()) if e.get("source") == "s" and "verdicts" in e]
    assert [e["verdicts"] for e in polls] == [{"new": 3}, {"edited": 1, "repeated": 2}]
    assert sorted(r["title"] for r in project.rows()) == ["Item 1", "Item 2", "Item 3, edited"]
