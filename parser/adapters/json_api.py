"""JSON APIs (and webhook payloads): a JSON document into records, by the source's `items` path and
its `map` of record field -> dotted path in an item.

A page's next address (the `next` path) travels back in Parsed.next_url; parser/sources/poll.py follows it.
The request side (query_params, header_params, auth) is built here too, so one module knows the
whole protocol.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from ..core.dates import read_date
from ..core.errors import FetchError, ParseError
from ..core.record import (
    AdapterRecord,
    Enclosure,
    Record,
    clean_text,
    html_to_text,
    summary_text,
    title_text,
    utc_iso,
)
from ..core.urls import entry_link
from .jsonfeed import load_json
from .parsed import Parsed
from .source_view import Auth, SourceView

# Where a record field is looked for when `map` does not say: the names APIs use most.
DEFAULT_PATHS: dict[str, tuple[str, ...]] = {
    "guid": ("id", "guid", "uuid"),
    "link": ("url", "link", "permalink", "html_url"),
    "title": ("title", "name", "headline"),
    "author": ("author", "authors", "user", "by"),
    "published": ("published", "published_at", "date_published", "date", "created_at", "time", "timestamp"),
    "summary": ("summary", "description", "excerpt"),
    "content": ("content_html", "content", "body_html", "body", "html"),
    "updated": ("updated", "updated_at", "date_modified", "modified", "modified_at"),
    "categories": ("tags", "categories", "category", "keywords"),
    "enclosures": ("attachments", "enclosures", "enclosure"),
    "image": ("image", "image_url", "thumbnail", "thumbnail_url"),
    "comments": ("comments_url",),
    "language": ("language", "lang"),
}
# An object standing for a text (a tag {"name": ...}) or an address ({"url": ...}): the keys read, in order.
_TEXT_KEYS = ("name", "term", "label", "title", "slug", "value")
_URL_KEYS = ("url", "href", "src", "link")
_YYYYMMDD = re.compile(r"\d{8}")
_AUTHOR_KEYS = ("name", "display_name", "username", "login")


def parse(body: bytes, *, url: str, headers: Mapping[str, str], source: SourceView, fetched: str) -> Parsed:
    """One JSON answer into records; ParseError when it is not JSON, holds an error object, or has
    no list at `items`."""
    document = load_json(body)
    api = source.api
    error = error_of(document)
    if error:
        raise ParseError(f"the API answered with an error: {error}")
    items = list_at(document, api.items if api else "")
    records: list[Record] = []
    skipped = 0
    for item in items:
        if isinstance(item, Mapping):
            records.append(record_from(item, api.map if api else {}, source.name, fetched))
        else:
            skipped += 1
    warnings = [f"skipped {skipped} items that are not JSON objects"] if skipped else []
    next_url = None
    if api and api.next:
        value = resolve(document, api.next)
        if isinstance(value, str) and value.strip():
            next_url = urljoin(url, value.strip())
    return Parsed(records=records, warnings=warnings, kind="json", next_url=next_url)


def error_of(document: Any) -> str:
    """The text of an `{"error": ...}` object in an answer ('' when there is none)."""
    if not isinstance(document, Mapping):
        return ""
    error = document.get("error")
    if error in (None, False, "", {}, []):
        return ""
    if isinstance(error, Mapping):
        parts = [str(error[k]) for k in ("code", "type", "message", "description") if error.get(k)]
        text = ": ".join(parts) if parts else str(dict(error))
    else:
        text = str(error)
    message = document.get("message") or document.get("error_description")
    if isinstance(message, str) and message and message not in text:
        text += f": {message}"
    return html_to_text(text)[:200]


def list_at(document: Any, path: str) -> list:
    """The list at a dotted path; a single object where a list was expected counts as a list of one."""
    found = resolve(document, path) if path else document
    if isinstance(found, list):
        return found
    if isinstance(found, Mapping) and path == "" and not any(k in found for k in ("items", "data", "results")):
        return [found]  # a webhook that posts one object
    where = f"items path {path!r}" if path else "the top level (set items to the list's dotted path)"
    keys = ", ".join(list(found)[:8]) if isinstance(found, Mapping) else type(found).__name__
    raise ParseError(f"no list at {where}; found {keys if found is not None else 'nothing'}")


def resolve(document: Any, path: str) -> Any:
    """Follow a dotted path ('data.posts', 'author.name', 'items.0.id'); None where it leads nowhere."""
    value = document
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def record_from(item: Mapping[str, Any], mapping: Mapping[str, str], source_name: str, fetched: str) -> AdapterRecord:
    def pick(name: str) -> Any:
        if name in mapping:
            return resolve(item, mapping[name])
        for path in DEFAULT_PATHS[name]:
            value = resolve(item, path)
            if value not in (None, "", [], {}):
                return value
        return None

    guid = _scalar(pick("guid"))
    link = _scalar(pick("link"))
    if not link and guid.startswith(("http://", "https://")):
        link = guid
    link = entry_link(link)  # parser/pipeline/identity.py decides what of it identifies; javascript: is none
    return {
        "source": source_name,
        "guid": guid or link,
        "link": link,
        "title": title_text(_scalar(pick("title"))),
        "author": _author(pick("author")),
        "published": timestamp(pick("published")),
        "updated": timestamp(pick("updated")),
        "summary": summary_text(_scalar(pick("summary"))),
        "content": _scalar(pick("content")),  # sanitized with every record in adapters.finish
        "categories": [_named(v, _TEXT_KEYS) for v in _listed(pick("categories"))],
        "enclosures": [_enclosure(v) for v in _listed(pick("enclosures"))],
        "image": _named(pick("image"), _URL_KEYS),
        "comments": _named(pick("comments"), _URL_KEYS),
        "language": _scalar(pick("language")),
        "fetched": fetched,
        "base": link,  # relative links in the content, image, enclosures: against the item's page
    }


def _listed(value: Any) -> list:
    """A list field's value: a list as it is, one value as a list of one, nothing as []."""
    if value in (None, "", {}):
        return []
    return value if isinstance(value, list) else [value]


def _named(value: Any, keys: tuple[str, ...]) -> str:
    """A text given as itself or as an object holding it under one of `keys` ({"name": "news"})."""
    if isinstance(value, Mapping):
        value = next((value[k] for k in keys if isinstance(value.get(k), (str, int, float))), None)
    return _scalar(value)


def _enclosure(value: Any) -> Enclosure:
    """An attachment given as an address or as an object (url/href, type/mime_type, length/size...)."""
    if not isinstance(value, Mapping):
        return {"url": _scalar(value), "type": "", "length": None}
    def first(*keys: str) -> Any:
        return next((value[k] for k in keys if value.get(k) not in (None, "")), None)
    return {"url": _named(value, _URL_KEYS), "type": _scalar(first("type", "mime_type", "mimetype", "content_type")),
            "length": first("length", "size_in_bytes", "size", "filesize")}


def timestamp(value: Any) -> str:
    """UTC ISO 8601 from a time since the epoch (number or digits: seconds when it is a date up to
    the year 9999 in seconds, else milliseconds, micro-, nanoseconds; see dates.EPOCH_UNITS) or date text.

    Eight digits in a string that are a real date as YYYYMMDD ("20240315") are that date, as a feed's
    text is read (an epoch of eight digits is 1970-04-26 to 1973-03-03); a JSON number is always a time
    since the epoch."""
    if isinstance(value, str) and value.strip().lstrip("-").replace(".", "", 1).isdigit():
        if _YYYYMMDD.fullmatch(value.strip()) and (day := read_date(value.strip()).iso):
            return day
        value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    return utc_iso(value)


def _author(value: Any) -> str:
    if isinstance(value, Mapping):
        for key in _AUTHOR_KEYS:
            if isinstance(value.get(key), str) and value[key].strip():
                return html_to_text(value[key])
        return ""
    if isinstance(value, list):
        names = [_author(v) for v in value]
        return ", ".join(n for n in names if n)
    return html_to_text(_scalar(value))


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    return clean_text(value).strip()


# -- the request side ----------------------------------------------------------------------------
def first_page_url(source: SourceView) -> str:
    """The source's url with its query_params (and an api_key auth param) added."""
    api = source.api
    params = dict(api.query_params) if api else {}
    return with_query(source.url, {**params, **auth_params(source)})


def page_url(source: SourceView, page: int) -> str:
    """The address of page `page` (1, 2, ...) for `page_param` paging."""
    api = source.api
    assert api is not None, "a json_api source with page_param"
    start = int(api.query_params.get(api.page_param, 1))
    return with_query(first_page_url(source), {api.page_param: str(start + page - 1)})


def request_headers(source: SourceView) -> dict[str, str]:
    """The source's headers, its header_params and its auth header: never a query parameter."""
    headers = dict(source.headers)
    if source.api:
        headers.update(source.api.header_params)
    auth = source.auth
    if auth is not None and not auth.param:
        token = _token(auth)
        headers["Authorization" if auth.type == "bearer" else auth.header] = \
            f"Bearer {token}" if auth.type == "bearer" else token
    return headers


def auth_params(source: SourceView) -> dict[str, str]:
    auth = source.auth
    return {auth.param: _token(auth)} if auth is not None and auth.param else {}


def without_auth_params(url: str, source: SourceView) -> str:
    """`url` without the source's `auth` query parameter: an address the source moved to, kept without
    the token the request carried (every request adds it afresh from the environment)."""
    auth = source.auth
    if auth is None or not auth.param or "?" not in url:
        return url
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != auth.param]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def same_origin(a: str, b: str) -> bool:
    """Credentials go only where the source's own address is: a `next` link elsewhere is not followed."""
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)


def with_query(url: str, params: Mapping[str, str]) -> str:
    if not params:
        return url
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in params]
    query.extend(params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


def _token(auth: Auth) -> str:
    token = auth.token()
    if not token:
        raise FetchError(f"the environment variable {auth.token_env} (auth token_env) is empty or not set")
    return token
