"""full_text on an install that lacks lxml_html_clean (what a stock pip left, tests/test_lost2_stock_pip.py):
every entry is still stored, with its summary and one line saying why there is no page text, and
`check` says the feature cannot run. The module's absence is made as an install makes it: a package of
that name on PYTHONPATH that cannot be imported, as Python reports a missing one."""
from __future__ import annotations

import os
import subprocess

from tests.feeds import rss
from tests.test_fulltext import ARTICLE

MISSING = 'raise ModuleNotFoundError("No module named \'lxml_html_clean\'", name="lxml_html_clean")\n'


def without_cleaner(tmp_path) -> dict[str, str]:
    shadow = tmp_path / "shadow" / "lxml_html_clean"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(MISSING, encoding="utf-8")
    return {**os.environ, "PYTHONPATH": str(shadow.parent)}


def run(project, env, *args) -> subprocess.CompletedProcess:
    return subprocess.run(project.command(*args), capture_output=True, text=True, timeout=120, cwd=project.folder,
                          env=env)


def test_a_missing_module_keeps_every_entry_with_its_summary_and_check_says_so(server, project, tmp_path):
    env = without_cleaner(tmp_path)
    items = [{"title": f"Short {n}", "link": server.url(f"/articles/{n}"), "description": f"Teaser {n}."}
             for n in (1, 2, 3)]
    server.route("/feed.xml", body=rss(items))
    for n in (1, 2, 3):
        server.route(f"/articles/{n}", body=ARTICLE, content_type="text/html")
    project.write_params(SOURCES=[{"name": "ft", "url": server.url("/feed.xml"), "full_text": True,
                                   "full_text_internal": True}])

    proc = run(project, env, "--once")
    assert proc.returncode == 0, proc.stderr
    rows = project.rows()
    assert sorted(r["title"] for r in rows) == ["Short 1", "Short 2", "Short 3"]
    assert all(r["content"] is None and r["summary"].startswith("Teaser") for r in rows)
    errors = project.log("errors.log")
    assert "full text unavailable: cannot import lxml_html_clean" in errors and "internal error" not in errors
    assert "3 entries kept their summary" in errors
    checked = run(project, env, "check")
    assert checked.returncode == 0, checked.stderr
    assert "missing:  full_text of ft cannot run: cannot import lxml_html_clean" in checked.stdout, checked.stdout

    # Mended install: the new entry gets its page; the stored ones (tried while it was missing) are not fetched.
    items.append({"title": "Short 4", "link": server.url("/articles/4"), "description": "Teaser 4."})
    server.route("/feed.xml", body=rss(items))
    server.route("/articles/4", body=ARTICLE, content_type="text/html")
    assert "missing:" not in project.run("check", check=True).stdout
    project.run("--once", check=True)
    assert "Paragraph 7 of the story" in {r["title"]: r for r in project.rows()}["Short 4"]["content"]
    assert server.hits.get("/articles/1", 0) == 0
    assert project.log("errors.log").count("full text unavailable") == 1  # the first run's line only
