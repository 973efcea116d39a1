"""Per-candidate score traces: the features and rank-fusion inputs a score is replayed from."""

from __future__ import annotations

from pydantic import Field

from prme.models.base import FiniteFloat, Frozen
from prme.models.scoring import ADDITIVE_FEATURES


class ScoreTrace(Frozen):
    """Features of one candidate; ``composite_score`` is the base score they produce."""

    semantic_similarity: FiniteFloat = 0.0
    lexical_relevance: FiniteFloat = 0.0
    graph_proximity: FiniteFloat = 0.0
    recency_factor: FiniteFloat = 0.0
    salience: FiniteFloat = 0.0
    confidence: FiniteFloat = 0.0
    epistemic_weight: FiniteFloat = 1.0
    path_score: FiniteFloat = 0.0
    temporal_affinity: FiniteFloat = 0.0
    node_type_boost: FiniteFloat = 1.0
    composite_score: FiniteFloat


class RankFusionTrace(Frozen):
    """Rank-fusion inputs of one candidate (formula 2). Factors are already pool-normalized."""

    semantic_rank: int | None = Field(default=None, ge=1)
    lexical_rank: int | None = Field(default=None, ge=1)
    epistemic_factor: FiniteFloat = Field(ge=0.0, le=1.0)
    node_type_factor: FiniteFloat = Field(ge=0.0, le=1.0)
    temporal_factor: FiniteFloat = Field(ge=0.0, le=1.0)
    recency_boost_factor: FiniteFloat | None = Field(default=None, ge=0.0, le=1.0)
    tie_break: FiniteFloat | None = Field(default=None, ge=0.0, lt=1.0)
    # Per-channel weights of confidence-weighted fusion (``rrf_channel_weights``), each in
    # [0, 2] and summing to 2; absent (None) means the plain formula's 1 and 1. Omitted from
    # the dump when absent, so receipts written before these fields keep their exact bytes.
    semantic_weight: FiniteFloat | None = Field(
        default=None, ge=0.0, le=2.0, exclude_if=lambda v: v is None
    )
    lexical_weight: FiniteFloat | None = Field(
        default=None, ge=0.0, le=2.0, exclude_if=lambda v: v is None
    )


# The trace column each additive weight multiplies, in ADDITIVE_FEATURES order.
ADDITIVE_COLUMNS: tuple[str, ...] = tuple(
    {
        "semantic": "semantic_similarity",
        "lexical": "lexical_relevance",
        "graph": "graph_proximity",
        "recency": "recency_factor",
        "salience": "salience",
        "confidence": "confidence",
    }[name]
    for name in ADDITIVE_FEATURES
)


# Every trace column the weighted formula reads.
WEIGHTED_COLUMNS: tuple[str, ...] = (
    *ADDITIVE_COLUMNS,
    "epistemic_weight",
    "temporal_affinity",
    "node_type_boost",
)
