"""JSON API items per second: the adapter alone (parse + map + sanitize a page in process), and the
real daemon's `--once` paging through a loopback API by its `next` links into SQLite.

    .venv/bin/python -m bench.bench_json_api [--pages 50] [--per-page 100]

The API needs a bearer token (from the environment, as in production) and answers pages of
`--per-page` items, each with a nested author, a millisecond timestamp and some HTML.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from parser.adapters import parse_body
from parser.settings.params import settings_from_dict
from tests.server import LoopbackServer, reply

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-token"


def page(number: int, per_page: int, pages: int) -> bytes:
    items = [{"id": f"{number}-{i}", "links": {"html": f"https://api.example/posts/{number}/{i}"},
              "headline": f"Post {number}.{i}", "author": {"name": f"Author {i % 7}"},
              "created_ms": 1793534400000 + (number * per_page + i) * 1000,
              "teaser": "A short teaser of the post, plain text, a sentence or two long.",
              "body": f"<p>Body of post {number}.{i} with <a href='https://x.example/{i}'>a link</a> "
                      f"and <b>bold</b> text.</p><script>bad()</script>"}
             for i in range(per_page)]
    next_url = f"/api/posts?cursor={number + 1}" if number + 1 < pages else None
    return json.dumps({"data": {"items": items}, "paging": {"next": next_url}}).encode()


def source_dict(url: str, pages: int, per_page: int) -> dict:
    return {"name": "api", "protocol": "json_api", "url": url, "items": "data.items", "next": "paging.next",
            "max_pages": pages, "max_items": pages * per_page,
            "map": {"guid": "id", "link": "links.html", "title": "headline", "author": "author.name",
                    "published": "created_ms", "summary": "teaser", "content": "body"},
            "auth": {"type": "bearer", "token_env": "BENCH_API_TOKEN"}}


def in_process(args) -> None:
    os.environ["BENCH_API_TOKEN"] = TOKEN
    settings = settings_from_dict({"SOURCES": [source_dict("https://api.example/", args.pages, args.per_page)]},
                                  ROOT / "params.py")
    source = settings.sources[0]
    body = page(0, args.per_page, 2)
    rounds = max(1, 20_000 // args.per_page)
    started = time.perf_counter()
    for _ in range(rounds):
        parsed = parse_body(source, body, url=source.url, headers={"content-type": "application/json"},
                            fetched="2026-12-01T00:00:00Z")
    seconds = time.perf_counter() - started
    assert len(parsed.records) == args.per_page and "script" not in parsed.records[0]["content"]
    items = rounds * args.per_page
    print(f"adapter alone          {items:>6} items in {seconds:6.2f} s = {items / seconds:8.0f} items/s", flush=True)


def daemon_once(args) -> None:
    server = LoopbackServer().start()

    def api(h):
        # Headers and body leave in two writes: without this, Nagle's algorithm and the client's delayed
        # ACK add 40 ms to every page, which a real API server does not.
        h.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if h.headers.get("Authorization") != f"Bearer {TOKEN}":
            return reply(h, 401)
        number = int(parse_qs(urlsplit(h.path).query).get("cursor", ["0"])[0])
        reply(h, 200, page(number, args.per_page, args.pages), {"Content-Type": "application/json"})

    server.route("/api/posts", handler=api)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            source = source_dict(server.url("/api/posts"), args.pages, args.per_page)
            (folder / "params.py").write_text(f"DB_URL = 'sqlite:///db/items.db'\nSOURCES = [{source!r}]\n",
                                              encoding="utf-8")
            env = {**os.environ, "BENCH_API_TOKEN": TOKEN}
            started = time.perf_counter()
            proc = subprocess.run([sys.executable, str(ROOT / "run_daemon.py"), "--params",
                                   str(folder / "params.py"), "--once"], capture_output=True, text=True, env=env)
            seconds = time.perf_counter() - started
            if proc.returncode != 0:
                raise SystemExit(f"daemon failed: {proc.stderr}")
            con = sqlite3.connect(folder / "db" / "items.db")
            stored = con.execute("SELECT COUNT(*) FROM items").fetchone()[0]
            con.close()
    finally:
        server.stop()
    print(f"daemon --once          {stored:>6} items in {seconds:6.2f} s = {stored / seconds:8.0f} items/s "
          f"({args.pages} pages, process start and the flush included)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=50)
    ap.add_argument("--per-page", type=int, default=100)
    args = ap.parse_args()
    in_process(args)
    daemon_once(args)


if __name__ == "__main__":
    main()
