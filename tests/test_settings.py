"""params.py is read once and every bad value is refused at start, naming the setting."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import parser
from parser.core.errors import SettingsError
from parser.settings.params import load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "params.py"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(SettingsError) as info:
        load_settings(write(tmp_path, text))
    return str(info.value)


def test_defaults_and_relative_paths_resolve_beside_params(tmp_path):
    settings = load_settings(write(tmp_path, "SOURCES = [{'name': 'a', 'url': 'feeds/a.xml'}]\n"))
    assert settings.db_url == f"sqlite:///{tmp_path}/db/items.db"
    assert settings.staging_dir == tmp_path / "staging" and settings.log_dir == tmp_path / "logs"
    assert settings.sources[0].url == (tmp_path / "feeds" / "a.xml").as_uri()
    assert settings.sources[0].max_items == 50 and settings.sources[0].interval == 600
    assert settings.unique_fields == "auto" and settings.hash == "sha224" and settings.dedup == "hashfile"
    assert settings.concurrency == 32 and settings.max_bytes == 10 * 1024 * 1024
    # The default User-Agent names the version the package is, not one written down once and forgotten.
    assert settings.user_agent.startswith(f"parser-daemon/{parser.__version__} ")


def test_lowercase_helpers_are_ignored_and_per_source_values_win(tmp_path):
    settings = load_settings(write(tmp_path, (
        "base = 'https://example.com'\n"
        "POLL_INTERVAL = 60\n"
        "SOURCES = [{'name': 'a', 'url': base + '/feed', 'interval': 5, 'max_items': 3, 'headers': {'X': 'y'},"
        " 'tags': ['t'], 'enabled': False}]\n")))
    source = settings.sources[0]
    assert (source.url, source.interval, source.max_items, dict(source.headers), source.tags, source.enabled) == \
        ("https://example.com/feed", 5.0, 3, {"X": "y"}, ("t",), False)


def test_postgresql_url_is_sent_to_psycopg3(tmp_path):
    settings = load_settings(write(tmp_path, "DB_URL = 'postgresql://u@127.0.0.1/db'\n"))
    assert settings.db_url == "postgresql+psycopg://u@127.0.0.1/db"


@pytest.mark.parametrize("text, expected", [
    ("SOURCS = []\n", "SOURCS: unknown setting, did you mean SOURCES?"),
    ("POLL_INTERVAL = 'often'\n", "POLL_INTERVAL: must be a number of seconds above 0, got 'often'"),
    ("POLL_INTERVAL = 0\n", "POLL_INTERVAL: must be a number of seconds above 0"),
    ("CONCURRENCY = True\n", "CONCURRENCY: must be a whole number above 0, got True"),
    ("DEDUP = 'sometimes'\n", "DEDUP: must be one of hashfile, bloom, off"),
    ("HASH = 'crc32'\n", "HASH: must be one of"),
    ("UNIQUE_FIELDS = ['url']\n", "UNIQUE_FIELDS: must be a non-empty list of record fields"),
    ("UNIQUE_FIELDS = []\n", "UNIQUE_FIELDS: must be a non-empty list"),
    ("SOURCES = {'name': 'a'}\n", "SOURCES: must be a list of dicts, got dict"),
    ("SOURCES = [{'name': 'a', 'url': 'ftp://example.com/x'}]\n",
     "SOURCES[0] ('a'): url must be an http(s) URL, a file:// URL or a file path, got 'ftp://example.com/x'"),
    ("SOURCES = [{'name': 'a', 'url': 'http://x/a'}, {'name': 'a', 'url': 'http://x/b'}]\n",
     "SOURCES[1] ('a'): duplicate source name 'a'"),
    ("SOURCES = [{'url': 'http://x/a'}]\n", "SOURCES[0]: name must be a non-empty string"),
    ("SOURCES = [{'name': 'a', 'url': 'http://x/a', 'intervall': 5}]\n",
     "SOURCES[0] ('a'): unknown key 'intervall', did you mean 'interval'?"),
    ("SOURCES = [{'name': 'a', 'url': 'http://x/a', 'headers': {'X': 1}}]\n", "headers must be a dict of strings"),
    ("SOURCES = [{'name': 'a', 'url': 'http://x/a', 'max_items': 0}]\n", "max_items must be a whole number above 0"),
    ("TIMEOUT = 30\nDEADLINE = 10\n", "DEADLINE: must be at least TIMEOUT (30), got 10"),
])
def test_bad_values_name_the_setting(tmp_path, text, expected):
    assert expected in error_of(tmp_path, text)


def test_every_problem_is_reported_at_once(tmp_path):
    message = error_of(tmp_path, "SOURCS = []\nDEDUP = 'x'\nTIMEOUT = -1\n")
    assert len(message.splitlines()) == 3


def test_a_params_file_that_does_not_import_names_the_file_and_line(tmp_path):
    message = error_of(tmp_path, "POLL_INTERVAL = 60\nSOURCES = [\n")
    assert "params.py: does not import" in message and "SyntaxError" in message
    message = error_of(tmp_path, "x = 1\ny = undefined_name\n")
    assert "(line 2)" in message and "NameError" in message


def test_missing_params_file(tmp_path):
    with pytest.raises(SettingsError, match="params file does not exist"):
        load_settings(tmp_path / "nope.py")


def test_run_daemon_exits_2_on_bad_settings_and_creates_nothing(project):
    project.write_params(SOURCS=[], DEDUP="maybe")
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "SOURCS: unknown setting, did you mean SOURCES?" in proc.stderr
    assert "DEDUP: must be one of" in proc.stderr
    assert not project.staging.exists() and not project.logs.exists() and not project.db_path.parent.exists()


def test_run_daemon_exits_2_when_params_file_is_missing(project):
    proc = project.run("--once")
    assert proc.returncode == 2 and "params file does not exist" in proc.stderr


def test_the_repository_params_file_is_valid():
    root = Path(__file__).resolve().parents[1]
    settings = load_settings(root / "params.py")
    assert any(s.url.startswith("file:") for s in settings.sources)
    assert settings.db_url.startswith("sqlite:///")


# Issue 27 case 19, the settings' part: a lowercase `sources` is named, not ignored; a duration with
# its unit ("10m") is taken by every setting of seconds, as UNIQUE_WINDOW takes it; a params.py any
# user of the machine may write gets a warning.
def test_a_lowercase_sources_is_refused_saying_did_you_mean_sources(project):
    project.write_params('sources = [{"name": "a", "url": "http://127.0.0.1:9/feed.xml"}]\n'
                         'feed_base = "http://127.0.0.1:9"')  # a helper value of one's own: welcome
    done = project.run("check")
    assert done.returncode == 2, done.stdout
    assert "sources: settings are read in UPPERCASE only; did you mean SOURCES?" in done.stderr
    assert "feed_base" not in done.stderr


def test_every_setting_of_seconds_takes_a_duration_with_its_unit(project):
    project.write_params(POLL_INTERVAL="1h", FLUSH_INTERVAL="30s", TIMEOUT=10,
                         SOURCES=[{"name": "a", "url": "http://127.0.0.1:9/feed.xml", "interval": "10m"},
                                  {"name": "b", "url": "http://127.0.0.1:9/b.xml"}],
                         LINK_JOBS=[{"name": "pages", "template": "http://127.0.0.1:9/item/{id}",
                                     "values": {"id": [1]}, "fields": {"name": "//h1/text()"},
                                     "interval": "1d", "delay": "2s"}])
    done = project.run("check")
    assert done.returncode == 0, done.stderr
    settings = load_settings(project.params)
    assert settings.poll_interval == 3600 and settings.flush_interval == 30
    assert [s.interval for s in settings.sources] == [600, 3600]
    assert settings.link_jobs[0].interval == 86400 and settings.link_jobs[0].delay == 2


def test_a_world_writable_params_py_gets_a_warning(project):
    project.write_params(SOURCES=[])
    os.chmod(project.params, 0o666)
    done = project.run("check")
    assert done.returncode == 0, done.stderr
    assert "is writable by every user of this machine" in done.stdout
    os.chmod(project.params, 0o644)
    assert "writable by every user" not in project.run("check").stdout
