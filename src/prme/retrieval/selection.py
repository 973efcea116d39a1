"""Selection: the score floor, the deterministic order, the per-source and per-evidence caps and
the result limit (pure)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from prme.index.owner_index import OwnerIndex
from prme.retrieval.candidates import CandidatePool
from prme.retrieval.ranking import Scored


@dataclass(frozen=True, slots=True)
class Caps:
    """The request's selection settings."""

    limit: int
    min_score: float | None = None
    max_per_source: int | None = None
    max_per_evidence: int | None = None


# The candidates are ordered a tier at a time: the ORDER_TIER best by score (and every one
# tied with the last of them), then, only if the caller reads past those, the rest. Every
# candidate of the first tier outscores every other, so the order is the same; a retrieval
# that returns 20 of 1,200 candidates sorts about 64 of them.
ORDER_TIER = 64
PositionsLike = Sequence[int] | npt.NDArray[np.int64]  # candidates' positions in the owner index


def ranked_order(
    scores: Sequence[float],
    path_score: Sequence[float] | npt.NDArray[np.float64],
    ids: Sequence[str],
    positions: PositionsLike,
    gate: Sequence[float],
    floor: float | None,
    tier: int = ORDER_TIER,
) -> Iterator[int]:
    """Candidates in ``ranking_key`` order (score desc, path score desc, id asc), lazily, without
    those whose ``gate`` is below ``floor``: numpy orders by (score, path) a tier at a time;
    only runs of equal (score, path) are sorted by id (``ids[positions[i]]``) in Python."""
    score_array = np.asarray(scores, dtype=np.float64)
    path_array = np.asarray(path_score, dtype=np.float64)
    for part in _tiers(score_array, tier):
        order: list[int] = part[np.lexsort((-path_array[part], -score_array[part]))].tolist()
        keys = list(zip(score_array[order].tolist(), path_array[order].tolist(), strict=True))
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order) and keys[end] == keys[start]:
                end += 1
            run = order[start:end]
            if len(run) > 1:
                run.sort(key=lambda j: ids[int(positions[j])])
            for i in run:
                if floor is None or gate[i] >= floor:
                    yield i
            start = end


def _tiers(scores: npt.NDArray[np.float64], tier: int) -> Iterator[npt.NDArray[np.intp]]:
    """The candidates scoring at least the ``tier``-th best score, then the others."""
    if len(scores) <= tier:
        yield np.arange(len(scores))
        return
    threshold = np.partition(scores, len(scores) - tier)[len(scores) - tier]
    yield np.flatnonzero(scores >= threshold)
    yield np.flatnonzero(scores < threshold)


def select(
    order: Iterator[int],
    evidence: Sequence[str],
    content_sha256: Sequence[str],
    positions: PositionsLike,
    caps: Caps,
) -> tuple[int, ...]:
    """The first ``caps.limit`` candidates of ``order`` within the caps: at most
    ``max_per_source`` per (evidence, content) and ``max_per_evidence`` per evidence reference
    (candidate ``i``'s are ``evidence[positions[i]]`` and ``content_sha256[positions[i]]``)."""
    selected: list[int] = []
    if caps.max_per_source is None and caps.max_per_evidence is None:
        for i in order:  # no cap reads a candidate's evidence
            if len(selected) >= caps.limit:
                break
            selected.append(i)
        return tuple(selected)
    source_counts: dict[tuple[str, str], int] = {}
    evidence_counts: dict[str, int] = {}
    for i in order:
        if len(selected) >= caps.limit:
            break
        position = int(positions[i])
        source = evidence[position]
        if caps.max_per_source is not None:
            key = (source, content_sha256[position])
            if source_counts.get(key, 0) >= caps.max_per_source:
                continue
            source_counts[key] = source_counts.get(key, 0) + 1
        if caps.max_per_evidence is not None:
            if evidence_counts.get(source, 0) >= caps.max_per_evidence:
                continue
            evidence_counts[source] = evidence_counts.get(source, 0) + 1
        selected.append(i)
    return tuple(selected)


@dataclass(frozen=True, slots=True)
class Selection:
    """The chosen candidates (indexes into the pool), in returned order."""

    chosen: tuple[int, ...]
    positions: tuple[int, ...]  # their positions in the owner index


def select_candidates(ix: OwnerIndex, pool: CandidatePool, scored: Scored, caps: Caps) -> Selection:
    """The pool's returned candidates: floor, order, caps and limit."""
    gate = scored.gate(pool)
    path_score = scored.features["path_score"]
    order = ranked_order(scored.scores, path_score, ix.ids, pool.pos, gate, caps.min_score)
    chosen = select(order, ix.evidence, ix.content_sha256, pool.pos, caps)
    positions: list[int] = pool.pos[list(chosen)].tolist()
    return Selection(chosen, tuple(positions))
