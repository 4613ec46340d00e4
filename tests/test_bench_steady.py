"""The steady-state bench's own machinery (bench/bench_steady.py): new entries put into real feed shapes, and a
process tree measured whole, a worker left behind by its parent included."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import feedparser
import pytest

from bench.feed_edits import with_new_entries

ROOT = Path(__file__).resolve().parents[1]
WHEN = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)

RSS = b"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>t</title><link>http://a.test/</link>
<item><title>old</title><link>http://a.test/old</link><guid>old</guid></item></channel></rss>"""
ATOM = b"""<?xml version="1.0"?><!-- <item> in a comment -->
<a:feed xmlns:a="http://www.w3.org/2005/Atom"><a:title>t</a:title><a:id>urn:t</a:id>
<a:entry><a:id>urn:old</a:id><a:title>old</a:title><a:link href="http://a.test/old"/></a:entry></a:feed>"""
RDF = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
 xmlns:dc="http://purl.org/dc/elements/1.1/"><channel rdf:about="http://a.test/"><title>t</title>
<link>http://a.test/</link><items><rdf:Seq><rdf:li resource="http://a.test/old"/></rdf:Seq></items></channel>
<item rdf:about="http://a.test/old"><title>old</title><link>http://a.test/old</link></item></rdf:RDF>"""
EMPTY_RSS = b"""<rss version="2.0"><channel><title>no items yet</title></channel></rss>"""


@pytest.mark.parametrize("body", [RSS, ATOM, RDF, EMPTY_RSS], ids=["rss", "prefixed-atom", "rdf", "empty-rss"])
def test_new_entries_come_first_and_are_read_as_entries(body):
    before = len(feedparser.parse(body).entries)
    edited = with_new_entries(with_new_entries(body, "one", WHEN), "two", WHEN)
    entries = feedparser.parse(edited).entries
    assert len(entries) == before + 4
    assert [e.link for e in entries[:4]] == ["https://steady.example/two/0", "https://steady.example/two/1",
                                             "https://steady.example/one/0", "https://steady.example/one/1"]
    dated = entries[0].get("published_parsed") or entries[0].get("updated_parsed")
    assert tuple(dated[:6]) == (2030, 1, 2, 3, 4, 5)


def test_new_entries_in_a_json_feed():
    body = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t", "items": [{"id": "old"}]})
    items = json.loads(with_new_entries(body.encode(), "one", WHEN))["items"]
    assert [i["id"] for i in items] == ["steady-one-0", "steady-one-1", "old"]
    assert items[0]["date_published"] == "2030-01-02T03:04:05Z"


def test_a_body_it_cannot_edit_says_so():
    with pytest.raises(ValueError, match="UTF-16"):
        with_new_entries(RSS.decode().encode("utf-16"), "one", WHEN)
    with pytest.raises(ValueError, match="root element"):
        with_new_entries(b"<html><body>not a feed</body></html>", "one", WHEN)


# A parent that starts a worker and leaves at once (os._exit, as the daemon does), the worker holding 64 MiB
# and spending 0.4 s of CPU after its parent has gone.
_LEAVES_A_WORKER = """
import os, subprocess, sys
worker = "import time; held = bytearray(64 << 20); held[::4096] = b'x' * len(held[::4096]);" \\
         "import sys; sys.stdin.read();" \\
         "start = time.process_time()\\nwhile time.process_time() - start < 0.4: pass"
proc = subprocess.Popen([sys.executable, "-c", worker], stdin=subprocess.PIPE)
os._exit(0)
"""
_MEASURE = """
import json, sys
from bench.tree_usage import measure
usage = measure([sys.executable, "-c", sys.argv[1]])
print(json.dumps({"cpu": usage.cpu, "peak": usage.peak_mib, "pss": usage.peak_pss_mib,
                  "code": usage.code, "killed": usage.orphans_killed}))
"""


def test_the_whole_tree_is_measured_an_orphaned_worker_included():
    # In a process of its own: measure() makes its caller a subreaper and reaps any child that ended.
    said = subprocess.run([sys.executable, "-c", _MEASURE, _LEAVES_A_WORKER], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    usage = json.loads(said.stdout)
    assert usage["code"] == 0 and usage["killed"] == 0
    assert usage["cpu"] >= 0.4          # the worker's CPU, spent after its parent had gone
    assert usage["peak"] >= 64 and usage["pss"] >= 64  # the worker's memory, though its parent has ended


# Sleeps 0.6 s, then spends 0.5 s of CPU; writes the monotonic clock (system-wide) at each change of phase.
_SLEEPS_THEN_WORKS = """
import sys, time
marks = [time.monotonic()]
time.sleep(0.6)
marks.append(time.monotonic())
start = time.process_time()
while time.process_time() - start < 0.5:
    pass
marks.append(time.monotonic())
open(sys.argv[1], "w").write(" ".join(map(str, marks)))
"""
_MEASURE_SPANS = """
import json, sys
from bench.tree_usage import measure
usage = measure([sys.executable, "-c", sys.argv[1], sys.argv[2]])
asleep, busy, done = map(float, open(sys.argv[2]).read().split())
spans = {"asleep": (asleep, busy), "busy": (busy, done)}
print(json.dumps({name: [usage.cores_between(a, b), b - a] for name, (a, b) in spans.items()}))
"""


def test_cores_busy_over_a_span_of_the_run(tmp_path):
    """What bench_steady reports as the cores busy while polling: the tree's CPU between two moments."""
    said = subprocess.run([sys.executable, "-c", _MEASURE_SPANS, _SLEEPS_THEN_WORKS, str(tmp_path / "marks")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    spans = json.loads(said.stdout)
    (asleep, asleep_for), (busy, busy_for) = spans["asleep"], spans["busy"]
    assert asleep is not None and asleep * asleep_for < 0.1  # CPU s spent while it slept
    assert busy is not None and busy * busy_for > 0.3  # of the 0.5 CPU s it spent, whatever the load


# A server the bench started beside the measured child (as bench_steady starts nginx): 64 MiB held, alive
# throughout. Then a child that ends at once is measured with the server spared.
_SPARES_A_SERVER = """
import json, subprocess, sys, time
from bench.tree_usage import measure
server = subprocess.Popen([sys.executable, "-c", "held = bytearray(64 << 20); held[::4096] = b'x' * len(held[::4096]);"
                           "import sys; print(flush=True); sys.stdin.read()"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE)
server.stdout.readline()  # its memory is held
started = time.monotonic()
usage = measure([sys.executable, "-c", "pass"], spare=[server.pid])
print(json.dumps({"peak": usage.peak_mib, "killed": usage.orphans_killed, "seconds": time.monotonic() - started,
                  "alive": server.poll() is None}))
server.stdin.close()
server.wait()
"""


def test_a_spared_server_beside_the_child_is_neither_counted_nor_waited_for():
    said = subprocess.run([sys.executable, "-c", _SPARES_A_SERVER], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    usage = json.loads(said.stdout)
    assert usage["alive"] and usage["killed"] == 0
    assert usage["peak"] < 64                 # the server's memory is not the child's
    assert usage["seconds"] < 20              # not held for ORPHANS_GRACE (30 s) waiting for it to end
