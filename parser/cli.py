"""The command line: `parser-daemon` (installed) and `python run_daemon.py` (a checkout) both land here.

With no command it runs the daemon; a command (`export-opml`, ...) is a subparser with its own
handler. This module only reads arguments, installs signal handlers and hands over to parser.daemon.
"""
from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from . import __version__
from .core import logs
from .core.errors import HistoryMismatchError, LockHeldError, SchemaRefusedError, SettingsError, StorageError

EXIT_OK, EXIT_FAILED, EXIT_SETTINGS = 0, 1, 2
DEFAULT_PARAMS = "params.py"  # in the current folder: the project is where the operator stands


def add_params_argument(ap: argparse.ArgumentParser, *, top: bool = False) -> None:
    """--params on the top level and on every command, so both `--params F cmd` and `cmd --params F`
    work; a command's copy has no default of its own, or it would hide the top level's value."""
    ap.add_argument("--params", default=DEFAULT_PARAMS if top else argparse.SUPPRESS, metavar="FILE",
                    help="the project's settings file (default: ./params.py in the current folder); "
                         "relative paths in it resolve against its own folder")


def build_arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="parser-daemon",
        description="Collect feeds into a SQL database. Polls every source on its interval, keeps new "
                    "records in a staging CSV, and flushes them into the database every FLUSH_INTERVAL. "
                    "Runs until SIGTERM or Ctrl-C, which flush and exit 0; SIGHUP re-reads the params "
                    "file. Two-pass jobs (LINK_JOBS) run beside the feeds: pass 1 writes a job's link "
                    "file (from a URL template or a harvest from a root page), pass 2 fetches each "
                    "pending link once into the job's own table.",
        epilog="Exit codes: 0 done, 1 the daemon could not work (lock held, database unreachable at "
               "the final flush of --once, a critical error), 2 bad settings or arguments, 4 --once: every "
               "source polled failed (when some did, the last line says how many). "
               "Files: STAGING_DIR/staging.csv, LOG_DIR/parser.log, errors.log, critical.log; a job's "
               "link file is STAGING_DIR/jobs/NAME/links.txt.")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_params_argument(ap, top=True)
    ap.add_argument("--once", action="store_true",
                    help="poll every enabled source and run every enabled job's pass 1 and pass 2 now "
                         "(intervals ignored), flush, exit; for cron")
    ap.add_argument("--source", action="append", default=[], metavar="NAME",
                    help="only this source (repeatable); a disabled source named here runs too")
    ap.add_argument("--tag", action="append", default=[], metavar="NAME",
                    help="only the enabled sources with this tag (a source's `tags`; repeatable), beside any "
                         "--source; like --source, it runs no jobs without --job")
    ap.add_argument("--job", action="append", default=[], metavar="NAME",
                    help="only this two-pass job (repeatable); a disabled job named here runs too. "
                         "--job without --source runs no feeds, --source without --job runs no jobs")
    ap.add_argument("--links-only", action="store_true",
                    help="run the jobs' pass 1 alone (no feeds, no pass 2), then exit 0, like --once, so the "
                         "link files (STAGING_DIR/jobs/NAME/links.txt) can be checked before pass 2")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the records as JSON lines and write nothing (no staging, database, logs"
                         " or state); implies --once")
    ap.set_defaults(handler=run_daemon)
    commands = ap.add_subparsers(dest="command", metavar="COMMAND",
                                 help="with no command the daemon runs; one of:")
    for add in COMMANDS:
        add(commands)
    return ap


# -- commands: each adds its subparser and sets `handler` (args -> exit code) ---------------------

def add_export_opml(commands) -> None:
    cmd = commands.add_parser("export-opml", help="write the feed sources as an OPML 2.0 subscription list",
                              description="Write the project's feed sources (SOURCES and SOURCES_OPML) as "
                                          "OPML 2.0, tags as categories (the first also as a folder); feed "
                                          "readers and SOURCES_OPML read it. A disabled source is kept, with "
                                          "isComment=\"true\"; a source whose page linked to its feed is "
                                          "written as that feed (xmlUrl), the page as htmlUrl.")
    add_params_argument(cmd)
    cmd.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    cmd.set_defaults(handler=export_opml)


def add_export(commands) -> None:
    cmd = commands.add_parser("export", help="write a table's rows as JSON lines, CSV or Atom, streamed",
                              description="Write the rows of the items table (or a job's table) to standard "
                                          "output or a file: JSON lines (typed values: lists as lists, times "
                                          "as ISO 8601 UTC, NULL as null), CSV (a header row, UTF-8, "
                                          "spreadsheet-safe) or an Atom 1.0 feed. Streamed: memory stays flat "
                                          "over any number of rows. Reads only DB_URL from params.py, and "
                                          "only reads the database; runs beside a daemon.",
                              epilog="Exit codes: 0 written, 1 the database could not be read or FILE not "
                                     "written, 2 bad arguments (a table the database does not have, a "
                                     "--since that is no time) or a bad DB_URL.")
    add_params_argument(cmd)
    cmd.add_argument("--table", default="items", metavar="items|JOB",
                     help="the table: items (the feeds'), or a two-pass job's (its name); default items")
    cmd.add_argument("--source", action="append", default=[], dest="export_sources", metavar="NAME",
                     help="only this source's rows (repeatable; the items table)")
    cmd.add_argument("--since", metavar="TIME|DURATION",
                     help="only rows new or changed since then (their `changed` or `fetched` at or after it): "
                          "an ISO 8601 time (no zone: UTC) or a duration back from now, such as 7d, 12h, 30m")
    cmd.add_argument("--cursor", metavar="FILE",
                     help="only rows new or changed since the run that last wrote FILE (whenever they were "
                          "polled), and FILE moved on once they are out: for a chain of runs (cron) that must "
                          "miss no row; none yet: every row")
    cmd.add_argument("--format", choices=("jsonl", "csv", "atom"), default="jsonl",
                     help="jsonl (default): a JSON object a line; csv; atom: an Atom 1.0 feed")
    cmd.add_argument("--bom", action="store_true",
                     help="csv: begin with a UTF-8 byte order mark, so Excel reads the file as UTF-8")
    cmd.add_argument("-o", "--output", metavar="FILE",
                     help="write FILE whole (a temporary file renamed at the end) instead of standard output")
    cmd.set_defaults(handler=export_rows)


def add_search(commands) -> None:
    cmd = commands.add_parser("search", help="the stored entries that hold some words, best first",
                              description="Look for WORDS in the items table's titles and summaries, through "
                                          "its full-text index (SEARCH): each entry's source, title, link, "
                                          "published and a piece of its text, best first. Words are all "
                                          "wanted; \"a phrase\" in quotes, `or` between two words and -word "
                                          "(left out) as in a web search. PostgreSQL reads a word in each "
                                          "entry's language (Haus finds Häuser in a German entry); SQLite "
                                          "stems English words and takes a word as a prefix too. Only reads; "
                                          "runs beside a daemon.",
                              epilog="Exit codes: 0 searched (found or not; how many is said on stderr), 1 the "
                                     "database could not be read or has no index yet (start the daemon once), "
                                     "2 search is off (SEARCH = False) or a bad argument or settings.")
    add_params_argument(cmd)
    cmd.add_argument("words", nargs="+", metavar="WORDS", help="what to look for")
    cmd.add_argument("--source", action="append", default=[], dest="search_sources", metavar="NAME",
                     help="only this source's entries (repeatable)")
    cmd.add_argument("--since", metavar="TIME|DURATION",
                     help="only entries published at or after then (fetched, for an entry without a date): "
                          "an ISO 8601 time (no zone: UTC) or a duration back from now, such as 7d, 12h")
    cmd.add_argument("--limit", type=int, default=20, metavar="N", help="at most N entries (default 20)")
    cmd.add_argument("--format", choices=("text", "jsonl"), default="text",
                     help="text (default): a block an entry; jsonl: a JSON object a line")
    cmd.set_defaults(handler=search_rows)


def add_status(commands) -> None:
    cmd = commands.add_parser("status", help="the sources' health, staged rows, last flush, the daemon's pid "
                              "and uptime; reads only, works while the daemon runs")
    add_params_argument(cmd)
    cmd.add_argument("--json", action="store_true", help="the same as JSON (ISO 8601 UTC times)")
    cmd.set_defaults(handler=status)


def add_control(commands) -> None:
    """`reset SOURCE` and `poll SOURCE`, handed to the running daemon (parser/operate/control.py)."""
    for verb, what in (("reset", "clear a source's failures and dead mark, and poll it now"),
                       ("poll", "poll a source now")):
        cmd = commands.add_parser(verb, help=f"{what} (handed to the running daemon)",
                                  epilog="Exit codes: 0 done, 1 no daemon runs on the staging folder or it did "
                                         "not answer, 2 no such source in params.py or the daemon does not poll "
                                         "it, 3 refused by the daemon (held until a server's Retry-After), "
                                         "4 polled, and the poll failed.")
        add_params_argument(cmd)
        cmd.add_argument("source", metavar="SOURCE", help="the source's name in params.py")
        cmd.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                         help="how long to wait for the daemon's answer (default 10)")
        cmd.set_defaults(handler=control_command)


def add_check(commands) -> None:
    cmd = commands.add_parser("check", help="check the settings as a start does, list each source and job and "
                              "where the files go; fetches nothing, writes nothing",
                              description="Read params.py with every check a start makes (and the hash files' "
                                          "identity rule), then list each source (protocol, interval, tags, "
                                          "address) and each job (table, link file, staging file), and where "
                                          "the database, staging and logs are. Sends no request, creates no "
                                          "file, does not connect to the database; runs beside a daemon.",
                              epilog="Exit codes: 0 the settings are good, 2 they are not (the message a start "
                                     "would give, on stderr).")
    add_params_argument(cmd)
    cmd.set_defaults(handler=check)


def add_accept_deletions(commands) -> None:
    cmd = commands.add_parser("accept-deletions", help="rows deleted from the database on purpose: keep every "
                              "hash (their entries stay out) and let the daemon start",
                              description="A start refuses a database whose table lacks the newest rows "
                                          "flushed into it. When they were deleted on purpose, this marks the "
                                          "table as it is now; the hash files are kept whole. Run it with the "
                                          "daemon stopped.")
    add_params_argument(cmd)
    cmd.set_defaults(handler=accept_deletions)


def add_try(commands) -> None:
    cmd = commands.add_parser("try", help="fetch one page as a two-pass job would and show each field it extracts",
                              description="Fetch URL once with JOB's politeness (its user agent, a harvest's "
                                          "robots.txt, its host's delay and any pause the host asked for), then "
                                          "print each field: whether its selector matched, and its value. "
                                          "Writes nothing (no link file, staging, state or database); the URL "
                                          "need not be in the job's link file.",
                              epilog="Exit codes: 0 fetched and extracted (even with fields that did not match), "
                                     "1 the page could not be fetched or is no HTML page, 2 no such job or "
                                     "bad settings.")
    add_params_argument(cmd)
    cmd.add_argument("job", metavar="JOB", help="the job's name in LINK_JOBS")
    cmd.add_argument("url", metavar="URL", help="the page to fetch: an http(s) address")
    cmd.set_defaults(handler=try_command)


def add_retain(commands) -> None:
    cmd = commands.add_parser("retain", help="prune the database now as RETAIN says (or, with --dry-run, say what "
                              "would go)",
                              description="Run the retention pass now: rows older than RETAIN's (or their "
                                          "source's or job's own) `items` deleted, bodies older than `content` "
                                          "emptied, versions and runs pruned, in short transactions; runs beside "
                                          "a daemon. The daemon runs the same pass at start, daily, and at the end "
                                          "of --once.",
                              epilog="Exit codes: 0 done, 1 the database could not be pruned, 2 bad settings.")
    add_params_argument(cmd)
    cmd.add_argument("--dry-run", action="store_true", dest="retain_dry_run",
                     help="count what would go, change nothing")
    cmd.add_argument("--vacuum", action="store_true",
                     help="then give the free space back to the system: SQLite's VACUUM (which rewrites the file "
                          "and turns on auto_vacuum for one made before this version), PostgreSQL's VACUUM FULL of "
                          "each table; both hold the flushes back while they run")
    cmd.set_defaults(handler=retain)


COMMANDS: list[Callable] = [add_check, add_status, add_control, add_export_opml, add_export, add_search, add_try,
                            add_accept_deletions, add_retain]


def _params_missing(args: argparse.Namespace) -> bool:
    """A params file that is not there: said with its full path and what to do (exit 2)."""
    path = Path(args.params).expanduser()
    if path.is_file():
        return False
    what = "is a folder, not a params file" if path.is_dir() else "params file does not exist"
    print(f"settings error: {path.absolute()}: {what}; create it, or pass --params PATH "
          "(an example is params.py in the checkout)", file=sys.stderr)
    return True


def _settings_or_exit(args: argparse.Namespace):
    from .settings.read import read_settings  # imported on first use: a command loads what it runs
    if _params_missing(args):
        return None
    try:
        # Within a time limit, as the daemon reads it. Only the daemon uses the secrets (a webhook's
        # secret_env, auth's token_env): one not in this shell's environment is a note, not exit 2.
        return read_settings(args.params, secrets=False)
    except SettingsError as exc:
        print(f"settings error: {exc}", file=sys.stderr)
        return None


def check(args: argparse.Namespace) -> int:
    from .operate.check import print_check  # imported on first use: a command loads what it runs
    from .settings.run_options import select_jobs, select_sources  # imported on first use: as above
    settings = _settings_or_exit(args)
    if settings is None:
        return EXIT_SETTINGS
    options = _run_options(args)
    try:
        select_sources(settings, options)  # --source, --tag or --job given before `check`: as a start reads them
        select_jobs(settings, options)
        print_check(settings, sys.stdout)
    except SettingsError as exc:  # hash files a start would refuse (HistoryMismatchError)
        print(f"settings error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS
    return EXIT_OK


def accept_deletions(args: argparse.Namespace) -> int:
    from db.store import Database  # imported on first use: a command loads what it runs

    from .operate.check import histories  # imported on first use: as above
    settings = _settings_or_exit(args)
    if settings is None:
        return EXIT_SETTINGS
    db = Database(settings.db_url, timeout=settings.db_timeout)
    try:
        accepted = [table for table, history in histories(settings, read_only=False) if history.accept(db, table)]
    finally:
        db.close()
    for table in accepted:
        print(f"{table}: the table as it is now is the mark of this database; every hash kept (the deleted "
              "entries stay out)")
    if not accepted:
        print("nothing to accept: each table holds the newest rows flushed into it")
    return EXIT_OK


def retain(args: argparse.Namespace) -> int:
    from db import retention  # imported on first use: a command loads what it runs
    from db.store import Database  # imported on first use: as above

    from .retention import marks_of, run_pass, tasks  # imported on first use: as above
    settings = _settings_or_exit(args)
    if settings is None:
        return EXIT_SETTINGS
    try:
        db = Database(settings.db_url, timeout=settings.db_timeout)
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        started = time.monotonic()
        done = run_pass(db, settings, time.time(), dry_run=args.retain_dry_run, marks=marks_of(settings))
        print(f"retain: {retention.said(done, dry_run=args.retain_dry_run)} in {time.monotonic() - started:.1f} s")
        if args.vacuum and not args.retain_dry_run:
            retention.vacuum(db, sorted({task.table for task in tasks(settings)}))
            print("retain: vacuumed")
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        db.close()
    return EXIT_OK


def try_command(args: argparse.Namespace) -> int:
    from .core.errors import FetchError, ParseError  # imported on first use: a command loads what it runs
    from .core.setting_values import http_url  # imported on first use: as above
    from .jobs.try_page import format_tried, try_page  # imported on first use: as above
    from .settings.run_options import select_named  # imported on first use: as above
    settings = _settings_or_exit(args)
    if settings is None:
        return EXIT_SETTINGS
    try:
        [job] = select_named(settings.link_jobs, (args.job,), "job", settings.params_path.name)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SETTINGS
    if not http_url(args.url):
        print(f"error: {args.url!r} is not an http(s) address like https://example.org/item/1", file=sys.stderr)
        return EXIT_SETTINGS
    try:
        tried = try_page(settings, job, args.url)
    except (FetchError, ParseError) as exc:
        print(f"error: {args.url}: not fetched: {exc}", file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.write(format_tried(job, args.url, tried))
    return EXIT_OK


def status(args: argparse.Namespace) -> int:
    from .operate.status import print_status  # imported on first use: a command loads what it runs
    settings = _settings_or_exit(args)
    if settings is None:
        return EXIT_SETTINGS
    return print_status(settings, as_json=args.json, now=time.time(), out=sys.stdout)


def control_command(args: argparse.Namespace) -> int:
    from .operate import control  # imported on first use: a command loads what it runs
    settings = _settings_or_exit(args)
    if settings is None:
        return EXIT_SETTINGS
    return control.command(settings, args.command, args.source, sys.stdout, sys.stderr, wait=args.wait)


def export_opml(args: argparse.Namespace) -> int:
    from .operate.export_opml import opml_text  # imported on first use: a command loads what it runs
    settings = _settings_or_exit(args)
    if settings is None:
        return EXIT_SETTINGS
    text, feeds = opml_text(settings, time.time())
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        marked = []
        if off := sum(not f.enabled for f in feeds):
            marked.append(f'{off} disabled, isComment="true"')
        if found := sum(bool(f.page) for f in feeds):
            marked.append(f"{found} as the feed found on its page")
        print(f"{len(feeds)} feed sources written to {args.output}" + (f" ({'; '.join(marked)})" if marked else ""),
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def export_rows(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime  # imported on first use: a command loads what it runs

    from .operate.export import ExportRequest, run_export  # imported on first use: as above
    if _params_missing(args):
        return EXIT_SETTINGS
    request = ExportRequest(table=args.table, sources=tuple(args.export_sources), since=args.since,
                            format=args.format, output=Path(args.output) if args.output else None, bom=args.bom,
                            cursor=Path(args.cursor) if args.cursor else None)
    return run_export(Path(args.params), request, sys.stdout.buffer, sys.stderr, now=datetime.now(UTC))


def search_rows(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime  # imported on first use: a command loads what it runs

    from .operate.search import SearchRequest, run_search  # imported on first use: as above
    settings = _settings_or_exit(args)
    if settings is None:
        return EXIT_SETTINGS
    request = SearchRequest(words=" ".join(args.words), sources=tuple(args.search_sources), since=args.since,
                            limit=args.limit, format=args.format)
    return run_search(settings, request, sys.stdout, sys.stderr, now=datetime.now(UTC))


def run_daemon(args: argparse.Namespace) -> int:
    # First, before the imports and the params read (over a second with 5,000 sources): SIGHUP's default
    # action ends the process without a line, and systemd counts that death as clean, so Restart=on-failure
    # would leave it down. A SIGHUP until the daemon is built is remembered, and taken as a reload then.
    hup_at_start = threading.Event()
    signal.signal(signal.SIGHUP, lambda _signum, _frame: hup_at_start.set())
    # A signal mask is inherited across exec: a parent that started us from a thread blocking these (as
    # multiprocessing does while it spawns its resource tracker) would leave each one pending for good, and
    # a SIGTERM then waits for the kill. Each is unblocked once its handler is in place.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})
    from .core.memory import (  # imported on first use: a command loads what it runs
        cap_malloc_arenas,
        give_large_blocks_back,
    )
    from .daemon import Daemon  # imported on first use: a command loads what it runs
    from .settings.read import read_settings  # imported on first use: a command loads what it runs
    cap_malloc_arenas()  # before any worker thread: memory then follows CONCURRENCY (parser/core/memory.py)
    give_large_blocks_back()
    if _params_missing(args):
        return EXIT_SETTINGS
    try:
        settings = read_settings(args.params)  # within a time limit: a params.py that blocks is exit 2
        options = _run_options(args)
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
    # SIGHUP: re-read the params file between cycles (Daemon.reload); a bad file keeps the old settings.
    signal.signal(signal.SIGHUP, lambda _signum, _frame: daemon.request_reload())
    if hup_at_start.is_set():
        daemon.request_reload(at_start=True)
    # SIGUSR2: every thread's stack on stderr (the journal under systemd), the daemon going on: what a
    # daemon that will not stop or seems stuck is doing, without a debugger on the machine.
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGUSR2})

    try:
        code = daemon.run()
    except LockHeldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # --dry-run's stdout closed (`| head`): main() ends quietly
        raise
    # The hash files do not fit the settings, or the database refuses this version's table shape
    # (db/migrate.py): no traceback, no restart; the message says what to do.
    except (HistoryMismatchError, SchemaRefusedError) as exc:
        logs.critical_line(f"stopped: {exc}")
        return EXIT_SETTINGS
    except (StorageError, SettingsError) as exc:
        logs.critical_line(f"stopped: {exc}", exc)  # on the console too: once
        return EXIT_FAILED
    except Exception as exc:  # the last line of defence: say what stopped us, with the traceback
        logs.critical_line(f"stopped by an unexpected error: {exc!r}", exc)
        return EXIT_FAILED
    return code


def _run_options(args: argparse.Namespace):
    from .settings.run_options import RunOptions  # imported on first use: a command loads what it runs
    return RunOptions(once=args.once or args.dry_run, sources=tuple(args.source), dry_run=args.dry_run,
                      jobs=tuple(args.job), links_only=args.links_only, tags=tuple(args.tag))


def main(argv: list[str] | None = None) -> int:
    args = build_arguments().parse_args(argv)
    try:
        code = args.handler(args)
        sys.stdout.flush()
    except BrokenPipeError:  # `status --json | head`: the reader has what it wanted
        return _stdout_closed()
    except KeyboardInterrupt:  # Ctrl-C in a command (`try`, `status`) or before the daemon's own handler
        print("interrupted", file=sys.stderr)
        return 130  # as a shell reports a program ended by SIGINT
    return code


def _stdout_closed() -> int:
    """The reader of standard output went away: end quietly with 0, as `git log | head` does.
    Standard output is pointed at /dev/null, so no later flush raises the error again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_OK


def run(argv: list[str] | None = None) -> None:
    """The console script's entry point: run, then leave without waiting for stuck worker threads."""
    code = main(argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a closed reader: nothing left to say to it
            pass
    logging.shutdown()
    # Worker threads still blocked in a socket read would hold the interpreter until their timeout;
    # everything that matters is flushed and closed by now.
    os._exit(code)
