#!/usr/bin/env python3
"""Run the parser daemon for one project: `python run_daemon.py --params path/to/params.py`.

This file only reads arguments, installs signal handlers and hands over to parser.daemon.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from parser import control, logs
from parser.daemon import Daemon, RunOptions
from parser.errors import LockHeldError, SettingsError, StorageError
from parser.settings import load_settings
from parser.status import print_status

HERE = Path(__file__).resolve().parent

EXIT_OK, EXIT_FAILED, EXIT_SETTINGS = 0, 1, 2


def build_arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="run_daemon.py",
        description="Collect feeds into a SQL database. Polls every source on its interval, keeps new "
                    "records in a staging CSV, and flushes them into the database every FLUSH_INTERVAL. "
                    "Runs until SIGTERM or Ctrl-C, which flush and exit 0. Two-pass jobs (LINK_JOBS) run "
                    "beside the feeds: pass 1 writes a job's link file (from a URL template or a harvest "
                    "from a root page), pass 2 fetches each pending link once into the job's own table.",
        epilog="Exit codes: 0 done, 1 the daemon could not work (lock held, database unreachable at "
               "the final flush of --once, a critical error), 2 bad settings or arguments. "
               "Files: STAGING_DIR/staging.csv, LOG_DIR/parser.log, errors.log, critical.log; a job's "
               "link file is STAGING_DIR/jobs/NAME/links.txt.")
    ap.add_argument("--params", default=str(HERE / "params.py"),
                    help="the project's settings file (default: params.py beside this script)")
    ap.add_argument("--once", action="store_true",
                    help="poll every enabled source and run every enabled job's pass 1 and pass 2 now "
                         "(intervals ignored), flush, exit; for cron")
    ap.add_argument("--source", action="append", default=[], metavar="NAME",
                    help="only this source (repeatable); a disabled source named here runs too")
    ap.add_argument("--job", action="append", default=[], metavar="NAME",
                    help="only this two-pass job (repeatable); a disabled job named here runs too. "
                         "--job without --source runs no feeds, --source without --job runs no jobs")
    ap.add_argument("--links-only", action="store_true",
                    help="run the jobs' pass 1 alone (no feeds, no pass 2), so the link files "
                         "(STAGING_DIR/jobs/NAME/links.txt) can be checked before pass 2")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the records as JSON lines and write nothing (no staging, database, logs"
                         " or state); implies --once")
    # Operator commands beside a running daemon (parser/status.py, parser/control.py).
    commands = ap.add_subparsers(dest="command", metavar="COMMAND",
                                 help="status, reset SOURCE or poll SOURCE; without one, run the daemon")
    params = argparse.ArgumentParser(add_help=False)
    params.add_argument("--params", default=argparse.SUPPRESS, help="the project's settings file")
    status = commands.add_parser("status", parents=[params], help="the sources' health, staged rows, last flush, "
                                 "the daemon's pid and uptime; reads only, works while the daemon runs")
    status.add_argument("--json", action="store_true", help="the same as JSON (ISO 8601 UTC times)")
    for verb, what in (("reset", "clear a source's failures and dead mark, and poll it now"),
                       ("poll", "poll a source now")):
        sub = commands.add_parser(verb, parents=[params], help=f"{what} (handed to the running daemon)")
        sub.add_argument("source", metavar="SOURCE", help="the source's name in params.py")
        sub.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                         help="how long to wait for the daemon's answer (default 10)")
    return ap


def run_command(args: argparse.Namespace) -> int:
    """status, reset, poll: read the settings, then hand over to the command's module."""
    try:
        settings = load_settings(args.params)
    except SettingsError as exc:
        print(f"settings error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS
    if args.command == "status":
        return print_status(settings, as_json=args.json, now=time.time(), out=sys.stdout)
    return control.command(settings, args.command, args.source, sys.stdout, sys.stderr, wait=args.wait)


def main(argv: list[str] | None = None) -> int:
    args = build_arguments().parse_args(argv)
    if args.command:
        return run_command(args)
    try:
        settings = load_settings(args.params)
        options = RunOptions(once=args.once or args.dry_run, sources=tuple(args.source), dry_run=args.dry_run,
                             jobs=tuple(args.job), links_only=args.links_only)
        stop = threading.Event()
        daemon = Daemon(settings, options, stop=stop)
    except SettingsError as exc:
        print(f"settings error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS
    except ValueError as exc:  # --source or --job names nothing
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS

    def on_signal(signum, _frame):
        if stop.is_set():  # a second Ctrl-C: the user means it
            os._exit(EXIT_FAILED)
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        code = daemon.run()
    except LockHeldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (StorageError, SettingsError) as exc:
        logs.critical_line(f"stopped: {exc}", exc)
        print(f"critical: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # the last line of defence: say what stopped us, with the traceback
        logs.critical_line(f"stopped by an unexpected error: {exc!r}", exc)
        return EXIT_FAILED
    return code


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    logging.shutdown()
    # Worker threads still blocked in a socket read would hold the interpreter until their timeout;
    # everything that matters is flushed and closed by now.
    os._exit(code)
