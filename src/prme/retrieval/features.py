"""Candidate features, filters and pool-level rank fusion inputs (pure, vectorized)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from prme.models.enums import DECAY_LAMBDA, DecayProfile
from prme.models.scoring import ScoringWeights
from prme.retrieval.scoring import FloatArray, competition_ranks
from prme.storage.timeutil import to_us

US_PER_DAY = 86_400_000_000.0
GRAPH_PROXIMITY = {1: 1.0, 2: 0.7, 3: 0.4}
_EXEMPT_VALIDITY = frozenset({"entity", "preference"})


@dataclass(frozen=True, slots=True)
class FilterSettings:
    mode: str
    time_from: datetime | None
    time_to: datetime | None
    knowledge_at: datetime | None
    event_time_from: datetime | None
    event_time_to: datetime | None
    exclude_node_types: frozenset[str]
    source_types: frozenset[str] | None
    unverified_threshold: float


def exclusion_reason(row: Mapping[str, Any], f: FilterSettings) -> str | None:
    """Why a candidate row is filtered out before scoring, or None to keep it."""
    node_type = row["node_type"]
    if node_type not in _EXEMPT_VALIDITY:
        valid_to = row["valid_to"]
        if f.time_from is not None and valid_to is not None and valid_to <= to_us(f.time_from):
            return "validity_filtered:time_from"
        if f.time_to is not None and row["valid_from"] > to_us(f.time_to):
            return "validity_filtered:time_to"
    stated = row["event_time"] if row["event_time"] is not None else row["created_at"]
    if f.event_time_from is not None and stated < to_us(f.event_time_from):
        return "event_time_filtered:from"
    if f.event_time_to is not None and stated > to_us(f.event_time_to):
        return "event_time_filtered:to"
    if f.knowledge_at is not None and row["created_at"] > to_us(f.knowledge_at):
        return "knowledge_filtered"
    if node_type in f.exclude_node_types:
        return f"node_type_filtered:{node_type}"
    if f.source_types is not None and row["source_type"] not in f.source_types:
        return f"source_type_filtered:{row['source_type']}"
    if f.mode == "default":
        lifecycle = row["lifecycle_state"]
        if lifecycle in ("superseded", "archived"):
            return f"lifecycle_filtered:{lifecycle}"
        epistemic = row["epistemic_type"]
        if epistemic == "conditional" and row["condition_state"] != "true":
            return f"condition_filtered:{row['condition_state'] or 'unknown'}"
        if epistemic in ("hypothetical", "deprecated"):
            return f"epistemic_filtered:{epistemic}"
        if epistemic == "unverified" and row["confidence"] <= f.unverified_threshold:
            return f"unverified_below_threshold:{row['confidence']}"
    return None


def epistemic_weight(
    epistemic: str, condition_state: str | None, weights: Mapping[str, float]
) -> float:
    """The epistemic multiplier; conditional claims score by their condition state."""
    if epistemic == "conditional":
        if condition_state == "true":
            epistemic = "asserted"
        elif condition_state in ("false", "expired"):
            epistemic = "deprecated"
        else:
            epistemic = "hypothetical"
    return float(weights.get(epistemic, 0.7))


def decayed_salience_confidence(row: Mapping[str, Any], now_us: int) -> tuple[float, float]:
    """Effective (virtually decayed) salience and confidence, clamped to [0, 1]."""
    sal_base = float(row["salience_base"])
    conf_base = float(row["confidence_base"])
    profile = row["decay_profile"]
    if (
        row["pinned"]
        or profile == "permanent"
        or row["lifecycle_state"] in ("archived", "deprecated")
    ):
        return sal_base, conf_base
    lam = DECAY_LAMBDA[DecayProfile(profile)]
    t = max(0.0, (now_us - row["last_reinforced_at"]) / US_PER_DAY)
    salience = sal_base * math.exp(-lam * t) + float(row["reinforcement_boost"]) * math.exp(
        -0.1 * t
    )
    if row["epistemic_type"] == "observed" and t < 180:
        confidence = conf_base
    else:
        confidence = conf_base * math.exp(-(lam / 2) * t)
    return min(1.0, max(0.0, salience)), min(1.0, max(0.0, confidence))


def recency_factor(memory_time_us: int, now_us: int, recency_lambda: float) -> float:
    days = max(0.0, (now_us - memory_time_us) / US_PER_DAY)
    return min(1.0, math.exp(-recency_lambda * days))


def minmax(values: Sequence[float]) -> list[float]:
    """(s − min)/(max − min); all equal → 1.0."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi == lo:
        return [1.0] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def weighted_features(
    rows: Sequence[Mapping[str, Any]],
    semantic: Sequence[float],
    lexical: Sequence[float],
    graph: Sequence[float],
    path_counts: Sequence[int],
    now_us: int,
    weights: ScoringWeights,
    epistemic_weights: Mapping[str, float],
) -> dict[str, FloatArray]:
    """Feature arrays (ScoreTrace field names) for the weighted formula."""
    recency: list[float] = []
    salience: list[float] = []
    confidence: list[float] = []
    epistemic: list[float] = []
    boost: list[float] = []
    for row in rows:
        recency.append(recency_factor(row["updated_at"], now_us, weights.recency_lambda))
        sal, conf = decayed_salience_confidence(row, now_us)
        salience.append(sal)
        confidence.append(conf)
        epistemic.append(
            epistemic_weight(row["epistemic_type"], row["condition_state"], epistemic_weights)
        )
        boost.append(float(weights.node_type_boost.get(row["node_type"], 1.0)))
    n = len(rows)
    return {
        "semantic_similarity": np.asarray(semantic, dtype=np.float64),
        "lexical_relevance": np.asarray(lexical, dtype=np.float64),
        "graph_proximity": np.asarray(graph, dtype=np.float64),
        "recency_factor": np.asarray(recency, dtype=np.float64),
        "salience": np.asarray(salience, dtype=np.float64),
        "confidence": np.asarray(confidence, dtype=np.float64),
        "epistemic_weight": np.asarray(epistemic, dtype=np.float64),
        "path_score": np.asarray([min(c / 3, 1.0) for c in path_counts], dtype=np.float64),
        "temporal_affinity": np.zeros(n, dtype=np.float64),
        "node_type_boost": np.asarray(boost, dtype=np.float64),
    }


@dataclass(frozen=True, slots=True)
class FusionInputs:
    semantic_rank: list[int | None]
    lexical_rank: list[int | None]
    epistemic_factor: list[float]
    node_type_factor: list[float]
    temporal_factor: list[float]
    recency_boost_factor: list[float | None]
    recency_raw: list[float]
    tie_break: list[float | None]


def fusion_inputs(
    rows: Sequence[Mapping[str, Any]],
    semantic: Sequence[float],
    lexical: Sequence[float],
    on_vector: Sequence[bool],
    on_lexical: Sequence[bool],
    weights: ScoringWeights,
    epistemic_weights: Mapping[str, float],
    current_state: bool,
) -> FusionInputs:
    """Per-candidate rank-fusion inputs: channel ranks and pool-normalized factors (§B.9)."""
    n = len(rows)
    sem_on = [on_vector[i] or semantic[i] > 0 for i in range(n)]
    lex_on = [on_lexical[i] or lexical[i] > 0 for i in range(n)]
    ranked = [sem_on[i] or lex_on[i] for i in range(n)]

    def channel_ranks(values: Sequence[float], member: Sequence[bool]) -> list[int | None]:
        idx = [i for i in range(n) if member[i]]
        ranks = competition_ranks([values[i] for i in idx])
        out: list[int | None] = [None] * n
        for i, r in zip(idx, ranks, strict=True):
            out[i] = r
        return out

    def normalized(raw: list[float]) -> list[float]:
        pool = [raw[i] for i in range(n) if ranked[i]]
        top = max(pool) if pool else 0.0
        return [min(1.0, v / top) if top > 0 else 0.0 for v in raw]

    epistemic = [
        epistemic_weight(r["epistemic_type"], r["condition_state"], epistemic_weights) for r in rows
    ]
    node_type = [float(weights.node_type_boost.get(r["node_type"], 1.0)) for r in rows]
    temporal = [1.0] * n
    stated = [r["event_time"] if r["event_time"] is not None else r["created_at"] for r in rows]
    recency_raw = [0.0] * n
    boost_factor: list[float | None] = [None] * n
    if current_state and weights.rrf_recency_boost is not None and any(ranked):
        newest = max(stated[i] for i in range(n) if ranked[i])
        lam = max(weights.recency_lambda, 0.05)
        recency_raw = [recency_factor(s, newest, lam) for s in stated]
        raw = [1.0 + weights.rrf_recency_boost * r for r in recency_raw]
        boost_factor = list(normalized(raw))
    tie: list[float | None] = [None] * n
    if weights.rrf_tie_break == "event_time":
        idx = [i for i in range(n) if ranked[i]]
        time_ranks = competition_ranks([float(stated[i]) for i in idx])
        for i, r in zip(idx, time_ranks, strict=True):
            tie[i] = (r - 1) / len(idx)
    return FusionInputs(
        semantic_rank=channel_ranks(semantic, sem_on),
        lexical_rank=channel_ranks(lexical, lex_on),
        epistemic_factor=normalized(epistemic),
        node_type_factor=normalized(node_type),
        temporal_factor=normalized(temporal),
        recency_boost_factor=boost_factor,
        recency_raw=recency_raw,
        tie_break=tie,
    )
