"""The scoring formulas, each defined once.

The weighted formula is :func:`weighted_scores` (vectorized; :func:`weighted_score` is that
function on one trace), so a score computed by retrieval is reproduced bit for bit by replaying
its trace. :class:`FactoredWeighted` is the same formula factored for fitting multipliers
(float form, no rounding). Rounding is always Python's ``round(x, 10)``, bit for bit (numpy's
``np.round`` differs in the last place), computed for many values at once by
:func:`round_places`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal
from uuid import UUID

import numpy as np
import numpy.typing as npt

from prme.models.scoring import ADDITIVE_FEATURES, ScoringWeights
from prme.models.trace import ADDITIVE_COLUMNS, WEIGHTED_COLUMNS, RankFusionTrace, ScoreTrace

FloatArray = npt.NDArray[np.float64]
RankingPolicy = Literal["score_path_id"]
TIE_BREAK_SCALE = 1e-11
_PLACES_SCALE = 1e10  # 10 places; exactly representable, as is every integer below 2**53
_EXACT_INTEGERS = 2.0**52


def round_places(values: FloatArray) -> list[float]:
    """``[round(x, 10) for x in values]``, bit for bit, without a Python call per value.

    Python's ``round(x, 10)`` is the double nearest to ``n / 10**10``, ``n`` the integer
    nearest to the exact ``x·10**10`` (ties to even). ``x * 1e10`` is that product within half
    an ulp, so ``rint`` of it is ``n`` unless the product lies within an ulp of a half-integer;
    and ``n / 1e10`` is one correctly rounded IEEE division of two exact numbers, the same
    double. The rare values near a half-integer (and non-finite or huge ones) take Python's
    ``round`` itself.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # those take Python's round below
        scaled = values * _PLACES_SCALE
        result: list[float] = (np.rint(scaled) / _PLACES_SCALE).tolist()
        size = np.abs(scaled)
        half_gap = np.abs(scaled - np.floor(scaled) - 0.5)
        sure = (size < _EXACT_INTEGERS) & (half_gap > 2.0 * np.spacing(size))
    for i in np.flatnonzero(~sure).tolist():
        result[i] = round(float(values[i]), 10)
    return result


def weighted_score(trace: ScoreTrace, weights: ScoringWeights) -> float:
    """:func:`weighted_scores` of one trace (the same arithmetic: it is that function)."""
    return weighted_scores(trace_columns([trace]), weights)[0]


def trace_columns(traces: Sequence[ScoreTrace]) -> dict[str, FloatArray]:
    """The weighted formula's columns of ``traces``, keyed by ScoreTrace field name."""
    return {
        name: np.asarray([getattr(t, name) for t in traces], dtype=np.float64)
        for name in WEIGHTED_COLUMNS
    }


def weighted_scores(features: dict[str, FloatArray], weights: ScoringWeights) -> list[float]:
    """Formula 1 (weighted), reference §B.5 steps 3–8, over arrays keyed by ScoreTrace names.

    ``additive = Σ w_f·x_f`` over ADDITIVE_FEATURES (semantic, lexical, graph, recency,
    salience, confidence), summed left to right;
    ``score = additive × epistemic_weight (+ temporal_boost × temporal_affinity) × node_type_boost``;
    capped at ``semantic + lexical`` when that sum is below ``relevance_floor``; each score
    rounded to 10 places as Python's ``round`` does (:func:`round_places`).
    """
    w = weights
    f = features
    additive = zip(w.additive(), ADDITIVE_COLUMNS, strict=True)
    first_weight, first_column = next(additive)
    score = first_weight * f[first_column]
    for weight, column in additive:
        score = score + weight * f[column]
    score = score * f["epistemic_weight"]
    affinity = f["temporal_affinity"]
    score = np.where(affinity != 0.0, score + w.temporal_boost * affinity, score)
    score = score * f["node_type_boost"]
    relevance = f["semantic_similarity"] + f["lexical_relevance"]
    if w.relevance_floor > 0.0:
        score = np.where(relevance < w.relevance_floor, np.minimum(score, relevance), score)
    return round_places(np.asarray(score, dtype=np.float64))


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
    rounded = np.asarray(round_places(value), dtype=np.float64)
    if tie_break is not None:  # the same two IEEE operations as rrf_value, element by element
        rounded = np.where(rounded > 0.0, rounded - tie_break * TIE_BREAK_SCALE, rounded)
    scores: list[float] = np.where(has_semantic | has_lexical, rounded, 0.0).tolist()
    return scores


class FactoredWeighted:
    """The weighted formula factored for fitting multipliers ``m`` to many candidates at once.

    With ``w = w0⊙m / Σ(w0⊙m)`` (:func:`prme.models.scoring.adjusted_weights`), the weighted
    formula's float form (no final rounding) is
    ``s(m) = (Σ_f a_f·m_f) / (Σ_f w0_f·m_f) + offset`` with ``a_f = x_f·w0_f·epistemic·boost``
    and ``offset = temporal_boost·affinity·boost``, capped at ``semantic + lexical`` below the
    relevance floor. ``a`` and ``w0`` are computed once; each evaluation costs one pass over the
    additive features, summed left to right (no BLAS: the same bits on every machine).

    Args:
        columns: trace columns by ScoreTrace field name (every additive column, epistemic_weight,
            temporal_affinity, node_type_boost), one entry per candidate.
        formulas: each candidate's ``ScoringWeights.formula()`` as rows of a matrix (the additive
            weights in ADDITIVE_FEATURES order, then temporal_boost and relevance_floor).
    """

    def __init__(self, columns: dict[str, FloatArray], formulas: FloatArray) -> None:
        width = len(ADDITIVE_FEATURES)
        w0 = formulas[:, :width]
        temporal_boost, floor = formulas[:, width], formulas[:, width + 1]
        boost = columns["node_type_boost"]
        scale = columns["epistemic_weight"] * boost
        self.numerator = [columns[c] * w0[:, j] * scale for j, c in enumerate(ADDITIVE_COLUMNS)]
        self.denominator = [w0[:, j] for j in range(width)]
        affinity = columns["temporal_affinity"]
        self.offset = np.where(affinity != 0.0, temporal_boost * affinity, 0.0) * boost
        self.relevance = columns["semantic_similarity"] + columns["lexical_relevance"]
        self.capped = (floor > 0.0) & (self.relevance < floor)

    def scores(self, multipliers: Sequence[float]) -> FloatArray:
        """``s(m)`` for every candidate (multipliers in ADDITIVE_FEATURES order)."""
        m = list(multipliers)
        numerator = self.numerator[0] * m[0]
        denominator = self.denominator[0] * m[0]
        for j in range(1, len(m)):
            numerator = numerator + self.numerator[j] * m[j]
            denominator = denominator + self.denominator[j] * m[j]
        scores: FloatArray = numerator / denominator + self.offset
        return np.where(self.capped, np.minimum(scores, self.relevance), scores)
