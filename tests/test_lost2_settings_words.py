"""Issue 27 case 19, the settings' part: a lowercase `sources` is named, not ignored; a duration with
its unit ("10m") is taken by every setting of seconds, as UNIQUE_WINDOW takes it; a params.py any
user of the machine may write gets a warning."""
from __future__ import annotations

import os

from parser.settings.params import load_settings


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
