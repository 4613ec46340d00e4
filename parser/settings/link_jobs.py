"""LINK_JOBS: each two-pass job checked into a frozen LinkJob, with messages naming the job and key.

Called by settings/params.py with its Problems (parser/core/problems.py): each problem is added with
`where` naming the job, so every message says which job it is about.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from db.upsert import MODES as UPDATE_MODES
from linkgen.spec import HarvestSpec
from linkgen.templates import NumberRange, Values, count_links, expand, parse_values, placeholders

from ..adapters.extract import compile_selector
from ..adapters.field_types import FIELD_TYPES, KIND_OF
from ..core.problems import Problems, unknown_key
from ..core.setting_values import as_seconds, duration_problem, http_url, seconds_problem, whole_problem
from .retain import JOB_RETAIN_KEYS, Retain, check_retain

JOB_KEYS = ("name", "enabled", "fields", "template", "values", "stop_after_misses", "harvest", "objects",
            "interval", "delay", "unique_fields", "refresh", "updates", "retain")
FIELD_KEYS = ("select", "type")  # a field given as a dict: {"select": selector, "type": one of FIELD_TYPES}
HARVEST_KEYS = ("root", "depth", "follow", "allowed_domains", "max_pages", "objects")
# `changed` and `gone` the parser fills itself (db/schema.py's added_columns).
RESERVED_COLUMNS = ("id", "hash", "url", "fetched", "changed", "gone")
# With updates "history", `<job>_versions` holds a row's earlier versions: its columns and these two
# (db/store.py's _versions), which a field of the same name would collide with.
VERSIONS_COLUMNS = ("version", "replaced")
# A job's name is its table's: these tables are the parser's own (the feeds' entries, the `sources`
# table, the feeds' earlier versions, the polls' and passes' `runs`), and every `parser_` table (each table's
# schema version, the record of the schema steps run: db/migrations.py, the group's coordination tables of
# SHARED = True).
RESERVED_TABLES = {"items": "the feeds' table", "sources": "the sources' table (a row per source, for joins)",
                   "items_versions": "the feeds' earlier versions (UPDATES = \"history\")",
                   "runs": "the runs' table (a row per poll and per job pass)"}
RESERVED_PREFIX = "parser_"
MAX_TEMPLATE_LINKS = 10_000_000
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_DOMAIN = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")

JOB_DEFAULTS = {"enabled": True, "interval": 86400, "delay": 0, "unique_fields": ["url"]}
HARVEST_DEFAULTS = {"depth": 3, "follow": "", "max_pages": 1000}


@dataclass(frozen=True)
class LinkJob:
    name: str                         # also its database table
    fields: Mapping[str, str]         # column -> XPath or css: selector
    template: str | None = None
    values: Mapping[str, Values] = field(default_factory=lambda: MappingProxyType({}))
    stop_after_misses: int | None = None
    harvest: HarvestSpec | None = None
    enabled: bool = True
    interval: float = 86400.0         # how often pass 1 runs again
    delay: float = 0.0                # seconds between requests to one host
    unique_fields: tuple[str, ...] = ("url",)
    types: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # field -> declared type
    refresh: float | None = None      # seconds after which a done object is fetched again (None: never)
    updates: str | None = None        # the job's own UPDATES mode; None: the UPDATES setting's
    retain: Retain = Retain()         # RETAIN, with the job's own `retain` over it (parser/settings/retain.py)

    @property
    def columns(self) -> tuple[str, ...]:
        return ("url", "fetched", *self.fields)

    @property
    def kinds(self) -> dict[str, str]:
        """The column kind (db/schema.py) of each field declared with a type; the rest are text."""
        return {name: KIND_OF[kind] for name, kind in self.types.items()}


def check_link_jobs(raw: Any, problems: Problems, updates: Any = "update", retain: Retain = Retain()) -> list[LinkJob]:
    """The jobs of LINK_JOBS; `updates` is the UPDATES setting, the mode of a job without its own; `retain`
    RETAIN, the retention of a job without its own."""
    if not isinstance(raw, (list, tuple)):
        problems.add("LINK_JOBS", f"must be a list of dicts, got {type(raw).__name__}")
        return []
    jobs: list[LinkJob] = []
    seen: set[str] = set()
    wheres: dict[str, str] = {}
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            problems.add(f"LINK_JOBS[{i}]", f"must be a dict, got {type(item).__name__}")
            continue
        name = item.get("name")
        where = f"LINK_JOBS[{i}]" + (f" ({name!r})" if isinstance(name, str) else "")
        job = _check_job(item, where, problems, updates, retain)  # None when the job has a problem
        if isinstance(name, str) and name in seen:
            problems.add(where, f"duplicate job name {name!r}")
        if isinstance(name, str):  # a list as a name is reported above; it cannot go in a set
            seen.add(name)
            wheres.setdefault(name, where)
        if job is not None:
            jobs.append(job)
    _versions_names(wheres, problems)
    return jobs


def _versions_names(wheres: Mapping[str, str], problems: Problems) -> None:
    """A job named `<other job>_versions` is refused: that is the other job's table of earlier versions
    once its updates are "history" (now or after an edit of params.py)."""
    for name, where in wheres.items():
        base = name.removesuffix("_versions")
        if base != name and base in wheres:
            problems.add(where, f"name {name!r} is the table of job {base!r}'s earlier versions "
                                "(updates \"history\"); choose another")


def _check_job(item: Mapping[str, Any], where: str, problems: Problems,
               default_updates: Any, retain: Retain) -> LinkJob | None:
    _unknown_keys(item, JOB_KEYS, "", where, problems)
    v = {**JOB_DEFAULTS, **item}
    v["interval"], v["delay"] = as_seconds(v["interval"]), as_seconds(v["delay"])  # "1d" as well as 86400
    name = v.get("name")
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        problems.add(where, f"name must be a table name: lowercase letters, digits and _, starting with a letter "
                            f"or _, at most 63 characters; got {name!r}")
    elif name in RESERVED_TABLES:
        problems.add(where, f"name {name!r} is {RESERVED_TABLES[name]}; choose another")
    elif name.startswith(RESERVED_PREFIX):
        problems.add(where, f"name {name!r}: names starting with {RESERVED_PREFIX!r} are the parser's own "
                            "tables (table versions, the group's coordination); choose another")
    if not isinstance(v["enabled"], bool):
        problems.add(where, f"enabled must be True or False, got {v['enabled']!r}")
    for key, what in (("interval", seconds_problem(v["interval"])), ("delay", seconds_problem(v["delay"], zero=True))):
        if what:
            problems.add(where, f"{key} {what}, got {v[key]!r}")
    types: dict[str, str] = {}
    fields = _check_fields(v.get("fields"), types, where, problems)
    refresh = _check_refresh(item, where, problems)
    updates = item.get("updates")
    if "updates" in item and updates not in UPDATE_MODES:
        problems.add(where, f"updates must be one of {', '.join(map(repr, UPDATE_MODES))}, got {updates!r}")
    if (updates if "updates" in item else default_updates) == "history":
        said = "updates \"history\"" if "updates" in item else "UPDATES = \"history\""
        for column in (c for c in fields if c in VERSIONS_COLUMNS):
            problems.add(where, f"fields: {column!r} is a column of {name}_versions, the table of earlier "
                                f"versions {said} keeps; choose another column name")
    if "retain" in item:
        retain = check_retain(item["retain"], where, JOB_RETAIN_KEYS, retain, problems, prefix="retain: ")
    unique = v["unique_fields"]
    allowed = ("url", "fetched", *fields)
    if not (isinstance(unique, (list, tuple)) and unique and all(f in allowed for f in unique)):
        problems.add(where, f"unique_fields must be a non-empty list of columns ({', '.join(allowed)}), got {unique!r}")

    has_template, has_harvest = "template" in item, "harvest" in item
    if has_template == has_harvest:
        problems.add(where, "needs exactly one of 'template' (with 'values') or 'harvest'"
                            + (", not both" if has_template else ""))
        return None
    template: str | None = None
    values: dict[str, Values] = {}
    stop: int | None = None
    harvest: HarvestSpec | None = None
    if has_template:
        for key in ("objects",):
            if key in item:
                problems.add(where, f"{key!r} belongs to a harvest job; a template job fetches every link it makes")
        template, values, stop = _check_template(v, where, problems)
    else:
        for key in ("values", "stop_after_misses"):
            if key in item:
                problems.add(where, f"{key!r} belongs to a template job, not a harvest")
        harvest = _check_harvest(v.get("harvest"), item.get("objects"), where, problems)
    if problems.has(where) or not isinstance(name, str):  # a name not a str is among the problems
        return None
    return LinkJob(name=name, fields=MappingProxyType(fields), template=template,
                   values=MappingProxyType(values), stop_after_misses=stop, harvest=harvest,
                   enabled=v["enabled"], interval=float(v["interval"]), delay=float(v["delay"]),
                   unique_fields=tuple(unique), types=MappingProxyType(types), refresh=refresh, updates=updates,
                   retain=retain)


def _check_refresh(item: Mapping[str, Any], where: str, problems: Problems) -> float | None:
    """`refresh`: a duration ("7d", "12h", "30s") or a number of seconds; absent or None: never."""
    raw = item.get("refresh")
    if raw is None:
        return None
    seconds = as_seconds(raw)
    what = duration_problem(raw) if isinstance(raw, str) else seconds_problem(seconds)
    if what:
        problems.add(where, f"refresh {what}, got {raw!r}")
        return None
    return float(seconds)


def _field_selector(column: str, raw: Any, types: dict[str, str], where: str, problems: Problems) -> Any:
    """A field's selector: the string itself, or a dict's `select` (its `type` kept in `types`)."""
    if not isinstance(raw, Mapping):
        return raw
    _unknown_keys(raw, FIELD_KEYS, f"fields[{column!r}]: ", where, problems)
    kind = raw.get("type", "text")
    if kind not in FIELD_TYPES:
        problems.add(where, f"fields[{column!r}]: type must be one of {', '.join(map(repr, FIELD_TYPES))}, "
                     f"got {kind!r}")
    elif "type" in raw:
        types[column] = kind
    return raw.get("select")


def _check_fields(raw: Any, types: dict[str, str], where: str, problems: Problems) -> dict[str, str]:
    if not isinstance(raw, Mapping) or not raw:
        problems.add(where, "fields must be a non-empty dict {column: XPath or 'css:selector', or "
                            "{'select': XPath or 'css:selector', 'type': 'number', 'date', 'text' or 'list'}}")
        return {}
    fields: dict[str, str] = {}
    for column, given in raw.items():
        if not isinstance(column, str) or not _IDENTIFIER.match(column):
            problems.add(where, f"fields: {column!r} is not a column name (lowercase letters, digits and _)")
            continue
        if column in RESERVED_COLUMNS:
            problems.add(where, f"fields: {column!r} is filled by the parser itself; choose another column name")
            continue
        selector = _field_selector(column, given, types, where, problems)
        try:
            compile_selector(selector)
        except ValueError as exc:
            problems.add(where, f"fields[{column!r}] {exc}: {selector!r}")
            continue
        fields[column] = selector.strip()
    return fields


def _check_template(v: Mapping[str, Any], where: str,
                    problems: Problems) -> tuple[str | None, dict[str, Values], int | None]:
    template, raw_values = v.get("template"), v.get("values", {})
    if not isinstance(template, str) or not template.strip():
        problems.add(where, f"template must be a URL string with {{name}} placeholders, got {template!r}")
        return None, {}, None
    try:
        names = placeholders(template)
    except ValueError as exc:
        problems.add(where, f"template: {exc}")
        return None, {}, None
    if not isinstance(raw_values, Mapping):
        problems.add(where, f"values must be a dict {{placeholder: list, range or dict}}, got {raw_values!r}")
        return None, {}, None
    values: dict[str, Values] = {}
    for name in names:
        if name not in raw_values:
            problems.add(where, f"values has no entry for the template's placeholder {{{name}}}")
            continue
        try:
            values[name] = parse_values(raw_values[name])
        except ValueError as exc:
            problems.add(where, f"values[{name!r}]: {exc}")
    for name in raw_values:
        if name not in names:
            problems.add(where, f"values[{name!r}] is not used by the template")
    if problems.has(where):
        return None, {}, None
    stop = v.get("stop_after_misses")
    ranges = [n for n, x in values.items() if isinstance(x, NumberRange)]
    if stop is not None:
        if what := whole_problem(stop):
            problems.add(where, f"stop_after_misses {what}, got {stop!r}")
        elif len(ranges) != 1:
            problems.add(where, f"stop_after_misses needs exactly one number range in values, found {len(ranges)}")
    else:
        for n, x in values.items():
            if isinstance(x, NumberRange) and x.last is None:
                problems.add(where, f"values[{n!r}] has no 'to': an open-ended range needs stop_after_misses")
    if problems.has(where):
        return None, {}, None
    today = datetime.now(UTC).date()
    size = count_links(values, today)
    if size is not None and size > MAX_TEMPLATE_LINKS:
        problems.add(where, f"template gives {size:,} links, more than {MAX_TEMPLATE_LINKS:,}; split the job")
        return None, {}, None
    try:
        first = next(expand(template, values, today=today, stop_after_misses=stop), None)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        problems.add(where, f"template does not expand: {exc}")
        return None, {}, None
    if first is not None and not _http_url(first.url):
        problems.add(where, f"template must give http(s) URLs, gives {first.url!r}")
    return template.strip(), values, stop


def _check_harvest(raw: Any, job_objects: Any, where: str, problems: Problems) -> HarvestSpec | None:
    if not isinstance(raw, Mapping):
        problems.add(where, f"harvest must be a dict with 'root' and the job's 'objects', got {type(raw).__name__}")
        return None
    _unknown_keys(raw, HARVEST_KEYS, "harvest: ", where, problems)
    h = {**HARVEST_DEFAULTS, **raw}
    root = h.get("root")
    if not _http_url(root):
        problems.add(where, f"harvest: root must be an http(s) URL, got {root!r}")
        return None
    if job_objects is not None and "objects" in raw:
        problems.add(where, "objects is given twice (in the job and in harvest); keep one")
    objects = job_objects if job_objects is not None else raw.get("objects")
    if objects is None:
        problems.add(where, "a harvest job needs 'objects': a regex matching the links of object pages")
    for key, pattern in (("objects", objects), ("harvest: follow", h["follow"])):
        if pattern is None:
            continue
        if not isinstance(pattern, str):
            problems.add(where, f"{key} must be a regex string, got {pattern!r}")
            continue
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.add(where, f"{key} is not a valid regex ({exc}): {pattern!r}")
    depth, max_pages = h["depth"], h["max_pages"]
    if not (_int(depth) and depth >= 1):
        problems.add(where, "harvest: depth must be a whole number, 1 or more (link hops from the root), "
                     f"got {depth!r}")
    if not (_int(max_pages) and max_pages >= 1):
        problems.add(where, f"harvest: max_pages must be a whole number above 0, got {max_pages!r}")
    domains = h.get("allowed_domains", [urlsplit(root).hostname])
    if not (isinstance(domains, (list, tuple)) and domains
            and all(isinstance(d, str) and _DOMAIN.match(d.strip().lower()) for d in domains)):
        problems.add(where, f"harvest: allowed_domains must be a non-empty list of host names "
                            f"(like 'example.com', no scheme or port), got {domains!r}")
        domains = []
    if problems.has(where) or not isinstance(objects, str):  # objects missing or not a str is among the problems
        return None
    return HarvestSpec(root=root.strip(), objects=objects, depth=depth, follow=h["follow"],
                       allowed_domains=tuple(d.strip().lower().rstrip(".") for d in domains), max_pages=max_pages)


def _unknown_keys(item: Mapping[str, Any], known: tuple[str, ...], prefix: str, where: str,
                  problems: Problems) -> None:
    for key in item:
        if key not in known:
            problems.add(where, prefix + unknown_key(key, known))


def _http_url(x: Any) -> TypeGuard[str]:
    return isinstance(x, str) and http_url(x.strip())


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)

