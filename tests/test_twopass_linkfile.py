"""The link file at scale: statuses by line number, counters kept up to date, pass 2 read as a stream
from a cursor, a template's pass 1 checked in order against the file, and pass 1 of a big template
in bounded memory through the real daemon."""
from __future__ import annotations

from collections import Counter

import pytest

from linkgen.linkfile import Link, LinkFile, Mark
from tests.test_hostile_sources import MiB, run_measured

NOW = 1_700_000_000.0


def url(n: int) -> str:
    return f"http://shop.test/item/{n}"


def recount(lf: LinkFile) -> Counter:
    """What counts() must say, counted the slow way from the statuses."""
    counts = Counter(lf.status_at(i) for i in range(len(lf)))
    return +counts


def test_statuses_survive_a_restart_and_counters_match_a_recount(tmp_path):
    lf = LinkFile(tmp_path, "j", clock=lambda: NOW)
    lf.add(Link(url(n), 1, "http://shop.test/") for n in range(10))
    handed = list(lf.pending())
    assert [u for _, u in handed] == [url(n) for n in range(10)]
    lf.mark([Mark(url(0), "done", index=0), Mark(url(1), "gone", "HTTP 404", 1), Mark(url(2), "failed", "500", 2),
             Mark(url(3), "refused", "429", 3), Mark(url(4), "done")])  # the last found by its URL
    lf.mark([Mark(url(1), "reopen", "asked again", 1)])
    assert +lf.counts() == recount(lf) == Counter(done=2, retry=1, refused=1, pending=6)
    lf.close()
    status_lines = (tmp_path / "links.status").read_text().splitlines()[1:]
    assert [line.split("\t")[5] for line in status_lines] == ["0", "1", "2", "3", "4", "1"]

    clock = [NOW]
    again = LinkFile(tmp_path, "j", clock=lambda: clock[0])
    assert +again.counts() == Counter(done=2, retry=1, refused=1, pending=6)
    assert [again.status(url(n)) for n in range(5)] == ["done", "pending", "retry", "refused", "done"]
    # Now: the refused and reopened ones, then the untried; the retry only once its backoff has passed.
    assert [u for _, u in again.pending()] == [url(n) for n in (1, 3, 5, 6, 7, 8, 9)]
    assert url(2) in [u for _, u in again.pending(ignore_backoff=True)]
    clock[0] = NOW + 599  # the first retry waits RETRY_BASE (600 s) from its mark
    assert url(2) not in [u for _, u in again.pending(hand_out=False)]
    clock[0] = NOW + 600
    assert url(2) in [u for _, u in again.pending(hand_out=False)]
    again.close()


def test_status_lines_of_an_earlier_version_are_matched_by_url(tmp_path):
    (tmp_path / "links.txt").write_text("# header\n" + "".join(f"{url(n)}\t-\ttemplate\n" for n in range(4)))
    (tmp_path / "links.status").write_text("# header\n2026-01-01T00:00:00Z\tdone\t1\t" + url(2) + "\t\n"
                                           "2026-01-01T00:00:00Z\tretry\t1\t" + url(0) + "\tHTTP 500\n")
    lf = LinkFile(tmp_path, "j", clock=lambda: NOW)
    assert [lf.status_at(i) for i in range(4)] == ["retry", "pending", "done", "pending"]
    assert +lf.counts() == Counter(pending=2, done=1, retry=1)
    lf.close()


def test_pass_2_reads_on_from_where_it_stopped_and_gets_back_what_it_did_not_finish(tmp_path):
    lf = LinkFile(tmp_path, "j", clock=lambda: NOW)
    lf.add_template(url(n) for n in range(2000))
    stream = lf.pending()
    first = [next(stream) for _ in range(1000)]
    lf.mark(Mark(u, "done", index=i) for i, u in first[:990])  # 10 handed out and not finished
    del stream
    assert lf._cursor[0] == 1000  # the next call does not read the first 1,000 lines again
    rest = list(lf.pending())
    assert [i for i, _ in rest] == list(range(990, 2000))
    assert +lf.counts() == Counter(done=990, pending=1010)


def test_a_template_is_added_once_and_a_grown_one_adds_only_its_new_links(tmp_path):
    lf = LinkFile(tmp_path, "j", clock=lambda: NOW)
    assert lf.add_template(url(n) for n in [1, 2, 2, 3]) == 3  # a link the template repeats: once
    assert lf.add_template(url(n) for n in [1, 2, 2, 3]) == 0
    assert lf._index is None  # checked in order against the file: no map of URLs was built
    # Values inserted in the middle (a date range inside another grew): only those are new.
    assert lf.add_template(url(n) for n in [1, 2, 10, 3, 11]) == 2
    lf.close()
    lines = [line.split("\t")[0] for line in (tmp_path / "links.txt").read_text().splitlines()[1:]]
    assert lines == [url(n) for n in (1, 2, 3, 10, 11)]


@pytest.mark.slow
def test_pass_1_of_a_big_template_runs_in_memory_that_does_not_grow_with_it(server, project):
    """Peak RSS of --once --links-only over 100,000 and 500,000 values: the same (before this, each
    link cost over 100 bytes in a dict, so 500,000 links took about 50 MiB more than 100,000)."""
    peaks = {}
    for values in (100_000, 500_000):
        project.write_params(LINK_JOBS=[{"name": "big", "template": server.url("/p/{id}"),
                                         "values": {"id": range(values)}, "fields": {"t": "//h1"}}])
        run = run_measured(project, "--once", "--links-only", timeout=300)
        assert run["code"] == 0, run["stderr"]
        path = project.staging / "jobs" / "big" / "links.txt"
        with open(path, "rb") as f:
            assert sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b"")) == values + 1
        path.unlink()
        peaks[values] = run["peak"]
    assert peaks[500_000] - peaks[100_000] < 15 * MiB, {k: v / MiB for k, v in peaks.items()}
