"""The one collector of settings problems and the one "did you mean" (parser/core/problems.py)."""
from __future__ import annotations

import pytest

from parser.core.errors import SettingsError
from parser.core.problems import Problems, did_you_mean, unknown_key


def test_every_problem_is_said_with_its_file_and_where_and_all_are_raised_together():
    problems = Problems("params.py")
    problems.raise_if_any()  # none: nothing raised
    problems.add("TIMEOUT", "must be a number of seconds above 0, got 'x'")
    problems.add("SOURCES[0] ('a')", "name must be a non-empty string")
    with pytest.raises(SettingsError) as raised:
        problems.raise_if_any()
    assert str(raised.value) == ("params.py: TIMEOUT: must be a number of seconds above 0, got 'x'\n"
                                 "params.py: SOURCES[0] ('a'): name must be a non-empty string")


def test_has_tells_whether_a_place_has_a_problem_yet():
    problems = Problems("params.py")
    problems.add("LINK_JOBS[0] ('a')", "enabled must be True or False, got 1")
    assert problems.has("LINK_JOBS[0] ('a')")
    assert not problems.has("LINK_JOBS[1] ('b')")


def test_an_unset_secret_is_a_problem_for_the_daemon_and_a_note_for_other_commands():
    daemon, check = Problems("params.py"), Problems("params.py", secrets=False)
    for problems in (daemon, check):
        problems.secret_unset("SOURCES[0] ('a')", "secret_env: the environment variable X is not set")
    assert daemon.lines == ["params.py: SOURCES[0] ('a'): secret_env: the environment variable X is not set"]
    assert check.lines == [] and check.unset == [
        "SOURCES[0] ('a'): secret_env: the environment variable X is not set; only the daemon reads it, from its "
        "own environment (EnvironmentFile= in its systemd unit)"]


def test_did_you_mean_names_the_closest_known_word_or_nothing():
    assert did_you_mean("intervall", ("name", "interval")) == "did you mean 'interval'?"
    assert did_you_mean("POLL_INTERVALL", {"POLL_INTERVAL": 600}, quote=False) == "did you mean POLL_INTERVAL?"
    assert did_you_mean("zzz", ("name", "interval")) == ""
    assert did_you_mean(3, ("name",)) == ""  # a key that is no string is still looked up as text


def test_unknown_key_suggests_one_or_lists_them_all():
    assert unknown_key("intervall", ("name", "interval")) == "unknown key 'intervall', did you mean 'interval'?"
    assert unknown_key("zzz", ("name", "interval")) == "unknown key 'zzz' (known keys: name, interval)"
