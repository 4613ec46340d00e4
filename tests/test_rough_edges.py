"""Issue 21's rough edges 2, 3, 4 and 12, through the installed `parser-daemon` where the command is the point:
SIGHUP's line names each changed setting as old -> new (a password never shown) and what needs a restart;
one feed under two names is polled once, with one note; a wrong default is one error, not one per source
that inherits it; JSON log lines carry a poll's (and a job's pass 2) counts as keys of their own."""
from __future__ import annotations

import json
import re
import signal
import subprocess

import pytest

from parser.core.errors import SettingsError
from parser.settings.params import load_settings
from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.server import LoopbackServer
from tests.shop import Shop
from tests.test_check_tag_try import INSTALLED, daemon
from tests.test_operator_week import template_job
from tests.test_opml import feed_outline, opml

pytestmark = pytest.mark.skipif(not INSTALLED.exists(), reason="no installed parser-daemon beside this Python")


def start(project: Project) -> subprocess.Popen:
    return subprocess.Popen([str(INSTALLED), "--params", str(project.params)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=project.folder)


def hup(project: Project, proc: subprocess.Popen) -> str:
    """SIGHUP, and the reload line it brought."""
    before = project.log().count("SIGHUP")
    proc.send_signal(signal.SIGHUP)
    wait_for(lambda: project.log().count("SIGHUP") > before, "the reload line")
    return [line for line in project.log().splitlines() if "SIGHUP" in line][-1]


def poll_lines(project: Project) -> list[str]:
    """The source of each poll line of parser.log (new, 304 or error)."""
    return re.findall(r"^\S+ (?:INFO|WARNING)  (.+?)  (?:new \d|304 not modified|error  )", project.log(),
                      re.MULTILINE)  # a failed poll's line is a WARNING


# -- 2: SIGHUP names the settings it changed ------------------------------------------------------
def test_sighup_names_each_changed_setting_old_to_new_and_which_wait_for_a_restart(project: Project,
                                                                                  server: LoopbackServer):
    server.route("/a.xml", body=rss(numbered_items(1, 1)))
    source = {"name": "a", "url": server.url("/a.xml")}
    project.write_params(SOURCES=[source], POLL_INTERVAL=3600, FLUSH_INTERVAL=30)
    proc = start(project)
    try:
        wait_for(lambda: poll_lines(project) == ["a"], "a polled")
        project.write_params(SOURCES=[source], POLL_INTERVAL=3600, FLUSH_INTERVAL=40, CONCURRENCY=8,
                             DB_URL="postgresql://reader:s3cret@127.0.0.1:9/elsewhere")
        line = hup(project, proc)
        assert "changed: none); settings changed: " in line, line
        assert "FLUSH_INTERVAL 30 -> 40" in line
        assert "CONCURRENCY 32 -> 8" in line
        assert f"DB_URL sqlite:///{project.db_path} -> postgresql+psycopg://***@127.0.0.1:9/elsewhere" in line
        assert line.endswith("; a restart is needed for DB_URL, CONCURRENCY"), line
        assert "s3cret" not in project.log() + project.log("errors.log")

        line = hup(project, proc)  # the same file again: FLUSH_INTERVAL runs already, the others wait still
        assert "FLUSH_INTERVAL" not in line and line.endswith("restart is needed for DB_URL, CONCURRENCY"), line
        project.write_params(SOURCES=[source], POLL_INTERVAL=3600, FLUSH_INTERVAL=40)
        line = hup(project, proc)  # the file as the daemon runs it
        assert "settings changed: none" in line and "restart" not in line, line
    finally:
        assert stop(proc) == 0


# -- 3: one feed, two names ------------------------------------------------------------------------
def test_one_feed_under_two_names_is_polled_once_and_said_once(project: Project, server: LoopbackServer):
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    server.route("/other.xml", body=rss(numbered_items(1, 1, host="other.example")))
    url = server.url("/feed.xml")
    (project.folder / "feeds.opml").write_text(opml(
        f'{feed_outline("Imported", url)}\n{feed_outline("Query", url + "?page=2")}'), encoding="utf-8")
    params = dict(SOURCES=[{"name": "first", "url": url},
                           {"name": "again", "url": url + "#top"},  # the fragment is never sent: one feed
                           {"name": "private", "url": url, "headers": {"X-Reader": "ann"}}],  # another reader's
                  SOURCES_OPML="feeds.opml", POLL_INTERVAL=3600)
    project.write_params(**params)
    proc = start(project)
    try:
        wait_for(lambda: sorted(poll_lines(project)) == ["Query", "first", "private"], "one poll a subscription")
        for name in ("again", "Imported"):
            assert sum(f"'{name}' is dropped" in line for line in project.log().splitlines()) == 1, project.log()
        assert f"SOURCES ('again'): the same feed as SOURCES ('first'); polled once, as 'first'; the name " \
               f"'again' is dropped ({url}#top)" in project.log()
        assert f"SOURCES_OPML (feeds.opml line 5, 'Imported'): the same feed as SOURCES ('first'); polled once, " \
               f"as 'first'; the name 'Imported' is dropped ({url})" in project.log()
        project.write_params(**params, FLUSH_INTERVAL=60)  # a SIGHUP reads the same sources
        assert "(added: none; removed: none; changed: none)" in hup(project, proc)
    finally:
        assert stop(proc) == 0
    assert sum("is dropped" in line for line in project.log().splitlines()) == 2  # not again at SIGHUP
    assert sorted(r["source"] for r in project.rows("runs")) == ["Query", "first", "private"]  # a poll each
    assert server.hits["/feed.xml"] == 3  # first, private, and Query (?page=2): one poll each, none for the others


# -- 4: a wrong default is one error ---------------------------------------------------------------
INHERITED_DEFAULTS = [("MAX_ITEMS", "fifty"), ("MAX_ITEMS", 0), ("POLL_INTERVAL", "often"), ("POLL_INTERVAL", -5),
                      ("KEEP", {"title": "("}), ("BLOCK", {"link": "[a-"}), ("WEBHOOK_LISTEN", "nowhere")]


@pytest.mark.parametrize(("setting", "wrong"), INHERITED_DEFAULTS)
def test_a_wrong_default_is_one_error_naming_it_not_one_per_source_that_inherits_it(tmp_path, monkeypatch,
                                                                                     setting, wrong):
    monkeypatch.setenv("HOOK_SECRET", "x")
    (tmp_path / "feeds.opml").write_text(opml(feed_outline("imported", "https://c.example/feed")), encoding="utf-8")
    project = Project(tmp_path)
    hook = {"name": "hook", "protocol": "webhook", "path": "/hook", "secret_env": "HOOK_SECRET"}
    project.write_params(SOURCES=[{"name": "a", "url": "https://a.example/feed"},
                                  {"name": "api", "url": "https://b.example/api", "protocol": "json_api"}, hook],
                         SOURCES_OPML="feeds.opml", **{setting: wrong})
    with pytest.raises(SettingsError) as raised:
        load_settings(project.params)
    lines = str(raised.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"params.py: {setting}: "), lines


def test_a_source_that_sets_its_own_wrong_value_is_still_named(tmp_path):
    project = Project(tmp_path)
    project.write_params(SOURCES=[{"name": "a", "url": "https://a.example/feed", "max_items": "ten",
                                   "interval": "hourly"}, {"name": "b", "url": "https://b.example/feed"}])
    with pytest.raises(SettingsError) as raised:
        load_settings(project.params)
    assert str(raised.value).splitlines() == [
        "params.py: SOURCES[0] ('a'): interval must be a number of seconds above 0, got 'hourly'",
        "params.py: SOURCES[0] ('a'): max_items must be a whole number above 0, got 'ten'"]


# -- 12: JSON log lines carry the counts -----------------------------------------------------------
def json_lines(project: Project, name: str = "parser.log") -> list[dict]:
    return [json.loads(line) for line in project.log(name).splitlines()]


def test_json_poll_and_pass_2_lines_carry_their_counts_as_keys(project: Project, server: LoopbackServer):
    server.route("/fresh.xml", body=rss(numbered_items(1, 2, host="fresh.example")), etag='"v1"')
    server.route("/again.xml", body=rss(numbered_items(1, 1, host="again.example")))
    server.route("/broken.xml", status=500)
    Shop(server)
    project.write_params(SOURCES=[{"name": n, "url": server.url(f"/{n}.xml")} for n in ("fresh", "again", "broken")],
                         LINK_JOBS=[template_job(server)], LOG_FORMAT="json")
    done = daemon(project, "--once")
    assert done.returncode == 0, done.stderr
    done = daemon(project, "--once", "--source", "fresh", "--source", "again", "--source", "broken")
    assert done.returncode == 0, done.stderr

    polls = [(line["source"], line["status"], line["new"], line["duplicates"])
             for line in json_lines(project) if "seconds" in line and "source" in line]
    assert polls.count(("fresh", 200, 2, 0)) == 1 and polls.count(("fresh", 304, 0, 0)) == 1, polls
    assert polls.count(("again", 200, 1, 0)) == 1 and polls.count(("again", 200, 0, 1)) == 1, polls
    assert polls.count(("broken", 500, 0, 0)) == 2 and len(polls) == 6, polls
    for line in json_lines(project):
        if "seconds" in line and "source" in line:
            assert isinstance(line["seconds"], float) and 0 <= line["seconds"] < 60
            assert line["message"].startswith(f"{line['source']}  ")  # the text is as it was
    fresh = next(line for line in json_lines(project) if line.get("source") == "fresh" and line["new"] == 2)
    assert re.fullmatch(r"fresh  new 2  duplicates 0  \d+\.\d\d s  rss20", fresh["message"]), fresh

    pass2 = [line for line in json_lines(project) if line.get("job") == "pages"]
    assert len(pass2) == 1, pass2
    assert {k: pass2[0][k] for k in ("fetched", "new", "duplicates", "gone", "retry", "given_up", "pending")} == \
        {"fetched": 3, "new": 3, "duplicates": 0, "gone": 0, "retry": 0, "given_up": 0, "pending": 0}
    assert pass2[0]["empty_fields"] == {"price": 1}  # item 3 has no price
