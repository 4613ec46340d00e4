"""A source as a parse process gets it: the fields of a SourceView (parser/adapters/source_view.py) and
nothing else, in a module that imports nothing the parse does not.

The settings' Source pickles as itself, and a parse process unpickling one imports the settings module
and with it SQLAlchemy and the database's modules: about 25 MiB more in each process, for nothing a
parse reads.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..adapters.source_view import Auth, JsonApi, SourceView
from ..fetch.ratelimit import Rate


@dataclass(frozen=True)
class ParseView:
    name: str
    url: str
    protocol: str
    body_kind: str
    headers: Mapping[str, str]
    max_items: int
    api: JsonApi | None
    auth: Auth | None
    rate: Rate | None
    full_text: bool
    full_text_internal: bool


def parse_view(source: SourceView) -> ParseView:
    """What the adapters read of `source`, to be sent to a parse process."""
    return ParseView(source.name, source.url, source.protocol, source.body_kind, source.headers, source.max_items,
                     source.api, source.auth, source.rate, source.full_text, source.full_text_internal)
