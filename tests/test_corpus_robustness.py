"""The 200 real feeds of ../shared/corpus/fastfeedparser/benchmark_data through the whole pipeline in
one --once from a loopback server: each stores its entries or gives an error line, none crashes the
daemon, and the rows match what the runs table says was staged."""
from __future__ import annotations

import sqlite3
from collections import Counter

import pytest

from tests.conftest import Project, corpus_dir
from tests.server import LoopbackServer


@pytest.mark.slow
def test_every_real_feed_stores_its_entries_or_gives_an_error_line(tmp_path):
    folder = corpus_dir("fastfeedparser", "benchmark_data")
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    assert len(files) >= 200
    server = LoopbackServer().start()
    sources = []
    for path in files:
        body = path.read_bytes()
        json_body = body.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")
        server.route(f"/{path.name}", body=body,
                     content_type="application/feed+json" if json_body else "application/xml")
        sources.append({"name": path.name, "url": server.url(f"/{path.name}")})
    project = Project(tmp_path)
    # Every entry of every feed counts: no per-source cap, uniqueness within each source.
    project.write_params(SOURCES=sources, MAX_ITEMS=100_000, UNIQUE_FIELDS=["source", "guid", "link"],
                         PER_HOST=8, CONCURRENCY=8, FLUSH_INTERVAL=3600, DEADLINE=120, TIMEOUT=60)
    try:
        proc = project.run("--once", timeout=600)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    assert project.log("critical.log") == ""

    # Each feed's poll that read its body, from the runs table: (new, entries read); a failed one has its error row.
    staged = {r["source"]: (r["new"], r["entries"]) for r in project.rows("runs") if r["outcome"] != "error"}
    errors = Counter(line.split("  ")[1] for line in project.log("errors.log").splitlines())
    con = sqlite3.connect(project.db_path)
    rows = dict(con.execute("SELECT source, COUNT(*) FROM items GROUP BY source").fetchall())
    con.close()

    silent = [p.name for p in files if p.name not in errors and sum(staged.get(p.name, (0, 0))) == 0]
    assert not silent, f"neither entries nor an error line: {silent}"
    assert "internal error" not in project.log()
    for name, (new, _) in staged.items():
        assert rows.get(name, 0) == new, f"{name}: its runs row says {new} staged, the table holds {rows.get(name, 0)}"
    failed = [p.name for p in files if p.name not in staged]
    print(f"\n{len(files)} feeds: {len(staged)} parsed, {sum(rows.values())} rows stored, "
          f"{len(failed)} refused with an error line, {len(errors)} sources with an errors.log line")
