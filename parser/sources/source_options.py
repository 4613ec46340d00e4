"""The per-protocol keys of a source (protocol, json_api, webhook, websub, rate, full_text, full_text_internal)
and its entry rules (keep, block: every protocol's): their checks, and the frozen values they set (those a poll and the
adapters read are in parser/adapters/source_view.py). Which protocol takes which key, and how each one
differs, is the table in parser/sources/protocols.py.

Called by settings._check_sources for each source, so every message names the source and the
key. Secrets never come from params.py: a key only names the environment variable that holds one
(token_env, secret_env), and a literal secret is refused with a message saying so.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeGuard
from typing import Protocol as Interface
from urllib.parse import quote, urlsplit

from ..adapters.source_view import Auth, JsonApi, SourceView
from ..core.problems import Problems
from ..core.record import RECORD_FIELDS
from ..core.setting_values import http_url
from ..fetch.ratelimit import Rate, parse_rate
from ..pipeline.filters import NO_FILTER, EntryFilter, Rules, compile_rules
from .protocols import DEFAULT, KEY_PROTOCOLS, PROTOCOLS, Protocol

PROTOCOL_KEYS = tuple(KEY_PROTOCOLS)
MAPPABLE = tuple(f for f in RECORD_FIELDS if f not in ("source", "fetched"))
AUTH_TYPES = ("bearer", "api_key")
DEFAULT_DELIVERY_HEADER = "X-Hub-Delivery"
DEFAULT_MAX_PAGES = 10          # when `next` or `page_param` asks for pages
# Names that say "this value is a secret": it must come from the environment, not params.py.
_SECRET_NAME = re.compile(r"authorization|token|secret|passw|api[-_]?key|apikey|^key$|signature", re.IGNORECASE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATH_SEGMENT = re.compile(r"^[A-Za-z0-9._~!$&'()*+,;=:@/%-]+$")
# The first segment of a url written without its scheme: a host with a dot (example.org, 127.0.0.1) or a
# host with a port (localhost:8901); a port, or a '/' after it, tells it from a file name (feed.xml).
_HOST_SEGMENT = re.compile(r"^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?::\d{1,5})?(?=/)|[A-Za-z0-9.-]+:\d{1,5}(?=/|$))")


@dataclass(frozen=True)
class Push:
    """A source whose records are sent to us: a webhook, or a WebSub subscription's callback."""
    path: str                                         # where the listener takes them
    secret_env: str = ""                              # the environment variable holding the HMAC secret
    delivery_header: str = DEFAULT_DELIVERY_HEADER
    hub: str = ""                                     # websub: the hub, when not discovered from the feed

    def secret(self) -> bytes:
        return os.environ.get(self.secret_env, "").encode("utf-8") if self.secret_env else b""


class PushedSource(SourceView, Interface):
    """What the listener's endpoints read of a source (webhook.py, websub.py): its view and its Push."""

    @property
    def push(self) -> Push | None: ...

    @property
    def interval(self) -> float: ...  # websub: how often the feed is polled when it names no hub


def push_of(source: PushedSource) -> Push:
    """A pushed source's Push: check_protocol_keys gives one to every webhook and websub source."""
    assert source.push is not None, f"{source.name}: a pushed source has its push options"
    return source.push


def check_protocol_keys(item: Mapping[str, Any], where: str, name: str, listen: str,
                        problems: Problems) -> dict[str, Any]:
    """Validate the protocol keys of one SOURCES entry; return the Source fields they set.

    `listen` is WEBHOOK_LISTEN ("host:port"): a webhook source's url defaults to its address there.
    """
    name_given = item.get("protocol", DEFAULT)
    if not isinstance(name_given, str) or name_given not in PROTOCOLS:
        problems.add(where, f"protocol must be one of {', '.join(map(repr, PROTOCOLS))}, got {name_given!r}")
        return {}
    protocol = PROTOCOLS[name_given]
    for key in item:
        allowed = KEY_PROTOCOLS.get(key)
        if allowed is not None and protocol.name not in allowed:
            problems.add(where, f"{key!r} is a key of protocol {' / '.join(allowed)}, not {protocol.name!r}"
                         + (" (set protocol)" if "protocol" not in item else ""))
    for literal, env_key in (("token", "auth's token_env"), ("secret", "secret_env"), ("password", "token_env")):
        if literal in item:
            problems.add(where, f"{literal!r}: a literal secret does not belong in params.py; put it in an "
                         f"environment variable and name that variable with {env_key}")
    _refuse_literal_secrets(item.get("headers"), where, "headers", problems)
    out: dict[str, Any] = {"protocol": protocol.name}

    if protocol.body == "json":
        out["api"] = _json_api(item, where, protocol, problems)
    if "auth" in item:
        out["auth"] = _auth(item["auth"], where, problems)
    if protocol.pushed:
        out["push"] = _push(item, where, name, protocol, problems)
        if not protocol.polled and "url" not in item:  # its address is the listener's
            out["url"] = f"http://{listen}{out['push'].path}" if out["push"] else f"http://{listen}/"
    if "rate" in item:
        try:
            out["rate"] = parse_rate(item["rate"])
        except ValueError as exc:
            problems.add(where, f"rate: {exc}")
    full_text = item.get("full_text", False)
    if not isinstance(full_text, bool):
        problems.add(where, f"full_text must be True or False, got {full_text!r}")
    else:
        out["full_text"] = full_text
    internal = item.get("full_text_internal", False)
    if not isinstance(internal, bool):
        problems.add(where, f"full_text_internal must be True or False, got {internal!r}")
    elif internal and full_text is not True:
        problems.add(where, "full_text_internal lets full text fetch internal addresses: it needs full_text True")
    else:
        out["full_text_internal"] = internal
    return out


FILTER_KEYS = ("keep", "block")  # a source's entry rules (parser/pipeline/filters.py), KEEP and BLOCK their defaults


def default_filter(values: Mapping[str, Any]) -> EntryFilter:
    """The entry rules of a source that sets neither `keep` nor `block`: KEEP and BLOCK of params.py. A bad
    one counts as none here; check_default_filter says its problem once, not once per source."""
    rules = {}
    for key in FILTER_KEYS:
        try:
            rules[key] = _default_rules(values, key)
        except ValueError:
            rules[key] = ()
    return EntryFilter(**rules)


def check_default_filter(values: Mapping[str, Any], problems: Problems) -> None:
    """KEEP and BLOCK: each a dict of entry field -> regular expression (parser/pipeline/filters.py)."""
    for key in FILTER_KEYS:
        try:
            _default_rules(values, key)
        except ValueError as exc:
            problems.add(key.upper(), str(exc))


def _default_rules(values: Mapping[str, Any], key: str) -> Rules:
    raw = values.get(key.upper())
    return compile_rules({} if raw is None else raw)  # None: no rules, as {}


def check_filter(item: Mapping[str, Any], where: str, default: EntryFilter, problems: Problems) -> EntryFilter:
    """A source's `keep` and `block` compiled; each one it does not set is KEEP's or BLOCK's (`default`)."""
    rules = {}
    for key in FILTER_KEYS:
        if key not in item:
            rules[key] = getattr(default, key)
            continue
        try:
            rules[key] = compile_rules(item[key])
        except ValueError as exc:
            problems.add(where, f"{key}: {exc}")
            return NO_FILTER
    return EntryFilter(**rules)


TAG_MAX = 40  # characters: a tag is a short label to select by (`--tag NAME`), not a sentence
# An OPML category list is comma-separated, a slash in it a path (parser/sources/opml.py): neither fits in a
# tag that export-opml writes there; a control character would forge lines in the logs.
_NOT_IN_A_TAG = re.compile("[,/\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_tags(item: Mapping[str, Any], where: str, problems: Problems) -> tuple[str, ...]:
    """A source's `tags`: short labels that `--tag NAME` selects its sources by, shown by `status` and
    written as OPML categories by export-opml. A tag given twice counts once."""
    tags = item.get("tags", [])
    if not isinstance(tags, (list, tuple)) or not all(isinstance(tag, str) for tag in tags):
        problems.add(where, f"tags must be a list of short strings like ['news', 'daily'], got {tags!r}")
        return ()
    for tag in tags:
        if not tag.strip() or tag != tag.strip() or len(tag) > TAG_MAX or _NOT_IN_A_TAG.search(tag):
            problems.add(where, f"tags: {tag!r} is not a tag: 1 to {TAG_MAX} characters, without a comma, a "
                         "slash, a line break or spaces at either end")
            return ()
    return tuple(dict.fromkeys(tags))


def default_interval(item: Mapping[str, Any], poll_interval: float) -> float:
    """The protocol's own interval (a websub source is polled rarely: the hub pushes, the poll is the
    fallback), else POLL_INTERVAL."""
    protocol = PROTOCOLS.get(str(item.get("protocol", DEFAULT)))
    interval = protocol.interval if protocol is not None else None
    return poll_interval if interval is None else interval


def check_rate_fits(rate: Rate | None, interval: float, where: str, problems: Problems) -> None:
    """A source polled more often than its own rate allows would wait on itself forever."""
    if rate is not None and interval < rate.seconds / rate.count:
        problems.add(where, f"interval {interval:g} s polls more often than rate {rate.text!r} allows "
                     f"(one request every {rate.seconds / rate.count:g} s)")


def _json_api(item: Mapping[str, Any], where: str, protocol: Protocol, problems: Problems) -> JsonApi | None:
    ok = True

    def path_of(key: str) -> str:
        nonlocal ok
        value = item.get(key, "")
        if not isinstance(value, str) or any(part == "" for part in value.split(".")) and value != "":
            problems.add(where, f"{key} must be a dotted path like 'data.posts', got {value!r}")
            ok = False
            return ""
        return value

    items = path_of("items")
    next_path = path_of("next")
    mapping = item.get("map", {})
    if not isinstance(mapping, Mapping):
        problems.add(where, f"map must be a dict of record field -> dotted path, got {type(mapping).__name__}")
        mapping, ok = {}, False
    for key, value in mapping.items():
        if key not in MAPPABLE:
            problems.add(where, f"map: {key!r} is not a record field (fields: {', '.join(MAPPABLE)})")
            ok = False
        elif not isinstance(value, str) or not value or "" in value.split("."):
            problems.add(where, f"map[{key!r}] must be a dotted path like 'author.name', got {value!r}")
            ok = False
    query = _string_dict(item.get("query_params", {}), where, "query_params", problems, scalars=True)
    headers = _string_dict(item.get("header_params", {}), where, "header_params", problems)
    if query is None or headers is None:
        return None
    # The seed's incident: a header sent as a query parameter. Each name goes to exactly one place.
    for name in set(query) & set(headers):
        problems.add(where, f"{name!r} is in both query_params and header_params; a parameter goes in one place")
        ok = False
    for name in query:
        if name.lower().startswith("x-") or name.lower() in ("accept", "user-agent", "content-type"):
            problems.add(where, f"query_params: {name!r} looks like an HTTP header; put it in header_params")
            ok = False
    ok &= _refuse_literal_secrets(query, where, "query_params", problems)
    ok &= _refuse_literal_secrets(headers, where, "header_params", problems)
    page_param = item.get("page_param", "")
    if not isinstance(page_param, str):
        problems.add(where, f"page_param must be the name of a query parameter, got {page_param!r}")
        page_param, ok = "", False
    if page_param and next_path:
        problems.add(where, "next and page_param are two ways to page; give one")
        ok = False
    if page_param and page_param in query and not str(query[page_param]).isdigit():
        problems.add(where, f"query_params[{page_param!r}] is the first page number, got {query[page_param]!r}")
        ok = False
    paged = bool(page_param or next_path)
    max_pages = item.get("max_pages", DEFAULT_MAX_PAGES if paged else 1)
    if not (isinstance(max_pages, int) and not isinstance(max_pages, bool) and max_pages > 0):
        problems.add(where, f"max_pages must be a whole number above 0, got {max_pages!r}")
        max_pages, ok = 1, False
    elif "max_pages" in item and not paged:
        problems.add(where, "max_pages needs next or page_param to say how to reach the next page")
        ok = False
    if not protocol.polled and (paged or query or headers):
        problems.add(where, "a webhook receives its records: next, page_param, query_params and header_params "
                     "do not apply")
        ok = False
    if not ok:
        return None
    return JsonApi(items=items, map=MappingProxyType(dict(mapping)), query_params=MappingProxyType(query),
                   header_params=MappingProxyType(headers), next=next_path, page_param=page_param,
                   max_pages=max_pages)


def _auth(raw: Any, where: str, problems: Problems) -> Auth | None:
    if not isinstance(raw, Mapping):
        problems.add(where, f"auth must be a dict like {{'type': 'bearer', 'token_env': 'MY_TOKEN'}}, got {raw!r}")
        return None
    for literal in ("token", "key", "secret", "password", "value"):
        if literal in raw:
            problems.add(where, f"auth: a literal {literal} does not belong in params.py; put the secret in an "
                         "environment variable and name that variable with token_env")
            return None
    unknown = [k for k in raw if k not in ("type", "token_env", "header", "param")]
    if unknown:
        problems.add(where, f"auth: unknown key {unknown[0]!r} (known: type, token_env, header, param)")
        return None
    kind = raw.get("type")
    if kind not in AUTH_TYPES:
        problems.add(where, f"auth: type must be one of {', '.join(map(repr, AUTH_TYPES))}, got {kind!r}")
        return None
    env = raw.get("token_env")
    if not _env_present(env, where, "auth: token_env", problems):
        return None
    header, param = raw.get("header", ""), raw.get("param", "")
    if not isinstance(header, str) or not isinstance(param, str):
        problems.add(where, "auth: header and param must be strings")
        return None
    if kind == "bearer" and (header or param):
        problems.add(where, "auth: a bearer token goes in the Authorization header; header and param are "
                     "for type 'api_key'")
        return None
    if header and param:
        problems.add(where, "auth: give header or param, not both (a parameter goes in one place)")
        return None
    if kind == "api_key" and not param:
        header = header or "X-API-Key"
    return Auth(type=kind, token_env=env, header=header, param=param)


def _push(item: Mapping[str, Any], where: str, name: str, protocol: Protocol, problems: Problems) -> Push | None:
    ok = True
    default_path = protocol.default_path.format(name=quote(name, safe="")) if protocol.default_path else None
    path = item.get("path", default_path)
    if not isinstance(path, str) or not path.startswith("/") or not _PATH_SEGMENT.match(path) or "?" in path:
        problems.add(where, f"path must be a URL path like '/hooks/{name}', got {path!r}"
                     if path is not None else "path is required: the URL path the listener takes deliveries at")
        ok = False
    secret_env = item.get("secret_env", "")
    if protocol.needs_secret and "secret_env" not in item:
        problems.add(where, "secret_env is required: the environment variable holding the HMAC secret that "
                     "signs deliveries (X-Hub-Signature-256)")
        ok = False
    elif "secret_env" in item and not _env_present(secret_env, where, "secret_env", problems):
        ok = False
    header = item.get("delivery_header", DEFAULT_DELIVERY_HEADER)
    if not isinstance(header, str) or not re.match(r"^[A-Za-z0-9-]+$", header):
        problems.add(where, f"delivery_header must be an HTTP header name, got {header!r}")
        ok = False
    hub = item.get("hub", "")
    if hub and not http_url(hub):
        problems.add(where, f"hub must be an http(s) URL, got {hub!r}")
        ok = False
    if not ok:
        return None
    return Push(path=path, secret_env=secret_env, delivery_header=header, hub=hub or "")


def check_push_paths(sources: Sequence[PushedSource], problems: Problems) -> None:
    """Two pushed sources at one path could not be told apart."""
    seen: dict[str, str] = {}
    for source in sources:
        push = source.push
        if push is None:
            continue
        if push.path in seen:
            problems.add(f"SOURCES ({source.name!r})", f"path {push.path!r} is already the path of source "
                         f"{seen[push.path]!r}")
        seen.setdefault(push.path, source.name)


def _env_present(env: Any, where: str, key: str, problems: Problems) -> TypeGuard[str]:
    if not isinstance(env, str) or not _ENV_NAME.match(env):
        problems.add(where, f"{key} must name an environment variable, got {env!r}")
        return False
    if not os.environ.get(env):  # only the daemon reads it: the problems object knows who is reading
        problems.secret_unset(where, f"{key}: the environment variable {env} is not set (the secret is read "
                              "from it)")
    return True


def _string_dict(raw: Any, where: str, key: str, problems: Problems, *, scalars: bool = False) -> dict[str, str] | None:
    types = (str, int, float) if scalars else (str,)
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) and k and isinstance(v, types)
                                               and not isinstance(v, bool) for k, v in raw.items()):
        what = "strings or numbers" if scalars else "strings"
        problems.add(where, f"{key} must be a dict of names to {what}, got {raw!r}")
        return None
    return {k: str(v) for k, v in raw.items()}


def _refuse_literal_secrets(values: Any, where: str, key: str, problems: Problems) -> bool:
    if not isinstance(values, Mapping):
        return True
    for name in values:
        if isinstance(name, str) and _SECRET_NAME.search(name):
            problems.add(where, f"{key}: {name!r} holds a secret, and secrets do not belong in params.py; use "
                         "auth {'type': 'bearer' or 'api_key', 'token_env': 'VARIABLE'} with the token in that "
                         "environment variable")
            return False
    return True


def parse_listen(value: Any) -> tuple[str, int]:
    """WEBHOOK_LISTEN 'host:port' ('[::1]:8787' for IPv6; port 0 picks a free one); ValueError if not."""
    if not isinstance(value, str) or ":" not in value:
        raise ValueError(f"must be 'host:port' like '127.0.0.1:8787', got {value!r}")
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"must be 'host:port' like '127.0.0.1:8787', got {value!r}")
    return host, int(port)


def missing_scheme(url: Any, base: os.PathLike[str] | str) -> str | None:
    """The http:// URL a source's url without a scheme means ('127.0.0.1:8901/feed.xml',
    'example.org/feed.xml'), or None: a url with a scheme, a path that names itself one ('./x', '/x',
    '~/x'), a file name, or any path that exists relative to `base` (params.py's folder) stays a file."""
    if not isinstance(url, str) or "://" in url or url.startswith((".", "/", "~", "\\")):
        return None
    if not _HOST_SEGMENT.match(url):
        return None
    try:
        if os.path.lexists(os.path.join(base, url)):
            return None
    except (OSError, ValueError):  # a NUL, a name too long: no such file, and its own check says so
        return None
    return f"http://{url}"


def check_callback_base(value: Any) -> bool:
    """WEBSUB_CALLBACK_BASE: '' (use the listener's own address) or the public http(s) address of it."""
    if value == "":
        return True
    return http_url(value) and not urlsplit(value).query
