"""The exact vector scan of sparse vectors through their postings (pure numpy, and one
background thread that builds them).

The hashing embedder gives a short text a vector with few nonzero components (about 19 of 384
for a sentence), so most of a full scan's products are zero. For an owner whose vectors are
sparse (:func:`is_sparse`), the nonzero components are also kept as postings: per dimension,
the positions whose vector has it and their values, in blocks of positions. A query's dot
product with every row is then the sum over the query's nonzero dimensions of their postings,
and only the rows that can reach the ``k`` best are rescored with the scan's own float32 dot
product (:func:`~prme.index.arrays.exact_dot`).

The result is exactly the scan's: the same positions, cosines (bits) and order. The postings
sum float32 products in float32 (half the memory traffic of float64, and numpy's unbuffered
``add.at`` instead of ``bincount``'s conversions: 2.5 times faster), so each sum, like the
scan's own dot product, is within a float32 rounding bound of the exact dot product, and the
two within :func:`error_bound` of each other, whatever order either adds its products in. A
row whose upper bound is below the ``k``-th best lower bound cannot be among the best; every
other row is rescored exactly, from its vector rebuilt from the postings' rows (a large
owner's vectors then stay on disk). A query whose ``k``-th best lower bound is not clearly
positive (fewer than ``k`` rows share a component with it) is scanned in full instead.
Because the result never depends on the postings, they are built in the background when the
owner grows or is first searched, and the rows they do not cover yet are scanned as before;
nothing about them is part of the feature identity. That an owner with sparse vectors is
scanned exactly even past the size where a vector index policy searches graphs is
(``exact_when_sparse``, :mod:`prme.index.ann`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index.ann import (
    SPARSE_DENSITY,
    SPARSE_SAMPLE_ROWS,
    AnnPolicy,
    best_by_cosine,
    segment_ranges,
)
from prme.index.arrays import exact_dot, group_of_each, offsets_of
from prme.index.stacked_rows import StackedRows
from prme.index.workers import Background

SPARSE_BLOCKS = "sparse_blocks"  # the key of an owner index's postings in its derived values
Range = tuple[int, int]
Found = tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]

# Blocks hold whole chunks of BLOCK_ROWS positions, grouped as the vector index groups chunks
# into graphs (:func:`~prme.index.ann.segment_ranges`): up to 64 chunks, then the binary
# decomposition of the rest, so growing rebuilds only the small blocks at the end.
BLOCK_LAYOUT = AnnPolicy(min_rows=0, chunk_rows=4096, max_segment_chunks=64)
# A block of at least this many rows per result wanted sets a first floor for the candidates
# (its own k-th best): at a million rows, 8k candidates to rank instead of 300k.
PROBE_ROWS = 64
# From this many rows in blocks, the candidates' vectors are rebuilt from the blocks' rows (to
# keep the vectors' pages out of memory); below, the vectors (15 MB at 10k rows) are read, which
# is faster (no zeroed buffer to fill): 0.53 ms instead of 0.65 for a top 500 at 10k rows.
REBUILD_ROWS = 65536
# The rows past the last whole chunk (the tail: up to 4,095) get a block of their own once this
# many of them are not in one: a top 500 at 10k rows took 0.40 ms instead of 0.52 with the
# 1,808-row tail scanned in full. The tail's block is built again in the background once this
# many more rows have arrived (3.5 ms for 1,808 rows), so a growing owner pays it once per
# TAIL_ROWS new rows, and scans at most TAIL_ROWS rows in full meanwhile.
TAIL_ROWS = 512
BUILDER = Background("prme-sparse")


def error_bound(dimension: int, query_norm: float, row_norm: float) -> float:
    """How far two float32 dot products of ``dimension`` components (any summation order,
    fused or not: the scan's, and the postings' sum) can be from each other: each is within
    ``gamma(n) * sum|q_i v_i|`` of the exact one, with ``n = dimension + 1`` roundings at most,
    and ``sum|q_i v_i| <= |q| |v|``."""
    n = dimension + 1
    u = 2.0**-24  # float32's unit roundoff
    return 2 * (n * u / (1 - n * u)) * query_norm * row_norm * (1 + 1e-6)


def float32_below(value: float) -> np.float32:
    """The largest float32 not above ``value`` (comparing a float32 array with a Python
    float converts the float to float32, which may round it up)."""
    rounded = np.float32(value)
    return rounded if float(rounded) <= value else np.nextafter(rounded, np.float32(-np.inf))


@dataclass(frozen=True)
class RowEntries:
    """A block's nonzero components row by row, to rebuild its rows' vectors: the candidates
    are rescored from these, not from the vectors, so a large owner's vectors (1.5 GB at a
    million rows of 384 dimensions) are not read into memory a few rows at a time."""

    offsets: npt.NDArray[np.int64]  # row r's entries are [offsets[r], offsets[r + 1])
    dims: npt.NDArray[np.integer[Any]]  # ascending within a row (uint16 or int32)
    values: npt.NDArray[np.float32]

    def write(self, rows: npt.NDArray[np.int64], into: npt.NDArray[np.float32]) -> None:
        """Write the vectors of ``rows`` (positions in the block) into the zero rows ``into``:
        the stored ones, bit for bit, but for the sign of zero components (which cannot
        change a nonzero dot product)."""
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        lengths = ends - starts
        first = np.cumsum(lengths) - lengths  # each row's first entry among those gathered
        entries = np.arange(int(lengths.sum())) + np.repeat(starts - first, lengths)
        cells = np.repeat(np.arange(len(rows)) * into.shape[1], lengths) + self.dims[entries]
        into.reshape(-1)[cells] = self.values[entries]


def dims_dtype(dimension: int) -> type[np.uint16] | type[np.int32]:
    """The smallest type of a row entry's dimension."""
    return np.uint16 if dimension <= 1 << 16 else np.int32


@dataclass(frozen=True)
class Block:
    """The nonzero components of positions ``[start, end)``, by dimension, and by row (absent
    in an index saved before rows were kept: its candidates are rescored from the vectors)."""

    start: int
    end: int
    offsets: npt.NDArray[np.int64]  # dimension d's entries are [offsets[d], offsets[d + 1])
    rows: npt.NDArray[np.int32]  # position - start, ascending within a dimension
    values: npt.NDArray[np.float32]
    max_norm: float  # the largest row norm
    by_row: RowEntries | None = None

    @classmethod
    def of(cls, matrix: npt.NDArray[np.float32], start: int) -> Block:
        """The block of ``matrix``'s rows, the first at position ``start``."""
        rows, dims = np.nonzero(matrix)  # row by row: ascending rows within each dimension
        dimension = matrix.shape[1]
        by_row = RowEntries(
            offsets_of(rows, len(matrix)), dims.astype(dims_dtype(dimension)), matrix[rows, dims]
        )
        squares = np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)
        max_norm = float(np.sqrt(squares.max())) if len(matrix) else 0.0
        return cls._by_dimension(start, dimension, by_row, max_norm)

    @classmethod
    def merged(cls, blocks: list[Block]) -> Block:
        """The block of the consecutive ``blocks``' rows (each with its rows), from their
        entries by row: what :meth:`of` gives for their rows' vectors, without reading them."""
        by_row = [block.by_row for block in blocks if block.by_row is not None]
        assert len(by_row) == len(blocks), "merged blocks keep their entries by row"
        shifts = np.cumsum([0, *[len(entries.dims) for entries in by_row[:-1]]]).tolist()
        shifted = [e.offsets[1:] + shift for e, shift in zip(by_row, shifts, strict=True)]
        row_offsets = np.concatenate([np.zeros(1, np.int64), *shifted]).astype(np.int64)
        entries = RowEntries(
            row_offsets,
            np.concatenate([entries.dims for entries in by_row]),
            np.concatenate([entries.values for entries in by_row]),
        )
        dimension = len(blocks[0].offsets) - 1
        max_norm = max(block.max_norm for block in blocks)
        return cls._by_dimension(blocks[0].start, dimension, entries, max_norm)

    @classmethod
    def _by_dimension(
        cls, start: int, dimension: int, by_row: RowEntries, max_norm: float
    ) -> Block:
        """The block whose entries by row are ``by_row``, with its postings by dimension."""
        rows = group_of_each(by_row.offsets)
        order = np.argsort(by_row.dims, kind="stable")  # ascending rows within a dimension
        offsets = offsets_of(by_row.dims, dimension)
        end = start + len(by_row.offsets) - 1
        values = by_row.values[order]
        return cls(start, end, offsets, rows[order].astype(np.int32), values, max_norm, by_row)

    def dots(
        self, dims: npt.NDArray[np.intp], weights: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """Each row's dot product with the query whose nonzero components are ``weights`` at
        ``dims``, in float32 (within :func:`error_bound` of the scan's)."""
        sums = np.zeros(self.end - self.start, np.float32)
        spans = zip(self.offsets[dims].tolist(), self.offsets[dims + 1].tolist(), strict=True)
        for (start, end), weight in zip(spans, weights, strict=True):
            # a dimension's rows are distinct, so each add.at is a plain scatter-add
            np.add.at(sums, self.rows[start:end], self.values[start:end] * weight)
        return sums


def block_ranges(rows: int) -> list[Range]:
    """The blocks covering the whole chunks of ``rows`` positions (pure)."""
    return segment_ranges(rows, BLOCK_LAYOUT)


def is_sparse(vectors: StackedRows) -> bool:
    """Whether these vectors (at least ``SPARSE_SAMPLE_ROWS`` of them) are sparse: their first
    ``SPARSE_SAMPLE_ROWS`` rows' share of nonzero components (the hashing embedder: 5% for a
    sentence; a dense model: all of them)."""
    sample = vectors[0:SPARSE_SAMPLE_ROWS]
    return bool(np.count_nonzero(sample) < SPARSE_DENSITY * sample.size)


@dataclass
class SharedBlocks:
    """An owner index's postings, shared by its snapshots: the blocks built, by range (a
    position's vector never changes, and positions below a size never move while it grows)."""

    sparse: bool | None = None  # decided once the index holds SPARSE_SAMPLE_ROWS rows
    built: dict[Range, Block] = field(default_factory=dict)
    pending: bool = False  # a build is queued or running
    largest: int = 0  # the most rows asked for (an older snapshot's smaller size builds nothing)
    tail: Block | None = None  # rows from the last whole chunk to some size (see TAIL_ROWS)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def up_to(self, position: int) -> SharedBlocks:
        """The blocks wholly before ``position`` (an index after a delete at ``position``)."""
        with self.lock:
            kept = {r: b for r, b in self.built.items() if r[1] <= position}
            sample_kept = position >= SPARSE_SAMPLE_ROWS  # else the sample's rows changed
            return SharedBlocks(self.sparse if sample_kept else None, kept)

    def is_sparse(self, vectors: StackedRows, size: int) -> bool:
        """Whether the index of these ``size`` vectors is sparse (:func:`is_sparse`; never
        below ``SPARSE_SAMPLE_ROWS`` rows), decided once."""
        if size < SPARSE_SAMPLE_ROWS:
            return False
        with self.lock:
            if self.sparse is None:
                self.sparse = is_sparse(vectors)
            return self.sparse

    def loaded(self, blocks: list[Block]) -> None:
        """Hold ``blocks``, loaded from a saved index (saved only for sparse vectors)."""
        with self.lock:
            self.sparse = True
            self.built = {(b.start, b.end): b for b in blocks}

    def layout(self, size: int) -> list[Block] | None:
        """The blocks of the largest built layout within ``size`` rows (none built: None)."""
        with self.lock:
            return _built_layout(self.built, size) if self.sparse else None

    def usable(self, vectors: StackedRows, size: int) -> list[Block] | None:
        """The blocks of the largest built layout within ``size`` rows, and the tail's block
        when it follows them within ``size``, starting a background build of the layout for
        ``size`` (or of its tail's block) when it is missing; None when these vectors are not
        sparse, or no layout is built yet."""
        if not self.is_sparse(vectors, size):
            return None
        with self.lock:
            wanted = block_ranges(size)
            if size >= self.largest and not self.pending:
                self.largest = size
                built = all(self._built_with_rows(r) for r in wanted)
                if not built or self._tail_due(wanted, size) is not None:
                    self.pending = BUILDER.submit(lambda: self._build(vectors, wanted, size))
            layout = _built_layout(self.built, size)
            tail = self.tail
            if layout and tail is not None and tail.start == layout[-1].end and tail.end <= size:
                return [*layout, tail]
            return layout

    def _tail_due(self, wanted: list[Range], size: int) -> int | None:
        """Where the tail's block for ``size`` rows starts (the end of the whole chunks
        ``wanted``) when at least TAIL_ROWS rows past them are in no tail block; else None.
        Called with the lock held."""
        if not wanted or size - wanted[-1][1] < TAIL_ROWS:
            return None
        covered, tail = wanted[-1][1], self.tail
        behind = tail is None or tail.start != covered or size - tail.end >= TAIL_ROWS
        return covered if behind else None

    def _build(self, vectors: StackedRows, wanted: list[Range], size: int) -> None:
        try:
            for start, end in wanted:
                with self.lock:
                    done = self._built_with_rows((start, end))
                if done or BUILDER.stopping.is_set():
                    continue
                block = self._block(vectors, start, end)
                with self.lock:
                    self.built[(start, end)] = block
            layout = set(wanted)
            with self.lock:  # the blocks merged into larger ones are dropped
                self.built = {r: b for r, b in self.built.items() if r in layout}
                covered = self._tail_due(wanted, size)
            if covered is not None and not BUILDER.stopping.is_set():
                tail = Block.of(np.ascontiguousarray(vectors[covered:size]), covered)
                with self.lock:
                    self.tail = tail
        finally:
            with self.lock:
                self.pending = False

    def _built_with_rows(self, at: Range) -> bool:
        """Whether the block over ``at`` is built with its rows (one loaded from an index
        saved without them is built again). Called with the lock held."""
        block = self.built.get(at)
        return block is not None and block.by_row is not None

    def _block(self, vectors: StackedRows, start: int, end: int) -> Block:
        """The block of positions ``[start, end)``: merged from the built blocks (with their
        rows) within it, and the ``vectors`` of the rows between them, so a growing owner's
        larger blocks do not read its vectors again."""
        with self.lock:
            have = {
                r[0]: b
                for r, b in self.built.items()
                if b.by_row is not None and start <= r[0] and r[1] <= end
            }
        pieces: list[Block] = []
        at = start
        while at < end:
            block = have.get(at)
            if block is None:  # the rows up to the next built block
                upto = min([s for s in have if s > at], default=end)
                block = Block.of(np.ascontiguousarray(vectors[at:upto]), at)
            pieces.append(block)
            at = block.end
        return pieces[0] if len(pieces) == 1 else Block.merged(pieces)


def _built_layout(built: dict[Range, Block], size: int) -> list[Block] | None:
    """The blocks of the largest layout of at most ``size`` rows whose blocks are all built."""
    if not built:
        return None
    rows = size - size % BLOCK_LAYOUT.chunk_rows
    while rows > 0:
        ranges = block_ranges(rows)
        if all(r in built for r in ranges):
            return [built[r] for r in ranges]
        rows -= BLOCK_LAYOUT.chunk_rows
    return None


def top_k(
    blocks: list[Block],
    vectors: StackedRows,
    size: int,
    query: npt.NDArray[np.float32],
    mask: npt.NDArray[np.bool_],
    k: int,
) -> Found | None:
    """The ``k`` best masked positions of ``size`` by exact cosine, then position, as the full
    scan finds them; None when the postings cannot bound them (then scan in full)."""
    covered = blocks[-1].end
    dims = np.flatnonzero(query)
    if dims.size == 0 or k <= 0:
        return None
    weights = query[dims]
    sums = [block.dots(dims, weights) for block in blocks]
    query_norm = float(np.sqrt(np.dot(weights.astype(np.float64), weights)))
    bound = error_bound(len(query), query_norm, max(block.max_norm for block in blocks))
    tail = np.arange(covered, size, dtype=np.int64)[mask[covered:size]]
    tail_cosines = (
        vectors.cosines(covered, size, query)[tail - covered]
        if tail.size
        else (np.zeros(0, np.float32))
    )
    # Only rows above ``floor`` can reach the k-th best lower bound (when it exceeds 3 bounds,
    # below): clearly positive ones, and with a probe block of many rows, those within 2
    # bounds of its own k-th best (k of its rows reach that less a bound).
    floor = 2 * bound
    probes = [i for i, block in enumerate(blocks) if block.end - block.start >= PROBE_ROWS * k]
    if probes:
        probe = min(probes, key=lambda i: blocks[i].end - blocks[i].start)
        # (its k-th best, when above the floor, is the k-th best of those above it)
        rows = np.flatnonzero(sums[probe] > float32_below(floor))
        allowed = sums[probe][rows[mask[blocks[probe].start + rows]]]
        if allowed.size >= k:
            best = float(np.partition(allowed, allowed.size - k)[allowed.size - k])
            floor = max(floor, best - 2 * bound)
    above = float32_below(floor)  # every float32 sum above ``floor`` is above it
    found = []
    for block, block_sums in zip(blocks, sums, strict=True):
        rows = np.flatnonzero(block_sums > above)
        rows = rows[mask[block.start + rows]]
        found.append((rows + block.start, block_sums[rows]))
    positive = np.concatenate([p for p, _ in found]).astype(np.int64)
    approx = np.concatenate([a for _, a in found]).astype(np.float64)  # bounds in float64
    lower = np.concatenate((approx - bound, tail_cosines.astype(np.float64)))
    if lower.size < k:
        return None
    kth = float(np.partition(lower, lower.size - k)[lower.size - k])
    # Below, rows sharing no component (cosine 0) could be among the best, or a row at most
    # twice the bound above 0 (not above ``floor``) could reach the k-th best.
    if kth <= 3 * bound:
        return None
    candidates = positive[approx + bound >= kth]
    in_tail = tail_cosines >= kth
    positions = np.concatenate((candidates, tail[in_tail]))
    rescored = exact_dot(candidate_vectors(blocks, vectors, candidates), query)
    cosines = np.concatenate((rescored, tail_cosines[in_tail]))
    return best_by_cosine(positions, cosines, k)


def candidate_vectors(
    blocks: list[Block], vectors: StackedRows, positions: npt.NDArray[np.int64]
) -> npt.NDArray[np.float32]:
    """The vectors at ``positions`` (ascending, within ``blocks``), rebuilt from the blocks'
    rows (or read from ``vectors`` where a block has none, or the blocks are small)."""
    by_row = [block.by_row for block in blocks if block.by_row is not None]
    if len(by_row) < len(blocks) or blocks[-1].end < REBUILD_ROWS:
        return np.asarray(vectors[positions], np.float32)
    rebuilt = np.zeros((len(positions), len(blocks[0].offsets) - 1), np.float32)
    cuts = np.searchsorted(positions, [block.end for block in blocks]).tolist()
    for block, entries, first, last in zip(blocks, by_row, [0, *cuts[:-1]], cuts, strict=True):
        if last > first:
            entries.write(positions[first:last] - block.start, rebuilt[first:last])
    return rebuilt


@dataclass(frozen=True)
class SparseScores:
    """A query against an owner index whose vectors have postings (see :func:`top_k`)."""

    vectors: StackedRows
    size: int
    query: npt.NDArray[np.float32]
    blocks: list[Block]

    def top_k(self, mask: npt.NDArray[np.bool_], k: int) -> Found | None:
        return top_k(self.blocks, self.vectors, self.size, self.query, mask, k)


def sparse_scores(
    derived: dict[str, tuple[int, object]],
    vectors: StackedRows,
    size: int,
    query: npt.NDArray[np.float32],
) -> SparseScores | None:
    """The query against an owner index's postings (kept in its ``derived`` values), or None
    when it has none to search (not sparse, too small, or none built yet)."""
    blocks = shared_blocks(derived).usable(vectors, size)
    return None if blocks is None else SparseScores(vectors, size, query, blocks)


def shared_blocks(derived: dict[str, tuple[int, object]]) -> SharedBlocks:
    """The postings an owner index (whose ``derived`` values these are) and its snapshots
    share."""
    shared = derived.setdefault(SPARSE_BLOCKS, (-1, SharedBlocks()))[1]
    assert isinstance(shared, SharedBlocks)
    return shared


def complete(derived: dict[str, tuple[int, object]], vectors: StackedRows, size: int) -> None:
    """Build the postings of an owner index of ``size`` rows now (nothing when its vectors are
    not sparse), so that no retrieval scans in full meanwhile."""
    shared = shared_blocks(derived)
    shared.usable(vectors, size)  # starts the build of what is missing
    if shared.sparse:
        BUILDER.drain()
