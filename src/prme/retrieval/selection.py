"""Selection: the score floor, the deterministic order, the per-source and per-evidence caps and
the result limit (pure)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

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


def ranked_order(
    scores: Sequence[float],
    path_score: Sequence[float],
    ids: Sequence[str],
    positions: Sequence[int],
    gate: Sequence[float],
    floor: float | None,
) -> Iterator[int]:
    """Candidates in ``ranking_key`` order (score desc, path score desc, id asc), lazily, without
    those whose ``gate`` is below ``floor``: numpy orders by (score, path); only runs of equal
    (score, path) are sorted by id (``ids[positions[i]]``) in Python."""
    score_array = np.asarray(scores, dtype=np.float64)
    path_array = np.asarray(path_score, dtype=np.float64)
    order: list[int] = np.lexsort((-path_array, -score_array)).tolist()
    start = 0
    while start < len(order):
        end = start + 1
        first = order[start]
        while (
            end < len(order)
            and scores[order[end]] == scores[first]
            and path_score[order[end]] == path_score[first]
        ):
            end += 1
        run = order[start:end]
        for i in run if len(run) == 1 else sorted(run, key=lambda j: ids[positions[j]]):
            if floor is None or gate[i] >= floor:
                yield i
        start = end


def select(
    order: Iterator[int],
    evidence: Sequence[str],
    content_sha256: Sequence[str],
    positions: Sequence[int],
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
        source = evidence[positions[i]]
        if caps.max_per_source is not None:
            key = (source, content_sha256[positions[i]])
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
    positions: list[int] = pool.pos.tolist()
    path_score: list[float] = scored.features["path_score"].tolist()
    gate = scored.gate(pool)
    order = ranked_order(scored.scores, path_score, ix.ids, positions, gate, caps.min_score)
    chosen = select(order, ix.evidence, ix.content_sha256, positions, caps)
    return Selection(chosen, tuple(positions[i] for i in chosen))
