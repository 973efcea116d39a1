"""Worker threads for the index's numeric work (numpy, BLAS and usearch release the GIL)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS reports one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


class Workers:
    """A thread pool of ``size()`` threads, started on first use, and again in a forked child
    (which does not inherit its parent's threads)."""

    def __init__(self, size: Callable[[], int], prefix: str) -> None:
        self._size, self._prefix = size, prefix
        self._executor: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T] | None:
        """``fn(*args)`` started on a worker, or None when the interpreter is shutting down
        (the caller then does the work itself)."""
        with self._lock:
            if self._executor is None or self._pid != os.getpid():
                self._executor = ThreadPoolExecutor(
                    max(1, self._size()), thread_name_prefix=self._prefix
                )
                self._pid = os.getpid()
            executor = self._executor
        try:
            return executor.submit(fn, *args)
        except RuntimeError:
            return None
