"""Reads a project's params.py once, checks every value, and returns one immutable Settings.

Nothing else in the project reads params.py. Every problem is reported with the setting's name
before anything is created on disk, so a typo never leaves half a project behind.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import reprlib
import sys
import traceback
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from db.upsert import Updates

from .. import __version__
from ..core.cpu_pool import default_processes
from ..core.errors import SettingsError
from ..core.logs import LOG_FORMATS
from ..core.problems import Problems, did_you_mean, unknown_key
from ..core.record import RECORD_FIELDS
from ..core.setting_values import (
    as_seconds,
    duration_problem,
    duration_seconds,
    resolve_path,
    seconds_problem,
    whole_problem,
)
from ..core.urls import canonical_url, redact_url
from ..fetch.ratelimit import Rate
from ..pipeline.filters import NO_FILTER, EntryFilter
from ..pipeline.identity import AUTO
from ..sources.opml import CONTROL_CHARACTERS, OpmlError, read_outlines
from ..sources.protocols import PROTOCOLS, pushed
from ..sources.source_options import (
    FILTER_KEYS,
    PROTOCOL_KEYS,
    Auth,
    JsonApi,
    Push,
    check_callback_base,
    check_default_filter,
    check_filter,
    check_protocol_keys,
    check_push_paths,
    check_rate_fits,
    check_tags,
    default_filter,
    default_interval,
    missing_scheme,
    parse_listen,
)
from .link_jobs import LinkJob, check_link_jobs
from .retain import RETAIN_KEYS, SOURCE_RETAIN_KEYS, Retain, check_retain

MiB = 1024 * 1024
DEDUP_MODES = ("hashfile", "bloom", "off")
HASHES = sorted(a for a in hashlib.algorithms_guaranteed if not a.startswith("shake"))
SOURCE_KEYS = ("name", "url", "enabled", "interval", "headers", "tags", "max_items", "updates", "retain") \
    + PROTOCOL_KEYS \
    + FILTER_KEYS
# UPDATES: what an entry edited at its source does to its stored row (db/upsert.py).
UPDATE_MODES = ("update", "history", "ignore")


# What a source fetches and how (Source.subscription): its canonical url, protocol, headers (lowercase
# names, sorted), auth, api (repr) and push.
Subscription = tuple[str, str, tuple[tuple[str, str], ...], Auth | None, str, Push | None]


@dataclass(frozen=True)
class Source:
    """One cyclic source: an address whose content changes (a SourceView: parser/adapters/source_view.py)."""
    name: str
    url: str
    enabled: bool = True
    interval: float = 600.0
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    tags: tuple[str, ...] = ()
    max_items: int = 50
    updates: str = "update"  # UPDATES, or the source's own `updates`
    retain: Retain | None = None  # the source's own `retain` over RETAIN; None: RETAIN's (parser/settings/retain.py)
    # Protocol adapters (parser/sources/source_options.py): the protocol, and the keys that protocol reads.
    protocol: str = "feed"
    api: JsonApi | None = None      # json_api and webhook: items, map, query/header params, paging
    auth: Auth | None = None
    push: Push | None = None        # webhook and websub: path, secret_env, delivery_header, hub
    rate: Rate | None = None
    full_text: bool = False
    full_text_internal: bool = False  # full text may fetch loopback, private and link-local addresses
    entry_filter: EntryFilter = NO_FILTER  # keep and block (parser/pipeline/filters.py), KEEP and BLOCK by default

    @property
    def body_kind(self) -> str:
        """What its bodies are, as its protocol's row says ("feed", "json"): the adapters' choice."""
        return PROTOCOLS[self.protocol].body

    @property
    def subscription(self) -> Subscription:
        """What is fetched and how: two sources alike in it are one feed read twice (_OneSourcePerFeed
        keeps the first). The canonical url (http://h/feed#x is http://h/feed; another query is another feed)
        and what is sent with it: a private feed read with two logins (headers, auth) is two feeds."""
        headers = tuple(sorted((key.lower(), value) for key, value in self.headers.items()))
        return canonical_url(self.url), self.protocol, headers, self.auth, repr(self.api), self.push


@dataclass(frozen=True)
class Settings:
    params_path: Path
    db_url: str
    staging_dir: Path
    log_dir: Path
    poll_interval: float
    flush_interval: float
    sources: tuple[Source, ...]
    unique_fields: str | tuple[str, ...]  # "auto" or record fields (parser/pipeline/identity.py)
    hash: str
    dedup: str
    unique_window: float | None  # seconds after which a hash may leave the hash file; None: kept for ever
    concurrency: int
    per_host: int
    user_agent: str
    timeout: float
    deadline: float
    max_bytes: int
    max_redirects: int
    max_items: int
    dead_after: int
    log_max_bytes: int
    log_backups: int
    link_jobs: tuple[LinkJob, ...] = ()  # two-pass jobs (parser/settings/link_jobs.py)
    webhook_listen: tuple[str, int] = ("127.0.0.1", 8787)  # protocol adapters (parser/sources/source_options.py)
    websub_callback_base: str = ""
    full_text_timeout: float = 10.0
    log_format: str = "text"        # "json": one JSON object a line (parser/core/logs.py)
    notes: tuple[str, ...] = ()  # what the daemon logs at start about how the settings were read
    # The status page and /metrics (parser/operate/statuspage.py); None: off.
    status_listen: tuple[str, int] | None = None
    shared: bool = False            # several daemons, one PostgreSQL (parser/group/shared.py)
    shared_lease: float = 300.0     # seconds a claimed source or link is this daemon's alone
    db_timeout: float = 5.0         # seconds a flush waits to connect or for a lock (db/store.py)
    parse_processes: int = 0        # processes parsing polled bodies; 0 = in the fetching threads (cpu_pool.py)
    parse_on_demand: bool = False   # "auto": they start only when parsing needs more than the threads give
    updates: str = "update"         # UPDATES: "update", "history" or "ignore" (db/upsert.py)
    retain: Retain = Retain()       # RETAIN: how long rows are kept (db/retention.py)
    search: bool = False            # SEARCH: the items table's full-text index (db/search_index.py)

    @property
    def items_updates(self) -> Updates:
        """The `items` table's modes at the flush: UPDATES, and each source's own where it differs (a row's
        `source` says whose it is): "history" keeps the versions of the sources that ask for it alone."""
        return Updates(self.updates, tuple((s.name, s.updates) for s in self.sources if s.updates != self.updates))

    def retain_of(self, source: Source) -> Retain:
        """How long a source's rows are kept: its own `retain` (RETAIN's where it says nothing), else RETAIN."""
        return self.retain if source.retain is None else source.retain


# Settings of seconds: a number, or a time with its unit ("10m", "12h").
SECONDS_SETTINGS = ("POLL_INTERVAL", "FLUSH_INTERVAL", "TIMEOUT", "DEADLINE", "DB_TIMEOUT", "SHARED_LEASE",
                    "FULL_TEXT_TIMEOUT")

# name -> default. docs/settings.md has a row for each (tests/test_docs.py checks it).
DEFAULTS: dict[str, Any] = {
    "DB_URL": "sqlite:///db/items.db",
    "DB_TIMEOUT": 5,
    "PARSE_PROCESSES": "auto",
    "STAGING_DIR": "staging",
    "LOG_DIR": "logs",
    "POLL_INTERVAL": 600,
    "FLUSH_INTERVAL": 300,
    "SOURCES": [],
    "UNIQUE_FIELDS": "auto",
    "HASH": "sha224",
    "DEDUP": "hashfile",
    "UNIQUE_WINDOW": None,
    "UPDATES": "update",
    "RETAIN": {},
    "SEARCH": False,
    "CONCURRENCY": 32,
    "PER_HOST": 2,
    "USER_AGENT": f"parser-daemon/{__version__} (+feeds and pages into SQL)",  # the package's version
    "TIMEOUT": 20,
    "DEADLINE": 60,
    "MAX_BYTES": 10 * MiB,
    "MAX_REDIRECTS": 5,
    "MAX_ITEMS": 50,
    "KEEP": {},
    "BLOCK": {},
    "DEAD_AFTER": 5,
    "LOG_MAX_BYTES": 10 * MiB,
    "LOG_BACKUPS": 5,
    "LINK_JOBS": [],
    "WEBHOOK_LISTEN": "127.0.0.1:8787",
    "WEBSUB_CALLBACK_BASE": "",
    "SOURCES_OPML": None,
    "FULL_TEXT_TIMEOUT": 10,
    "LOG_FORMAT": "text",
    "STATUS_LISTEN": None,
    "SHARED": False,
    "SHARED_LEASE": 300,
}


def load_settings(params_path: str | os.PathLike[str], *, secrets: bool = True) -> Settings:
    """Import params.py, validate it, and return Settings; raise SettingsError naming what is wrong.
    `secrets` False (a command other than the daemon): a secret not in the environment is only a note."""
    path = Path(params_path).expanduser()
    if not path.is_file():
        raise SettingsError(f"{path}: params file does not exist")
    path = path.resolve()
    found = _import_params(path)
    values = {k: v for k, v in found.items() if k.isupper()}
    _refuse_lowercase_settings(found, values, path)
    try:
        settings = settings_from_dict(values, path, secrets=secrets)
        if path.stat().st_mode & 0o002:  # anyone on the machine could make the daemon run their code
            settings = replace(settings, notes=(*settings.notes, f"warning: {path} is writable by every user of "
                                                "this machine, and the daemon runs it as Python: chmod o-w it"))
        return settings
    except SettingsError:
        raise
    except Exception as exc:  # a value no check foresaw: still the file's problem, said without a traceback
        raise SettingsError(f"{path}: a value could not be read: {type(exc).__name__}: {exc} "
                            "(check the types of the settings it holds)") from None


def db_url_of(path: Path) -> str:
    """DB_URL alone from params.py (its default when unset), checked and resolved as load_settings does; the
    rest of the file is not checked (`export` needs no source's credentials to be valid)."""
    values = _import_params(path.resolve())
    url = values.get("DB_URL", DEFAULTS["DB_URL"])
    if problem := _db_url_problem(url, path.resolve().parent):
        raise SettingsError(f"{path}: DB_URL: {problem}")
    return _resolve_db_url(url, path.resolve().parent)


def _import_params(path: Path) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"_params_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    # Anything the file raises is a settings error, with its line: sys.exit() and KeyboardInterrupt
    # too, which would otherwise end the daemon (on SIGHUP: without its final flush, maybe with exit 0).
    except BaseException as exc:  # noqa: BLE001
        tb = traceback.extract_tb(sys.exc_info()[2])
        line = next((f.lineno for f in reversed(tb) if f.filename == str(path)), None)
        where = f" (line {line})" if line else ""
        if isinstance(exc, SystemExit):
            raise SettingsError(f"{path}: called sys.exit({exc.code!r}){where}; a params file only sets "
                                "values: remove the call") from None
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise SettingsError(f"{path}: does not import{where}: {what}") from None
    return {k: v for k, v in vars(module).items() if not k.startswith("_")}


def _refuse_lowercase_settings(found: Mapping[str, Any], values: Mapping[str, Any], path: Path) -> None:
    """`sources = [...]` is read as no setting at all (only UPPERCASE names are): a daemon with no
    sources that says "settings ok". Refused when the UPPERCASE name is not set; a helper value of
    one's own is welcome under any other name."""
    meant = [k for k, v in found.items() if not k.isupper() and k.upper() in DEFAULTS and k.upper() not in values
             and not callable(v) and not isinstance(v, types.ModuleType)]
    problems = Problems(path.name)
    for k in meant:  # not a close match but the very name in capitals: no did_you_mean needed
        problems.add(k, f"settings are read in UPPERCASE only; did you mean {k.upper()}? (a helper value of your "
                     "own needs another name)")
    problems.raise_if_any()


def _check_values(v: Mapping[str, Any], base: Path, problems: Problems) -> Any:
    """The settings that are one value each, every problem added to `problems`; returns UNIQUE_FIELDS."""
    def check(name: str, test: Callable[[Any], bool], what: str) -> Any:
        if not test(v[name]):
            problems.add(name, f"{what}, got {v[name]!r}")
        return v[name]

    def check_shape(name: str, problem: Callable[[Any], str | None]) -> None:
        """`problem` (parser/core/setting_values.py) says what is wrong with the value, or None."""
        if what := problem(v[name]):
            problems.add(name, f"{what}, got {reprlib.repr(v[name])}")  # 10**400 shown short

    if what := _db_url_problem(v["DB_URL"], base):  # its own words: the URL may hold a password
        problems.add("DB_URL", what)
    for name in ("STAGING_DIR", "LOG_DIR"):
        folder = resolve_path(v[name], base)
        if folder is None:
            problems.add(name, f"must be a folder path, got {v[name]!r}")
        elif blocker := _not_a_folder(folder):
            problems.add(name, f"must be a folder, but {blocker} is a file")
    for name in ("POLL_INTERVAL", "FLUSH_INTERVAL", "TIMEOUT", "DEADLINE", "DB_TIMEOUT"):
        check_shape(name, seconds_problem)
    for name in ("CONCURRENCY", "PER_HOST", "MAX_BYTES", "MAX_ITEMS", "DEAD_AFTER", "LOG_MAX_BYTES"):
        check_shape(name, whole_problem)
    for name in ("MAX_REDIRECTS", "LOG_BACKUPS"):
        check_shape(name, lambda x: whole_problem(x, 0))
    check("PARSE_PROCESSES", lambda x: x == "auto" or (whole_problem(x, 0) is None and x <= 64),
          "must be \"auto\" (one per core) or a number of processes from 0 (parse in the fetching threads) to 64")
    check("LOG_FORMAT", lambda x: x in LOG_FORMATS, f"must be one of {', '.join(map(repr, LOG_FORMATS))}")
    check("HASH", lambda x: x in HASHES, f"must be one of {', '.join(HASHES)}")
    check("DEDUP", lambda x: x in DEDUP_MODES, f"must be one of {', '.join(DEDUP_MODES)}")
    check("UPDATES", lambda x: x in UPDATE_MODES, f"must be one of {', '.join(map(repr, UPDATE_MODES))}")
    check("SEARCH", lambda x: isinstance(x, bool), "must be True or False")
    _check_unique_window(v, problems)
    check_default_filter(v, problems)
    check("USER_AGENT", lambda x: isinstance(x, str) and x.strip() != "" and not CONTROL_CHARACTERS.search(x),
          "must be a non-empty string without line breaks or control characters (it is sent as a header)")
    unique = check("UNIQUE_FIELDS",
                   lambda x: x == AUTO or (isinstance(x, (list, tuple)) and len(x) > 0
                                           and all(f in RECORD_FIELDS for f in x)),
                   f"must be a non-empty list of record fields ({', '.join(RECORD_FIELDS)}) or \"auto\"")
    if isinstance(v["DEADLINE"], (int, float)) and isinstance(v["TIMEOUT"], (int, float)) \
            and v["DEADLINE"] < v["TIMEOUT"]:
        problems.add("DEADLINE", f"must be at least TIMEOUT ({v['TIMEOUT']}), got {v['DEADLINE']!r}")
    return unique


def settings_from_dict(values: Mapping[str, Any], params_path: Path, *, secrets: bool = True) -> Settings:
    """Validate UPPERCASE settings (as found in params.py) into Settings."""
    problems = Problems(params_path.name, secrets=secrets)
    for name in values:
        if name not in DEFAULTS:
            hint = did_you_mean(name, DEFAULTS, quote=False)
            problems.add(name, f"unknown setting, {hint}" if hint else
                         "unknown setting (your own helper values must be lowercase)")
    v = {**DEFAULTS, **values}
    for name in SECONDS_SETTINGS:  # "10m" as well as 600, as UNIQUE_WINDOW takes it
        v[name] = as_seconds(v[name])
    base = params_path.parent
    unique = _check_values(v, base, problems)
    retain = check_retain(v["RETAIN"], "RETAIN", RETAIN_KEYS, Retain(), problems)
    sources = _check_sources(v["SOURCES"], v, base, problems, retain)
    listen = _check_protocol_settings(v, problems)
    notes: list[str] = list(problems.unset)  # logged at start: what was read differently from what the file says
    feeds = _OneSourcePerFeed(notes)
    sources = feeds.first_of_each(sources, lambda source: f"SOURCES ({source.name!r})")
    sources += _opml_sources(v, base, sources, problems, feeds)
    check_push_paths(sources, problems)
    link_jobs = check_link_jobs(v["LINK_JOBS"], problems, v["UPDATES"], retain)
    status_listen = _check_status_listen(v["STATUS_LISTEN"], listen, sources, problems)
    _check_shared(v, problems)
    problems.raise_if_any()

    return Settings(
        params_path=params_path,
        db_url=_resolve_db_url(v["DB_URL"], base),
        staging_dir=_resolve(v["STAGING_DIR"], base),
        log_dir=_resolve(v["LOG_DIR"], base),
        poll_interval=float(v["POLL_INTERVAL"]),
        flush_interval=float(v["FLUSH_INTERVAL"]),
        sources=tuple(sources),
        unique_fields=unique if unique == AUTO else tuple(unique),
        hash=v["HASH"],
        dedup=v["DEDUP"],
        unique_window=duration_seconds(v["UNIQUE_WINDOW"]),
        concurrency=v["CONCURRENCY"],
        per_host=v["PER_HOST"],
        user_agent=v["USER_AGENT"],
        timeout=float(v["TIMEOUT"]),
        deadline=float(v["DEADLINE"]),
        max_bytes=v["MAX_BYTES"],
        max_redirects=v["MAX_REDIRECTS"],
        max_items=v["MAX_ITEMS"],
        dead_after=v["DEAD_AFTER"],
        log_max_bytes=v["LOG_MAX_BYTES"],
        log_backups=v["LOG_BACKUPS"],
        link_jobs=tuple(link_jobs),
        webhook_listen=listen,
        websub_callback_base=v["WEBSUB_CALLBACK_BASE"].rstrip("/"),
        full_text_timeout=float(v["FULL_TEXT_TIMEOUT"]),
        notes=tuple(notes),
        log_format=v["LOG_FORMAT"],
        status_listen=status_listen,
        shared=v["SHARED"],
        shared_lease=float(v["SHARED_LEASE"]),
        db_timeout=float(v["DB_TIMEOUT"]),
        parse_processes=default_processes(len(sources)) if v["PARSE_PROCESSES"] == "auto" else v["PARSE_PROCESSES"],
        parse_on_demand=v["PARSE_PROCESSES"] == "auto",
        updates=v["UPDATES"],
        retain=retain,
        search=v["SEARCH"],
    )


def _check_unique_window(v: Mapping[str, Any], problems: Problems) -> None:
    """UNIQUE_WINDOW ("400d"): how long a hash stays in the hash file (parser/pipeline/hash_window.py). Only
    the hash file of DEDUP = "hashfile" can forget a hash: a Bloom filter cannot, and "off" keeps none."""
    window = v["UNIQUE_WINDOW"]
    if window is None:
        return
    if what := duration_problem(window):
        problems.add("UNIQUE_WINDOW", f"{what} (or None: every hash kept), got {reprlib.repr(window)}")
    elif v["DEDUP"] != "hashfile":
        problems.add("UNIQUE_WINDOW", f"applies to the hash file of DEDUP = \"hashfile\", but DEDUP is {v['DEDUP']!r} "
                     "(a Bloom filter cannot forget a hash; \"off\" keeps none): remove UNIQUE_WINDOW or set "
                     "DEDUP = \"hashfile\"")


def _check_shared(v: Mapping[str, Any], problems: Problems) -> None:
    """SHARED: the daemons of the group coordinate through the database, so it must be PostgreSQL
    (SQLite is one file on one machine). A lease shorter than a poll could hand a source being
    polled to a second daemon, so it must outlast DEADLINE."""
    if not isinstance(v["SHARED"], bool):
        problems.add("SHARED", f"must be True or False, got {v['SHARED']!r}")
        return
    if what := seconds_problem(v["SHARED_LEASE"]):
        problems.add("SHARED_LEASE", f"{what}, got {reprlib.repr(v['SHARED_LEASE'])}")
    elif _positive_number(v["DEADLINE"]) and v["SHARED_LEASE"] <= 2 * v["DEADLINE"]:
        problems.add("SHARED_LEASE", f"must be more than twice DEADLINE ({v['DEADLINE']} s): a claimed source "
                     f"is polled within its lease, got {v['SHARED_LEASE']!r}")
    url = v["DB_URL"]
    if v["SHARED"] and isinstance(url, str) and not url.startswith(("postgresql", "postgres://")):
        problems.add("SHARED", "True needs DB_URL to be a PostgreSQL database (postgresql://...), the one "
                     f"every daemon of the group reaches; got DB_URL {url.split('://', 1)[0]}://...")


def _check_sources(raw: Any, v: Mapping[str, Any], base: Path, problems: Problems, retain: Retain) -> list[Source]:
    if not isinstance(raw, (list, tuple)):
        problems.add("SOURCES", f"must be a list of dicts, got {type(raw).__name__}")
        return []
    sources: list[Source] = []
    seen: set[str] = set()
    entry_filter = default_filter(v)
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            problems.add(f"SOURCES[{i}]", f"must be a dict, got {type(item).__name__}")
            continue
        name = item.get("name")
        where = f"SOURCES[{i}]" + (f" ({name!r})" if isinstance(name, str) else "")
        for key in item:
            if key not in SOURCE_KEYS:
                problems.add(where, unknown_key(key, SOURCE_KEYS))
        if not isinstance(name, str) or not name.strip():
            problems.add(where, "name must be a non-empty string")
            continue
        if CONTROL_CHARACTERS.search(name):
            problems.add(where, "name must not hold line breaks or other control characters"
                         " (they would forge lines in errors.log)")
        if name in seen:
            problems.add(where, f"duplicate source name {name!r}")
        seen.add(name)
        extra = check_protocol_keys(item, where, name, str(v["WEBHOOK_LISTEN"]), problems)
        url = item.get("url", extra.pop("url", None))  # a webhook's url defaults to its listener address
        resolved = _source_url(url, base)
        if meant := missing_scheme(url, base):  # read as a file path, it would only be "file not found"
            problems.add(where, f'url: no scheme: did you mean "{meant}"?')
            resolved = None
        elif resolved is None:
            problems.add(where, f"url must be an http(s) URL, a file:// URL or a file path, got {url!r}")
        enabled = item.get("enabled", True)
        if not isinstance(enabled, bool):
            problems.add(where, f"enabled must be True or False, got {enabled!r}")
        # A value the source inherits (POLL_INTERVAL, MAX_ITEMS) was checked once under its own name; a
        # wrong default is one error, not one more per source that never set it.
        interval = as_seconds(item.get("interval", default_interval(item, v["POLL_INTERVAL"])))
        if "interval" in item and (what := seconds_problem(interval)):
            problems.add(where, f"interval {what}, got {reprlib.repr(interval)}")
        headers = item.get("headers", {})
        if not (isinstance(headers, Mapping) and all(isinstance(k, str) and isinstance(x, str)
                                                     for k, x in headers.items())):
            problems.add(where, "headers must be a dict of strings")
            headers = {}
        tags = check_tags(item, where, problems)
        max_items = item.get("max_items", v["MAX_ITEMS"])
        if "max_items" in item and (what := whole_problem(max_items)):
            problems.add(where, f"max_items {what}, got {reprlib.repr(max_items)}")
        updates = item.get("updates", v["UPDATES"])
        if "updates" in item and updates not in UPDATE_MODES:
            problems.add(where, f"updates must be one of {', '.join(map(repr, UPDATE_MODES))}, got {updates!r}")
        own = check_retain(item["retain"], where, SOURCE_RETAIN_KEYS, retain, problems, prefix="retain: ") \
            if "retain" in item else None
        if resolved is not None:
            sources.append(Source(name=name, url=resolved, enabled=enabled, interval=float(interval)
                                  if _positive_number(interval) else 600.0,
                                  headers=MappingProxyType(dict(headers)), tags=tuple(tags),
                                  max_items=max_items if _positive_int(max_items) else 50,
                                  updates=updates if updates in UPDATE_MODES else "update", retain=own,
                                  entry_filter=check_filter(item, where, entry_filter, problems), **extra))
            if _positive_number(interval):
                check_rate_fits(extra.get("rate"), float(interval), where, problems)
    return sources


def _check_protocol_settings(v: Mapping[str, Any], problems: Problems) -> tuple[str, int]:
    """WEBHOOK_LISTEN, WEBSUB_CALLBACK_BASE, FULL_TEXT_TIMEOUT (SOURCES_OPML is read by _opml_sources)."""
    try:
        listen = parse_listen(v["WEBHOOK_LISTEN"])
    except ValueError as exc:
        problems.add("WEBHOOK_LISTEN", str(exc))
        listen = ("127.0.0.1", 8787)
    if not check_callback_base(v["WEBSUB_CALLBACK_BASE"]):
        problems.add("WEBSUB_CALLBACK_BASE", "must be '' or the public http(s) address at which hubs reach "
                     f"WEBHOOK_LISTEN, got {v['WEBSUB_CALLBACK_BASE']!r}")
    if what := seconds_problem(v["FULL_TEXT_TIMEOUT"]):
        problems.add("FULL_TEXT_TIMEOUT", f"{what}, got {v['FULL_TEXT_TIMEOUT']!r}")
    return listen


def _check_status_listen(value: Any, webhook_listen: tuple[str, int], sources: list[Source],
                         problems: Problems) -> tuple[str, int] | None:
    """STATUS_LISTEN: None (off) or 'host:port'; not the webhook listener's port when that one is used."""
    if value is None:
        return None
    try:
        listen = parse_listen(value)
    except ValueError:
        problems.add("STATUS_LISTEN", f"must be None (off) or 'host:port' like '127.0.0.1:8788', got {value!r}")
        return None
    if pushed(sources) and listen[1] != 0 and listen[1] == webhook_listen[1]:
        problems.add("STATUS_LISTEN", f"must not use the port of WEBHOOK_LISTEN ({webhook_listen[1]}), got {value!r}")
    return listen


def _opml_sources(v: Mapping[str, Any], base: Path, sources: list[Source], problems: Problems,
                  feeds: _OneSourcePerFeed) -> list[Source]:
    """SOURCES_OPML: each feed outline of the file becomes a feed source. Two outlines with one title
    and two feeds get unique names (" (2)"); one feed listed twice, or also in SOURCES, is polled once
    (`feeds`). Either is a note."""
    notes = feeds.notes
    raw = v["SOURCES_OPML"]
    if raw is None:
        return []
    path = resolve_path(raw, base)
    if path is None:
        problems.add("SOURCES_OPML", f"must be the path of an OPML file, got {raw!r}")
        return []
    try:
        outlines = read_outlines(path)
    except OpmlError as exc:
        problems.add("SOURCES_OPML", str(exc))
        return []
    names = {s.name: "SOURCES" for s in sources}
    urls = {(s.name, s.url) for s in sources}
    taken: dict[str, str] = {}  # an OPML title -> the url of its first outline
    out: list[Source] = []
    for outline in outlines:
        where = f"SOURCES_OPML ({path.name} line {outline.line}, {outline.name!r})"
        url = _source_url(outline.url, base)
        if url is None:
            problems.add(where, f"xmlUrl must be an http(s) URL, got {outline.url!r}")
            continue
        name = outline.name
        source = Source(name=name, url=url, enabled=outline.enabled, interval=float(v["POLL_INTERVAL"])
                        if _positive_number(v["POLL_INTERVAL"]) else 600.0, tags=outline.tags,
                        max_items=v["MAX_ITEMS"] if _positive_int(v["MAX_ITEMS"]) else 50,
                        updates=v["UPDATES"] if v["UPDATES"] in UPDATE_MODES else "update",
                        entry_filter=default_filter(v))
        if (name, url) in urls:  # the same feed twice (two folders, or also in SOURCES): one source
            notes.append(f"{where}: the same feed as {names[name]}; polled once")
            continue
        if feeds.repeats(source, where):  # under another name
            continue
        if name in taken:
            # Another reader's export may hold two feeds under one title; the user should not have
            # to edit it. Document order decides, so the suffix is the same at every start.
            n = 2
            while f"{name} ({n})" in names:
                n += 1
            name = f"{name} ({n})"
            notes.append(f"{where}: the title is taken by another feed; this one is named {name!r}")
        elif name in names:
            problems.add(where, f"name clash: {names[name]} already has a source named {name!r}"
                         " (rename one of them)")
            continue
        taken.setdefault(outline.name, url)
        names[name] = f"{path.name} line {outline.line}"
        urls.add((outline.name, url))
        out.append(replace(source, name=name))
        feeds.add(out[-1], names[name])
    return out


class _OneSourcePerFeed:
    """Miniflux refuses a second subscription to one feed. Here a second name for a feed (twice in SOURCES,
    or in SOURCES and the OPML file) is dropped with a note, not an error, as an OPML import commonly repeats
    a feed: it is polled once and its entries are not split between two names. One feed is one
    Source.subscription; a disabled source is no subscription (it is polled only when named)."""

    def __init__(self, notes: list[str]):
        self.notes = notes
        self.first: dict[Subscription, tuple[str, str]] = {}  # subscription -> its first source's name, and where

    def repeats(self, source: Source, where: str) -> bool:
        """Whether a source kept before reads the feed `source` reads; if so the note says which."""
        first = self.first.get(source.subscription) if source.enabled else None
        if first is None:
            return False
        name, at = first
        dropped = f"; the name {source.name!r} is dropped" if source.name != name else ""
        self.notes.append(f"{where}: the same feed as {at}; polled once, as {name!r}{dropped} "
                          f"({redact_url(source.url)})")
        return True

    def add(self, source: Source, where: str) -> None:
        if source.enabled:
            self.first.setdefault(source.subscription, (source.name, where))

    def first_of_each(self, sources: list[Source], where: Callable[[Source], str]) -> list[Source]:
        """`sources` without those reading a feed one before them reads, each one dropped noted."""
        kept = []
        for source in sources:
            if not self.repeats(source, where(source)):
                self.add(source, where(source))
                kept.append(source)
        return kept


def _source_url(url: Any, base: Path) -> str | None:
    """http(s) and file URLs pass; a plain path becomes a file:// URL relative to params.py."""
    if not isinstance(url, str) or not url.strip():
        return None
    try:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https"):
            return url if parts.hostname else None
        if parts.scheme == "file":
            return url
        if parts.scheme == "" or (len(parts.scheme) == 1 and os.name == "nt"):
            return (base / url).resolve().as_uri()
    except ValueError:  # "Invalid IPv6 URL" (http://[x), "embedded null byte" in a path
        return None
    return None


def _not_a_folder(path: Path) -> Path | None:
    """The file standing where the folder, or one above it, should be (the daemon could create
    nothing there); None when the folder exists or can be created."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def _resolve(path: Any, base: Path) -> Path:
    return (base / Path(path).expanduser()).resolve()


KNOWN_DATABASES = "sqlite:///path/to/file.db or postgresql://user@host/db (psycopg 3)"


def _db_url_problem(url: Any, base: Path) -> str | None:
    """DB_URL must name a database SQLAlchemy can open with a driver installed here: found now, at
    start or reload, not as a traceback when the daemon first opens it. The URL itself is never
    quoted back (it may hold a password), only its scheme."""
    if not isinstance(url, str) or "://" not in url:
        return f"must be an SQLAlchemy URL string like {KNOWN_DATABASES}, got {type(url).__name__}" \
            + (f" {url!r}" if not isinstance(url, str) else " without '://'")
    scheme = url.split("://", 1)[0]
    try:
        dialect = make_url(_resolve_db_url(url, base)).get_dialect()
        dialect.import_dbapi()
    except NoSuchModuleError:
        return f"{scheme}:// is no database SQLAlchemy knows (a typo?); use {KNOWN_DATABASES}"
    except ImportError as exc:
        return (f"{scheme}:// needs the Python module {exc.name or exc}, which is not installed here; install "
                f"that driver into the daemon's virtualenv, or use {KNOWN_DATABASES}")
    except (ArgumentError, ValueError) as exc:
        return f"is not a database URL SQLAlchemy can read ({exc}); use {KNOWN_DATABASES}"
    if getattr(dialect, "is_async", False):
        return f"{scheme}:// is an asyncio driver, which the daemon cannot use; use {KNOWN_DATABASES}"
    return None


def _resolve_db_url(url: str, base: Path) -> str:
    """Make a relative SQLite path relative to params.py, and send plain postgresql:// to psycopg 3."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////") and url != "sqlite:///:memory:":
        return "sqlite:///" + str(_resolve(url[len("sqlite:///"):], base))
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _positive_int(x: Any) -> bool:
    return whole_problem(x) is None


def _positive_number(x: Any) -> bool:
    return seconds_problem(x) is None
