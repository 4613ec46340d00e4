"""`export-opml`: the project's feed sources as an OPML 2.0 subscription list (parser/sources/opml.py
writes it), each as the daemon polls it: a feed found on a source's HTML page is exported, not the
page, and a disabled source is kept, marked so.
"""
from __future__ import annotations

from ..settings.params import Settings, Source
from ..sources.opml import FeedOutline, write_opml
from ..sources.protocols import opml_sources
from ..sources.state import SourceState, for_source
from .status import source_states


def feed_outline(source: Source, state: SourceState | None) -> FeedOutline:
    """One source as an outline. A feed found on the page at the source's url (state.json's feed_url)
    is what the daemon polls and what a reader needs: it is xmlUrl, and the page is htmlUrl. A state
    kept for another url is not this source's (the daemon drops it too)."""
    state = for_source(state, source.url)
    found = state.feed_url if state is not None else ""
    return FeedOutline(name=source.name, url=found or source.url, tags=source.tags, enabled=source.enabled,
                       page=source.url if found else "")


def opml_text(settings: Settings, now: float) -> tuple[str, list[FeedOutline]]:
    """The OPML text and the outlines in it."""
    states, _damage, _links = source_states(settings, now)  # `status` says when state.json is damaged
    outlines = [feed_outline(source, states.get(source.name)) for source in opml_sources(settings.sources)]
    return write_opml(outlines, title=f"parser-daemon sources ({settings.params_path.name})"), outlines
