"""An owner index's vectors as two blocks of rows: a base (a saved index's file, memory-mapped
read-only, or the rows an index was built with) and the rows appended in memory after it.

An index loaded from a saved file maps its vectors read-only. When it grows, copying the mapped
rows into memory first (as an array growing in place must) costs their whole size in anonymous
memory and the time to copy it: at a million 384-dimension rows, 1.5 GB and seconds, in the
retrieval that follows the first store. An index built in memory, as large as its rows, paid
the same copy on its first store. The rows appended since are kept in an array of their own
instead, after the base; reading either block is a view, and a read across both is assembled
from the two (a scan's cosines have the same bits in either layout: each row's dot product
does not depend on the rows around it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from prme.index.arrays import exact_dot


@dataclass(frozen=True)
class StackedRows:
    """Rows ``[0, len(base))`` are ``base``'s, the next ones ``after``'s: sliced (a step of 1)
    and gathered as one array of ``len(base) + len(after)`` rows (its capacity: an index
    reads its first ``size`` rows)."""

    base: npt.NDArray[np.float32]
    after: npt.NDArray[np.float32]

    @classmethod
    def of(cls, rows: npt.NDArray[np.float32]) -> StackedRows:
        """``rows`` alone (full: grown after them, see :meth:`reserved`)."""
        return cls(rows, np.zeros((0, rows.shape[1]), np.float32))

    def reserved(self, size: int, rows: int) -> StackedRows:
        """Room for ``rows`` rows, the first ``size`` kept. A full base stays (a saved file, or
        rows built in memory: growing never copies them again), and the rows after it are
        copied into a larger block of their own; an empty base, or a writable one not full
        yet, is replaced by a larger one."""
        dimension = self.shape[1]
        split = len(self.base)
        if not split or (self.base.flags.writeable and not len(self.after) and size < split):
            grown = np.zeros((rows, dimension), np.float32)
            grown[:size] = self.base[:size]
            return StackedRows.of(grown)
        after = np.zeros((max(rows - split, 0), dimension), np.float32)
        after[: size - split] = self.after[: size - split]
        return StackedRows(self.base, after)

    def write(self, start: int, rows: npt.NDArray[np.float32]) -> None:
        """Set rows ``[start, start + len(rows))``, all within the block they fall in."""
        split = len(self.base)
        if start >= split:
            self.after[start - split : start - split + len(rows)] = rows
        else:
            self.base[start : start + len(rows)] = rows

    def cosines(
        self, start: int, end: int, query: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """:func:`~prme.index.arrays.exact_dot` of rows ``[start, end)``, block by block."""
        blocks = self.blocks(start, end)
        if len(blocks) == 1:
            return exact_dot(blocks[0], query)
        return np.concatenate([exact_dot(block, query) for block in blocks])

    def blocks(self, start: int, end: int) -> list[npt.NDArray[np.float32]]:
        """Rows ``[start, end)`` as views, one per block they span."""
        split = len(self.base)
        parts = [
            self.base[min(start, split) : min(end, split)],
            self.after[max(start - split, 0) : max(end - split, 0)],
        ]
        return [p for p in parts if len(p)] or [self.base[:0]]

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.base) + len(self.after), int(self.base.shape[1]))

    def __getitem__(self, key: slice | npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        split = len(self.base)
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                raise ValueError("rows are sliced with a step of 1")
            stop = max(start, stop)
            if stop <= split:
                return self.base[start:stop]
            if start >= split:
                return self.after[start - split : stop - split]
            return np.concatenate((self.base[start:], self.after[: stop - split]))
        positions = np.asarray(key, dtype=np.int64)
        inside = positions < split
        if inside.all():
            return self.base[positions]
        rows: npt.NDArray[np.float32] = np.empty((len(positions), self.shape[1]), np.float32)
        rows[inside] = self.base[positions[inside]]
        rows[~inside] = self.after[positions[~inside] - split]
        return rows
