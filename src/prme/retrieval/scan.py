"""The exact vector scan of an owner index, inline or on the process's scan thread.

A large owner's scan (numpy on a fixed index snapshot, no store access) can run in one worker
thread while the caller does the lexical query; both release the GIL. The arithmetic is the
same in either thread, so the retrieval is the same.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

import numpy as np
import numpy.typing as npt

from prme.index.owner_index import OwnerIndex, VectorScores
from prme.index.workers import Workers

# (the query's scores: every position's exact cosine, or a large owner's approximate searcher;
# the top positions; their cosines)
Scan = tuple[VectorScores, npt.NDArray[np.int64], npt.NDArray[np.float32]]


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


def finish(
    started: Future[Scan] | None,
    ix: OwnerIndex,
    query: npt.NDArray[np.float32],
    mask: npt.NDArray[np.bool_],
    k: int,
) -> Scan:
    """The started scan's result; a scan the busy worker has not begun is taken back and done
    here (as is one never started)."""
    if started is None or started.cancel():
        return scan(ix, query, mask, k)
    return started.result()


SCAN_THREAD = ScanThread()
