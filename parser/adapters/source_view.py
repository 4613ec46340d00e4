"""What a poll, an adapter and full text read of a source: SourceView, and the frozen option values
it carries (a JSON API's paths and paging, an auth token's place).

The settings' Source (parser/settings/params.py) is one; so is anything else with these attributes (a test's
own source). The stages below the settings take this view, never the settings module.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from ..fetch.ratelimit import Rate


@dataclass(frozen=True)
class Auth:
    type: str                    # "bearer" or "api_key"
    token_env: str               # the environment variable holding the token
    header: str = ""             # api_key: the header to put it in (default X-API-Key) ...
    param: str = ""              # ... or the query parameter, when the API wants it in the URL

    def token(self) -> str:
        """The secret, read at use time so a rotated token needs only a restart, never an edit."""
        return os.environ.get(self.token_env, "")


@dataclass(frozen=True)
class JsonApi:
    items: str = ""                                   # dotted path to the list; "" = the body is the list
    map: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    query_params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    header_params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    next: str = ""                                    # dotted path to the next page's URL
    page_param: str = ""                              # or: the query parameter numbering pages
    max_pages: int = 1


class SourceView(Protocol):
    """A source as the stages below the settings see it (read-only)."""

    @property
    def name(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def protocol(self) -> str: ...          # its row in parser/sources/protocols.py

    @property
    def body_kind(self) -> str: ...         # what its bodies are: its protocol row's `body` ("feed", "json")

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def max_items(self) -> int: ...

    @property
    def api(self) -> JsonApi | None: ...    # json_api and webhook: items, map, query/header params, paging

    @property
    def auth(self) -> Auth | None: ...

    @property
    def rate(self) -> Rate | None: ...

    @property
    def full_text(self) -> bool: ...

    @property
    def full_text_internal(self) -> bool: ...  # full text may fetch internal addresses (an intranet's pages)
