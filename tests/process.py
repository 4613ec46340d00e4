"""Helpers for tests that run the daemon as a long-lived process: a free loopback port, waiting for a
condition, starting the daemon and waiting until it listens."""
from __future__ import annotations

import functools
import glob
import io
import itertools
import os
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Callable

# A port for a daemon to listen on (or one nothing listens on), from below the kernel's ephemeral range.
# A port found free by binding to 0 comes from that range, and between the test closing it and the daemon
# binding it, any outgoing connection of the suite (thousands a run) may take it as its own source port:
# "address already in use" at the daemon's start, run 3 of a 10-run make test loop. Below the range the
# kernel hands out nothing; each xdist worker counts through its own slice, so workers never pick alike.
PORTS_FROM, PORTS_PER_WORKER = 20000, 1000


@functools.cache
def _worker_ports() -> range:
    """This xdist worker's slice (gw0 when not under xdist), below ip_local_port_range's first port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as found:
            ephemeral = int(found.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768  # Linux's default
    low = PORTS_FROM + index % max(1, (ephemeral - PORTS_FROM) // PORTS_PER_WORKER) * PORTS_PER_WORKER
    return range(low, low + PORTS_PER_WORKER)


# Where in the slice the next one is tried; this session's pid as the start, as an earlier session's
# ports may linger (TIME_WAIT).
_next_port = itertools.count(os.getpid())


def free_port() -> int:
    ports = _worker_ports()
    for _ in ports:
        port = ports[next(_next_port) % len(ports)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # held by something else: the next one
                continue
            return port
    raise AssertionError(f"no free port in {ports.start}-{ports.stop - 1}")


def wait_for(condition: Callable[[], object], what: str, timeout: float = 120.0) -> None:
    """Poll `condition` until it holds; `timeout` only bounds a hang (a loaded machine is slow, not
    wrong), so it is generous."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def start_listening(project, preexec_fn=None) -> subprocess.Popen:
    """Start the daemon (no --once) and return once parser.log says it listens; `preexec_fn` runs in
    the child before the daemon (a resource limit)."""
    before = project.log().count("listening on")  # an earlier run's line is no sign of this one
    proc = project.start(preexec_fn=preexec_fn)

    def listening() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited {proc.returncode}: {proc.stderr.read()}")
        return project.log().count("listening on") > before

    wait_for(listening, "the daemon's listener")
    return proc


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> int:
    """SIGTERM, as a service manager would: the daemon flushes and exits. One that does not is asked
    for its threads' stacks (SIGUSR2), killed, and the test fails showing them: where it hung."""
    proc.send_signal(signal.SIGTERM)
    try:
        # communicate, not wait: the daemon's stdout and stderr are read while it shuts down. With wait, a
        # daemon that wrote more than a pipe holds (64 KiB) on its way out blocked in the write for good:
        # SIGTERM caught, its stack in logging's emit (the listener test's daemon, 1 of 10 make test runs).
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        masks = signal_masks(proc.pid)  # before the stacks: whether the SIGTERM is still pending, and where
        proc.send_signal(signal.SIGUSR2)
        time.sleep(1)  # faulthandler writes at once; a second is plenty before the kill
        proc.kill()
        _, stderr = proc.communicate(timeout=30)
        raise AssertionError(f"the daemon did not stop within {timeout:g} s of SIGTERM; its signal masks:\n{masks}\n"
                             f"its stacks:\n{(stderr or '')[-20000:]}") from None
    # What was read stays readable as the pipes were: tests read a stopped daemon's proc.stderr.
    proc.stdout, proc.stderr = _readable(out), _readable(err)
    return proc.returncode


def _readable(text: str | bytes | None) -> io.StringIO | io.BytesIO | None:
    if text is None:
        return None
    return io.StringIO(text) if isinstance(text, str) else io.BytesIO(text)


def signal_masks(pid: int) -> str:
    """The process's and each thread's signal masks from /proc (hexadecimal, bit 14 = SIGTERM): a SIGTERM
    pending in ShdPnd with every thread blocking it (SigBlk) never reaches the daemon's handler; one
    caught (SigCgt) and no longer pending reached it."""
    lines = []
    for status in [f"/proc/{pid}/status", *sorted(glob.glob(f"/proc/{pid}/task/*/status"))]:
        try:
            with open(status) as file:
                fields = dict(line.rstrip("\n").split(":\t", 1) for line in file if ":\t" in line)
        except OSError:
            continue
        lines.append(f"{status}: " + " ".join(f"{k}={fields.get(k, '?')}" for k in
                                               ("Name", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))
    return "\n".join(lines) or "(gone)"


def lock_sqlite(path) -> sqlite3.Connection:
    """Hold SQLite's write lock on `path` (made if absent) as another process would: the daemon's
    flushes fail with "database is locked" until the returned connection runs ROLLBACK."""
    path.parent.mkdir(parents=True, exist_ok=True)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("CREATE TABLE IF NOT EXISTS placeholder (x)")
    blocker.execute("BEGIN EXCLUSIVE")
    return blocker
