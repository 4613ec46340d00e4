"""The read-only commands need none of the daemon's secrets (issue 27, case 17). A webhook's secret_env
set in the daemon's environment (systemd's EnvironmentFile=) is not in an operator's shell: `check`,
`status`, `poll` and `export-opml` exited 2 there. Now they go on (`check` notes the variable), and the
daemon, which uses the secret, still refuses to start without it."""
from __future__ import annotations

import json

from tests.feeds import numbered_items, rss
from tests.process import free_port, start_listening, stop, wait_for

SECRET = "PARSER_TEST_READONLY_HOOK_SECRET"


def test_commands_run_without_the_daemons_secrets_and_the_daemon_still_needs_them(server, project, monkeypatch):
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")},
                                  {"name": "hook", "protocol": "webhook", "path": "/hooks/shop", "secret_env": SECRET}],
                         WEBHOOK_LISTEN=f"127.0.0.1:{free_port()}", FLUSH_INTERVAL=0.3)
    monkeypatch.setenv(SECRET, "s3cret")
    daemon = start_listening(project)  # the daemon's environment has it, as its unit's EnvironmentFile gives
    try:
        wait_for(lambda: len(project.rows()) == 2, "a's items stored")
        monkeypatch.delenv(SECRET)  # the operator's shell has not

        check = project.run("check")
        assert check.returncode == 0, check.stderr
        assert f"note:     SOURCES[1] ('hook'): secret_env: the environment variable {SECRET} is not set" \
            in check.stdout
        assert "only the daemon reads it, from its own environment (EnvironmentFile=" in check.stdout
        status = project.run("status")
        assert status.returncode == 0, status.stderr
        listed = json.loads(project.run("status", "--json", check=True).stdout)["sources"]
        assert {s["name"] for s in listed} == {"a", "hook"}
        opml = project.run("export-opml")
        assert opml.returncode == 0, opml.stderr
        assert server.url("/a.xml") in opml.stdout
        poll = project.run("poll", "a")
        assert poll.returncode == 0, poll.stdout + poll.stderr
        for proc in (check, status, opml, poll):
            assert "settings error" not in proc.stderr
    finally:
        assert stop(daemon) == 0

    refused = project.run("--once")  # the daemon itself: without the secret it cannot check a delivery
    assert refused.returncode == 2
    assert f"secret_env: the environment variable {SECRET} is not set" in refused.stderr
