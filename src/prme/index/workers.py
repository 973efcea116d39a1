"""Worker threads for the index's numeric work (numpy, BLAS and usearch release the GIL)."""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

log = logging.getLogger("prme.index")

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


class Background:
    """One daemon thread running submitted jobs in order, started on first use (and again in
    a forked child). A daemon: the process never waits for it to exit, so a job must leave
    nothing half done that matters (a graph built ahead is saved atomically, or not at all)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._pid = 0
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; False when no thread can be started (the interpreter is exiting)."""
        with self._lock:
            if self._pid != os.getpid():
                self._jobs = queue.SimpleQueue()
                try:
                    threading.Thread(target=self._run, name=self._name, daemon=True).start()
                except RuntimeError:
                    return False
                self._pid = os.getpid()
            self._jobs.put(job)
        return True

    def _run(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            try:
                job()
            except Exception:  # a job reports its own failures; the thread goes on
                log.exception("background job failed")

    def drain(self) -> None:
        """Wait until the jobs submitted so far have run."""
        done = threading.Event()
        if self.submit(done.set):
            done.wait()
