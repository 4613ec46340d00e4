"""params.py is read once and every bad value is refused at start, naming the setting."""
from __future__ import annotations

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
