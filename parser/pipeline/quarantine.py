"""Records that no file or database will take are set aside here instead of stopping the daemon.

Text is made safe before staging (record.safe_record), so this is the last resort: a row the staging
CSV cannot encode, or one the database refuses at the flush (a value it rejects), goes as one JSON
line to STAGING_DIR/quarantine.jsonl (a job's to its own folder) with the time, the table, the source
and the error, an errors.log line says so, and every other record goes on. A person can read the
line, fix it, and stage it again by hand.
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

from ..core import durable, logs


def set_aside(folder: Path, table: str, record: Mapping[str, object], error: str) -> None:
    """Keep `record` in folder/quarantine.jsonl (fsynced) and write an errors.log line naming it."""
    line = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "table": table,
            "source": record.get("source") or table, "error": error, "record": record}
    # ASCII with \u escapes: whatever the record holds (lone surrogates too) is written and reads back.
    data = json.dumps(line, default=str).encode("ascii") + b"\n"
    durable.repair_tail(folder / "quarantine.jsonl", durable.whole_lines)
    durable.append(folder / "quarantine.jsonl", data)
    logs.error_line(str(line["source"]), str(record.get("link") or record.get("url") or ""),
                    f"record set aside in {folder.name}/quarantine.jsonl ({error}); the others go on")
