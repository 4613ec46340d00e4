"""How a job's passes pace a run, by its mode, chosen once where the daemon is put together
(parser/group/parts.py): forever (Continuous), --once alone (OneShot), --once in a SHARED group
(OneShotInGroup). The passes ask their JobPace and never which mode they run in."""
from __future__ import annotations

from typing import Protocol

from .job_files import JobFiles
from .job_run import JobRun


class JobPace(Protocol):
    # Only held hosts' links or pages left: wait for their holds (within ONCE_WAIT_MAX), else leave them
    # for the next run; a run forever just goes on.
    waits_for_holds: bool
    # The link file's retries of earlier runs asked for at the first look, their backoff not waited for.
    retries_at_once: bool

    def pass1_due(self, files: JobFiles, run: JobRun, now: float) -> bool:
        """Whether pass 1 (the template's expansion, or a harvest) starts now."""
        ...


class Continuous:
    """Forever: pass 1 on its own schedule (the job's `every`), retries on their backoff."""
    waits_for_holds = False
    retries_at_once = False

    def pass1_due(self, files: JobFiles, run: JobRun, now: float) -> bool:
        return files.pass1_due(now)


class OneShot:
    """--once: pass 1 now, once; the retries of earlier runs asked for at once; held hosts waited for a while."""
    waits_for_holds = True
    retries_at_once = True

    def pass1_due(self, files: JobFiles, run: JobRun, now: float) -> bool:
        return not run.pass1_ran


class OneShotInGroup(OneShot):
    """--once in a SHARED group: pass 1 only when the group's is due and the job's lock is free (another
    daemon may be running it)."""

    def pass1_due(self, files: JobFiles, run: JobRun, now: float) -> bool:
        return files.pass1_due(now)
