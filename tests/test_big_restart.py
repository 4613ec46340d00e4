"""A restart with many records waiting (after a crash or a database outage) opens and repairs its
files in one pass: 200,000 waiting rows with a torn last record are flushed by one `--once` (the old
tail repair sliced the file once per record: hours at this size)."""
from __future__ import annotations

import pytest

from tests.feeds import OLD_RECORD_FIELDS  # the rows waiting at an upgrade's first start

WAITING = 200_000


def waiting_row(n: int) -> str:
    cells = [f"{n:056x}", "big", f"urn:{n}", f"http://big.example/{n}", f"Waiting {n}", "", "",
             "two\nlines", "", "2026-11-01T00:00:00Z"]
    return ",".join(f'"{c}"' for c in cells) + "\n"


@pytest.mark.slow
def test_a_restart_over_200000_waiting_rows_flushes_them_all(project):
    project.staging.mkdir(parents=True)
    with open(project.staging / "staging.csv", "w", encoding="utf-8", newline="") as f:
        f.write(",".join(f'"{c}"' for c in ("hash", *OLD_RECORD_FIELDS)) + "\n")
        f.writelines(waiting_row(n) for n in range(WAITING))
        f.write(waiting_row(WAITING)[:90])  # torn inside the quoted two-line summary
    project.write_params(SOURCES=[])
    # The bound is generous for a loaded machine (bench/bench_restart.py has the figures); the old
    # repair needed about 70 s for 8,000 rows and grows with the square.
    proc = project.run("--once", timeout=400)
    assert proc.returncode == 0, (proc.stderr, project.log("critical.log"))
    assert "repaired staging.csv: dropped a torn last record" in project.log()
    rows = project.rows()
    assert len(rows) == WAITING and rows[-1]["title"] == f"Waiting {WAITING - 1}"
    assert rows[0]["summary"] == "two\nlines"

