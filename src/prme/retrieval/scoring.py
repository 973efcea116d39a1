"""The scoring formulas, scalar (replay) and vectorized (retrieval), with identical arithmetic.

Both forms evaluate the same IEEE-754 operations in the same order, so a score computed by
retrieval is reproduced bit for bit by replaying its trace. Rounding always uses Python's
``round(x, 10)`` (numpy's rounding differs in the last place).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal
from uuid import UUID

import numpy as np
import numpy.typing as npt

from prme.models.scoring import ScoringWeights
from prme.models.trace import RankFusionTrace, ScoreTrace

FloatArray = npt.NDArray[np.float64]
RankingPolicy = Literal["score_path_id"]
TIE_BREAK_SCALE = 1e-11


def weighted_score(trace: ScoreTrace, weights: ScoringWeights) -> float:
    """Formula 1 (weighted), reference §B.5 steps 3–8.

    ``additive = Σ w_f·x_f`` over semantic, lexical, graph, recency, salience, confidence;
    ``score = additive × epistemic_weight (+ temporal_boost × temporal_affinity) × node_type_boost``;
    capped at ``semantic + lexical`` when that sum is below ``relevance_floor``; rounded to 10 places.
    """
    w = weights
    t = trace
    score = (
        w.w_semantic * t.semantic_similarity
        + w.w_lexical * t.lexical_relevance
        + w.w_graph * t.graph_proximity
        + w.w_recency * t.recency_factor
        + w.w_salience * t.salience
        + w.w_confidence * t.confidence
    ) * t.epistemic_weight
    if t.temporal_affinity != 0.0:
        score = score + w.temporal_boost * t.temporal_affinity
    score = score * t.node_type_boost
    relevance = t.semantic_similarity + t.lexical_relevance
    if w.relevance_floor > 0.0 and relevance < w.relevance_floor:
        score = min(score, relevance)
    return round(score, 10)


def weighted_scores(features: dict[str, FloatArray], weights: ScoringWeights) -> list[float]:
    """Vectorized :func:`weighted_score` over arrays keyed by ScoreTrace field names."""
    w = weights
    f = features
    score = (
        w.w_semantic * f["semantic_similarity"]
        + w.w_lexical * f["lexical_relevance"]
        + w.w_graph * f["graph_proximity"]
        + w.w_recency * f["recency_factor"]
        + w.w_salience * f["salience"]
        + w.w_confidence * f["confidence"]
    ) * f["epistemic_weight"]
    affinity = f["temporal_affinity"]
    score = np.where(affinity != 0.0, score + w.temporal_boost * affinity, score)
    score = score * f["node_type_boost"]
    relevance = f["semantic_similarity"] + f["lexical_relevance"]
    if w.relevance_floor > 0.0:
        score = np.where(relevance < w.relevance_floor, np.minimum(score, relevance), score)
    return [round(x, 10) for x in score.tolist()]


def rrf_score(fusion: RankFusionTrace, k: int) -> float:
    """Formula 2 (reciprocal-rank fusion), reference §B.9; see :func:`rrf_value`."""
    return rrf_value(
        fusion.semantic_rank,
        fusion.lexical_rank,
        fusion.epistemic_factor,
        fusion.node_type_factor,
        fusion.temporal_factor,
        fusion.recency_boost_factor,
        fusion.tie_break,
        k,
        fusion.semantic_weight,
        fusion.lexical_weight,
    )


def rrf_value(
    semantic_rank: int | None,
    lexical_rank: int | None,
    epistemic_factor: float,
    node_type_factor: float,
    temporal_factor: float,
    recency_boost_factor: float | None,
    tie_break: float | None,
    k: int,
    semantic_weight: float | None = None,
    lexical_weight: float | None = None,
) -> float:
    """``fused = Σ_channels w_ch/(k + rank)`` (``w_ch`` the recorded channel weight, 1 when
    absent); ``value = fused·(k+1)/2 × epistemic × node_type × temporal [× recency_boost]``
    rounded to 10 places; a positive score then loses ``tie_break × 1e-11`` (newer stated times
    lose less). A candidate on no channel scores 0.
    """
    if semantic_rank is None and lexical_rank is None:
        return 0.0
    ws = 1.0 if semantic_weight is None else semantic_weight
    wl = 1.0 if lexical_weight is None else lexical_weight
    fused = 0.0
    if semantic_rank is not None:
        fused = fused + ws / (k + semantic_rank)
    if lexical_rank is not None:
        fused = fused + wl / (k + lexical_rank)
    value = fused * (k + 1) / 2 * epistemic_factor * node_type_factor * temporal_factor
    if recency_boost_factor is not None:
        value = value * recency_boost_factor
    score = round(value, 10)
    if tie_break is not None and score > 0.0:
        score = score - tie_break * TIE_BREAK_SCALE
    return score


def ranking_key(score: float, path_score: float, node_id: UUID | str) -> tuple[float, float, str]:
    """The deterministic sort key (``score_path_id``): score desc, path score desc, id asc."""
    return (-score, -path_score, str(node_id))


def competition_ranks(values: Sequence[float]) -> list[int]:
    """Competition ranks of ``values`` in descending order: ties share the better rank (1, 2, 2, 4)."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    ranks = [0] * len(values)
    previous: float | None = None
    rank = 0
    for position, index in enumerate(order, start=1):
        if previous is None or values[index] != previous:
            rank = position
            previous = values[index]
        ranks[index] = rank
    return ranks


def rrf_scores(
    semantic_rank: npt.NDArray[np.int64],
    lexical_rank: npt.NDArray[np.int64],
    epistemic_factor: FloatArray,
    node_type_factor: FloatArray,
    temporal_factor: FloatArray,
    recency_boost_factor: FloatArray | None,
    tie_break: FloatArray | None,
    k: int,
    channel_weights: tuple[float, float] | None = None,
) -> list[float]:
    """Vectorized :func:`rrf_value` (rank 0 = not on that channel), same arithmetic order."""
    ws, wl = (1.0, 1.0) if channel_weights is None else channel_weights
    has_semantic = semantic_rank > 0
    has_lexical = lexical_rank > 0
    fused = np.zeros(len(semantic_rank), dtype=np.float64)
    fused = np.where(
        has_semantic, fused + ws / (k + np.where(has_semantic, semantic_rank, 1)), fused
    )
    fused = np.where(has_lexical, fused + wl / (k + np.where(has_lexical, lexical_rank, 1)), fused)
    value = fused * (k + 1) / 2 * epistemic_factor * node_type_factor
    value = value * temporal_factor
    if recency_boost_factor is not None:
        value = value * recency_boost_factor
    ties = [None] * len(value) if tie_break is None else tie_break.tolist()
    scores: list[float] = []
    for v, ranked, tie in zip(
        value.tolist(), (has_semantic | has_lexical).tolist(), ties, strict=True
    ):
        if not ranked:
            scores.append(0.0)
            continue
        score = round(v, 10)
        if tie is not None and score > 0.0:
            score = score - tie * TIE_BREAK_SCALE
        scores.append(score)
    return scores
