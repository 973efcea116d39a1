"""Scoring configuration (ScoringWeights) and bounded ranking multipliers."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from prme.models.base import FiniteFloat, Frozen

ADDITIVE_FEATURES: tuple[str, ...] = (
    "semantic",
    "lexical",
    "graph",
    "recency",
    "salience",
    "confidence",
)
MULTIPLIER_MIN = 0.25
MULTIPLIER_MAX = 4.0

DEFAULT_NODE_TYPE_BOOST: dict[str, float] = {
    "fact": 1.15,
    "preference": 1.15,
    "decision": 1.15,
    "summary": 1.10,
    "instruction": 1.15,
}

Multiplier = float
# The product default's rank-fusion constant. Measured (bench/quality.py, LoCoMo and SciFact):
# with confidence-weighted channels a small k lets the trusted channel's head lead; k=60 (the
# reference's) keeps the fused list near the weaker channel's middle ranks.
PRODUCT_RRF_K = 10


# Every field a complete scoring record held before ``graph_specificity`` existed
# (``rrf_channel_weights`` is left out: it is omitted from a record when unset).
_RECORD_FIELDS_BEFORE_GRAPH_SPECIFICITY: frozenset[str] = frozenset(
    {
        *(f"w_{name}" for name in ADDITIVE_FEATURES),
        "w_epistemic",
        "w_paths",
        "recency_lambda",
        "temporal_boost",
        "node_type_boost",
        "relevance_floor",
        "current_update_multiplier",
        "fusion",
        "rrf_k",
        "rrf_recency_boost",
        "rrf_tie_break",
    }
)


class RankingMultipliers(Frozen):
    """Six bounded factors on the additive weights; all exactly 1 is neutral (bit-exact identity)."""

    semantic: FiniteFloat = Field(default=1.0, ge=MULTIPLIER_MIN, le=MULTIPLIER_MAX)
    lexical: FiniteFloat = Field(default=1.0, ge=MULTIPLIER_MIN, le=MULTIPLIER_MAX)
    graph: FiniteFloat = Field(default=1.0, ge=MULTIPLIER_MIN, le=MULTIPLIER_MAX)
    recency: FiniteFloat = Field(default=1.0, ge=MULTIPLIER_MIN, le=MULTIPLIER_MAX)
    salience: FiniteFloat = Field(default=1.0, ge=MULTIPLIER_MIN, le=MULTIPLIER_MAX)
    confidence: FiniteFloat = Field(default=1.0, ge=MULTIPLIER_MIN, le=MULTIPLIER_MAX)

    @property
    def is_neutral(self) -> bool:
        return all(getattr(self, f) == 1.0 for f in ADDITIVE_FEATURES)

    def as_tuple(self) -> tuple[float, ...]:
        return tuple(getattr(self, f) for f in ADDITIVE_FEATURES)

    @classmethod
    def from_tuple(cls, values: tuple[float, ...] | list[float]) -> RankingMultipliers:
        """The multipliers with ``values`` in ``ADDITIVE_FEATURES`` order (validated)."""
        return cls(**dict(zip(ADDITIVE_FEATURES, values, strict=True)))


def is_neutral(multipliers: RankingMultipliers | None) -> bool:
    return multipliers is None or multipliers.is_neutral


class ScoringWeights(Frozen):
    """Base scoring. Class defaults are the weighted formula; the product default is rrf."""

    w_semantic: FiniteFloat = Field(default=0.25, ge=0.0)
    w_lexical: FiniteFloat = Field(default=0.20, ge=0.0)
    w_graph: FiniteFloat = Field(default=0.20, ge=0.0)
    w_recency: FiniteFloat = Field(default=0.10, ge=0.0)
    w_salience: FiniteFloat = Field(default=0.10, ge=0.0)
    w_confidence: FiniteFloat = Field(default=0.15, ge=0.0)
    w_epistemic: FiniteFloat = 0.05
    w_paths: FiniteFloat = 0.0
    recency_lambda: FiniteFloat = Field(default=0.02, ge=0.0)
    temporal_boost: FiniteFloat = Field(default=0.15, ge=0.0)
    node_type_boost: dict[str, FiniteFloat] = Field(
        default_factory=lambda: dict(DEFAULT_NODE_TYPE_BOOST)
    )
    relevance_floor: FiniteFloat = Field(default=0.35, ge=0.0)
    current_update_multiplier: FiniteFloat = Field(default=1.30, ge=1.0, le=2.0)
    fusion: Literal["weighted", "rrf"] = "weighted"
    rrf_k: int | None = Field(default=None, ge=1, le=10000)
    rrf_recency_boost: FiniteFloat | None = Field(default=None, gt=0.0, le=4.0)
    rrf_tie_break: Literal["event_time"] | None = None
    # Confidence-weighted rank fusion: each channel's reciprocal ranks are weighted by its own
    # confidence for the query (``prme.retrieval.fusion.channel_weights``). None is plain RRF
    # (omitted from the dump, so scoring recorded before this field keeps its bytes).
    rrf_channel_weights: Literal["score_gap"] | None = Field(
        default=None, exclude_if=lambda v: v is None
    )
    # How the weighted formula reads the graph channel. "hop_idf" (the default) weighs each
    # candidate's graph proximity by how specific the graph evidence is for the query:
    # ``ln(N/n_h) / ln(N)`` with N candidates of which n_h the graph reached at the candidate's
    # hop (``prme.retrieval.features.graph_specificity``), as BM25's idf weighs a term by its
    # rarity; None is the earlier formula (raw proximity). A complete scoring record written
    # before this field existed means None, so recorded settings, receipts and profiles keep
    # their meaning and their bytes (None is omitted from the dump). Weighted formula only.
    graph_specificity: Literal["hop_idf"] | None = Field(
        default="hop_idf", exclude_if=lambda v: v is None
    )

    @model_validator(mode="before")
    @classmethod
    def _recorded_before_graph_specificity(cls, data: Any) -> Any:
        if (
            isinstance(data, Mapping)
            and "graph_specificity" not in data
            and data.keys() >= _RECORD_FIELDS_BEFORE_GRAPH_SPECIFICITY
        ):
            return {**data, "graph_specificity": None}
        return data

    @model_validator(mode="after")
    def _check(self) -> ScoringWeights:
        total = sum(self.additive())
        if not math.isclose(total, 1.0, rel_tol=0.0, abs_tol=1e-6):
            raise ValueError(f"the six additive weights must sum to 1 (got {total!r})")
        if self.fusion == "rrf":
            if self.rrf_k is None:
                object.__setattr__(self, "rrf_k", 60)
            # rank fusion reads channel ranks, not the weighted formula's graph feature
            object.__setattr__(self, "graph_specificity", None)
        elif (
            self.rrf_k is not None
            or self.rrf_recency_boost is not None
            or self.rrf_tie_break is not None
            or self.rrf_channel_weights is not None
        ):
            # rrf-only settings have no meaning under the weighted formula; drop them.
            object.__setattr__(self, "rrf_k", None)
            object.__setattr__(self, "rrf_recency_boost", None)
            object.__setattr__(self, "rrf_tie_break", None)
            object.__setattr__(self, "rrf_channel_weights", None)
        return self

    def additive(self) -> tuple[float, ...]:
        return (
            self.w_semantic,
            self.w_lexical,
            self.w_graph,
            self.w_recency,
            self.w_salience,
            self.w_confidence,
        )

    def formula(self) -> tuple[float, ...]:
        """What the weighted formula reads from the weights (node-type boosts live in each
        trace): the six additive weights, ``temporal_boost`` and ``relevance_floor``."""
        return (*self.additive(), self.temporal_boost, self.relevance_floor)

    @classmethod
    def from_formula(cls, formula: tuple[float, ...]) -> ScoringWeights:
        """Weighted-formula weights that score exactly as any weights with this formula."""
        names = [f"w_{name}" for name in ADDITIVE_FEATURES] + ["temporal_boost", "relevance_floor"]
        return cls(**dict(zip(names, formula, strict=True)))

    @property
    def version_id(self) -> str:
        """First 12 hex of SHA-256 over the colon-joined settings (reference §B.10)."""
        parts = [str(v) for v in self.additive()]
        parts += [
            str(self.w_epistemic),
            str(self.w_paths),
            str(self.recency_lambda),
            str(self.temporal_boost),
            str(self.relevance_floor),
            str(self.current_update_multiplier),
            ",".join(f"{k}={v}" for k, v in sorted(self.node_type_boost.items())),
        ]
        text = ":".join(parts)
        if self.graph_specificity is not None:
            text += f":graph={self.graph_specificity}"
        if self.fusion == "rrf":
            text += f":rrf:{self.rrf_k}"
            if self.rrf_recency_boost is not None:
                text += f":recency={self.rrf_recency_boost}"
            if self.rrf_tie_break is not None:
                text += f":tie_break={self.rrf_tie_break}"
            if self.rrf_channel_weights is not None:
                text += f":channels={self.rrf_channel_weights}"
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def product_default_scoring() -> ScoringWeights:
    """What an unconfigured engine uses: reciprocal-rank fusion."""
    return ScoringWeights(
        fusion="rrf",
        rrf_k=PRODUCT_RRF_K,
        rrf_recency_boost=0.25,
        rrf_tie_break="event_time",
        rrf_channel_weights="score_gap",
    )


def adjusted_weights(
    weights: ScoringWeights, multipliers: RankingMultipliers | None
) -> ScoringWeights:
    """``w'_f = w_f·m_f / Σ_g w_g·m_g`` over the six additive weights; neutral returns ``weights``.

    Every other field is untouched, and a zero weight stays zero.
    """
    base = weights.additive()
    if any(not math.isfinite(w) or w < 0 for w in base):
        raise ValueError("Learning requires finite nonnegative additive weights")
    if multipliers is None or multipliers.is_neutral:
        return weights
    products = [w * m for w, m in zip(base, multipliers.as_tuple(), strict=True)]
    total = sum(products)
    if total <= 0:
        raise ValueError("Learning requires finite nonnegative additive weights")
    scaled = [p / total for p in products]
    update = {f"w_{name}": value for name, value in zip(ADDITIVE_FEATURES, scaled, strict=True)}
    # model_copy skips validation: the scaled weights sum to 1 up to rounding by construction.
    return weights.model_copy(update=update)
