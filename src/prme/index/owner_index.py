"""An owner's memories as in-memory column arrays: vector search and vectorized features.

SQLite (or PostgreSQL) stays the system of record; this index is a cache refreshed from the
pack's content write sequence, so writes by other processes are seen by the next retrieval.

The vector channel scans every cosine exactly, or, for an owner of at least
``AnnPolicy.min_rows`` memories when the engine's policy says so, searches deterministic HNSW
segments and rescores what they return exactly (:mod:`prme.index.ann`). The entity graph
is held as adjacency arrays (:mod:`prme.index.entity_graph`), so a query's expansion
slices arrays instead of converting Python lists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index.ann import (
    SEARCH_POOL,
    AnnPolicy,
    Segment,
    best_by_cosine,
    kept_ranges,
    load_segment,
    oversampled_count,
    rescore_top_k,
    save_segment,
    searched_ranges,
    segment_key,
)
from prme.index.arrays import best_positions, distinct, exact_dot
from prme.index.entity_graph import EntityGraph, expand
from prme.index.segment_cache import GraphSource, SegmentCache
from prme.index.sparse_vectors import SparseScores, shared_blocks, sparse_scores
from prme.index.stacked_rows import StackedRows
from prme.index.strings import StringColumn
from prme.models.enums import (
    DecayProfile,
    EpistemicType,
    LifecycleState,
    NodeType,
    Scope,
    SourceType,
)
from prme.models.memory import MemoryNode

SCOPES = [s.value for s in Scope]
NODE_TYPES = [t.value for t in NodeType]
EPISTEMIC = [e.value for e in EpistemicType]
SOURCES = [s.value for s in SourceType]
LIFECYCLES = [s.value for s in LifecycleState]
DECAYS = [d.value for d in DecayProfile]
CONDITIONS = ["unknown", "true", "false", "expired"]
NO_TIME = np.iinfo(np.int64).min
NODE_CACHE = 4096
SEGMENT_LOG = "segments.log"  # in a saved index's directory: the segment files built since
_SEGMENT_LOG_LOCK = threading.Lock()
NO_TTL = -1

# (column name, numpy dtype); codes index the lists above.
NUMERIC_COLUMNS: tuple[tuple[str, type[np.generic]], ...] = (
    ("rowid", np.int64),
    ("scope", np.int8),
    ("node_type", np.int8),
    ("epistemic", np.int8),
    ("source", np.int8),
    ("lifecycle", np.int8),
    ("decay", np.int8),
    ("condition", np.int8),
    ("created_at", np.int64),
    ("updated_at", np.int64),
    ("event_time", np.int64),
    ("valid_from", np.int64),
    ("valid_to", np.int64),
    ("last_reinforced_at", np.int64),
    ("confidence", np.float64),
    ("salience", np.float64),
    ("confidence_base", np.float64),
    ("salience_base", np.float64),
    ("reinforcement_boost", np.float64),
    ("pinned", np.bool_),
    ("ttl_days", np.int64),  # NO_TTL when the memory never expires
    ("doc_len", np.int64),  # the memory's token count in the lexical index (BM25's D)
)


# Links appended since the graph's arrays were last rebuilt stay in a small dict of lists;
# past this many (or a quarter of the arrays' links) they are merged into new arrays.
FRESH_LINKS = 65536


def code(values: list[str], value: str | None, default: int = 0) -> int:
    if value is None:
        return default
    try:
        return values.index(value)
    except ValueError:
        return default


@dataclass
class OwnerIndex:
    """Column arrays aligned by position; positions grow by append in increasing rowid order."""

    dimension: int
    size: int = 0
    columns: dict[str, npt.NDArray[Any]] = field(default_factory=dict)
    vectors: StackedRows = field(default_factory=lambda: StackedRows.of(np.zeros((0, 0), np.float32)))
    # (lists, or loaded from a saved index: memory-mapped and decoded when read)
    ids: list[str] | StringColumn = field(default_factory=list)
    content_sha256: list[str] | StringColumn = field(default_factory=list)
    evidence: list[str] | StringColumn = field(default_factory=list)
    # the entity graph: arrays for positions below graph.size, plus the links appended since
    # (name -> positions, and each later position's names)
    graph: EntityGraph = field(default_factory=EntityGraph.empty)
    entity_positions: dict[str, list[int]] = field(default_factory=dict)
    fresh_names: list[list[str]] = field(default_factory=list)
    fresh_links: int = 0
    max_rowid: int = 0
    write_seq: int = -1
    delete_seq: int = -1
    saved_size: int = 0  # rows of this index saved beside the pack (index/index_file.py)
    # approximate vector search: the policy (None: always exact), where segments are saved,
    # and the segments built so far (shared by every snapshot: a segment never changes)
    ann: AnnPolicy | None = None
    ann_dir: Path | None = None
    graphs: SegmentCache = field(default_factory=SegmentCache, compare=False, repr=False)
    # memories already fetched for a retrieval, by position (shared by every snapshot: the
    # rows an index holds never change, a delete or supersede makes a new index), at most
    # NODE_CACHE of them
    nodes: dict[int, MemoryNode] = field(default_factory=dict, compare=False, repr=False)
    # where the store saved this index (index/index_file.py): each segment file built for
    # it is logged there, so that a later save can delete the files it supersedes
    index_dir: Path | None = None
    # values derived from the columns, per size (shared by every snapshot: positions below a
    # size never change, so a value computed over them stays right for that size)
    derived_values: dict[str, tuple[int, Any]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = {name: np.zeros(0, dtype=dtype) for name, dtype in NUMERIC_COLUMNS}
            self.vectors = StackedRows.of(np.zeros((0, self.dimension), dtype=np.float32))

    def col(self, name: str) -> npt.NDArray[Any]:
        return self.columns[name][: self.size]

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` rows in all, so appending up to there never copies the arrays."""
        if rows <= len(self.columns["rowid"]):
            return
        for name, array in self.columns.items():
            self.columns[name] = np.resize(array, rows)
        self.vectors = self.vectors.reserved(self.size, rows)

    def append(
        self,
        rows: Sequence[dict[str, Any]],
        vectors: npt.NDArray[np.float32],
        entities: dict[int, list[str]],
    ) -> None:
        """Append rows (already sorted by rowid, all greater than ``max_rowid``)."""
        if not rows:
            return
        needed = self.size + len(rows)
        capacity = len(self.columns["rowid"])
        if needed > capacity:
            self.reserve(max(needed, 2 * capacity))  # exact on the first fill: small owners
        start, end = self.size, needed
        for name, _ in NUMERIC_COLUMNS:
            self.columns[name][start:end] = [row[name] for row in rows]
        self.vectors.write(start, vectors)
        for offset, row in enumerate(rows):
            position = start + offset
            self.ids.append(row["id"])
            self.content_sha256.append(row["content_sha256"])
            self.evidence.append(row["evidence_refs"])
            names = entities.get(int(row["rowid"]), [])
            self.fresh_names.append(names)
            for name in names:
                self.entity_positions.setdefault(name, []).append(position)
            self.fresh_links += len(names)
        self.size = end
        self.max_rowid = int(rows[-1]["rowid"])
        if self.fresh_links > max(FRESH_LINKS, len(self.graph.positions) // 4):
            self.compact_graph()

    def compact_graph(self) -> None:
        """Merge the appended links into new arrays (new objects: snapshots keep theirs)."""
        self.graph = self.graph.merged(self.fresh_names)
        self.entity_positions = {}
        self.fresh_names = []
        self.fresh_links = 0

    def names_at(self, position: int) -> list[str]:
        """The entity names linked to ``position``."""
        if position < self.graph.size:
            return self.graph.names_of(position)
        return self.fresh_names[position - self.graph.size]

    def entity_links(self, name: str) -> npt.NDArray[np.int64]:
        """The positions (ascending, below ``size``) linked to ``name``."""
        linked = self.graph.links(name)
        fresh = self.entity_positions.get(name)
        if fresh:
            linked = np.concatenate([linked, np.asarray(fresh, dtype=np.int64)])
        return linked[: int(np.searchsorted(linked, self.size))]

    def derived(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` over positions ``[0, size)``, computed once per size."""
        cached = self.derived_values.get(name)
        if cached is not None and cached[0] == self.size:
            return cached[1]
        value = compute()
        self.derived_values[name] = (self.size, value)
        return value

    def memories(
        self, positions: Sequence[int], fetch: Callable[[list[int]], Mapping[int, MemoryNode]]
    ) -> list[MemoryNode]:
        """The memories at ``positions``: those fetched before, the others by
        ``fetch(rowids)`` (a mapping rowid → memory), kept for later retrievals."""
        cached = self.nodes
        have = {p: node for p in positions if (node := cached.get(p)) is not None}
        missing = [p for p in dict.fromkeys(positions) if p not in have]
        if missing:
            rowids = self.col("rowid")[missing].tolist()
            found = fetch(rowids)
            if len(cached) + len(missing) > NODE_CACHE:
                cached.clear()
            for position, rowid in zip(missing, rowids, strict=True):
                have[position] = cached[position] = found[rowid]
        return [have[p] for p in positions]

    def doc_len_total(self) -> int:
        """The owner's token total in the lexical index (BM25's mean length times N)."""
        total: int = self.derived("doc_len_total", lambda: int(self.col("doc_len").sum()))
        return total

    def positions_of(
        self, rowids: Sequence[int] | npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Positions of ``rowids`` (sorted column, binary search) and which of them were found."""
        wanted = np.asarray(rowids, dtype=np.int64)
        column = self.col("rowid")
        found = np.searchsorted(column, wanted)
        inside = found < self.size
        ok = np.zeros(len(wanted), dtype=np.bool_)
        ok[inside] = column[found[inside]] == wanted[inside]
        return found[ok].astype(np.int64), ok

    def snapshot(self) -> OwnerIndex:
        """A view with a fixed size: later appends never change what it shows."""
        return replace(self)

    def scope_mask(self, scopes: Sequence[Scope] | None) -> npt.NDArray[np.bool_]:
        """Which positions are in ``scopes`` (None: every one): read-only, one per scope set
        and size (a query does not pay for the owner's size to find its scopes again)."""
        codes = None if scopes is None else sorted({SCOPES.index(s.value) for s in scopes})
        mask: npt.NDArray[np.bool_] = self.derived(
            f"scope_mask {codes}", lambda: self._scope_mask(codes)
        )
        return mask

    def _scope_mask(self, codes: list[int] | None) -> npt.NDArray[np.bool_]:
        if codes is None:
            mask = np.ones(self.size, dtype=np.bool_)
        else:
            mask = np.isin(self.col("scope"), np.array(codes, dtype=np.int8))
        mask.flags.writeable = False
        return mask

    def vector_search(
        self, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Cosine top-k among masked positions; ties broken by position (rowid order). Exact,
        or approximate past the policy's size (:meth:`scores`)."""
        return self.top_k(self.scores(query), mask, k)

    def uses_ann(self) -> bool:
        """Whether the vector channel searches approximately at this size."""
        return self.ann is not None and self.size >= self.ann.min_rows and not self.sparse()

    def sparse(self) -> bool:
        """Whether the vectors are sparse (scanned through their postings, never by graphs)."""
        return shared_blocks(self.derived_values).is_sparse(self.vectors, self.size)

    def kept_graphs(self, size: int) -> list[tuple[int, int]]:
        """The graphs this index keeps at ``size`` rows (:func:`~prme.index.ann.kept_ranges`;
        none when it scans exactly)."""
        return [] if self.ann is None or self.sparse() else kept_ranges(size, self.ann)

    def scores(self, query: npt.NDArray[np.float32]) -> VectorScores:
        """The query's similarity to this index, for :meth:`top_k`: an approximate searcher
        past the policy's size, else the exact scan: through the vectors' postings when they
        are sparse, or every cosine (:meth:`cosines`)."""
        if query.shape[-1] != self.dimension:
            return self.cosines(query)
        if self.uses_ann():
            return QueryScores(self, query.astype(np.float32))
        exact = sparse_scores(
            self.derived_values, self.vectors, self.size, query.astype(np.float32)
        )
        return self.cosines(query) if exact is None else exact

    def cosines(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The query's cosine with every position (empty when the dimension differs)."""
        if self.size == 0 or query.shape[-1] != self.dimension:
            return np.zeros(0, np.float32)
        return self.vectors.cosines(0, self.size, query)

    def segments_for(self, ranges: Sequence[tuple[int, int]]) -> list[Segment]:
        """The graphs over ``ranges``: each built once (or loaded from the pack's index
        directory), then shared; the missing ones are built side by side."""
        assert self.ann is not None
        return self.graphs.get(ranges, self._graph_source(self.ann))

    def complete_segments(self) -> list[tuple[int, int]]:
        """Build (or load) every graph the policy keeps at this size, those searched later
        included (:func:`~prme.index.ann.kept_ranges`); their ranges (none when the vector
        channel scans exactly)."""
        ranges = self.kept_graphs(self.size)
        if ranges:
            self.segments_for(ranges)
        return ranges

    @property
    def segments(self) -> dict[tuple[int, int], Segment]:  # those built or loaded so far
        return self.graphs.built

    def _graph_source(self, policy: AnnPolicy) -> GraphSource:
        return GraphSource(self.vectors, policy, self._load_segment, self._keep)

    def _segment_path(self, start: int, end: int) -> Path | None:
        if self.ann is None or self.ann_dir is None:
            return None  # a read-only pack keeps its graphs in memory only
        return self.ann_dir / f"{segment_key(self.ann, self.dimension, self.ids, start, end)}.usearch"

    def _load_segment(self, bounds: tuple[int, int]) -> Segment | None:
        path = self._segment_path(*bounds)
        if path is None or self.ann is None:
            return None
        return load_segment(path, *bounds, self.ann, self.dimension)

    def _keep(self, built: Segment) -> Segment:
        """Save a graph just built; searched through the saved file from then on (its pages
        are the page cache's, so the built graph's memory is returned)."""
        path = self._segment_path(built.start, built.end)
        if path is None or self.ann is None:
            return built
        with suppress(OSError):
            save_segment(built, path)
            logged = self.index_dir  # the saved index lists it: a later save may delete it
            if logged is not None and logged.is_dir():
                with _SEGMENT_LOG_LOCK, (logged / SEGMENT_LOG).open("a", encoding="utf-8") as log:
                    log.write(f"{path.stem}\n")
            return load_segment(path, built.start, built.end, self.ann, self.dimension) or built
        return built

    def ann_top_k(
        self, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Approximate top-k among masked positions: the searched graphs' neighbours and the
        rows after them, rescored exactly (the graphs searched later are built ahead). A mask
        keeping under ``min_rows`` rows (or a quarter of them) is scanned exactly instead."""
        assert self.ann is not None
        size = self.size
        allowed = size if mask.all() else int(np.count_nonzero(mask))
        if allowed == 0 or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        vectors = self.vectors
        if allowed < self.ann.min_rows or 4 * allowed < size:
            return rescore_top_k(np.flatnonzero(mask), query, vectors, k, exact_dot)
        ranges = searched_ranges(size, self.ann)
        count = oversampled_count(k, size, allowed)
        found = SEARCH_POOL.search(self.segments_for(ranges), query, count, self.ann.expansion_search)
        self.graphs.prepare(kept_ranges(size, self.ann), self._graph_source(self.ann))
        pool = distinct(np.concatenate(found)) if found else np.zeros(0, np.int64)
        pool = pool[mask[pool]]
        # the rows after the graphs, scanned where they lie (not gathered into a copy)
        tail = ranges[-1][1] if ranges else 0
        tail_cosines = vectors.cosines(tail, size, query)
        tail_pos = np.arange(tail, size, dtype=np.int64)[mask[tail:size]]
        cosines = np.concatenate((exact_dot(vectors[pool], query), tail_cosines[tail_pos - tail]))
        chosen, chosen_cosines = best_by_cosine(np.concatenate((pool, tail_pos)), cosines, k)
        if chosen.size < min(k, allowed):  # the graphs found too few: scan the mask exactly
            return rescore_top_k(np.flatnonzero(mask), query, vectors, k, exact_dot)
        return chosen, chosen_cosines

    def widened(
        self,
        scores: VectorScores,
        found: tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]],
        extra: Sequence[npt.NDArray[np.int64]],
        mask: npt.NDArray[np.bool_],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """An approximate search's hits ``found`` (:meth:`top_k`) with the masked positions of
        ``extra`` (the other channels' candidates) rescored among them: the best
        ``len(found[0])`` of both by exact cosine, then position. The approximate search can
        miss a row another channel found; this way the vector channel still ranks it. Exact
        scans' hits, and a policy that does not rescore, are returned as they are."""
        positions = found[0]
        if not isinstance(scores, QueryScores) or positions.size == 0:
            return found
        if self.ann is None or not self.ann.rescore_channels or not extra:
            return found
        more = np.concatenate([np.asarray(e, np.int64) for e in extra])
        more = more[(more >= 0) & (more < self.size)]
        pool = np.union1d(positions, more[mask[more]])
        if pool.size == positions.size:
            return found
        return rescore_top_k(pool, scores.query, self.vectors, positions.size, exact_dot)

    def top_k(
        self, scores: VectorScores, mask: npt.NDArray[np.bool_], k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` best masked positions of :meth:`scores`, best first, then by position."""
        if isinstance(scores, QueryScores):
            return scores.index.ann_top_k(scores.query, mask, k)
        if isinstance(scores, SparseScores):  # the same as the full scan's, or that scan
            found = scores.top_k(mask, k)
            if found is not None:
                return found
            scores = self.cosines(scores.query)
        if scores.size == 0 or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if mask.all():  # no scope filter: skip the gather
            allowed, sub = np.arange(scores.size), scores
        else:
            allowed = np.flatnonzero(mask)
            if allowed.size == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            sub = scores[allowed]
        top = best_positions(sub, k)
        order = np.lexsort((allowed[top], -sub[top]))
        chosen = top[order]
        return allowed[chosen].astype(np.int64), sub[chosen]

    def pinned_mask(self) -> npt.NDArray[np.bool_]:
        """``salience == 1`` or pinned, plus tasks that are tentative or stable (read-only)."""
        mask: npt.NDArray[np.bool_] = self.derived("pinned_mask", self._pinned_mask)
        return mask

    def _pinned_mask(self) -> npt.NDArray[np.bool_]:
        task = self.col("node_type") == NODE_TYPES.index("task")
        open_state = np.isin(
            self.col("lifecycle"),
            [LIFECYCLES.index("tentative"), LIFECYCLES.index("stable")],
        )
        result: npt.NDArray[np.bool_] = (
            (self.col("salience") == 1.0) | self.col("pinned") | (task & open_state)
        )
        result.flags.writeable = False
        return result

    def graph_search(
        self, names: Sequence[str], mask: npt.NDArray[np.bool_], max_hops: int, limit: int
    ) -> dict[int, int]:
        """Entity-graph expansion: position → hop (1..max_hops), seeds matched by name
        (:func:`~prme.index.entity_graph.expand`)."""
        everything = bool(mask[: self.size].all())
        return expand(
            self.entity_links, self.names_at, names, None if everything else mask, max_hops, limit
        )


@dataclass(frozen=True)
class QueryScores:
    """A query against an index searched approximately (see :meth:`OwnerIndex.ann_top_k`)."""

    index: OwnerIndex
    query: npt.NDArray[np.float32]

    @property
    def size(self) -> int:
        return self.index.size


#: What :meth:`OwnerIndex.scores` returns: every exact cosine, a sparse index's postings, or
#: an approximate searcher.
VectorScores = npt.NDArray[np.float32] | SparseScores | QueryScores
