"""The running daemon's side of `run_daemon.py reset SOURCE` and `poll SOURCE`: the requests found in
the control folder (parser/operate/control.py, which hands them over) applied to the sources' states in the
main thread, and answered twice: "accepted" at once, "done" with the outcome once the poll is taken.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from ..core.dates import iso
from ..core.runinfo import RunInfo
from ..core.urls import redact_url
from ..settings.params import Settings, Source
from ..sources.protocols import protocol_of
from ..sources.source_schedule import Schedule
from ..sources.state import SourceState
from .control import NOT_POLLED, POLL_FAILED, ControlBox, Request

log = logging.getLogger("parser")


class OperatorRequests:
    def __init__(self, control: ControlBox | None, *, schedule: Schedule[Source], run_info: RunInfo,
                 clock: Callable[[], float], save: Callable[[], None]):
        """`control` None (--once, --dry-run): no requests are taken. `save` writes state.json and
        daemon.json now, so that `status` after an answer shows what the answer says."""
        self.control, self.schedule, self.run_info = control, schedule, run_info
        self.clock, self.save = clock, save
        self.awaiting: dict[str, list[Request]] = {}  # source name -> requests answered after its poll

    def apply(self, sources: list[Source], settings: Settings) -> None:
        """Main thread: the requests waiting, each applied to a source this daemon polls (`sources`)."""
        if self.control is None or not self.control.waiting():
            return
        now = self.clock()
        by_name = {s.name: s for s in sources}
        for request in self.control.take():
            self.run_info.stats.inc_value("control_requests")
            source = by_name.get(request.source)
            if source is None:
                self._refuse(request, not_polled(request.source, settings), code=NOT_POLLED)
            elif not self.schedule.claim(source):  # SHARED: the group's row, claimed on this machine
                self._refuse(request, f"{source.name} is being polled by another daemon of the group (SHARED); "
                             "ask again in a moment")
            else:
                self._apply(request, source, self.schedule.state(source), now)

    def _apply(self, request: Request, source: Source, state: SourceState, now: float) -> None:
        if request.verb == "reset":
            log.info("%s  reset by the operator: %d failures cleared, polled now%s", source.name, state.failures,
                     f"; the feed found on its page ({redact_url(state.feed_url)}) forgotten, its url asked"
                     " again" if state.feed_url else "")
            state.reset(now)
        elif state.hold_left(now):
            self._refuse(request, f"{source.name} is held until {iso(state.not_before)} at the server's request "
                         f"(Retry-After); `reset {source.name}` polls it anyway")
            return
        else:
            log.info("%s  poll requested by the operator", source.name)
            state.requested(now)
        self.schedule.poll_now(source)
        self.awaiting.setdefault(source.name, []).append(request)
        self._answer(request, ok=True, done=False, message=f"{request.verb} {source.name}: polling now")

    def _answer(self, request: Request, *, ok: bool, done: bool, message: str, code: int | None = None) -> None:
        assert self.control is not None, "requests come only from a control box"
        self.control.answer(request, ok=ok, done=done, message=message, code=code)

    def _refuse(self, request: Request, message: str, code: int | None = None) -> None:
        self._answer(request, ok=False, done=True, message=message, code=code)

    def answer_polled(self, source: Source, state: SourceState, ok: bool) -> None:
        """After the source's poll is taken (parser/feeds/feed_pass.py): the requests waiting for it answered."""
        requests = self.awaiting.pop(source.name, [])
        if requests:  # the operator looks at `status` next: the files say what the answer says
            self.schedule.changed()
            self.save()
        # A failure's outcome reads "error: ..." in `status`; the command puts its own "error: " first.
        outcome = (state.last_outcome or "polled").removeprefix("error: ")
        for request in requests:
            self._answer(request, ok=ok, done=True, code=None if ok else POLL_FAILED,
                                message=f"{request.verb} {source.name}: {outcome}")


def not_polled(name: str, settings: Settings) -> str:
    """Why a request names a source this daemon does not poll."""
    source = next((s for s in settings.sources if s.name == name), None)
    if source is None:  # the command found it in params.py: added since the daemon read the file
        return (f"no source named {name!r} in the settings the daemon runs with; if you added it to "
                f"{settings.params_path} since, reload the daemon first (systemctl reload, or kill -HUP its pid)")
    if not protocol_of(source).polled:
        return f"{name} is a {source.protocol} source: it is never polled, its records are delivered"
    if not source.enabled:
        return f"{name} is disabled in {settings.params_path.name} (enabled=False)"
    return f"{name} is not polled by this daemon (it was started with --source or --job)"
