"""An owner's memories as in-memory column arrays: exact vector search and vectorized features.

SQLite (or PostgreSQL) stays the system of record; this index is a cache refreshed from the
pack's content write sequence, so writes by other processes are seen by the next retrieval.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from prme.models.enums import (
    DecayProfile,
    EpistemicType,
    LifecycleState,
    NodeType,
    Scope,
    SourceType,
)

SCOPES = [s.value for s in Scope]
NODE_TYPES = [t.value for t in NodeType]
EPISTEMIC = [e.value for e in EpistemicType]
SOURCES = [s.value for s in SourceType]
LIFECYCLES = [s.value for s in LifecycleState]
DECAYS = [d.value for d in DecayProfile]
CONDITIONS = ["unknown", "true", "false", "expired"]
NO_TIME = np.iinfo(np.int64).min
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


_SCAN_LOCK = threading.Lock()


@cache
def _blas() -> ThreadpoolController:
    """Inspecting the loaded BLAS libraries is slow, so it happens once per process."""
    return ThreadpoolController()


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
    vectors: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    ids: list[str] = field(default_factory=list)
    content_sha256: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    entity_positions: dict[str, list[int]] = field(default_factory=dict)
    entity_names: list[list[str]] = field(default_factory=list)
    max_rowid: int = 0
    write_seq: int = -1
    delete_seq: int = -1

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = {name: np.zeros(0, dtype=dtype) for name, dtype in NUMERIC_COLUMNS}
            self.vectors = np.zeros((0, self.dimension), dtype=np.float32)

    def col(self, name: str) -> npt.NDArray[Any]:
        return self.columns[name][: self.size]

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
            capacity = max(needed, 2 * capacity, 1024)
            for name, array in self.columns.items():
                self.columns[name] = np.resize(array, capacity)
            grown = np.zeros((capacity, self.dimension), dtype=np.float32)
            grown[: self.size] = self.vectors[: self.size]
            self.vectors = grown
        start, end = self.size, needed
        for name, _ in NUMERIC_COLUMNS:
            self.columns[name][start:end] = [row[name] for row in rows]
        self.vectors[start:end] = vectors
        for offset, row in enumerate(rows):
            position = start + offset
            self.ids.append(row["id"])
            self.content_sha256.append(row["content_sha256"])
            self.evidence.append(row["evidence_refs"])
            names = entities.get(int(row["rowid"]), [])
            self.entity_names.append(names)
            for name in names:
                self.entity_positions.setdefault(name, []).append(position)
        self.size = end
        self.max_rowid = int(rows[-1]["rowid"])

    def positions_of(
        self, rowids: Sequence[int]
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
        if scopes is None:
            return np.ones(self.size, dtype=np.bool_)
        codes = np.array(sorted({SCOPES.index(s.value) for s in scopes}), dtype=np.int8)
        return np.isin(self.col("scope"), codes)

    def vector_search(
        self, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Exact cosine top-k among masked positions; ties broken by position (rowid order)."""
        return self.top_k(self.cosines(query), mask, k)

    def cosines(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The query's cosine with every position (empty when the dimension differs)."""
        if self.size == 0 or query.shape[-1] != self.dimension:
            return np.zeros(0, np.float32)
        # One BLAS thread: a matrix-vector product is memory-bound, and extra threads only add
        # synchronisation (measured 1.2 ms vs 7–18 ms at 10k rows on a busy 2-core machine).
        # The limit is process-wide, so scans on several threads take turns: otherwise one
        # thread's exit could restore the default while another still scans, and a threaded
        # BLAS kernel need not sum in the same order (the cosines must be the same bits).
        with _SCAN_LOCK, _blas().limit(limits=1, user_api="blas"):
            scores: npt.NDArray[np.float32] = self.vectors[: self.size] @ query.astype(np.float32)
        return scores

    def top_k(
        self, scores: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """The ``k`` best masked positions of :meth:`cosines` scores, best first, then by position."""
        if scores.size == 0 or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if mask.all():  # no scope filter: skip the gather
            allowed, sub = np.arange(scores.size), scores
        else:
            allowed = np.flatnonzero(mask)
            if allowed.size == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            sub = scores[allowed]
        top = np.argpartition(-sub, k - 1)[:k] if k < allowed.size else np.arange(allowed.size)
        order = np.lexsort((allowed[top], -sub[top]))
        chosen = top[order]
        return allowed[chosen].astype(np.int64), sub[chosen]

    def pinned_mask(self) -> npt.NDArray[np.bool_]:
        """``salience == 1`` or pinned, plus tasks that are tentative or stable."""
        task = self.col("node_type") == NODE_TYPES.index("task")
        open_state = np.isin(
            self.col("lifecycle"),
            [LIFECYCLES.index("tentative"), LIFECYCLES.index("stable")],
        )
        result: npt.NDArray[np.bool_] = (
            (self.col("salience") == 1.0) | self.col("pinned") | (task & open_state)
        )
        return result

    def graph_search(
        self, names: Sequence[str], mask: npt.NDArray[np.bool_], max_hops: int, limit: int
    ) -> dict[int, int]:
        """Entity-graph expansion: position → hop (1..max_hops), seeds matched by name.

        A name linked to more than ``limit`` memories (a hub, such as a speaker's name in a
        conversation) cannot discriminate and is skipped. Each hop ranks the memories it reaches
        by how many of the hop's names they mention (then by position), takes the best ones up
        to ``limit`` in all, and the next hop expands from their entities.
        """
        found: dict[int, int] = {}
        seen = set(names)
        frontier = sorted(seen)
        for hop in range(1, max_hops + 1):
            if not frontier or len(found) >= limit:
                break
            lists = []
            for name in frontier:
                positions = np.asarray(self.entity_positions.get(name, ()), dtype=np.int64)
                positions = positions[positions < self.size]
                positions = positions[mask[positions]]
                if 0 < len(positions) <= limit:
                    lists.append(positions)
            if not lists:
                break
            hits, counts = np.unique(np.concatenate(lists), return_counts=True)
            if found:
                fresh = ~np.isin(hits, np.fromiter(found, np.int64, len(found)))
                hits, counts = hits[fresh], counts[fresh]
            order = np.lexsort((hits, -counts))
            taken = hits[order][: limit - len(found)].tolist()
            for position in taken:
                found[position] = hop
            next_names = {n for p in taken for n in self.entity_names[p]} - seen
            seen |= next_names
            frontier = sorted(next_names)
        return found
