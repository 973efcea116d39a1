"""An owner index's vectors as blocks of rows: full ones (a saved index's file, memory-mapped
read-only, or the rows an index was built with; then the runs of those a delete left) and the
rows appended in memory after them.

An index loaded from a saved file maps its vectors read-only. When it grows, copying the mapped
rows into memory first (as an array growing in place must) costs their whole size in anonymous
memory and the time to copy it: at a million 384-dimension rows, 1.5 GB and seconds, in the
retrieval that follows the first store. An index built in memory, as large as its rows, paid
the same copy on its first store. The rows appended since are kept in an array of their own
instead, after the base. A delete likewise keeps the rows before and after the removed one as
views instead of copying them around it. Reading one block is a view, and a read across blocks
is assembled from them (a scan's cosines have the same bits in any layout: each row's dot
product does not depend on the rows around it).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from prme.index.arrays import exact_dot

# At most this many full blocks: a removal that would leave more copies them into one.
MAX_FULL_BLOCKS = 16


@dataclass(frozen=True)
class StackedRows:
    """Rows of the ``full`` blocks one after another, then ``after``'s: sliced (a step of 1)
    and gathered as one array of their rows in all (its capacity: an index reads its first
    ``size`` rows). The first full block is the base: a saved file's rows, or the rows an
    index was built with; the others are runs of rows a removal left (:meth:`without`)."""

    full: tuple[npt.NDArray[np.float32], ...]
    after: npt.NDArray[np.float32]

    @classmethod
    def of(cls, rows: npt.NDArray[np.float32]) -> StackedRows:
        """``rows`` alone (full: grown after them, see :meth:`reserved`)."""
        return cls((rows,), np.zeros((0, rows.shape[1]), np.float32))

    @property
    def base(self) -> npt.NDArray[np.float32]:
        return self.full[0]

    @property
    def _split(self) -> int:
        """Where ``after`` begins."""
        return sum(len(block) for block in self.full)

    def reserved(self, size: int, rows: int) -> StackedRows:
        """Room for ``rows`` rows, the first ``size`` kept. The full blocks stay (a saved
        file, or rows built in memory: growing never copies them again), and the rows after
        them are copied into a larger block of their own; an empty base, or a writable one not
        full yet, is replaced by a larger one."""
        dimension = self.shape[1]
        split = self._split
        single = len(self.full) == 1 and not len(self.after)
        if not split or (single and self.base.flags.writeable and size < split):
            grown = np.zeros((rows, dimension), np.float32)
            grown[:size] = self[:size]
            return StackedRows.of(grown)
        after = np.zeros((max(rows - split, 0), dimension), np.float32)
        after[: size - split] = self.after[: size - split]
        return StackedRows(self.full, after)

    def without(self, size: int, removed: npt.NDArray[np.int64]) -> StackedRows:
        """The first ``size`` rows but the ``removed`` ones (ascending, below ``size``). The
        full blocks are not copied: the runs of their rows between removed ones become full
        blocks of their own (views), unless that makes more than ``MAX_FULL_BLOCKS``, when
        they are copied into one; the rows after them are copied into a new block."""
        split = self._split
        bounds = [-1, *removed.tolist(), size]
        runs = [(a + 1, b) for a, b in pairwise(bounds) if b > a + 1]
        full = [v for a, b in runs if a < split for v in self.blocks(a, min(b, split)) if len(v)]
        moved = [self.after[max(a, split) - split : b - split] for a, b in runs if b > split]
        after = np.concatenate(moved) if moved else self.after[:0].copy()
        if not full:
            return StackedRows.of(after)
        if len(full) > MAX_FULL_BLOCKS:
            full = [np.concatenate(full)]
        return StackedRows(tuple(full), after)

    def write(self, start: int, rows: npt.NDArray[np.float32]) -> None:
        """Set rows ``[start, start + len(rows))``, all within the block they fall in: the
        rows after the full blocks, or a writable base alone."""
        split = self._split
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
        parts = []
        first = 0
        for block in (*self.full, self.after):
            last = first + len(block)
            if start < last and end > first:
                parts.append(block[max(start - first, 0) : min(end, last) - first])
            first = last
        return [p for p in parts if len(p)] or [self.base[:0]]

    @property
    def shape(self) -> tuple[int, int]:
        return (self._split + len(self.after), int(self.base.shape[1]))

    def __getitem__(self, key: slice | npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step != 1:
                raise ValueError("rows are sliced with a step of 1")
            blocks = self.blocks(start, max(start, stop))
            return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        positions = np.asarray(key, dtype=np.int64)
        base = self.base
        if len(self.full) == 1 and (positions < len(base)).all():
            return base[positions]
        rows: npt.NDArray[np.float32] = np.empty((len(positions), self.shape[1]), np.float32)
        first = 0
        for block in (*self.full, self.after):
            inside = (positions >= first) & (positions < first + len(block))
            if inside.any():
                rows[inside] = block[positions[inside] - first]
            first += len(block)
        return rows
