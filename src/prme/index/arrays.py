"""Small array operations the hot paths share (pure numpy)."""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from prme.index.workers import Workers, usable_cpus


def distinct(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct values, ascending: ``np.unique(values)``, by one sort. numpy 2's
    ``np.unique`` hashes first and then sorts, about 15 times slower on the few thousand
    positions of a candidate pool."""
    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    result: npt.NDArray[np.int64] = ordered[keep]
    return result


def offsets_of(keys: npt.NDArray[np.integer[Any]], groups: int) -> npt.NDArray[np.int64]:
    """Where each of ``groups`` groups starts among entries ordered by their group ``keys``,
    and where the last ends: ``groups + 1`` offsets (a CSR layout's)."""
    offsets = np.zeros(groups + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=groups), out=offsets[1:])
    return offsets


def group_of_each(offsets: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int64]:
    """Each entry's group under ``offsets`` (group ``g``'s entries are
    ``[offsets[g], offsets[g + 1])``)."""
    groups = np.arange(len(offsets) - 1, dtype=np.int64)
    result: npt.NDArray[np.int64] = np.repeat(groups, np.diff(offsets))
    return result


def best_positions(values: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    """The indices of the ``k`` largest ``values``, ties at the k-th value broken by the lowest
    index (in no particular order). ``np.argpartition`` alone keeps an arbitrary subset of the
    ties, and with sparse embeddings many cosines are exactly 0."""
    if k >= values.size:
        return np.arange(values.size)
    kth = values[np.argpartition(-values, k - 1)[k - 1]]
    above = np.flatnonzero(values > kth)
    tied = np.flatnonzero(values == kth)[: k - above.size]
    return np.concatenate((above, tied))


def renumbered(
    positions: npt.NDArray[np.integer], removed: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Which ``positions`` remain once the ``removed`` positions (ascending, distinct) are
    taken out of their rows, and where the remaining ones move: down by the removed positions
    below each."""
    below = np.searchsorted(removed, positions)
    keep = np.ones(len(positions), dtype=np.bool_)
    inside = below < removed.size
    keep[inside] = removed[below[inside]] != positions[inside]
    moved: npt.NDArray[np.int64] = positions[keep].astype(np.int64) - below[keep]
    return keep, moved


def comma_integers(text: str | None) -> npt.NDArray[np.int64]:
    """The integers of comma-separated ``text`` (as SQL's ``group_concat`` and ``string_agg``
    give them; none for NULL or empty text)."""
    if not text:
        return np.zeros(0, np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


_SCAN_LOCK = threading.Lock()
# From this many rows a scan is cut in two halves computed side by side (a matrix-vector product
# is memory-bound, and each core streams its own half). At 100k rows of 384 dimensions a
# retrieval's scan took 5.0-4.5 ms instead of 5.7-5.4 (interleaved runs); at 10k the hand-off
# to the other thread cost what it saved.
SPLIT_ROWS = 32768
_HALF_WORKER = Workers(lambda: 1, "prme-dot")


@cache
def _blas() -> ThreadpoolController:
    """Inspecting the loaded BLAS libraries is slow, so it happens once per process."""
    return ThreadpoolController()


def split_point(rows: int, cpus: int) -> int:
    """Where a scan of ``rows`` rows is cut in two (0: not cut)."""
    if rows < SPLIT_ROWS or cpus < 2:
        return 0
    return rows // 2 // ROW_BLOCK * ROW_BLOCK


def exact_dot(
    matrix: npt.NDArray[np.float32], query: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """``matrix @ query`` in float32: each row's dot product has the same bits whatever rows
    surround it (a whole scan, its halves, or a few gathered candidates rescored)."""
    # One BLAS thread: BLAS's own threads spin while they wait, and on a busy 2-core machine a
    # threaded product took 7-18 ms at 10k rows (1.2 ms on one thread). The limit is
    # process-wide, so scans on several threads take turns: otherwise one thread's exit could
    # restore the default while another still scans, and a threaded BLAS kernel need not sum
    # in the same order (the cosines must be the same bits).
    vector = query.astype(np.float32)
    half = split_point(len(matrix), usable_cpus())
    with _SCAN_LOCK, _blas().limit(limits=1, user_api="blas"):
        second = _HALF_WORKER.submit(_blocked_dot, matrix[half:], vector) if half else None
        if second is None:
            return _blocked_dot(matrix, vector)
        return np.concatenate((_blocked_dot(matrix[:half], vector), second.result()))


# A BLAS matrix-vector kernel computes rows in blocks, and the few rows past the last whole
# block through another path whose sums can differ in the last bit (OpenBLAS: 1-3 rows of 4,
# measured). A ragged end is therefore computed as a whole block padded with zero rows.
ROW_BLOCK = 64
# And it may choose its path by the row count: OpenBLAS 0.3.31's SkylakeX kernel for 2-8
# columns sums differently from about 32k rows on (measured). So no call gets more rows than
# this, a multiple of ROW_BLOCK below any such switch seen.
PIECE_ROWS = 8192


def _blocked_dot(
    matrix: npt.NDArray[np.float32], vector: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    rows = len(matrix)
    whole = rows - rows % ROW_BLOCK
    scores: npt.NDArray[np.float32] = np.empty(rows, np.float32)
    for start in range(0, whole, PIECE_ROWS):
        end = min(start + PIECE_ROWS, whole)
        np.matmul(matrix[start:end], vector, out=scores[start:end])
    if whole < rows:
        block = np.zeros((ROW_BLOCK, matrix.shape[1]), np.float32)
        block[: rows - whole] = matrix[whole:]
        scores[whole:] = (block @ vector)[: rows - whole]
    return scores
