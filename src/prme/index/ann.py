"""Approximate vector search for large owners: deterministic HNSW segments (usearch).

An owner with fewer than :attr:`AnnPolicy.min_rows` memories is scanned exactly (every
cosine). From that size on, the owner's vectors (in position order, i.e. rowid order) are cut
into chunks of ``chunk_rows`` rows; whole chunks are grouped into **segments**, each an HNSW
graph over its rows, and the rows after the last whole chunk (the *tail*, fewer than
``chunk_rows``) are scanned exactly. Segment boundaries depend only on the owner's row count
(:func:`segment_ranges`: groups of ``max_segment_chunks`` chunks, then the binary
decomposition of the remaining chunks), and each segment is built from scratch, in position
order, on one thread, with fixed parameters. Its graph is therefore a function of its rows
alone (never of when it was built, or of what was built before), so the same pack gives the
same results in every process and every run; a segment built once is reused while its rows
stay the same (persisted under the pack's index directory, keyed by its memory ids and the
policy, and memory-mapped when reopened).

The graphs searched lag ``lag_chunks`` chunks behind the owner (:func:`searched_ranges`): an
owner of ``n`` rows searches the segments of ``n - lag_chunks * chunk_rows`` rows and scans
the rest exactly. When a chunk fills, the layout that takes over ``lag_chunks`` chunks later
is known, and its new graphs (a merge of smaller ones can take minutes) are built in the
background meanwhile (:func:`kept_ranges`), not inside the retrieval that first needs them.
Which graphs are searched is still a function of the row count alone; only an owner that
grows faster than a graph is built waits for it.

The graph stores vectors quantized to int8: integer dot products are exact on every CPU, so
the graph does not depend on the SIMD kernels of the machine that built it. Every candidate a
graph returns is rescored with the float32 cosine the exact scan computes, and the best ``k``
are ordered exactly as the exact scan orders them (cosine descending, then position). What the
policy is, with every parameter and the library's version, is part of the engine's feature
identity (:meth:`AnnPolicy.identity`): a ranking profile evaluated under one vector index is
``inapplicable`` under another.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index import strings
from prme.index.stacked_rows import StackedRows
from prme.index.workers import Workers, usable_cpus

METHOD = "usearch-hnsw"
METRIC = "cos"

Dot = Callable[[npt.NDArray[np.float32], npt.NDArray[np.float32]], npt.NDArray[np.float32]]
# Vectors by position: an array, or an index's blocks of rows (sliced and gathered alike).
Rows = npt.NDArray[np.float32] | StackedRows


@cache
def library_version() -> str:
    return version("usearch")


# An owner whose vectors are sparse is scanned exactly whatever its size, through the vectors'
# postings (prme.index.sparse_vectors): at a million rows of the hashing embedder that took 7 ms
# where the graphs took 19 ms and found 0.87 of the exact top 10. Sparse: nonzero components in
# under SPARSE_DENSITY of the dimensions of the first SPARSE_SAMPLE_ROWS vectors.
SPARSE_SAMPLE_ROWS = 4096
SPARSE_DENSITY = 0.125


@dataclass(frozen=True)
class AnnPolicy:
    """When and how the vector channel searches approximately (all of it is identity)."""

    # Exact scans below this many rows. At 100k rows of the benchmark workload the segments'
    # searches (2 graphs, 500 neighbours each) cost what one exact scan costs (retrieve 16 ms
    # CPU either way), so the graphs start past that, where a scan keeps growing.
    min_rows: int = 131072
    chunk_rows: int = 32768  # segments hold whole chunks; at most this many rows in the tail
    # Sparse embeddings give graphs of low navigability: on the hashing embedder's, 48 links
    # and a wide build gave recall@10 0.99 at 100k rows where 24 gave less, but still 0.868
    # at 1M (those owners are now scanned exactly: SPARSE_DENSITY).
    connectivity: int = 48
    expansion_add: int = 256
    expansion_search: int = 512
    quantization: str = "i8"
    max_segment_chunks: int = 8  # the largest segment holds this many chunks
    # The graphs searched are those of this many chunks fewer rows: the next ones are built
    # in the background while the newest chunks fill (and those rows are scanned exactly).
    lag_chunks: int = 1
    # The other channels' candidates (lexical, graph) are rescored with the exact cosine and
    # compete for the vector channel's k places (:meth:`OwnerIndex.widened`).
    rescore_channels: bool = True

    def graph_identity(self) -> dict[str, Any]:
        """What a segment's graph depends on (a search-time setting is not part of it)."""
        return {
            "method": METHOD,
            "library": f"usearch {library_version()}",
            "metric": METRIC,
            "quantization": self.quantization,
            "connectivity": self.connectivity,
            "expansion_add": self.expansion_add,
        }

    def identity(self) -> dict[str, Any]:
        return {
            **self.graph_identity(),
            "exact_below_rows": self.min_rows,
            "chunk_rows": self.chunk_rows,
            "max_segment_chunks": self.max_segment_chunks,
            "graphs_lag_chunks": self.lag_chunks,
            "expansion_search": self.expansion_search,
            "rescores_other_channels": self.rescore_channels,
            "exact_when_sparse": {"sample_rows": SPARSE_SAMPLE_ROWS, "density_below": SPARSE_DENSITY},
        }


def segment_ranges(size: int, policy: AnnPolicy) -> list[tuple[int, int]]:
    """The ``[start, end)`` position ranges of the graphs for ``size`` rows (pure).

    ``size // chunk_rows`` whole chunks: groups of ``max_segment_chunks``, then the remaining
    chunks as a binary decomposition, largest first. Rows past the last whole chunk are the
    exactly scanned tail. Below ``min_rows`` there is no segment at all.
    """
    if size < policy.min_rows:
        return []
    chunk = policy.chunk_rows
    chunks = size // chunk
    ranges: list[tuple[int, int]] = []
    start = 0
    while chunks >= policy.max_segment_chunks:
        ranges.append((start, start + policy.max_segment_chunks * chunk))
        start += policy.max_segment_chunks * chunk
        chunks -= policy.max_segment_chunks
    bit = 1 << max(chunks.bit_length() - 1, 0)
    while chunks:
        if chunks & bit:
            ranges.append((start, start + bit * chunk))
            start += bit * chunk
            chunks -= bit
        bit >>= 1
    return ranges


def searched_ranges(size: int, policy: AnnPolicy) -> list[tuple[int, int]]:
    """The graphs the vector channel searches at ``size`` rows: the :func:`segment_ranges`
    of ``lag_chunks`` chunks fewer rows (pure). Rows after them are scanned exactly."""
    if size < policy.min_rows:
        return []
    return segment_ranges(size - policy.lag_chunks * policy.chunk_rows, policy)


def kept_ranges(size: int, policy: AnnPolicy) -> list[tuple[int, int]]:
    """The graphs an owner of ``size`` rows keeps (pure): those searched now, then those
    searched once it grows by up to ``lag_chunks`` chunks, whose rows all exist already (so
    they are built ahead). Largest first within each layout, without repeats."""
    kept: dict[tuple[int, int], None] = {}
    for ahead in range(policy.lag_chunks + 1):
        kept.update(dict.fromkeys(searched_ranges(size + ahead * policy.chunk_rows, policy)))
    return list(kept)


def segment_key(policy: AnnPolicy, dimension: int, ids: Sequence[str], start: int, end: int) -> str:
    """What the graph over positions ``[start, end)`` is a function of: the policy's graph
    settings, the dimension and those positions' memory ids in order (a memory's vector never
    changes)."""
    digest = hashlib.sha256()
    digest.update(repr(sorted(policy.graph_identity().items())).encode())
    digest.update(f"\n{dimension}\n".encode())
    digest.update(strings.joined(ids, start, end))
    return digest.hexdigest()[:40]


class Segment:
    """One HNSW graph over positions ``[start, end)``; keys are positions."""

    def __init__(self, start: int, end: int, graph: Any) -> None:
        self.start, self.end, self._graph = start, end, graph
        # usearch keeps the search expansion on the index and one search context per thread
        # slot: a graph answers one search at a time; different graphs search in parallel.
        self._lock = threading.Lock()

    def search(
        self, query: npt.NDArray[np.float32], count: int, expansion: int
    ) -> npt.NDArray[np.int64]:
        """Up to ``count`` positions near ``query`` (approximate; order irrelevant)."""
        count = min(count, self.end - self.start)
        if count <= 0:
            return np.zeros(0, np.int64)
        with self._lock:
            self._graph.expansion_search = max(expansion, count)
            found = self._graph.search(query, count, threads=1)
        keys: npt.NDArray[np.int64] = np.asarray(found.keys, dtype=np.int64)
        return keys


class SearchPool:
    """Worker threads that search an owner's segments side by side (usearch releases the
    GIL), one per CPU this process may use. Each segment's result depends on that segment
    alone, so the union is the same whichever thread searched what."""

    def __init__(self) -> None:
        self._workers = Workers(lambda: min(usable_cpus(), MAX_SEARCH_THREADS), "prme-ann")

    def search(
        self,
        segments: Sequence[Segment],
        query: npt.NDArray[np.float32],
        count: int,
        expansion: int,
    ) -> list[npt.NDArray[np.int64]]:
        """Each segment's :meth:`Segment.search`: the first here, the rest on the workers (or
        here too, when the interpreter is shutting down)."""
        started = [self._workers.submit(s.search, query, count, expansion) for s in segments[1:]]
        found = [s.search(query, count, expansion) for s in segments[:1]]
        for segment, future in zip(segments[1:], started, strict=True):
            found.append(
                segment.search(query, count, expansion) if future is None else future.result()
            )
        return found


MAX_SEARCH_THREADS = 4
SEARCH_POOL = SearchPool()


def _new_graph(policy: AnnPolicy, dimension: int) -> Any:
    from usearch.index import Index  # imported on first use: it costs 0.4 s

    return Index(
        ndim=dimension,
        metric=METRIC,
        dtype=policy.quantization,
        connectivity=policy.connectivity,
        expansion_add=policy.expansion_add,
        expansion_search=policy.expansion_search,
    )


# Rows inserted per call while a graph is built: a build can stop between calls (see
# build_segment). The graph is the same bytes for any batch size (tested).
BUILD_BATCH_ROWS = 4096


class BuildStopped(RuntimeError):
    """A graph build was stopped before it was complete (its ``stop`` said so)."""


def build_segment(
    vectors: Rows,
    start: int,
    end: int,
    policy: AnnPolicy,
    stop: Callable[[], bool] = lambda: False,
) -> Segment:
    """The graph over ``vectors[start:end]``, inserted in position order on one thread, a
    batch of rows at a time; :class:`BuildStopped` once ``stop()`` is true between batches."""
    graph = _new_graph(policy, int(vectors.shape[1]))
    for first in range(start, end, BUILD_BATCH_ROWS):
        if stop():
            raise BuildStopped(f"the graph over positions {start}-{end} was not completed")
        last = min(first + BUILD_BATCH_ROWS, end)
        keys = np.arange(first, last, dtype=np.uint64)
        graph.add(keys, np.ascontiguousarray(vectors[first:last], dtype=np.float32), threads=1)
    return Segment(start, end, graph)


def build_segments(
    vectors: Rows,
    ranges: Sequence[tuple[int, int]],
    policy: AnnPolicy,
    keep: Callable[[Segment], Segment] = lambda segment: segment,
) -> list[Segment]:
    """:func:`build_segment` for each range, several at once, each passed to ``keep`` (which
    saves it) as soon as it is built. Each graph is still built on one thread in position
    order (the same bytes as alone), so the builds run side by side on threads of their own,
    one per CPU this process may use (usearch releases the GIL). Not on the search pool: a
    build takes minutes, and other owners' searches must not queue behind it. The largest
    range is started first (``ranges`` from :func:`segment_ranges` are)."""

    def build(bounds: tuple[int, int]) -> Segment:
        return keep(build_segment(vectors, bounds[0], bounds[1], policy))

    workers = min(usable_cpus(), len(ranges))
    if workers <= 1:
        return [build(bounds) for bounds in ranges]
    with ThreadPoolExecutor(workers, thread_name_prefix="prme-ann-build") as builders:
        return list(builders.map(build, ranges))


def load_segment(
    path: Path, start: int, end: int, policy: AnnPolicy, dimension: int
) -> Segment | None:
    """A saved segment, memory-mapped (None when missing or unreadable: it is rebuilt)."""
    if not path.is_file():
        return None
    graph = _new_graph(policy, dimension)
    try:
        graph.view(str(path))
    except (RuntimeError, ValueError, OSError):
        return None
    if len(graph) != end - start:
        return None
    return Segment(start, end, graph)


def save_segment(segment: Segment, path: Path) -> None:
    """Write the segment atomically (a partial file never has the final name). The directory
    is created, its parent not: a build ahead that ends after its store closed and removed its
    private directory writes nothing (an OSError)."""
    path.parent.mkdir(exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        segment._graph.save(str(partial))
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def oversampled_count(k: int, size: int, allowed: int) -> int:
    """How many neighbours to ask each graph for so that about ``k`` survive a mask that
    keeps ``allowed`` of ``size`` rows (pure)."""
    if allowed <= 0:
        return 0
    return int(-(-k * size // allowed))


def rescore_top_k(
    positions: npt.NDArray[np.int64],
    query: npt.NDArray[np.float32],
    vectors: Rows,
    k: int,
    dot: Dot,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The ``k`` best of ``positions`` by float32 cosine, then position (``positions`` unique
    and sorted)."""
    if positions.size == 0 or k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    return best_by_cosine(positions, dot(vectors[positions], query), k)


def best_by_cosine(
    positions: npt.NDArray[np.int64], cosines: npt.NDArray[np.float32], k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The ``k`` best of ``positions`` (unique) by their ``cosines`` descending, then by
    position: the order every rescored vector search returns."""
    order = np.lexsort((positions, -cosines))[:k]
    return positions[order].astype(np.int64), cosines[order]
