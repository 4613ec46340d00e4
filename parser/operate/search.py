"""`parser-daemon search WORDS`: the stored entries that hold the words, best first, as text or JSON lines;
the status page's /search shows the same (find). The index and the query are db/search_index.py's; this
module reads the command's arguments, opens the database read only and writes what was found.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO

from sqlalchemy.exc import SQLAlchemyError

from db.search_index import Found, Query, SearchUnavailableError, search

from ..core.errors import StorageError
from ..settings.params import Settings
from .export import read_only_engine, since_time

FORMATS = ("text", "jsonl")
OFF = "search is off (SEARCH = False in params.py): set SEARCH = True and start the daemon once to build the index"
NOT_BUILT = ("the database has no search index yet: start the daemon once (this version builds it from the "
             "stored rows at start)")


@dataclass(frozen=True)
class SearchRequest:
    words: str
    sources: tuple[str, ...] = ()
    since: str | None = None  # as given: a time or a duration back from now (export's --since forms)
    limit: int = 20
    format: str = "text"


def run_search(settings: Settings, request: SearchRequest, out: IO[str], err: IO[str], *, now: datetime) -> int:
    """The command: 0 searched (found or not), 1 the database could not be read or holds no index yet,
    2 search is off or an argument is bad (said on stderr in one line)."""
    if not settings.search:
        print(f"error: {OFF}", file=err)
        return 2
    try:
        since = since_time(request.since, now) if request.since is not None else None
        found = find(settings.db_url, Query(request.words, request.sources, since, request.limit))
    except ValueError as exc:
        print(f"error: {exc}", file=err)
        return 2
    except StorageError as exc:
        print(f"error: {exc}", file=err)
        return 1
    if request.format == "jsonl":
        out.writelines(json.dumps(row.as_json(), ensure_ascii=False) + "\n" for row in found)
    else:
        out.write(format_text(found))
    print(f"{len(found)} found" + (f" (the best {request.limit}: --limit for more)" if len(found) == request.limit
                                   else ""), file=err)
    return 0


def find(db_url: str, query: Query) -> list[Found]:
    """The rows the query finds, best first; StorageError when the database cannot be read or has no index,
    ValueError when the query has nothing to look for."""
    engine = read_only_engine(db_url)
    try:
        with engine.connect() as conn:
            return search(conn, query)
    except SearchUnavailableError:
        raise StorageError(NOT_BUILT) from None
    except SQLAlchemyError as exc:
        text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise StorageError(f"cannot search the items table: {text[0][:300] if text else type(exc).__name__}") from None
    finally:
        engine.dispose()


def format_text(found: Sequence[Found]) -> str:
    """A row a block: `published  source  title`, then its link and its snippet, indented; a blank line after."""
    blocks = []
    for row in found:
        lines = [f"{row.published or '-':<20}  {row.source or '-'}  {row.title or '(no title)'}"]
        if row.link:
            lines.append(f"    {row.link}")
        if row.snippet and row.snippet != row.title:
            lines.append(f"    {row.snippet}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
