"""make test's two phases (tests/suite.py): one exit code and one closing line for both."""
from __future__ import annotations

from tests.suite import closing_line, combined


def test_a_failure_in_either_phase_fails_the_run_and_an_empty_phase_does_not():
    assert combined([0, 0]) == 0
    assert combined([0, 5]) == 0 and combined([5, 0]) == 0  # the selection had nothing of one phase
    assert combined([5, 5]) == 5  # nothing collected at all: still a failure, as pytest's own
    assert combined([1, 0]) == 1 and combined([0, 1]) == 1 and combined([5, 1]) == 1
    assert combined([2]) == 2  # an interrupted first phase ends the run with its code


def test_the_closing_line_adds_up_both_phases():
    line = closing_line(["===== 1 failed, 990 passed, 3 skipped, 2 warnings in 250.10s (0:04:10) =====",
                         "===== 9 passed in 80.00s (0:01:20) ====="], 331.5, 1)
    assert "1 failed, 999 passed, 3 skipped, 2 warnings in 331.50s" in line
    assert line.startswith("=") and line.endswith("=")
    assert "no tests ran" in closing_line(["=== no tests ran in 0.7s ===", None], 1.0, 5)
    assert "exit code 2" in closing_line([None], 1.0, 2)
