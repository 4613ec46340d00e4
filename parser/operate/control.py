"""Commands for the running daemon (`parser-daemon reset SOURCE`, `parser-daemon poll SOURCE`),
handed over through files, so only the main thread ever changes a source's state.

The command writes STAGING_DIR/control/<id>.request.json (written whole, then renamed); the main
loop looks for requests a few times a second, takes them (deletes the request), applies them and
answers in <id>.reply.json: first "accepted", then "done" with the poll's outcome. The command
waits for the answer, prints it, and removes the reply.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..core.jsonfile import read_object, write_whole

VERBS = ("reset", "poll")
REPLY_WAIT = 10.0          # seconds a command waits for the daemon's answer
STALE_REPLY = 3600.0       # a reply no command came for (it was killed) is removed after this
# The commands' exit codes, one per outcome (docs/operating.md, "reset SOURCE and poll SOURCE"):
DONE = 0            # done, or taken and still running
NO_DAEMON = 1       # no daemon runs on the staging folder, or it did not take the request
NOT_POLLED = 2      # no such source in params.py, or the daemon does not poll it
REFUSED = 3         # the daemon refused it: held by Retry-After, claimed by another daemon of the group
POLL_FAILED = 4     # polled, and the poll failed (`reset old-forum: HTTP 410 Gone`)


def invoked_as() -> str:
    """The command as the operator typed it, for hints: `parser-daemon` when installed, `python
    run_daemon.py` in a checkout (sys.argv[0]'s name)."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if name.endswith(".py") and name != "__main__.py":
        return f"python {name}"
    return name if name and name not in ("-c", "__main__.py") else "parser-daemon"


@dataclass(frozen=True)
class Request:
    id: str
    verb: str
    source: str


def control_folder(staging_dir: Path) -> Path:
    return staging_dir / "control"


def daemon_pid(staging_dir: Path) -> int | None:
    """The pid in STAGING_DIR/daemon.lock when that process is alive, else None.

    Read, never locked: taking the lock, even for a moment, could make a daemon starting just then
    refuse to run. A pid reused by another process is possible; a command then waits in vain and
    says so."""
    try:
        text = (staging_dir / "daemon.lock").read_text(encoding="ascii", errors="replace").strip()
        pid = int(text)
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, owned by another user
    return pid


# -- the daemon's side ---------------------------------------------------------------------------
class ControlBox:
    def __init__(self, staging_dir: Path):
        self.folder = control_folder(staging_dir)
        self.folder.mkdir(parents=True, exist_ok=True)

    def waiting(self) -> bool:
        """Cheap enough to ask a few times a second: one listing of a folder that is nearly always empty."""
        with os.scandir(self.folder) as entries:
            return any(e.name.endswith(".request.json") for e in entries)

    def take(self) -> list[Request]:
        """The requests waiting, oldest first, each removed as it is read; unreadable ones answered."""
        now = time.time()
        taken: list[Request] = []
        for path in sorted(self.folder.iterdir()):
            if path.name.endswith(".reply.json") and now - _mtime(path) > STALE_REPLY:
                _remove(path)
            if not path.name.endswith(".request.json"):
                continue
            rid = path.name[: -len(".request.json")]
            data = read_object(path)
            if not _remove(path):
                continue  # its command gave up and took it back
            if data is None or data.get("verb") not in VERBS or not isinstance(data.get("source"), str):
                self.answer(Request(rid, "?", "?"), ok=False, code=2, done=True,
                            message=f"not a request this daemon understands ({', '.join(VERBS)} SOURCE)")
                continue
            taken.append(Request(rid, data["verb"], data["source"]))
        return taken

    def answer(self, request: Request, *, ok: bool, done: bool, message: str, code: int | None = None) -> None:
        code = (DONE if ok else REFUSED) if code is None else code
        write_whole(self.folder / f"{request.id}.reply.json",
                    {"id": request.id, "ok": ok, "code": code, "done": done, "message": message})


# -- the command's side --------------------------------------------------------------------------
def send(staging_dir: Path, verb: str, source: str, out: TextIO, err: TextIO, *,
         wait: float = REPLY_WAIT, params: Path | None = None) -> int:
    """Hand one command to the running daemon and print its answer; return the exit code (DONE,
    NO_DAEMON, NOT_POLLED, REFUSED, POLL_FAILED above). `params`: the params file, named in a hint."""
    pid = daemon_pid(staging_dir)
    if pid is None:
        named = f" --params {params}" if params is not None else ""
        print(f"error: no daemon is running on {staging_dir} (no live process in its daemon.lock); "
              f"start it, or poll once with: {invoked_as()}{named} --once --source {source}", file=err)
        return NO_DAEMON
    folder = control_folder(staging_dir)
    folder.mkdir(parents=True, exist_ok=True)
    rid = f"{time.time_ns()}-{os.getpid()}"
    request, reply_path = folder / f"{rid}.request.json", folder / f"{rid}.reply.json"
    write_whole(request, {"verb": verb, "source": source})
    deadline = time.monotonic() + wait
    reply = None
    while time.monotonic() < deadline:
        reply = read_object(reply_path) or reply
        if reply is not None and reply.get("done"):
            break
        time.sleep(0.05)
    if reply is None and _remove(request):
        print(f"error: the daemon (pid {pid}) did not take the request in {wait:g} s; is its loop stuck? "
              "See its logs/parser.log", file=err)
        return NO_DAEMON
    _remove(reply_path)
    if reply is None:  # taken at the last moment, not answered yet
        print(f"{verb} {source}: taken by the daemon (pid {pid}); see logs/parser.log for the outcome", file=out)
        return DONE
    stream = out if reply.get("ok") else err
    message = str(reply.get("message", ""))
    if not reply.get("done"):
        message += f"; not finished after {wait:g} s, see logs/parser.log for the outcome"
    print(message if reply.get("ok") else f"error: {message}", file=stream)
    code = reply.get("code", NO_DAEMON)
    return code if isinstance(code, int) else NO_DAEMON


def _remove(path: Path) -> bool:
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def command(settings, verb: str, source: str, out: TextIO, err: TextIO, *, wait: float = REPLY_WAIT) -> int:
    """`run_daemon.py reset SOURCE` / `poll SOURCE`: a name params.py does not have is refused here
    (exit 2), before anything is handed over."""
    names = [s.name for s in settings.sources]
    if source not in names:
        print(f"error: no source named {source!r} in {settings.params_path} (sources: "
              f"{', '.join(names) or 'none'})", file=err)
        return NOT_POLLED
    return send(settings.staging_dir, verb, source, out, err, wait=wait, params=settings.params_path)
