"""What a harvest is asked to do: the frozen HarvestSpec that parser/settings/link_jobs.py checks a job's
`harvest` dict into and linkgen/harvest.py walks by. It lives here so linkgen needs nothing from the
settings modules (which import linkgen for templates)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HarvestSpec:
    root: str
    objects: str                      # regex: links that are objects (leaves, collected)
    depth: int = 3                    # link hops from the root (root = 0)
    follow: str = ""                  # regex: pages to expand; '' expands every page in the domains
    allowed_domains: tuple[str, ...] = ()
    max_pages: int = 1000
