"""The benches' feeds served by nginx (Debian's nginx-light): one process of its own, its config, logs, pid and
temp folders in a temp folder, listening on every loopback host; each feed a static file, so that it answers
with an ETag and a Last-Modified and 304 to a conditional request, as a site's server does. The requests are
read from its access log."""
from __future__ import annotations

import ctypes
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from bench.feed_server import Request, content_type, free_port
from bench.tree_usage import tree_cpu

PACKAGE = "nginx-light"
# One worker: serving static files from the page cache takes a fraction of one core, and a second worker would
# only add a process to the machine the two sides share.
WORKERS = 1
EXTENSIONS = {"application/rss+xml": "rss", "application/atom+xml": "atom", "application/feed+json": "json"}
# The temp folders of the modules nginx was built with, each made at its start (here, not under /var/lib).
TEMP_PATHS = {"client_body": None, "proxy": "http_proxy", "fastcgi": "http_fastcgi", "uwsgi": "http_uwsgi",
              "scgi": "http_scgi"}
# $msec is when the answer was sent; less $request_time, when the request came (what tests/server.py records).
LOG_FORMAT = "$msec|$request_time|$status|$http_if_none_match|$http_if_modified_since"
STARTS = 3  # tries, each on another free port: another program may take the port between our look and nginx's
_PR_SET_PDEATHSIG = 1


class NginxStartError(RuntimeError):
    pass


def find_nginx() -> str | None:
    """The nginx binary, installed with apt-get when absent; None (and the reason printed) when it cannot be."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found:
        return found
    print(f"nginx is absent: apt-get install -y {PACKAGE} ...", flush=True)
    try:
        subprocess.run(["apt-get", "install", "-y", "-qq", PACKAGE], check=True, capture_output=True, timeout=600,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"nginx could not be installed ({exc})")
        return None
    return shutil.which("nginx", path="/usr/sbin:/usr/local/sbin:" + os.environ.get("PATH", ""))


class NginxFeeds:
    """Feed n is bodies[n % len(bodies)] at /feed{n}.xml on 127.0.0.{n % hosts + 1}, one port for every host.

    On disk feed n is feeds/feed{n}.xml.{rss,atom,json}, the extension giving its Content-Type (nginx's `types`);
    its repeats start as hard links to one file. A new body is a new file renamed over the old one, its mtime set
    a second past the last one's at least, since nginx's validators are its mtime (ETag: mtime-size, in hex;
    Last-Modified) and two changes within one second must still change them."""

    def __init__(self, binary: str, bodies: list[bytes], repeat: int, hosts: int):
        self.binary, self.hosts = binary, hosts
        self.folder = Path(tempfile.mkdtemp(prefix="nginx-feeds-"))
        self.pids: tuple[int, ...] = ()
        self.urls: list[str] = []
        self._bodies: list[bytes] = []
        self._files: list[Path] = []
        self._mtimes: list[int] = []
        self._requests: list[Request] = []
        self._log_read = 0  # bytes of the access log already read
        self._proc: subprocess.Popen | None = None
        try:
            self._write_feeds(bodies, repeat)
            self._start()
        except BaseException:
            self.stop()
            raise

    def describe(self) -> str:
        return (f"nginx ({self.binary}, {WORKERS} worker process, static files; a process of its own, "
                f"not counted on either side)")

    def body(self, n: int) -> bytes:
        return self._bodies[n]

    def replace(self, n: int, body: bytes) -> None:
        path = self._files[n]
        self._mtimes[n] = max(int(time.time()), self._mtimes[n] + 1)
        new = path.with_name(path.name + ".new")
        new.write_bytes(body)
        os.utime(new, (self._mtimes[n], self._mtimes[n]))
        os.replace(new, path)  # a request meets the old file or the new one, never half of one
        self._bodies[n] = body

    def requests(self) -> list[Request]:
        """From the access log; its times ($msec, the wall clock) turned into time.monotonic()'s."""
        with open(self.folder / "access.log", "rb") as log:
            log.seek(self._log_read)
            text = log.read()
        complete = text[:text.rfind(b"\n") + 1]  # a line being written is read next time
        self._log_read += len(complete)
        wall_to_monotonic = time.monotonic() - time.time()
        for line in complete.decode("ascii", "replace").splitlines():
            sent, took, status, etag, since = line.split("|", 4)
            arrived = float(sent) - float(took) + wall_to_monotonic
            self._requests.append(Request(arrived, bool(etag or since), status == "304"))
        return list(self._requests)

    def cpu(self) -> float:
        """nginx's master and worker processes'."""
        return tree_cpu(self._proc.pid) if self._proc else 0.0

    def stop(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.terminate()  # SIGTERM: nginx's fast shutdown
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _write_feeds(self, bodies: list[bytes], repeat: int) -> None:
        feeds = self.folder / "feeds"
        feeds.mkdir()
        for n in range(len(bodies) * repeat):
            body = bodies[n % len(bodies)]
            path = feeds / f"feed{n}.xml.{EXTENSIONS[content_type(body)]}"
            if n < len(bodies):
                path.write_bytes(body)
            else:
                os.link(self._files[n % len(bodies)], path)
            self._bodies.append(body)
            self._files.append(path)
            self._mtimes.append(int(path.stat().st_mtime))

    def _start(self) -> None:
        built_with = subprocess.run([self.binary, "-V"], capture_output=True, text=True, timeout=30).stderr
        for _ in range(STARTS):
            port = free_port()
            conf = self.folder / "nginx.conf"
            conf.write_text(self._config(port, built_with))
            (self.folder / "access.log").write_bytes(b"")
            with open(self.folder / "stderr", "wb") as said:
                self._proc = subprocess.Popen([self.binary, "-p", f"{self.folder}/", "-c", str(conf),
                                               "-e", str(self.folder / "error.log")],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=said,
                                              preexec_fn=_end_with_parent)
            if self._wait_listening(port):
                self.pids = (self._proc.pid,)
                self.urls = [f"http://127.0.0.{n % self.hosts + 1}:{port}/feed{n}.xml"
                             for n in range(len(self._files))]
                return
        raise NginxStartError(f"it did not start: {self._said()}")

    def _config(self, port: int, built_with: str) -> str:
        folder = self.folder
        user = ""
        if os.geteuid() == 0:  # else nginx's workers would run as nobody, who cannot read our temp folder
            user = f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};"
        temp = "\n".join(f"  {name}_temp_path {folder}/temp/{name};" for name, module in TEMP_PATHS.items()
                         if module is None or f"--without-{module}_module" not in built_with)
        (folder / "temp").mkdir(exist_ok=True)
        listen = "\n".join(f"    listen 127.0.0.{h + 1}:{port};" for h in range(self.hosts))
        types = " ".join(f"{kind} {ext};" for kind, ext in EXTENSIONS.items())
        tries = " ".join(f"$uri.{ext}" for ext in EXTENSIONS.values())
        return f"""# Written by bench/nginx_feeds.py for one run; nothing of the system's nginx is read.
daemon off;
master_process on;
worker_processes {WORKERS};
{user}
pid {folder}/nginx.pid;
lock_file {folder}/nginx.lock;
error_log {folder}/error.log warn;
events {{ worker_connections 4096; }}
http {{
{temp}
  log_format feeds escape=json '{LOG_FORMAT}';
  access_log {folder}/access.log feeds;
  sendfile on;
  keepalive_requests 1000000;  # as tests/server.py: a kept-alive connection is never closed for its count
  types {{ {types} }}
  default_type application/octet-stream;
  server {{
{listen}
    root {folder}/feeds;
    location / {{ try_files {tries} =404; }}
  }}
}}
"""

    def _wait_listening(self, port: int, limit: float = 15.0) -> bool:
        """Whether every host accepts a connection on `port` before nginx exits or `limit` seconds pass."""
        assert self._proc is not None
        deadline, waiting = time.monotonic() + limit, [f"127.0.0.{h + 1}" for h in range(self.hosts)]
        while waiting and time.monotonic() < deadline and self._proc.poll() is None:
            try:
                socket.create_connection((waiting[0], port), timeout=1).close()
                waiting.pop(0)
            except OSError:
                time.sleep(0.05)
        if waiting and self._proc.poll() is None:
            self._proc.kill()
        if waiting:
            self._proc.wait()
        return not waiting

    def _said(self) -> str:
        text = ""
        for name in ("error.log", "stderr"):
            if (self.folder / name).exists():
                text += (self.folder / name).read_text(errors="replace")
        return text.strip()[-500:] or "nothing in its error log"




def _end_with_parent() -> None:
    """In the child before nginx runs: SIGTERM (nginx's fast shutdown) when the bench ends, however it ends."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
