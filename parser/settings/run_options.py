"""What one run of the daemon does (--once, --source, --job, --links-only, --dry-run), and the
sources and jobs of the settings it therefore runs: at start, and again for the sources at SIGHUP.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .link_jobs import LinkJob
from .params import Settings, Source


@dataclass(frozen=True)
class RunOptions:
    once: bool = False
    sources: tuple[str, ...] = ()   # empty: every enabled source
    dry_run: bool = False
    jobs: tuple[str, ...] = ()      # two-pass jobs (LINK_JOBS); empty: every enabled job
    links_only: bool = False        # the jobs' pass 1 alone


def select_named(items: Sequence, names: tuple[str, ...], kind: str, params_name: str) -> list:
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


def select_sources(settings: Settings, options: RunOptions) -> list[Source]:
    """The sources this run polls or listens to; none with --job or --links-only alone (the jobs, not
    the feeds). ValueError when --source names one params.py lacks."""
    sources = select_named(settings.sources, options.sources, "source", settings.params_path.name)
    return [] if (options.jobs or options.links_only) and not options.sources else sources


def select_jobs(settings: Settings, options: RunOptions) -> list[LinkJob]:
    """The two-pass jobs this run runs; none with --source alone (the feeds, not the jobs).
    ValueError when --job names one params.py lacks."""
    jobs = select_named(getattr(settings, "link_jobs", ()), options.jobs, "job", settings.params_path.name)
    return [] if options.sources and not options.jobs else jobs
