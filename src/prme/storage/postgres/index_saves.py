"""The PostgreSQL store's background saves of owner indexes: one worker thread per store, at
most one save per owner queued or running, started lazily by the first save.

A retrieve that finds its owner's index due to be saved
(:func:`~prme.storage.owner_indexes.save_due`) hands a fixed view of it to this worker and
returns without waiting (at a million memories a save is seconds of segment building, file
writing and upload). ``close()`` waits for the save that is
running, and drops those not started, before the store closes its pool."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

log = logging.getLogger("prme.storage")


class IndexSaves:
    """A store's saving thread and the owners whose save is queued or running."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending: dict[str, Future[None]] = {}
        self._closed = False

    def pending(self, user_id: str) -> bool:
        """Whether a save of the owner's index is queued or running."""
        with self._lock:
            return user_id in self._pending

    def submit(self, user_id: str, save: Callable[[], None]) -> bool:
        """Run ``save`` on the saving thread, unless the owner already has a save pending or
        the store is closing (False: not scheduled)."""
        with self._lock:
            if self._closed or user_id in self._pending:
                return False
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
            self._pending[user_id] = self._executor.submit(self._run, user_id, save)
            return True

    def _run(self, user_id: str, save: Callable[[], None]) -> None:
        try:
            save()
        except Exception:  # a save is a cache: it never fails anything else
            log.warning("saving an owner index failed", exc_info=True)
        finally:
            with self._lock:
                self._pending.pop(user_id, None)

    def wait(self) -> None:
        """Wait for the saves pending now to finish."""
        with self._lock:
            pending = list(self._pending.values())
        wait(pending)

    def close(self) -> None:
        """Schedule no more saves, drop those not started, and wait for the running one."""
        with self._lock:
            self._closed = True
            executor = self._executor
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
