"""A batch file copied beside the real one (`staging.flushing-<ns> (copy).csv`, a file manager's paste)
is no batch the daemon named: it is left alone with a warning, and the start goes on (issue 27, case 11).
Before, every start failed on it with `ValueError: invalid literal for int()`: a restart loop."""
from __future__ import annotations

import shutil

from tests.feeds import numbered_items, rss
from tests.process import lock_sqlite


def test_a_pasted_copy_of_a_batch_file_is_left_alone_with_a_warning(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}], DB_TIMEOUT=0.5)
    blocker = lock_sqlite(project.db_path)  # the flush fails: the records stay in a batch file
    try:
        failed = project.run("--once")
    finally:
        blocker.rollback()
        blocker.close()
    assert failed.returncode == 1, failed.stderr
    [batch] = project.staging.glob("staging.flushing-*.csv")
    copy = batch.with_name(f"{batch.stem} (copy).csv")
    shutil.copyfile(batch, copy)  # what a file manager's copy and paste makes

    for _run in range(2):  # every start, not only the first: no restart loop
        proc = project.run("--once")
        assert proc.returncode == 0, proc.stderr
        assert "invalid literal" not in proc.stderr + project.log("critical.log")
    assert sorted(r["link"] for r in project.rows()) == [f"http://example.com/item/{n}" for n in (1, 2, 3)]
    assert copy.exists() and not batch.exists()  # the daemon's own batch loaded; the copy untouched
    warned = [line for line in project.log().splitlines() if copy.name in line]
    assert len(warned) == 2 and all("WARNING" in line and "left alone" in line for line in warned)
    assert "rename it" in warned[0]
