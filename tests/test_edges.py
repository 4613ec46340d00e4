"""Edges through the real daemon: formula-like titles are neutralised in the staging CSV a person may
open in a spreadsheet while the database keeps the true text; source names cannot forge lines in
errors.log (refused in SOURCES, cleaned from OPML titles); STAGING_DIR or LOG_DIR on a file is a
settings error."""
from __future__ import annotations

import csv
import re

import pytest

from tests.feeds import rss
from tests.process import stop, wait_for
from tests.test_opml import feed_outline, opml

TITLES = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+2", "-3", "@SUM(A1)", "'Tis the season",
          "'=quoted formula", "''", "plain title", "a = b"]


def test_formula_titles_are_neutralised_in_the_csv_and_true_in_the_database(server, project):
    server.route("/f.xml", body=rss([{"title": t, "link": f"http://f.example/{i}"} for i, t in enumerate(TITLES)]))
    project.write_params(SOURCES=[{"name": "f", "url": server.url("/f.xml")}], FLUSH_INTERVAL=3600)
    daemon = project.start()
    try:
        wait_for(lambda: project.staged_rows() == 9, "the poll's 9 records staged")
        with open(project.staging / "staging.csv", newline="", encoding="utf-8") as f:
            staged = [row["title"] for row in csv.DictReader(f)]
    finally:
        assert stop(daemon) == 0
    # What a spreadsheet sees: no cell starts with a formula character.
    assert not [t for t in staged if t[:1] in "=+-@"], staged
    assert sorted(staged) == sorted("'" + t if t[:1] in "=+-@'" else t for t in TITLES)
    assert sorted(r["title"] for r in project.rows()) == sorted(TITLES)


def test_a_source_name_with_a_line_break_is_a_settings_error(project):
    project.write_params(SOURCES=[{"name": "evil\n2026-01-01T00:00:00Z  bank  forged", "url": "https://x.example/"},
                                  {"name": "bell\x07", "url": "https://y.example/"}])
    proc = project.run("--once")
    assert proc.returncode == 2, proc.stderr
    assert "SOURCES[0] ('evil\\n2026-01-01T00:00:00Z  bank  forged'): name must not hold line breaks" in proc.stderr
    assert "SOURCES[1] ('bell\\x07'): name must not hold line breaks" in proc.stderr
    assert not project.staging.exists()


def test_opml_titles_with_line_breaks_become_clean_names(server, project):
    server.route("/ok.xml", body=rss([{"title": "t", "link": "http://ok.example/1"}]))
    title = "evil&#10;2026-01-01T00:00:00Z  bank  https://bank.example/  forged&#13;line"
    (project.folder / "feeds.opml").write_text(opml(
        f'<outline type="rss" text="{title}" title="{title}" xmlUrl="{server.url("/gone.xml")}"/>'
        f'\n{feed_outline("ok", server.url("/ok.xml"))}'), encoding="utf-8")
    project.write_params(SOURCES_OPML="feeds.opml")
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    lines = project.log("errors.log").splitlines()
    assert lines and all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ [A-Z]+  ", line) for line in lines), lines
    assert len(lines) == 1 and "evil 2026-01-01T00:00:00Z bank https://bank.example/ forged line" in lines[0]


@pytest.mark.parametrize("setting", ["STAGING_DIR", "LOG_DIR"])
def test_a_folder_setting_pointing_at_a_file_is_a_settings_error(project, setting):
    (project.folder / "taken").write_text("a file, not a folder\n")
    project.write_params(**{setting: "taken", "SOURCES": []})
    proc = project.run("--once")
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert f"{setting}: must be a folder, but {project.folder / 'taken'} is a file" in proc.stderr
    assert "Traceback" not in proc.stderr
    project.write_params(**{setting: "taken/below", "SOURCES": []})
    proc = project.run("--once")
    assert proc.returncode == 2 and f"{setting}: must be a folder" in proc.stderr
