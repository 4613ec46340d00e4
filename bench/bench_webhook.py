"""Webhook deliveries accepted per second on loopback, by the real daemon (run_daemon.py), with one
sender and with several at once, side by side in one run.

    .venv/bin/python -m bench.bench_webhook [--deliveries 2000] [--senders 8] [--items 1]

Each delivery is signed (X-Hub-Signature-256), has its own X-Hub-Delivery id and `--items` records.
A delivery counts when it was answered 202, i.e. its records were fsynced to the inbox. After
SIGTERM the daemon stages and flushes them; the bench checks that every record reached the table.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from bench.feed_server import free_port

ROOT = Path(__file__).resolve().parents[1]
SECRET = "bench-secret"




def start_daemon(folder: Path, port: int) -> subprocess.Popen:
    (folder / "params.py").write_text(
        "DB_URL = 'sqlite:///db/items.db'\nFLUSH_INTERVAL = 3600\n"
        f"WEBHOOK_LISTEN = '127.0.0.1:{port}'\n"
        "SOURCES = [{'name': 'hook', 'protocol': 'webhook', 'path': '/hook', 'secret_env': 'BENCH_HOOK_SECRET',"
        " 'items': 'items'}]\n", encoding="utf-8")
    env = {**os.environ, "BENCH_HOOK_SECRET": SECRET}
    proc = subprocess.Popen([sys.executable, str(ROOT / "run_daemon.py"), "--params", str(folder / "params.py")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=folder)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"daemon exited: {proc.stderr.read().decode()}") from None
            time.sleep(0.05)
    raise SystemExit("daemon did not start listening")


def deliveries(count: int, items: int, tag: str) -> list[tuple[bytes, dict[str, str]]]:
    out = []
    for n in range(count):
        body = json.dumps({"items": [{"id": f"{tag}-{n}-{i}", "url": f"https://bench.example/{tag}/{n}/{i}",
                                      "title": f"Delivery {n} item {i}", "published": 1793534400 + n}
                                     for i in range(items)]}).encode()
        signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        out.append((body, {"Content-Type": "application/json", "X-Hub-Signature-256": signature,
                           "X-Hub-Delivery": f"{tag}-{n}"}))
    return out


def send_all(url: str, batch: list[tuple[bytes, dict[str, str]]], senders: int) -> tuple[float, int]:
    """Seconds to send every delivery with `senders` concurrent connections, and how many got 202."""
    sessions = [requests.Session() for _ in range(senders)]
    chunks = [batch[i::senders] for i in range(senders)]

    def send(k: int) -> int:
        return sum(sessions[k].post(url, data=body, headers=headers, timeout=30).status_code == 202
                   for body, headers in chunks[k])

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=senders) as pool:
        accepted = sum(pool.map(send, range(senders)))
    return time.perf_counter() - started, accepted


def scenario(label: str, senders: int, args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        port = free_port()
        daemon = start_daemon(folder, port)
        url = f"http://127.0.0.1:{port}/hook"
        try:
            send_all(url, deliveries(20, args.items, "warm"), 1)  # connections and imports warmed up
            seconds, accepted = send_all(url, deliveries(args.deliveries, args.items, "run"), senders)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=120)
        con = sqlite3.connect(folder / "db" / "items.db")
        stored = con.execute("SELECT COUNT(*) FROM items WHERE guid LIKE 'run-%'").fetchone()[0]
        con.close()
        expected = args.deliveries * args.items
        print(f"{label:<22} {accepted:>6} accepted in {seconds:6.2f} s = {accepted / seconds:8.0f} deliveries/s, "
              f"{accepted * args.items / seconds:8.0f} records/s; stored after the stop flush: {stored}/{expected}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deliveries", type=int, default=2000)
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--items", type=int, default=1, help="records per delivery")
    args = ap.parse_args()
    scenario("1 sender", 1, args)
    scenario(f"{args.senders} senders at once", args.senders, args)


if __name__ == "__main__":
    main()
