"""What one run of the daemon does (--once, --source, --tag, --job, --links-only, --dry-run), and the
sources and jobs of the settings it therefore runs: at start, and again for the sources at SIGHUP.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ..sources.protocols import protocol_of
from .link_jobs import LinkJob
from .params import Settings, Source


@dataclass(frozen=True)
class RunOptions:
    once: bool = False
    sources: tuple[str, ...] = ()   # empty: every enabled source
    dry_run: bool = False
    jobs: tuple[str, ...] = ()      # two-pass jobs (LINK_JOBS); empty: every enabled job
    links_only: bool = False        # the jobs' pass 1 alone
    tags: tuple[str, ...] = ()      # --tag: the enabled sources with one of these tags, beside --source's

    @property
    def picks_sources(self) -> bool:
        """--source or --tag: this run's feeds are the ones picked, not every enabled source."""
        return bool(self.sources or self.tags)


class Named(Protocol):
    """What select_named reads of a Source or a LinkJob."""

    @property
    def name(self) -> str: ...

    @property
    def enabled(self) -> bool: ...


Picked = TypeVar("Picked", bound=Named)


def select_named(items: Sequence[Picked], names: tuple[str, ...], kind: str, params_name: str) -> list[Picked]:
    """Enabled sources (or jobs), or exactly the named ones (named but disabled still runs: the user
    asked); `kind` ("source", "job") names them in the message about a name params.py lacks."""
    if not names:
        return [item for item in items if item.enabled]
    by_name = {item.name: item for item in items}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"no {kind} named {', '.join(map(repr, unknown))} in {params_name}"
                         f" ({kind}s: {', '.join(by_name) or 'none'})")
    return [by_name[n] for n in dict.fromkeys(names)]


def select_tagged(sources: Sequence[Source], tags: tuple[str, ...], params_name: str) -> list[Source]:
    """The enabled sources with one of `tags` (a disabled one runs when named with --source). ValueError for a
    tag no source has, naming the tags there are, and for one whose sources are all disabled, naming them."""
    known = list(dict.fromkeys(tag for source in sources for tag in source.tags))
    unknown = [tag for tag in tags if tag not in known]
    if unknown:
        raise ValueError(f"no source tagged {', '.join(map(repr, unknown))} in {params_name}"
                         f" (tags: {', '.join(known) or 'none'})")
    for tag in tags:
        if not any(source.enabled for source in sources if tag in source.tags):
            off = [source.name for source in sources if tag in source.tags]
            raise ValueError(f"tag {tag!r} has only disabled sources in {params_name} ({', '.join(off)}); "
                             "name one with --source to run it")
    return [source for source in sources if source.enabled and set(tags) & set(source.tags)]


def select_sources(settings: Settings, options: RunOptions) -> list[Source]:
    """The sources this run polls or listens to: every enabled one, or those --source names and --tag picks;
    none with --job or --links-only alone (the jobs, not the feeds). ValueError when --source names one
    params.py lacks, or --tag a tag no source has."""
    name = settings.params_path.name
    if not options.picks_sources:
        return [] if options.jobs or options.links_only else select_named(settings.sources, (), "source", name)
    named = select_named(settings.sources, options.sources, "source", name) if options.sources else []
    if not options.tags:
        return named
    chosen = {id(source) for source in named + select_tagged(settings.sources, options.tags, name)}
    return [source for source in settings.sources if id(source) in chosen]  # params.py's order, each once


def unpolled_picks(sources: Sequence[Source], options: RunOptions) -> list[Source]:
    """The sources --source or --tag picked for a --once run that it can do nothing for: pushed ones that
    are never polled (a webhook's records reach only a running daemon's listener, which --once does not
    open). Said, so cron's mail does not read a run that did nothing as one that went well."""
    if not (options.once and options.picks_sources):
        return []
    return [source for source in sources if not protocol_of(source).polled]


def unpolled_text(sources: Sequence[Source]) -> str:
    """Why --once runs nothing for these (unpolled_picks), in a user's words."""
    names = ", ".join(f"{source.name!r} ({source.protocol})" for source in sources)
    return (f"{names}: not polled; {'its' if len(sources) == 1 else 'their'} records are pushed to the listener "
            "(WEBHOOK_LISTEN) of a daemon running without --once, so --once has nothing to do for "
            f"{'it' if len(sources) == 1 else 'them'}")


def select_jobs(settings: Settings, options: RunOptions) -> list[LinkJob]:
    """The two-pass jobs this run runs; none with --source or --tag alone (the feeds, not the jobs).
    ValueError when --job names one params.py lacks."""
    jobs = select_named(getattr(settings, "link_jobs", ()), options.jobs, "job", settings.params_path.name)
    return [] if options.picks_sources and not options.jobs else jobs
