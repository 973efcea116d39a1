"""The fusion methods behind one registry: ``weighted`` (formula 1) and ``rrf`` (formula 2).

A method turns the candidates' features into scores (vectorized, at retrieval) and replays one
recorded candidate's score from its trace (scalar, bit-identical). Callers look a method up by
``ScoringWeights.fusion`` instead of branching on the name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from prme.index.owner_index import OwnerIndex
from prme.models.scoring import ScoringWeights
from prme.models.trace import RankFusionTrace, ScoreTrace
from prme.retrieval.features import BoolArray, FusionInputs, Positions, fusion_inputs
from prme.retrieval.scoring import (
    FloatArray,
    rrf_score,
    rrf_scores,
    trace_columns,
    weighted_scores,
)


class Replayable(Protocol):
    """What replay reads of a recorded candidate (``ReceiptCandidate``)."""

    @property
    def trace(self) -> ScoreTrace: ...

    @property
    def rank_fusion(self) -> RankFusionTrace | None: ...


@dataclass(frozen=True, slots=True)
class FusionContext:
    """What a fusion method may read besides the weighted-formula features."""

    ix: OwnerIndex
    pos: Positions
    semantic: FloatArray
    lexical: FloatArray
    on_vector: BoolArray
    on_lexical: BoolArray
    epistemic_map: Mapping[str, float]
    current_state: bool


@dataclass(frozen=True, slots=True)
class Fused:
    scores: list[float]
    features: dict[str, FloatArray]  # the trace's features (a method may replace some)
    rank_fusion: FusionInputs | None  # the per-candidate rank-fusion inputs, if any


@dataclass(frozen=True, slots=True)
class FusionMethod:
    name: Literal["weighted", "rrf"]
    # Ranking multipliers reweight this method's additive weights (else they are refused).
    adjusts_weights: bool
    # What ``min_score`` is compared with: the score, or the semantic relevance.
    min_score_on: Literal["score", "semantic_relevance"]
    fuse: Callable[[dict[str, FloatArray], FusionContext, ScoringWeights, ScoringWeights], Fused]
    # Every recorded candidate's score from its trace (vectorized where the formula allows).
    replay: Callable[[Sequence[Replayable], ScoringWeights, ScoringWeights], list[float]]


def _fuse_weighted(
    features: dict[str, FloatArray],
    context: FusionContext,
    base: ScoringWeights,
    applied: ScoringWeights,
) -> Fused:
    return Fused(weighted_scores(features, applied), features, None)


def _replay_weighted(
    candidates: Sequence[Replayable], base: ScoringWeights, applied: ScoringWeights
) -> list[float]:
    return weighted_scores(trace_columns([c.trace for c in candidates]), applied)


def _fuse_rrf(
    features: dict[str, FloatArray],
    context: FusionContext,
    base: ScoringWeights,
    applied: ScoringWeights,
) -> Fused:
    c = context
    fi = fusion_inputs(
        c.ix,
        c.pos,
        c.semantic,
        c.lexical,
        c.on_vector,
        c.on_lexical,
        base,
        c.epistemic_map,
        c.current_state,
    )
    scores = rrf_scores(
        fi.semantic_rank,
        fi.lexical_rank,
        fi.epistemic_factor,
        fi.node_type_factor,
        fi.temporal_factor,
        fi.recency_boost_factor,
        fi.tie_break,
        base.rrf_k or 60,
        fi.channel_weights,
    )
    n = len(c.pos)
    zeros: npt.NDArray[np.float64] = np.zeros(n, dtype=np.float64)
    traced = {**features, "recency_factor": fi.recency_raw, "salience": zeros, "confidence": zeros}
    return Fused(scores, traced, fi)


def _replay_rrf(
    candidates: Sequence[Replayable], base: ScoringWeights, applied: ScoringWeights
) -> list[float]:
    k = base.rrf_k or 60
    return [0.0 if c.rank_fusion is None else rrf_score(c.rank_fusion, k) for c in candidates]


FUSION_METHODS: dict[str, FusionMethod] = {
    "weighted": FusionMethod("weighted", True, "score", _fuse_weighted, _replay_weighted),
    "rrf": FusionMethod("rrf", False, "semantic_relevance", _fuse_rrf, _replay_rrf),
}


def fusion_method(scoring: ScoringWeights) -> FusionMethod:
    """The registered method of ``scoring.fusion``."""
    return FUSION_METHODS[scoring.fusion]
