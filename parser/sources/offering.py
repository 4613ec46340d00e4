"""Which sources a turn of the daemon's loop offers the scheduler, by the run's mode, chosen once where the
daemon is put together (parser/group/parts.py): forever, the ones due now (EveryDue); --once, every selected
one, once (EachOnce). The feed pass (parser/feeds/feed_pass.py) asks its Offering and never which mode it
runs in."""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from .source_schedule import Schedule, Src

log = logging.getLogger("parser")


class Offering(Protocol):
    spread: bool   # a first start spreads the sources' first polls over their intervals
    listens: bool  # the pushed sources' listener is opened (a one-shot run takes no pushes)

    def sources(self, schedule: Schedule[Src], sources: Sequence[Src], now: float) -> list[Src]:
        """The sources to poll now."""
        ...

    def offered_all(self) -> bool:
        """Whether everything this run will poll was offered (a run forever never has)."""
        ...


class EveryDue:
    """Forever: each turn, the sources due now (with SHARED, those of the group's due ones this daemon claims)."""
    spread = True
    listens = True

    def sources(self, schedule: Schedule[Src], sources: Sequence[Src], now: float) -> list[Src]:
        return schedule.due(now)

    def offered_all(self) -> bool:
        return False


class EachOnce:
    """--once: every selected source once, at the first turn (with SHARED, those the group lets this daemon
    claim); a source its server asked to wait (Retry-After) is skipped, and said so."""
    spread = False
    listens = False

    def __init__(self) -> None:
        self._offered = False

    def sources(self, schedule: Schedule[Src], sources: Sequence[Src], now: float) -> list[Src]:
        if self._offered:
            return []
        self._offered = True
        offered: list[Src] = []
        for source in schedule.each_once(now, sources):
            held = schedule.state(source).hold_left(now)
            if held:
                log.info("%s  skipped: the server asked to wait %.0f s more (Retry-After)", source.name, held)
                continue
            offered.append(source)
        return offered

    def offered_all(self) -> bool:
        return self._offered


def offering_for(once: bool) -> Offering:
    return EachOnce() if once else EveryDue()
