"""Identity first and the parse processes (issue 20): a poll's entries keyed before they are read whole,
only the entries its source's last poll had not seen read, and the parsing done in a pool of processes
(parser/pipeline/first_read.py, parser/core/cpu_pool.py).

What a user checks: the same rows and keys as reading everything (the 200 real feeds of the corpus),
a steady poll's line counting the unread entries as duplicates, a parse process that dies costing
nothing, and no process left behind by a stop, a Ctrl-C or a kill -9."""
from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

import pytest

from parser.adapters import parse_body
from parser.core.cpu_pool import CpuPool, ProcessDiedError
from parser.core.cpu_slots import cores
from parser.core.errors import ParseError
from parser.core.record import safe_record
from parser.fetch.http import FetchResult
from parser.pipeline.first_read import read_new
from parser.pipeline.identity import Identity
from parser.pipeline.last_polls import short_key
from parser.settings.params import settings_from_dict
from parser.sources.poll import Keying, Poller
from tests.conftest import ROOT, Project, corpus_dir
from tests.feeds import BASE_TIME, numbered_items, rss
from tests.process import wait_for

URL = "http://127.0.0.1:9/feed.xml"
RULE = ("auto", "sha224", "items")


class View:
    """A feed source as the adapters see it."""
    name, url, protocol, body_kind, max_items, full_text = "s", URL, "feed", "feed", 50, False
    headers: dict = {}
    api = auth = rate = None


def whole_read(body: bytes, identity: Identity) -> tuple[list[dict], list[str]]:
    """Today's way: every kept entry read whole, then keyed by the sink (parser/pipeline/sink.py)."""
    parsed = parse_body(View(), body, url=URL, headers={}, fetched="2026-12-01T00:00:00Z", limit=50)
    identified = identity.identify([safe_record(r) for r in parsed.records], (parsed.home, URL, URL))
    return identified.records, identified.keys


class FirstRead(NamedTuple):
    """read_new's records and what the first look found of them; `known`: the keys judged REPEATED."""
    records: list
    keys: list[str]
    known: list[str]
    digests: dict[str, str]


def first_read(body: bytes, known=None) -> FirstRead:
    parsed, keyed = read_new(View(), body, url=URL, headers={}, fetched="2026-12-01T00:00:00Z", limit=50,
                             keying=Keying(rule=RULE, last_poll=known, feed_urls=(URL,)))
    return FirstRead(parsed.records, keyed.keys, keyed.repeated, keyed.digests)


def test_the_corpus_keyed_first_gives_the_records_and_keys_of_a_whole_read():
    """Fields and keys exactly as before; with every key known with its digest nothing is read whole but
    the entries keyed by their content; with two keys unknown, or two digests differing (an edit), those two
    entries alone, each as a whole read gives it."""
    files = sorted(p for p in corpus_dir("fastfeedparser", "benchmark_data").iterdir() if p.is_file())
    identity = Identity("auto", "sha224")
    compared = partly = 0
    for path in files:
        body = path.read_bytes()
        try:
            records, keys = whole_read(body, identity)
        except ParseError:
            with pytest.raises(ParseError):
                first_read(body)
            continue
        first = first_read(body)
        assert (first.keys, [safe_record(r) for r in first.records]) == (keys, records), path.name
        assert first.known == []
        compared += 1
        digests = {short_key(k): first.digests[k] for k in keys if k in first.digests}
        steady = first_read(body, known=digests)
        assert steady.keys == [k for k in keys if k in steady.keys]  # the unread are the known ones
        assert sorted(steady.keys + steady.known) == sorted(keys)
        if len(set(keys)) > 2 and len(steady.known) == len(keys):
            partly += 1
            new = set(keys[:2])
            expected = [r for r, k in zip(records, keys, strict=True) if k in new]
            unknown = {k: d for k, d in digests.items() if k not in {short_key(n) for n in new}}
            edited = {k: (d if k not in {short_key(n) for n in new} else "0" * 16) for k, d in digests.items()}
            for known in (unknown, edited):
                changed = first_read(body, known=known)
                assert set(changed.keys) == new and len(changed.known) == len(keys) - len(changed.keys), path.name
                assert [safe_record(r) for r in changed.records] == expected, path.name
    assert compared > 150 and partly > 100  # the corpus was read, not skipped


def die() -> None:
    os._exit(3)


def test_a_parse_process_that_dies_is_replaced_and_only_its_own_work_fails():
    pool = CpuPool(2)
    try:
        assert pool.run(len, "abc") == 3
        with pytest.raises(ProcessDiedError):
            pool.run(die)
        assert pool.run(len, "abcd") == 4  # a new pool, started by the next work
        with pytest.raises(ParseError, match="empty body"):  # the work's own error comes back as it is
            pool.run(first_read, b"  ")
    finally:
        pool.close()


def resident_mib() -> float:
    """In a parse process: its resident memory, MiB."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:", 1)[1].split()[0]) / 1024


def hold_one_in(blocks: int) -> float:
    """In a parse process: a body's kind of garbage (many blocks of 1 KB, lxml's and nh3's size, from the
    heap) freed but for one in 64, which keeps the holes from joining into a heap top malloc gives back on
    its own; returns the resident MiB at its peak."""
    made = [bytes(1024) for _ in range(blocks)]
    peak = resident_mib()
    hold_one_in.kept = made[::64]  # type: ignore[attr-defined]  # alive until the next call
    return peak


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim and /proc: Linux")
def test_what_a_body_freed_goes_back_to_the_system_before_the_next_body():
    """A parse process trims malloc's free memory between bodies when it waits for work or holds over
    TRIM_ABOVE free, not after each body (the next one would fault the same pages in again)."""
    pool = CpuPool(1)
    try:
        peak = pool.run(hold_one_in, 200_000)  # 200 MiB
        after = pool.run(resident_mib)
    finally:
        pool.close()
    assert peak > 200
    assert after < peak - 150, f"{after:.0f} MiB resident after a peak of {peak:.0f} MiB"


def descendants() -> set[int]:
    """This process's descendants: its children (every thread's), theirs, and so on."""
    found: set[int] = set()
    parents = [os.getpid()]
    while parents:
        tasks = Path(f"/proc/{parents.pop()}/task")
        with contextlib.suppress(FileNotFoundError):  # one that ended meanwhile has none
            for task in tasks.iterdir():
                kids = {int(pid) for pid in (task / "children").read_text().split()} - found
                found |= kids
                parents += kids
    return found


def helpers() -> set[str]:
    """The multiprocessing helpers among this process's descendants: "forkserver", "resource_tracker"."""
    found = set()
    for pid in descendants():
        with contextlib.suppress(FileNotFoundError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            found |= {name for name in ("forkserver", "resource_tracker")
                      if b"multiprocessing." + name.encode() in command}
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="/proc: Linux")
def test_a_closed_pool_leaves_no_process_behind_and_a_new_one_starts_again():
    """The parse processes, the forkserver and the resource tracker all end with the pool (a --once's last
    flush holds no helper's memory beside its own); a pool made after it starts them again. Judged by what
    each process runs, so that a helper another test left running counts too."""
    before = descendants()
    pool = CpuPool(2)
    assert pool.run(len, "abc") == 3
    started = descendants() - before
    assert len(started) >= 2 and helpers() == {"forkserver", "resource_tracker"}
    pool.close()
    assert not descendants() & started and helpers() == set()
    again = CpuPool(1)
    try:
        assert again.run(len, "abcd") == 4
        assert helpers() == {"forkserver", "resource_tracker"}
    finally:
        again.close()
    assert descendants() <= before and helpers() == set()


class Sent(CpuPool):
    """The work done here, each piece kept as it would be sent to a parse process (pickled)."""

    def __init__(self):
        super().__init__(0)
        self.sent: list[bytes] = []

    def run(self, work, /, *args, **kwargs):
        self.sent.append(pickle.dumps((work, args, kwargs)))
        return super().run(work, *args, **kwargs)


class OneBody:
    def get(self, url, **_):
        return FetchResult(url=url, status=200, body=rss(numbered_items(1, 3)),
                           headers={"content-type": "application/rss+xml"})


# What a parse process imports to read the work it is sent, beyond the parsing modules the forkserver loaded.
_IMPORTED = """
import pickle, sys
pickle.loads(sys.stdin.buffer.read())
print(" ".join(m for m in ("sqlalchemy", "db", "parser.settings.params") if m in sys.modules))
"""


def test_a_parse_process_is_sent_the_source_without_the_settings(tmp_path):
    """The settings' Source goes as its ParseView: unpickling the Source itself imported the settings module
    and SQLAlchemy into every parse process (about 25 MiB each)."""
    source = settings_from_dict({"SOURCES": [{"name": "s", "url": URL}], "DB_URL": "sqlite:///db/items.db"},
                                tmp_path / "params.py").sources[0]
    cpu = Sent()
    poller = Poller(OneBody(), stop=threading.Event(), max_wait=5, cpu=cpu)
    _, parsed, _ = poller.poll(source, etag=None, last_modified=None, fetched="2026-12-01T00:00:00Z",
                               keying=Keying(rule=RULE, last_poll=None, feed_urls=(URL,)))
    assert parsed is not None and len(parsed.records) == 3 and len(cpu.sent) == 1
    said = subprocess.run([sys.executable, "-c", _IMPORTED], input=cpu.sent[0], capture_output=True, cwd=ROOT,
                          check=True)
    assert said.stdout.decode().strip() == ""


def test_on_demand_the_processes_start_only_when_work_would_wait_for_a_thread():
    """PARSE_PROCESSES "auto": a steady poll's few bodies are parsed in the daemon's threads (one per core
    at a time); the processes start when one more would wait, and then take all the work."""
    pool = CpuPool(2, on_demand=True)
    held, running = threading.Event(), threading.Semaphore(0)

    def hold() -> None:
        running.release()
        held.wait(30)

    try:
        assert pool.run(os.getpid) == os.getpid()  # a thread is free: done here, nothing started
        threads = [threading.Thread(target=pool.run, args=(hold,)) for _ in range(cores())]
        for thread in threads:
            thread.start()
        for _ in threads:
            assert running.acquire(timeout=30)
        elsewhere = pool.run(os.getpid)  # every thread slot busy: the processes start
        assert elsewhere != os.getpid()
        held.set()
        for thread in threads:
            thread.join(30)
        assert pool.run(os.getpid) != os.getpid()  # started: they take the work from now on
    finally:
        held.set()
        pool.close()


def feeds(count: int, newest: int = 20) -> dict[str, bytes]:
    return {f"/f{i}.xml": rss(numbered_items(newest - 19, 20, host=f"h{i}.example")) for i in range(count)}


def serve(server, bodies: dict[str, bytes]) -> list[dict]:
    for path, body in bodies.items():
        server.route(path, body=body)
    return [{"name": path.strip("/").removesuffix(".xml"), "url": server.url(path)} for path in bodies]


def stored(project) -> list[tuple]:
    return sorted((r["source"], r["guid"], r["link"], r["title"], r["summary"], r["published"], r["hash"])
                  for r in project.rows())


def test_a_run_with_parse_processes_stores_what_a_run_without_them_stores(server, tmp_path):
    sources = serve(server, feeds(30))
    runs = {}
    for processes in (0, 2):
        project = Project(tmp_path / f"p{processes}")
        project.folder.mkdir()
        project.write_params(SOURCES=sources, PARSE_PROCESSES=processes)
        project.run("--once", check=True)
        runs[processes] = stored(project)
        polls = project.rows("runs")  # 30 polls of 30 sources, each with something new
        assert len(polls) == len({r["source"] for r in polls}) == 30 and {r["outcome"] for r in polls} == {"new"}
        assert project.log("errors.log") == ""
    assert len(runs[0]) == 600 and runs[2] == runs[0]


def parse_processes(daemon: int) -> list[int]:
    """The pool's processes: those whose command line is the forkserver's or the resource tracker's and
    that started after the daemon (an orphan of the daemon has the init process as parent)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"multiprocessing" in command and f"PARSER_TEST_DAEMON={daemon}".encode() in environ:
            found.append(int(entry.name))
    return found


def started(project, tag: str, *, group: bool = False) -> subprocess.Popen:
    """The daemon, marked in its environment (its pool's processes inherit the mark)."""
    env = {**os.environ, "PARSER_TEST_DAEMON": tag}
    return subprocess.Popen(project.command(), cwd=project.folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=group)


@pytest.mark.parametrize("ending", ["SIGTERM", "SIGINT to the process group", "kill -9"])
def test_no_parse_process_outlives_the_daemon(server, project, ending):
    project.write_params(SOURCES=serve(server, feeds(3)), PARSE_PROCESSES=2, POLL_INTERVAL=1)
    tag = f"{os.getpid()}-{ending}"
    proc = started(project, tag, group=True)
    wait_for(lambda: project.log().count("  new ") >= 3, "the first polls")
    assert len(parse_processes(tag)) >= 3  # the forkserver and two parse processes (and the resource tracker)
    if ending == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    elif ending == "kill -9":
        proc.send_signal(signal.SIGKILL)
    else:  # what Ctrl-C in a terminal does: every process of the foreground group gets it
        os.killpg(proc.pid, signal.SIGINT)
    code = proc.wait(timeout=60)
    wait_for(lambda: not parse_processes(tag), "the parse processes to end", timeout=30)
    if ending != "kill -9":
        assert code == 0, proc.stderr.read()
        assert "died" not in project.log("errors.log")
        assert len(project.rows()) == 60


def test_a_parse_process_killed_while_the_daemon_runs_costs_no_poll(server, project):
    bodies = feeds(3)
    project.write_params(SOURCES=serve(server, bodies), PARSE_PROCESSES=2, POLL_INTERVAL=1,
                         FLUSH_INTERVAL=1)
    tag = f"{os.getpid()}-killed"
    proc = started(project, tag)
    try:
        wait_for(lambda: len(project.rows()) == 60, "the first polls stored")
        workers = [pid for pid in parse_processes(tag) if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        for pid in workers:  # the forkserver goes too: a new one is started with the new pool
            os.kill(pid, signal.SIGKILL)
        server.route("/f1.xml", body=rss(numbered_items(3, 20, host="h1.example")))  # items 3..22: two new
        wait_for(lambda: len(project.rows()) == 62, "the new entries stored after the kill")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert "internal error" not in project.log("errors.log")


def test_a_steady_poll_counts_the_entries_it_did_not_read_as_duplicates(server, project):
    """The second poll of a changed feed reads its two new entries; its runs row says 20 entries, 2 new
    (the 18 it did not read are duplicates)."""
    project.write_params(SOURCES=serve(server, {"/news.xml": rss(numbered_items(1, 20))}), POLL_INTERVAL=1,
                         FLUSH_INTERVAL=1)
    proc = project.start()
    try:
        wait_for(lambda: len(project.rows()) == 20, "the first poll's entries stored")
        later = numbered_items(3, 20)
        later[0]["date"] = later[1]["date"] = BASE_TIME + timedelta(days=1)
        server.route("/news.xml", body=rss(later))
        wait_for(lambda: len(project.rows()) == 22, "the two new entries stored")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert {"Item 21", "Item 22"} <= {r["title"] for r in project.rows()}
    polls = project.polls("news")  # (entries, new, changed) of each poll, from the runs table
    assert polls[0] == (20, 20, 0) and polls.count((20, 2, 0)) == 1, polls
    assert set(polls[1:]) <= {(20, 2, 0), (20, 0, 0)}, polls  # the other polls: 20 entries, nothing new


@pytest.mark.parametrize("value", [-1, 65, "many", 1.5, True])
def test_a_bad_parse_processes_is_a_settings_error(project, value):
    project.write_params(PARSE_PROCESSES=value)
    proc = project.run("--once")
    assert proc.returncode == 2 and "PARSE_PROCESSES" in proc.stderr, proc.stderr


_WHERE = """
import sys
sys.path.insert(0, sys.argv[1])
from parser.core.cpu_pool import CpuPool
from parser.core.where_am_i import where
pool = CpuPool(1, preload=("parser.pipeline.first_read",))  # as the feed pass's: the package loaded first
try:
    print(pool.run(where))
finally:
    pool.close()
"""


def test_parse_processes_run_the_daemons_own_copy_of_the_code(tmp_path):
    """Python 3.11's forkserver drops the daemon's sys.path: a daemon started from another checkout than
    the installed one (an old release tried beside it) parsed with the installed copy's code, the package
    being loaded by the forkserver's preload. Its parse processes import the daemon's own copy: here one
    that only this copy holds a module of."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "parser", copy / "parser", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "parser" / "core" / "where_am_i.py").write_text("import parser\n\n\ndef where() -> str:\n"
                                                           "    return parser.__file__\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run([sys.executable, "-c", _WHERE, str(copy)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip() == str(copy / "parser" / "__init__.py")
