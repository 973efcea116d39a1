"""SQLite connections' failure handling: lock retries, and the errors that are temporary
(:class:`StorageUnavailableError`) or mean the pack cannot be written (opened read-only)."""

from __future__ import annotations

import errno
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from prme.errors import StorageUnavailableError

# Lock retries go on for the busy timeout, and at least this long (SQLite's own busy handler
# does not wait in every case, e.g. for the journal-mode switch of a pack being created).
LOCK_RETRY_SECONDS = 2.0
DISK_FULL = "the disk is full; nothing was written (free space, then retry)"
# SQLite's answers when the pack's file or directory cannot be written (or the -shm/-wal
# files cannot be created next to it): the pack is then opened read-only.
READ_ONLY_ERRORS = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")

T = TypeVar("T")


@contextmanager
def temporary_errors(db_path: Path, lock_window: float) -> Iterator[None]:
    """A write that outwaited the busy timeout (``SQLITE_BUSY``/``SQLITE_LOCKED``) or met a
    full disk (``SQLITE_FULL``, ``ENOSPC``) raises :class:`StorageUnavailableError`."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            detail = f"the pack stayed locked by another writer for {lock_window:g} s"
            raise StorageUnavailableError(str(db_path), f"{detail}; retry later") from exc
        if code == sqlite3.SQLITE_FULL:
            raise StorageUnavailableError(str(db_path), DISK_FULL, 30) from exc
        raise
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise StorageUnavailableError(str(db_path), DISK_FULL, 30) from exc
        raise


def describe(exc: sqlite3.OperationalError) -> str:
    name = getattr(exc, "sqlite_errorname", "")
    return f"{exc}" + (f" ({name})" if name else "")


def retry_locked(action: Callable[[], T], window: float) -> T:
    """Retry an action that hit ``database is locked`` with jittered exponential backoff, for
    ``window`` seconds in all; then the error is raised with a note saying how long it waited."""
    deadline = time.monotonic() + window
    delay = 0.002
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                exc.add_note(
                    f"prme: the pack stayed locked by another connection for {window:g} s "
                    "(storage.busy_timeout_ms); retry later"
                )
                raise
            time.sleep(min(delay * random.uniform(0.5, 1.5), remaining))
            delay = min(delay * 2, 0.1)
