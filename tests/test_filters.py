"""Issue 21: a source's keep and block rules (parser/pipeline/filters.py). The rule itself in-process; then
the real daemon against the loopback server: only the kept entries reach the database, the poll line says
`blocked N`, a blocked entry is never hashed (so a rule changed by a restart or a SIGHUP lets it in), pushed
entries obey the same rules, --dry-run shows what a real run would stage, and a bad pattern is exit 2."""
from __future__ import annotations

import json
import signal

import pytest

from parser.pipeline.filters import EntryFilter, compile_rules
from tests.feeds import BASE_TIME, rss
from tests.process import free_port, start_listening, stop, wait_for
from tests.test_webhook import SECRET, post

ITEMS = [  # (title, description); the rules below keep 1 and 4
    ("Python 3.14 released", "release notes"),
    ("Sponsored: a Python course", "buy now"),   # keep matches, block wins
    ("Rust news", "nothing about snakes"),        # no keep pattern matches
    ("Weekly digest", "a PYTHON tip inside"),     # kept by its summary, whatever the case
    ("Go release", "fast builds"),
]
KEEP = {"title": "python", "summary": "python"}
BLOCK = {"title": "^sponsored"}


def feed() -> bytes:
    return rss([{"title": title, "link": f"http://example.com/item/{n}", "description": text, "date": BASE_TIME}
                for n, (title, text) in enumerate(ITEMS, 1)])


def links(*numbers: int) -> list[str]:
    return [f"http://example.com/item/{n}" for n in numbers]


def stored(project) -> list[str]:
    return sorted(row["link"] for row in project.rows())


def hashes(project) -> int:
    path = project.staging / "hashes.txt"
    return len(path.read_text().split()) if path.exists() else 0


# -- the rule ------------------------------------------------------------------------------------------
def test_block_wins_over_keep_and_any_keep_pattern_keeps():
    rules = EntryFilter(keep=compile_rules(KEEP), block=compile_rules(BLOCK))
    kept = [title for title, text in ITEMS if not rules.blocked({"title": title, "summary": text})]
    assert kept == ["Python 3.14 released", "Weekly digest"]
    assert not EntryFilter().blocked({"title": "anything"})  # no rules: every entry kept
    only_block = EntryFilter(block=compile_rules({"link": r"/ads/", "author": "(?-i:Bot)"}))
    assert only_block.blocked({"link": "http://x.example/ads/1"})
    assert only_block.blocked({"author": "NewsBot"}) and not only_block.blocked({"author": "newsbot"})
    assert not only_block.blocked({"title": "no link, no author"})  # a missing field matches nothing


def test_split_keeps_the_records_with_their_keys():
    rules = EntryFilter(block=compile_rules({"content": "<script"}))
    records = [{"content": "<p>ok</p>"}, {"content": "<SCRIPT>x</script>"}, {"content": ""}]
    assert rules.split(records, ["k1", "k2", "k3"]) == ([records[0], records[2]], ["k1", "k3"], 1)
    assert rules.split(records) == ([records[0], records[2]], None, 1)


@pytest.mark.parametrize(("raw", "said"), [
    ("python", "must be a dict of entry field -> regular expression"),
    ({"titel": "x"}, "'titel' is not an entry field a rule can match (did you mean 'title'?)"),
    ({"guid": "x"}, "'guid' is not an entry field a rule can match (fields: title, link, author, summary, content)"),
    ({"title": ["a", "b"]}, "title: the pattern must be a string (a regular expression), got ['a', 'b']"),
    ({"title": "(unclosed"}, "title: '(unclosed' is not a regular expression: missing )"),
    ({"title": ""}, "title: an empty pattern matches every entry"),
])
def test_a_bad_rule_says_what_is_wrong(raw, said):
    with pytest.raises(ValueError, match=None) as caught:
        compile_rules(raw)
    assert said in str(caught.value)


# -- the daemon ----------------------------------------------------------------------------------------
def test_only_kept_entries_are_stored_and_a_changed_rule_lets_a_blocked_one_in(server, project):
    server.route("/feed.xml", body=feed())
    source = {"name": "news", "url": server.url("/feed.xml"), "keep": KEEP}
    project.write_params(SOURCES=[source], BLOCK=BLOCK)  # BLOCK: the default of a source without `block`
    project.run("--once", check=True)
    assert stored(project) == links(1, 4)
    assert project.polls("news") == [(5, 2, 0)]  # 5 read, 2 new, 3 blocked (below)
    assert hashes(project) == 2  # the blocked ones were never hashed
    status = json.loads(project.run("status", "--json", check=True).stdout)
    assert status["sources"][0]["totals"]["blocked"] == 3

    # --dry-run applies the same rules: with BLOCK gone, the sponsored entry is what a run would stage.
    project.write_params(SOURCES=[source])
    dry = project.run("--dry-run", check=True)
    assert [json.loads(line)["link"] for line in dry.stdout.splitlines()] == links(2)
    assert "# news: 5 records, 2 blocked, 1 new would be staged" in dry.stderr

    # A restart with the new rule stores it: a blocked entry was not remembered as seen.
    project.run("--once", check=True)
    assert stored(project) == links(1, 2, 4)
    assert project.polls("news")[-1] == (5, 1, 0)
    status = json.loads(project.run("status", "--json", check=True).stdout)
    assert (status["sources"][0]["totals"]["duplicates"], status["sources"][0]["totals"]["blocked"]) == (2, 3 + 2)


def test_a_sighup_changes_the_rules_and_a_bad_pattern_is_refused(server, project):
    server.route("/feed.xml", body=feed())
    source = {"name": "news", "url": server.url("/feed.xml"), "interval": 0.3}
    project.write_params(SOURCES=[{**source, "block": {"summary": "snakes|fast"}}], POLL_INTERVAL=3600)
    proc = project.start()
    try:
        wait_for(lambda: project.staged_rows() == 3, "the first poll's 3 kept entries staged")

        project.write_params(SOURCES=[{**source, "block": {"summary": "(snakes"}}], POLL_INTERVAL=3600)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: refused" in project.log("errors.log"), "the refusal")
        assert "SOURCES[0] ('news'): block: summary: '(snakes' is not a regular expression" \
            in project.log("errors.log")

        project.write_params(SOURCES=[{**source, "block": {"summary": "snakes"}}], POLL_INTERVAL=3600)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: project.staged_rows() == 4, "a poll under the new rule staging the one it lets in")
    finally:
        code = stop(proc)
    assert code == 0
    assert stored(project) == links(1, 2, 4, 5)
    # The runs table: the first poll read 5, 3 new (2 blocked); one under the new rule 1 new (the other 4
    # duplicates or blocked: 1, as stored above); the rest nothing new.
    polls = project.polls("news")
    assert polls[0] == (5, 3, 0) and polls.count((5, 1, 0)) == 1 and set(polls[1:]) <= {(5, 1, 0), (5, 0, 0)}, polls


def test_pushed_entries_obey_the_rules(project, monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    port = free_port()
    project.write_params(
        SOURCES=[{"name": "shop", "protocol": "webhook", "path": "/hooks/shop", "secret_env": "HOOK_SECRET",
                  "items": "posts", "map": {"summary": "text"}, "block": {"summary": "(?i)advert"}}],
        WEBHOOK_LISTEN=f"127.0.0.1:{port}", FLUSH_INTERVAL=3600)
    posts = [{"id": f"p{n}", "url": f"https://shop.example/{n}", "title": f"Post {n}", "text": text}
             for n, text in enumerate(["news", "an ADVERT", "more news"], 1)]
    daemon = start_listening(project)
    try:
        answer = post(f"http://127.0.0.1:{port}/hooks/shop", {"posts": posts}, delivery="d-1")
        assert answer.status_code == 202, answer.text
        # Staged by the next turn, or by the start's flush when it came first (straight into the table): the
        # delivery's line is what both say.
        wait_for(lambda: "shop  new 2  duplicates 0  blocked 1  received" in project.log(), "the delivery staged")
    finally:
        assert stop(daemon) == 0
    assert stored(project) == ["https://shop.example/1", "https://shop.example/3"]
    totals = json.loads(project.run("status", "--json", check=True).stdout)["sources"][0]["totals"]
    assert (totals["new"], totals["duplicates"], totals["blocked"]) == (2, 0, 1), totals


@pytest.mark.parametrize(("params", "said"), [
    ({"SOURCES": [{"name": "news", "url": "http://127.0.0.1:9/f.xml", "keep": {"title": "(x"}}]},
     "params.py: SOURCES[0] ('news'): keep: title: '(x' is not a regular expression"),
    ({"SOURCES": [{"name": "news", "url": "http://127.0.0.1:9/f.xml", "block": {"body": "x"}}]},
     "params.py: SOURCES[0] ('news'): block: 'body' is not an entry field a rule can match"),
    ({"SOURCES": [{"name": "news", "url": "http://127.0.0.1:9/f.xml"}, {"name": "more", "url": "http://127.0.0.1:9/g"}],
      "KEEP": {"title": 3}},
     "params.py: KEEP: title: the pattern must be a string (a regular expression), got 3"),
])
def test_a_bad_pattern_is_a_settings_error(project, params, said):
    project.write_params(**params)
    proc = project.run("--once")
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr  # a bad KEEP is said once, not per source
    assert sorted(p.name for p in project.folder.iterdir()) == ["params.py"]
