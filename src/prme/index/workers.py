"""Worker threads for the index's numeric work (numpy, BLAS and usearch release the GIL)."""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

log = logging.getLogger("prme.index")
# How long exit waits for a background job to reach its next check (a batch of a graph's rows:
# well under a second).
HALT_SECONDS = 30.0

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
    a forked child). A daemon, so that a process never waits for work it no longer needs:
    at exit, :attr:`stopping` is set and the job running is waited for, which must therefore
    check it often (a graph is built a batch of rows at a time) and leave nothing half done
    (a graph built ahead is saved atomically, or not at all). A job still inside a C++
    library when the interpreter exits would abort the process."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._pid = 0
        self._lock = threading.Lock()
        self._running = threading.Lock()  # held while a job runs
        self.stopping = threading.Event()

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; False when no thread can be started (the interpreter is exiting)."""
        with self._lock:
            if self._pid != os.getpid():
                self._jobs, self._running = queue.SimpleQueue(), threading.Lock()
                self.stopping = threading.Event()
                try:
                    threading.Thread(target=self._run, name=self._name, daemon=True).start()
                except RuntimeError:
                    return False
                if not self._pid:
                    atexit.register(self._halt)
                self._pid = os.getpid()
            self._jobs.put(job)
        return True

    def _run(self) -> None:
        jobs, running, stopping = self._jobs, self._running, self.stopping
        while True:
            job = jobs.get()
            with running:
                if stopping.is_set():
                    continue
                try:
                    job()
                except Exception:  # a job reports its own failures; the thread goes on
                    log.exception("background job failed")

    def _halt(self) -> None:
        """At exit: no job starts any more, and the one running stops at its next check."""
        if self._pid != os.getpid():
            return  # no thread of this process (a forked child that never started one)
        self.stopping.set()
        if self._running.acquire(timeout=HALT_SECONDS):
            self._running.release()

    def drain(self) -> None:
        """Wait until the jobs submitted so far have run."""
        done = threading.Event()
        if self.submit(done.set):
            while not done.wait(0.1) and not self.stopping.is_set():
                pass
