"""parser/core/memory.py: the daemon caps glibc's malloc arenas unless the operator chose a number."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest

CHECK = "from parser.core.memory import cap_malloc_arenas; print(cap_malloc_arenas())"


def _run(env_extra: dict[str, str]) -> str:
    import os
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env_extra
    return subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt(M_ARENA_MAX) is glibc's")
def test_arenas_are_capped_on_glibc():
    assert _run({}) == "True"


def test_the_operators_malloc_arena_max_wins():
    assert _run({"MALLOC_ARENA_MAX": "8"}) == "False"
