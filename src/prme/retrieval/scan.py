"""The exact vector scan of an owner index: inline, on the process's scan thread, or in the
owner's scan process.

A large owner's scan (numpy on a fixed index snapshot, no store access) can run in one worker
thread while the caller does the lexical query; both release the GIL. A large owner whose
vectors are sparse, and whose index is saved as it is, is scanned in a process of its own
(:mod:`prme.index.scan_process`): their scan holds the GIL. The arithmetic is the same in any
thread or process, so the retrieval is the same.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import numpy.typing as npt

from prme.index.owner_index import OwnerIndex, VectorScores
from prme.index.scan_process import SCAN_PROCESSES, Answer, ScanUnavailable
from prme.index.workers import Workers
from prme.models.enums import Scope

# (the query's scores: every position's exact cosine, or a large owner's approximate searcher;
# the top positions; their cosines)
Scan = tuple[VectorScores, npt.NDArray[np.int64], npt.NDArray[np.float32]]
# A scan started beside the caller (None: not started)
Started = Future[Scan] | Answer | None


def scan(
    ix: OwnerIndex, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
) -> Scan:
    """The query's scores, and the top ``k`` masked positions with their cosines."""
    scores = ix.scores(query)
    return (scores, *ix.top_k(scores, mask, k))


class ScanThread:
    """One worker thread for vector scans, started on first use. At most one scan runs on it
    at a time: a retrieval that finds it busy scans inline instead of queueing."""

    def __init__(self) -> None:
        self._worker = Workers(lambda: 1, "prme-scan")
        self._slot = threading.Semaphore(1)

    def submit(
        self, ix: OwnerIndex, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
    ) -> Future[Scan] | None:
        """The scan started on the thread, or None when the thread is busy (or shutting down)."""
        if not self._slot.acquire(blocking=False):
            return None
        try:
            future = self._worker.submit(scan, ix, query, mask, k)
        except BaseException:
            self._slot.release()
            raise
        if future is None:  # the interpreter is shutting down: scan inline
            self._slot.release()
            return None
        future.add_done_callback(lambda _: self._slot.release())
        return future


def start(
    ix: OwnerIndex,
    query: npt.NDArray[np.float32],
    scopes: Sequence[Scope] | None,
    mask: npt.NDArray[np.bool_],
    k: int,
    threaded: bool,
) -> Started:
    """The scan started beside the caller: in the process serving the owner's saved index
    when there is one ready and idle, else on the scan thread when ``threaded`` (a large
    owner); None: it is done inline, by :func:`finish`. ``mask`` is ``scopes``' mask."""
    answer = SCAN_PROCESSES.submit(ix, query, scopes, k)
    if answer is not None:
        return answer
    return SCAN_THREAD.submit(ix, query, mask, k) if threaded else None


def finish(
    started: Started,
    ix: OwnerIndex,
    query: npt.NDArray[np.float32],
    mask: npt.NDArray[np.bool_],
    k: int,
) -> Scan:
    """The started scan's result; a scan the busy worker has not begun is taken back and done
    here (as is one never started, or one its process did not answer)."""
    if isinstance(started, Answer):
        try:
            return (ix.scores(query), *started.result())
        except ScanUnavailable:
            return scan(ix, query, mask, k)
    if started is None or started.cancel():
        return scan(ix, query, mask, k)
    return started.result()


def discard(started: Started) -> None:
    """Give up a started scan (the retrieval failed before :func:`finish`)."""
    if isinstance(started, Answer):
        started.discard()
    elif started is not None:
        started.cancel()


SCAN_THREAD = ScanThread()
