"""Candidate filters and features, vectorized over positions in an owner's column index."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from prme.index.owner_index import (
    CONDITIONS,
    DECAYS,
    EPISTEMIC,
    LIFECYCLES,
    NO_TIME,
    NODE_TYPES,
    SOURCES,
    OwnerIndex,
)
from prme.models.enums import DECAY_LAMBDA, DecayProfile
from prme.models.scoring import ScoringWeights
from prme.retrieval.fusion import channel_weights
from prme.retrieval.scoring import FloatArray
from prme.timeutil import to_us

US_PER_DAY = 86_400_000_000.0
US_PER_DAY_INT = 86_400_000_000
GRAPH_PROXIMITY = {1: 1.0, 2: 0.7, 3: 0.4}
Positions = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


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
    clock_us: int | None = None  # the request's clock: memories expired by then are dropped


def _codes(values: list[str], names: Sequence[str]) -> list[int]:
    return [values.index(n) for n in names]


def _is_one_of(
    codes: npt.NDArray[np.integer], values: list[str], names: Sequence[str]
) -> BoolArray:
    """``codes`` (indexes into ``values``) naming one of ``names``, by table look-up."""
    table = np.zeros(len(values), dtype=np.bool_)
    table[_codes(values, names)] = True
    result: BoolArray = table[codes]
    return result


def ttl_expired(
    stated_us: npt.NDArray[np.int64], ttl_days: npt.NDArray[np.int64], clock_us: int
) -> BoolArray:
    """Which memories have expired by ``clock_us``: a memory with ``ttl_days = N`` (``NO_TTL``
    = never) lives until its stated time (``event_time``, else ``created_at``) plus N days, and
    is expired once the clock is past that: ``ttl_days >= 0 and stated + N days < clock``.
    Integer microseconds, so no date can overflow."""
    ends = stated_us + np.maximum(ttl_days, 0) * US_PER_DAY_INT
    result: BoolArray = (ttl_days >= 0) & (ends < clock_us)
    return result


def keep_mask(ix: OwnerIndex, pos: Positions, f: FilterSettings) -> BoolArray:
    """Bitemporal, type, TTL and DEFAULT-mode epistemic/lifecycle filters (§A.2, §B.1)."""
    node_type = ix.col("node_type")[pos]
    keep = np.ones(len(pos), dtype=np.bool_)
    exempt = _is_one_of(node_type, NODE_TYPES, ["entity", "preference"])
    if f.time_from is not None:
        valid_to = ix.col("valid_to")[pos]
        keep &= exempt | (valid_to == NO_TIME) | (valid_to > to_us(f.time_from))
    if f.time_to is not None:
        keep &= exempt | (ix.col("valid_from")[pos] <= to_us(f.time_to))
    event = ix.col("event_time")[pos]
    stated = np.where(event == NO_TIME, ix.col("created_at")[pos], event)
    if f.event_time_from is not None:
        keep &= stated >= to_us(f.event_time_from)
    if f.event_time_to is not None:
        keep &= stated <= to_us(f.event_time_to)
    if f.knowledge_at is not None:
        keep &= ix.col("created_at")[pos] <= to_us(f.knowledge_at)
    if f.clock_us is not None:
        keep &= ~ttl_expired(stated, ix.col("ttl_days")[pos], f.clock_us)
    if f.exclude_node_types:
        keep &= ~_is_one_of(node_type, NODE_TYPES, sorted(f.exclude_node_types))
    if f.source_types is not None:
        keep &= _is_one_of(ix.col("source")[pos], SOURCES, sorted(f.source_types))
    if f.mode == "default":
        lifecycle = ix.col("lifecycle")[pos]
        hidden = _is_one_of(lifecycle, LIFECYCLES, ["superseded", "archived"])
        if f.knowledge_at is not None:
            # An updated memory's old version (superseded, valid_to = the update time) is
            # what was known at a ``knowledge_at`` before the update.
            ended = ix.col("valid_to")[pos]
            known_then = (lifecycle == LIFECYCLES.index("superseded")) & (ended != NO_TIME)
            hidden &= ~(known_then & (ended > to_us(f.knowledge_at)))
        keep &= ~hidden
        epistemic = ix.col("epistemic")[pos]
        conditional = epistemic == EPISTEMIC.index("conditional")
        keep &= ~conditional | (ix.col("condition")[pos] == CONDITIONS.index("true"))
        keep &= ~_is_one_of(epistemic, EPISTEMIC, ["hypothetical", "deprecated"])
        unverified = epistemic == EPISTEMIC.index("unverified")
        keep &= ~unverified | (ix.col("confidence")[pos] > f.unverified_threshold)
    return keep


def epistemic_weights(ix: OwnerIndex, pos: Positions, weights: Mapping[str, float]) -> FloatArray:
    """The epistemic multiplier; conditional claims score by their condition state."""
    table = np.array([float(weights.get(e, 0.7)) for e in EPISTEMIC], dtype=np.float64)
    epistemic = ix.col("epistemic")[pos].astype(np.int64)
    condition = ix.col("condition")[pos]
    as_if = np.full(len(pos), EPISTEMIC.index("hypothetical"), dtype=np.int64)
    as_if[condition == CONDITIONS.index("true")] = EPISTEMIC.index("asserted")
    as_if[_is_one_of(condition, CONDITIONS, ["false", "expired"])] = EPISTEMIC.index("deprecated")
    effective = np.where(epistemic == EPISTEMIC.index("conditional"), as_if, epistemic)
    result: FloatArray = table[effective]
    return result


def node_type_boosts(ix: OwnerIndex, pos: Positions, weights: ScoringWeights) -> FloatArray:
    table = np.array([float(weights.node_type_boost.get(t, 1.0)) for t in NODE_TYPES])
    result: FloatArray = table[ix.col("node_type")[pos].astype(np.int64)]
    return result


def decayed_salience_confidence(
    ix: OwnerIndex, pos: Positions, now_us: int
) -> tuple[FloatArray, FloatArray]:
    """Effective salience and confidence (virtual decay), clamped to [0, 1] (§B.5 step 1)."""
    lambdas = np.array([DECAY_LAMBDA[DecayProfile(d)] for d in DECAYS], dtype=np.float64)
    decay = ix.col("decay")[pos].astype(np.int64)
    lam = lambdas[decay]
    t = np.maximum(0.0, (now_us - ix.col("last_reinforced_at")[pos]) / US_PER_DAY)
    sal_base = ix.col("salience_base")[pos]
    conf_base = ix.col("confidence_base")[pos]
    salience = sal_base * np.exp(-lam * t) + ix.col("reinforcement_boost")[pos] * np.exp(-0.1 * t)
    confidence = conf_base * np.exp(-(lam / 2) * t)
    observed_young = (ix.col("epistemic")[pos] == EPISTEMIC.index("observed")) & (t < 180)
    confidence = np.where(observed_young, conf_base, confidence)
    frozen = (
        ix.col("pinned")[pos]
        | (decay == DECAYS.index("permanent"))
        | _is_one_of(ix.col("lifecycle")[pos], LIFECYCLES, ["archived", "deprecated"])
    )
    salience = np.where(frozen, sal_base, salience)
    confidence = np.where(frozen, conf_base, confidence)
    return np.clip(salience, 0.0, 1.0), np.clip(confidence, 0.0, 1.0)


def recency(times_us: npt.NDArray[np.int64], now_us: int, recency_lambda: float) -> FloatArray:
    """``min(1, exp(−λ · days))`` with days = max(0, now − time)."""
    days = np.maximum(0.0, (now_us - times_us) / US_PER_DAY)
    result: FloatArray = np.minimum(1.0, np.exp(-recency_lambda * days))
    return result


def minmax(values: FloatArray) -> FloatArray:
    """(s − min)/(max − min); all equal → 1.0."""
    if values.size == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    if hi == lo:
        return np.ones_like(values)
    result: FloatArray = (values - lo) / (hi - lo)
    return result


def graph_specificity(graph: FloatArray) -> FloatArray:
    """How specific the graph channel's evidence is for one query, per candidate:
    ``ln(N/n_h) / ln(N)``.

    ``N`` is the number of candidates and ``n_h`` how many of them the graph reached at the
    candidate's hop (its proximity level: each hop has its own proximity). Like BM25's idf for
    a term, being at a hop that many candidates share carries little evidence: the only
    candidate at its hop gets 1, a hop that reached every candidate gives 0. A candidate the
    graph did not reach gets 1 (its proximity is 0 anyway); fewer than two candidates cannot
    be discriminated, so every factor is 1 and the proximity is unchanged.
    """
    total = int(graph.size)
    factors: FloatArray = np.ones(total, dtype=np.float64)
    if total < 2:
        return factors
    log_total = math.log(total)
    levels, counts = np.unique(graph[graph != 0.0], return_counts=True)
    for level, count in zip(levels.tolist(), counts.tolist(), strict=True):
        factors[graph == level] = math.log(total / count) / log_total
    return factors


def graph_feature(graph: FloatArray, weights: ScoringWeights) -> FloatArray:
    """The weighted formula's ``graph_proximity``: the proximity, weighed by
    :func:`graph_specificity` when ``weights.graph_specificity`` is ``"hop_idf"``."""
    if weights.graph_specificity is None:
        return graph
    result: FloatArray = graph * graph_specificity(graph)
    return result


def stated_times(ix: OwnerIndex, pos: Positions) -> npt.NDArray[np.int64]:
    event = ix.col("event_time")[pos]
    result: npt.NDArray[np.int64] = np.where(event == NO_TIME, ix.col("created_at")[pos], event)
    return result


def weighted_features(
    ix: OwnerIndex,
    pos: Positions,
    semantic: FloatArray,
    lexical: FloatArray,
    graph: FloatArray,
    path_counts: npt.NDArray[np.int64],
    now_us: int,
    weights: ScoringWeights,
    epistemic_map: Mapping[str, float],
) -> dict[str, FloatArray]:
    """Feature arrays keyed by ScoreTrace field names (the weighted formula's inputs)."""
    salience, confidence = decayed_salience_confidence(ix, pos, now_us)
    return {
        "semantic_similarity": semantic,
        "lexical_relevance": lexical,
        "graph_proximity": graph_feature(graph, weights),
        "recency_factor": recency(ix.col("updated_at")[pos], now_us, weights.recency_lambda),
        "salience": salience,
        "confidence": confidence,
        "epistemic_weight": epistemic_weights(ix, pos, epistemic_map),
        "path_score": np.minimum(path_counts / 3, 1.0),
        "temporal_affinity": np.zeros(len(pos), dtype=np.float64),
        "node_type_boost": node_type_boosts(ix, pos, weights),
    }


def competition_ranks(values: FloatArray) -> npt.NDArray[np.int64]:
    """Descending competition ranks: ties share the better rank (1, 2, 2, 4)."""
    ascending = np.sort(values)
    result: npt.NDArray[np.int64] = (
        len(values) - np.searchsorted(ascending, values, side="right") + 1
    )
    return result


@dataclass(frozen=True, slots=True)
class FusionInputs:
    """Per-candidate rank-fusion inputs; rank 0 means "not on this channel"."""

    semantic_rank: npt.NDArray[np.int64]
    lexical_rank: npt.NDArray[np.int64]
    epistemic_factor: FloatArray
    node_type_factor: FloatArray
    temporal_factor: FloatArray
    recency_boost_factor: FloatArray | None
    recency_raw: FloatArray
    tie_break: FloatArray | None
    ranked: BoolArray
    channel_weights: tuple[float, float] | None = None  # (semantic, lexical); None = plain


def _pool_normalized(raw: FloatArray, ranked: BoolArray) -> FloatArray:
    top = float(raw[ranked].max()) if ranked.any() else 0.0
    if top <= 0:
        return np.zeros_like(raw)
    result: FloatArray = np.minimum(1.0, raw / top)
    return result


def fusion_inputs(
    ix: OwnerIndex,
    pos: Positions,
    semantic: FloatArray,
    lexical: FloatArray,
    on_vector: BoolArray,
    on_lexical: BoolArray,
    weights: ScoringWeights,
    epistemic_map: Mapping[str, float],
    current_state: bool,
) -> FusionInputs:
    """Channel ranks and pool-normalized factors for reciprocal-rank fusion (§B.9)."""
    n = len(pos)
    sem_on = on_vector | (semantic > 0)
    lex_on = on_lexical | (lexical > 0)
    ranked = sem_on | lex_on
    sem_rank = np.zeros(n, dtype=np.int64)
    lex_rank = np.zeros(n, dtype=np.int64)
    sem_rank[sem_on] = competition_ranks(semantic[sem_on])
    lex_rank[lex_on] = competition_ranks(lexical[lex_on])
    stated = stated_times(ix, pos)
    recency_raw = np.zeros(n, dtype=np.float64)
    boost: FloatArray | None = None
    if current_state and weights.rrf_recency_boost is not None and ranked.any():
        newest = int(stated[ranked].max())
        recency_raw = recency(stated, newest, max(weights.recency_lambda, 0.05))
        boost = _pool_normalized(1.0 + weights.rrf_recency_boost * recency_raw, ranked)
    tie: FloatArray | None = None
    if weights.rrf_tie_break == "event_time" and ranked.any():
        tie = np.zeros(n, dtype=np.float64)
        count = int(ranked.sum())
        tie[ranked] = (competition_ranks(stated[ranked].astype(np.float64)) - 1) / count
    weights_by_channel = None
    if weights.rrf_channel_weights == "score_gap":
        weights_by_channel = channel_weights(semantic[sem_on], lexical[lex_on])
    return FusionInputs(
        channel_weights=weights_by_channel,
        semantic_rank=sem_rank,
        lexical_rank=lex_rank,
        epistemic_factor=_pool_normalized(epistemic_weights(ix, pos, epistemic_map), ranked),
        node_type_factor=_pool_normalized(node_type_boosts(ix, pos, weights), ranked),
        temporal_factor=_pool_normalized(np.ones(n, dtype=np.float64), ranked),
        recency_boost_factor=boost,
        recency_raw=recency_raw,
        tie_break=tie,
        ranked=ranked,
    )
