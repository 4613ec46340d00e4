"""One child process measured as a whole process tree: wall time, CPU of it and all its descendants, peak RSS
summed over the tree. Linux only (/proc, prctl).

- CPU: our RUSAGE_CHILDREN before and after, which counts every process reaped, with what each of them reaped
  (os.wait4's rusage of one child is the same thing). A pool worker left behind by its parent (an os._exit)
  is reparented to us, a child subreaper, and reaped here: its CPU counts too.
- Cores busy over a span (cores_between): the live tree's user + system seconds from /proc/PID/stat at
  each sample, so a phase of a run (the polling, without start-up and flush) can be measured.
- Peak RSS: the largest sum of RSS over the tree at one sample, every SAMPLE_EVERY seconds, since a parse
  pool spreads memory over several processes and ru_maxrss is one process's peak. Pages the processes share
  (what a forkserver's children inherit) count once per process in that sum: an upper bound. The sum of PSS
  (each shared page divided among the processes that map it) is measured beside it: what the tree really
  holds. One sample walks /proc (about 2 ms of one core for 100 processes) and reads each of the tree's
  /proc/PID/smaps_rollup.
- Spared: processes of the bench's own that run beside the child (the nginx serving the feeds), passed by pid:
  they and their descendants are neither counted, nor waited for, nor killed.
- Per process (TreeUsage.processes): each role's peak (the child itself "main", the multiprocessing
  forkserver and resource tracker, the forkserver's children "parse", anything else "other"), and each
  process's PSS split (anonymous, file-backed, shared) at the sample where the tree's PSS peaked.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field

SAMPLE_EVERY = 0.05
ORPHANS_GRACE = 30.0  # seconds the processes left behind by the child get to end on their own
_PR_SET_CHILD_SUBREAPER = 36
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcessMemory:
    """One process's memory at one sample, KiB (smaps_rollup): PSS split into its anonymous and file-backed
    parts; `shared` the resident pages another process maps too (Shared_Clean + Shared_Dirty)."""
    role: str
    pid: int
    rss: int = 0
    pss: int = 0
    pss_anon: int = 0
    pss_file: int = 0
    shared: int = 0


@dataclass(frozen=True)
class TreeUsage:
    seconds: float      # wall time until the child itself ended
    code: int
    cpu: float          # user + system seconds of the child and all its descendants
    peak_mib: float     # the largest sum of RSS over the tree at one sample
    peak_pss_mib: float  # the largest sum of PSS over the tree at one sample
    orphans_killed: int  # descendants still alive ORPHANS_GRACE after the child ended
    said: str           # the tail of its stderr when it failed
    cpu_series: tuple[tuple[float, float], ...] = ()  # (time.monotonic(), CPU s of the live tree) per sample
    # Each process at the sample where the tree's PSS peaked, and each role's largest PSS sum (KiB) at one sample
    at_peak: tuple[ProcessMemory, ...] = ()
    role_peaks: dict[str, int] = field(default_factory=dict)

    def describe(self) -> list[str]:
        """Lines: each role's peak PSS, then every process at the tree's peak (MiB)."""
        peaks = ", ".join(f"{role} {kib / 1024:.0f}" for role, kib in sorted(self.role_peaks.items()))
        lines = [f"peak PSS per role, MiB (each at its own peak): {peaks}",
                 "at the tree's peak PSS, MiB: role pid RSS PSS (anon file) shared"]
        for p in sorted(self.at_peak, key=lambda p: (p.role, -p.pss)):
            lines.append(f"  {p.role:10} {p.pid:7d} {p.rss / 1024:6.0f} {p.pss / 1024:6.0f} ({p.pss_anon / 1024:5.0f} "
                         f"{p.pss_file / 1024:5.0f}) {p.shared / 1024:6.0f}")
        return lines

    @property
    def cores(self) -> float:
        """Cores busy on average over the wall time."""
        return self.cpu / self.seconds if self.seconds else 0.0

    def cores_between(self, start: float, end: float) -> float | None:
        """Cores busy on average between two time.monotonic() moments, from the samples around them
        (None when fewer than two samples fall in or around the span). A process that ended within the
        span takes its CPU out of the later samples: measure a span where the tree's processes live."""
        inside = [(t, cpu) for t, cpu in self.cpu_series if start <= t <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        return (c1 - c0) / (t1 - t0)


def measure(command: list[str], spare: Collection[int] = (), **popen_kwargs) -> TreeUsage:
    """Run `command` to its end (stdout discarded, stderr kept in a file: a full pipe would stop it). `spare`:
    pids of our processes running beside it (a server it talks to), left out with their descendants."""
    _become_subreaper()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = _PeakSampler(spare)
    sampler.start()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as said:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=said, **popen_kwargs)
        sampler.child = proc.pid
        _, status, _ = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        killed = _reap_orphans(spare)
        sampler.finish()
        said.seek(0)
        stderr = said.read().decode("utf-8", "replace").strip() if proc.returncode else ""
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return TreeUsage(seconds, proc.returncode, cpu, sampler.peak_rss_kib / 1024, sampler.peak_pss_kib / 1024,
                     killed, stderr[-300:], tuple(sampler.cpu_series), sampler.at_peak, dict(sampler.role_peaks))


def descendants(root: int) -> list[int]:
    """Every process below `root`, from the parent pids in /proc/*/stat (a process may end meanwhile)."""
    return _tree(_scan(), root)


def tree_cpu(root: int) -> float:
    """User + system seconds of `root` and of every live descendant, from one walk of /proc."""
    processes = _scan()
    return sum(processes[pid][1] for pid in [root, *_tree(processes, root)] if pid in processes)


def _scan() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, user + system seconds) of every process, from /proc/*/stat."""
    processes: dict[int, tuple[int, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # it ended meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ")".
        fields = stat[stat.rindex(b")") + 2:].split()
        # ppid, then utime and stime (stat's fields 4, 14 and 15)
        processes[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS)
    return processes


def _tree(processes: dict[int, tuple[int, float]], root: int, spare: Collection[int] = ()) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in processes.items():
        if pid not in spare:
            children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        below = children.get(todo.pop(), [])
        found.extend(below)
        todo.extend(below)
    return found


_ROLLUP = {b"Rss:": "rss", b"Pss:": "pss", b"Pss_Anon:": "pss_anon", b"Pss_File:": "pss_file",
           b"Shared_Clean:": "shared", b"Shared_Dirty:": "shared"}


def _memory(pid: int, role: str) -> ProcessMemory:
    """One process's memory in KiB; nothing when it has ended or is a zombie (which holds no memory)."""
    sizes = dict.fromkeys(_ROLLUP.values(), 0)
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                name = _ROLLUP.get(line.split(maxsplit=1)[0])
                if name:
                    sizes[name] += int(line.split()[1])
    except (OSError, IndexError):
        pass
    return ProcessMemory(role, pid, **sizes)


def _role(pid: int, child: int, processes: dict[int, tuple[int, float]], known: dict[int, str]) -> str:
    """What a process of the tree is, from its command line (read once per process) and its parent's role:
    a parse process is forked by the forkserver, and so shows the forkserver's command line."""
    if pid == child:
        return "main"
    if pid not in known:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            command = b""
        parent = processes.get(pid, (0, 0.0))[0]
        known[pid] = "parse" if known.get(parent) in ("forkserver", "parse") \
            else "forkserver" if b"forkserver" in command \
            else "tracker" if b"resource_tracker" in command else "other"
    return known[pid]


class _PeakSampler(threading.Thread):
    """The largest sums of RSS and of PSS over this process's descendants (the bench itself not counted),
    each role's largest PSS sum, and every process at the tree's PSS peak."""

    def __init__(self, spare: Collection[int] = ()) -> None:
        super().__init__(daemon=True)
        self.spare = spare
        self.peak_rss_kib = self.peak_pss_kib = 0
        self.cpu_series: list[tuple[float, float]] = []
        self.at_peak: tuple[ProcessMemory, ...] = ()
        self.role_peaks: dict[str, int] = {}
        self.child = 0  # the measured command's pid, once started: its role is "main"
        self._done = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        roles: dict[int, str] = {}
        while True:
            processes = _scan()  # one walk of /proc: the tree and its CPU
            tree = _tree(processes, me, self.spare)
            self.cpu_series.append((time.monotonic(), sum(processes[pid][1] for pid in tree)))
            sizes = [_memory(pid, _role(pid, self.child, processes, roles)) for pid in sorted(tree)]
            self.peak_rss_kib = max(self.peak_rss_kib, sum(p.rss for p in sizes))
            pss = sum(p.pss for p in sizes)
            if pss > self.peak_pss_kib:
                self.peak_pss_kib, self.at_peak = pss, tuple(p for p in sizes if p.rss)
            by_role: dict[str, int] = {}
            for p in sizes:
                by_role[p.role] = by_role.get(p.role, 0) + p.pss
            for role, kib in by_role.items():
                self.role_peaks[role] = max(self.role_peaks.get(role, 0), kib)
            if self._done.wait(SAMPLE_EVERY):
                return

    def finish(self) -> None:
        self._done.set()
        self.join()


def _become_subreaper() -> None:
    """Orphaned descendants come to us rather than to init, so that their CPU can be counted."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed: the tree's CPU cannot be counted")


def _reap_orphans(spare: Collection[int] = ()) -> int:
    """Reap what the child left behind; kill (by pid) what is still running after ORPHANS_GRACE. How many killed.
    The spared processes are neither waited for nor killed."""
    deadline, killed = time.monotonic() + ORPHANS_GRACE, 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return killed
        if pid:
            continue
        left = _tree(_scan(), os.getpid(), spare)
        if not left:
            return killed
        if time.monotonic() > deadline:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass  # it ended meanwhile
            deadline = float("inf")
        time.sleep(SAMPLE_EVERY)
