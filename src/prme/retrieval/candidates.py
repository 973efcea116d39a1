"""Candidate generation: the channels' hits merged into one pool with membership flags.

Pure over an owner index snapshot: the caller does the I/O (the lexical search and the vector
scan) and passes their results in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index.arrays import distinct
from prme.index.owner_index import OwnerIndex, VectorScores
from prme.retrieval.features import (
    GRAPH_PROXIMITY,
    BoolArray,
    FilterSettings,
    Positions,
    keep_mask,
    minmax,
)
from prme.retrieval.scan import Scan
from prme.retrieval.scoring import FloatArray

PINNED_LIMIT = 500
HINT_LIMIT = 5
CHANNELS = ("GRAPH", "LEXICAL", "PINNED", "VECTOR")  # the receipt's path names, in this order


@dataclass(frozen=True, slots=True)
class ChannelHits:
    """What each channel returned, as positions in the owner index."""

    cosines: VectorScores  # the query's scores (exact cosines, or the approximate searcher)
    vector_pos: Positions
    vector_cos: npt.NDArray[np.float32]
    lexical_pos: Positions
    lexical_raw: FloatArray  # BM25 scores of lexical_pos
    graph: dict[int, int]  # position → hops from a query entity
    pinned_pos: Positions

    @property
    def graph_pos(self) -> Positions:
        return np.fromiter(self.graph, np.int64, len(self.graph))

    def generated(self, merged: int) -> dict[str, int]:
        """The receipt's ``candidates_generated``."""
        return {
            "vector": len(self.vector_pos),
            "lexical": len(self.lexical_pos),
            "graph": len(self.graph),
            "pinned": len(self.pinned_pos),
            "merged": merged,
        }


def channel_hits(
    ix: OwnerIndex,
    in_scope: BoolArray,
    vector: Scan | Callable[[], Scan],
    lexical: Sequence[tuple[int, float]],
    entity_names: Sequence[str],
    graph_max_hops: int,
    graph_max_candidates: int,
) -> ChannelHits:
    """The four channels' hits: the vector scan, the lexical search's (rowid, score) pairs,
    the graph walk from the query's entity names and the pinned memories, all in scope.

    ``vector`` may be a function giving the scan: it is called last, so that a scan running
    on the scan thread overlaps the other channels' work here. An approximate search's hits
    are widened by the lexical and graph candidates (:meth:`OwnerIndex.widened`)."""
    lex_pos, lex_found = ix.positions_of([r for r, _ in lexical])
    lex_raw = np.array([s for _, s in lexical], dtype=np.float64)[lex_found]
    graph = ix.graph_search(entity_names, in_scope, graph_max_hops, graph_max_candidates)
    pinned = _first_in_scope(_pinned_positions(ix), in_scope, PINNED_LIMIT)
    cosines, vec_pos, vec_cos = vector() if callable(vector) else vector
    graph_pos = np.fromiter(graph, np.int64, len(graph))
    vec_pos, vec_cos = ix.widened(cosines, (vec_pos, vec_cos), [lex_pos, graph_pos], in_scope)
    return ChannelHits(cosines, vec_pos, vec_cos, lex_pos, lex_raw, graph, pinned)


def _pinned_positions(ix: OwnerIndex) -> Positions:
    """The owner's pinned positions, ascending (computed once per index size)."""
    found: Positions = ix.derived("pinned_positions", lambda: np.flatnonzero(ix.pinned_mask()))
    return found


def _first_in_scope(positions: Positions, in_scope: BoolArray, limit: int) -> Positions:
    """The first ``limit`` of ``positions`` (ascending) that are in scope: what
    ``np.flatnonzero(mask & in_scope)[:limit]`` gives for the mask of ``positions``, read a
    block at a time, so a query reads a few blocks of them, not the owner's every row."""
    step = max(limit, 1024)
    found: list[Positions] = []
    have = 0
    for start in range(0, len(positions), step):
        block = positions[start : start + step]
        kept = block[in_scope[block]]
        found.append(kept)
        have += len(kept)
        if have >= limit:
            break
    if not found:
        return np.zeros(0, np.int64)
    return np.concatenate(found)[:limit].astype(np.int64)


def _lookup(
    keys: npt.NDArray[np.int64], values: npt.NDArray[Any], wanted: npt.NDArray[np.int64]
) -> FloatArray:
    """``values`` at the positions of ``wanted`` within ``keys`` (every wanted key is present)."""
    order = np.argsort(keys, kind="stable")
    found = np.searchsorted(keys[order], wanted)
    result: FloatArray = values[order][found].astype(np.float64)
    return result


def _members(size: int, members: Positions, wanted: Positions) -> BoolArray:
    """Which of ``wanted`` (ascending, distinct positions below ``size``) are among
    ``members``: through a table of the owner's size while that is cheap, else by binary
    search, so that a large owner's cost follows the candidates, not its size."""
    if size <= 64 * (len(members) + len(wanted)):
        table = np.zeros(size, dtype=np.bool_)
        table[members] = True
        found: BoolArray = table[wanted]
        return found
    result = np.zeros(len(wanted), dtype=np.bool_)
    if len(wanted) == 0 or len(members) == 0:
        return result
    at = np.searchsorted(wanted, members)
    inside = at < len(wanted)
    at = at[inside]
    result[at[wanted[at] == members[inside]]] = True
    return result


@dataclass(frozen=True, slots=True)
class CandidatePool:
    """The merged, filtered pool (``pos``) and each candidate's channel features."""

    merged: int  # candidates before filtering
    pos: Positions  # kept candidates, ascending positions
    on_vector: BoolArray
    on_lexical: BoolArray
    on_graph: BoolArray
    on_pinned: BoolArray
    raw_cosine: FloatArray  # the vector channel's cosine (0 off the channel)
    semantic: FloatArray  # max(0, raw_cosine)
    lexical: FloatArray  # the lexical score min-max normalized over the kept candidates
    graph: FloatArray  # graph proximity by hop count
    generated: dict[str, int]

    @property
    def filtered(self) -> int:
        return self.merged - len(self.pos)

    @property
    def path_counts(self) -> npt.NDArray[np.int64]:
        result: npt.NDArray[np.int64] = (
            self.on_graph.astype(np.int64)
            + self.on_lexical.astype(np.int64)
            + self.on_pinned.astype(np.int64)
            + self.on_vector.astype(np.int64)
        )
        return result

    def paths(self, i: int) -> tuple[str, ...]:
        """Candidate ``i``'s channels, in :data:`CHANNELS` order."""
        flags = (self.on_graph[i], self.on_lexical[i], self.on_pinned[i], self.on_vector[i])
        return tuple(name for name, on in zip(CHANNELS, flags, strict=True) if on)


def candidate_pool(ix: OwnerIndex, hits: ChannelHits, settings: FilterSettings) -> CandidatePool:
    """Every channel's hits merged, filtered by ``settings``, with membership and features."""
    graph_pos = hits.graph_pos
    pool = distinct(
        np.concatenate([hits.vector_pos, hits.lexical_pos, graph_pos, hits.pinned_pos]).astype(
            np.int64
        )
    )
    pos = pool[keep_mask(ix, pool, settings)]
    n = len(pos)
    on_vector = _members(ix.size, hits.vector_pos, pos)
    on_lexical = _members(ix.size, hits.lexical_pos, pos)
    on_graph = _members(ix.size, graph_pos, pos)
    raw_cosine = np.zeros(n, dtype=np.float64)
    raw_cosine[on_vector] = _lookup(hits.vector_pos, hits.vector_cos, pos[on_vector])
    lexical = np.zeros(n, dtype=np.float64)
    lexical[on_lexical] = minmax(_lookup(hits.lexical_pos, hits.lexical_raw, pos[on_lexical]))
    graph = np.zeros(n, dtype=np.float64)
    if on_graph.any():
        hops = np.array([GRAPH_PROXIMITY[hop] for hop in hits.graph.values()], np.float64)
        graph[on_graph] = _lookup(graph_pos, hops, pos[on_graph])
    return CandidatePool(
        merged=len(pool),
        pos=pos,
        on_vector=on_vector,
        on_lexical=on_lexical,
        on_graph=on_graph,
        on_pinned=_members(ix.size, hits.pinned_pos, pos),
        raw_cosine=raw_cosine,
        semantic=np.maximum(0.0, raw_cosine),
        lexical=lexical,
        graph=graph,
        generated=hits.generated(len(pool)),
    )


def cross_scope_hints(
    ix: OwnerIndex,
    cosines: VectorScores,
    in_scope: BoolArray,
    settings: FilterSettings,
) -> tuple[tuple[int, float], ...]:
    """Up to :data:`HINT_LIMIT` (position, cosine) out of scope, obeying the same filters as
    results, with a positive similarity."""
    hint_pos, hint_cos = ix.top_k(cosines, ~in_scope, HINT_LIMIT * 4)
    allowed = keep_mask(ix, hint_pos, settings) & (hint_cos > 0)
    hints = zip(hint_pos[allowed].tolist(), hint_cos[allowed].tolist(), strict=True)
    return tuple(hints)[:HINT_LIMIT]
