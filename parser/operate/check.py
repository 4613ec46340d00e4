"""`parser-daemon check`, as `nginx -t`: the settings read and checked by the code a start reads them with
(parser/settings/), and the hash files' identity rule a start would refuse; then what the settings set up,
for a person to look over: each source and job, and where the staging files, logs and database are.

It only reads. No request is sent, no file or folder is made, the database is not connected (its URL was
checked for an installed driver, as at a start) and the daemon's lock is not taken: it runs beside a
working daemon, before a `systemctl reload`.
"""
from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..core.setting_values import duration_text
from ..core.urls import redact_url
from ..jobs.job_files import job_folder
from ..pipeline.history import History
from ..settings.link_jobs import LinkJob
from ..settings.params import Settings, Source
from ..sources.protocols import protocol_of
from .control import daemon_pid


def check_hash_rules(settings: Settings) -> None:
    """Each table's hashes.json against HASH and UNIQUE_FIELDS (a job's unique_fields), read-only:
    HistoryMismatchError, a settings error, where a start would refuse to run."""
    for _table, history in histories(settings, read_only=True):
        history.check_rule()


def histories(settings: Settings, *, read_only: bool) -> list[tuple[str, History]]:
    """(table, its hash file's History) for the feeds' table and each job's."""
    tables = [("items", settings.staging_dir, settings.unique_fields, "UNIQUE_FIELDS")]
    tables += [(job.name, job_folder(settings.staging_dir, job.name), job.unique_fields,
                f"unique_fields of job {job.name!r} (LINK_JOBS)") for job in settings.link_jobs]
    return [(table, History(folder, "hashes", dedup_mode=settings.dedup, algorithm=settings.hash,
                            unique_fields=unique_fields, setting=setting, read_only=read_only))
            for table, folder, unique_fields, setting in tables]


def check_report(settings: Settings) -> str:
    """What the settings set up, one fact a line; the caller has checked them (check_hash_rules too)."""
    staging = settings.staging_dir
    pid = daemon_pid(staging)
    lines = [f"params:   {settings.params_path}",
             f"database: {redact_url(settings.db_url)} (not connected by check)",
             f"staging:  {_folder(staging)}",
             f"logs:     {_folder(settings.log_dir)}",
             f"daemon:   {f'running on this staging folder, pid {pid}' if pid else 'not running'}"]
    lines += [f"note:     {note}" for note in settings.notes]
    lines += [f"missing:  {what}" for what in missing_modules(settings)]
    enabled = sum(source.enabled for source in settings.sources)
    lines += ["", f"sources: {len(settings.sources)} ({enabled} enabled)", *_source_table(settings.sources)]
    lines += ["", f"jobs: {len(settings.link_jobs)}"]
    for job in settings.link_jobs:
        lines += _job_lines(job, job_folder(staging, job.name))
    lines += ["", f"{settings.params_path.name}: settings ok ({_count(len(settings.sources), 'source')}, "
                  f"{_count(len(settings.link_jobs), 'job')}); nothing was fetched or written"]
    return "\n".join(lines) + "\n"


def missing_modules(settings: Settings) -> list[str]:
    """The features the settings turn on whose modules do not import, each with what to install. A start
    runs all the same (full text then keeps every summary), so this is the place an operator learns it."""
    found = []
    full_text = [source.name for source in settings.sources if source.enabled and source.full_text]
    if full_text:
        from ..pipeline.fulltext import missing_module  # imported on first use: a command loads what it runs
        why = missing_module()
        if why:
            names = ", ".join(full_text[:3]) + (f" and {len(full_text) - 3} more" if len(full_text) > 3 else "")
            found.append(f"full_text of {names} cannot run: {why}; their entries keep their summary")
    if settings.status_listen is not None:
        try:
            import prometheus_client  # noqa: F401
        except ImportError as exc:
            found.append(f"STATUS_LISTEN cannot run: cannot import {exc.name or 'prometheus_client'}; install "
                         "it into the daemon's environment (pip install prometheus_client)")
    return found


def print_check(settings: Settings, out: TextIO) -> None:
    check_hash_rules(settings)
    out.write(check_report(settings))


def _source_table(sources: tuple[Source, ...]) -> list[str]:
    rows = [("NAME", "PROTOCOL", "EVERY", "TAGS", "URL")]
    for source in sources:
        every = duration_text(source.interval) if protocol_of(source).polled else "push"
        rows.append((source.name + ("" if source.enabled else " (off)"), source.protocol, every,
                     ",".join(source.tags) or "-", redact_url(source.url)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1]
            for row in rows] if sources else ["  (none)"]


def _job_lines(job: LinkJob, folder: Path) -> list[str]:
    first = f"harvest from {redact_url(job.harvest.root)}" if job.harvest else "template"
    return [f"  {job.name}{'' if job.enabled else ' (off)'}: table {job.name}, pass 1 ({first}) every "
            f"{duration_text(job.interval)}, fields {', '.join(job.fields)}",
            f"    links file: {folder / 'links.txt'}",
            f"    staging:    {folder / 'staging.csv'}"]


def _folder(path: Path) -> str:
    return f"{path}" if path.is_dir() else f"{path} (made at the first start)"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
