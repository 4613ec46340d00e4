"""Small JSON files one process writes and others read (daemon.json, the control requests and
replies): written whole, as a temporary file renamed over the old one, so a reader never sees half
of one; read as a dict, or None when the file is absent, damaged or not an object."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import StorageError, cannot_write


def write_whole(path: Path, data: dict, *, indent: int | None = None) -> None:
    """Raises StorageError naming `path` (a full disk says so); the previous file stays whole."""
    write_text_whole(path, json.dumps(data, indent=indent))


def write_text_whole(path: Path, text: str) -> None:
    """write_whole's replace, for a JSON text laid out by its writer."""
    tmp = path.with_name(path.name + ".tmp")  # not *.json: a reader looking for *.json never takes it
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(cannot_write(path, exc)) from None


def read_object(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
