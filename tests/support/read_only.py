"""Read-only packs for tests: file modes set read-only, and checks run in a forked child that
drops root's override of file modes (as an unprivileged user)."""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

NOBODY = 65534


def unprivileged(check: Callable[[], Any]) -> Any:
    """``check()`` in a forked child without root's override of file modes; its JSON result
    (or the child's traceback, re-raised here as a failure)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            data = json.dumps({"ok": check()}, default=str)
        except BaseException:
            data = json.dumps({"error": traceback.format_exc()})
        with os.fdopen(write, "w") as out:
            out.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as source:
        text = source.read()
    os.waitpid(pid, 0)
    result = json.loads(text)
    assert "error" not in result, result["error"]
    return result["ok"]


def read_only(path: Path, *, directory: bool = True) -> None:
    for item in path.iterdir():
        item.chmod(0o444)
    if directory:
        path.chmod(0o555)
