"""Scoring formulas: weighted (§B.5, §M.1), rank fusion (§B.9, §M.3), ranking key and ranks."""

from __future__ import annotations

from uuid import UUID

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from prme.models.scoring import RankingMultipliers, ScoringWeights, adjusted_weights
from prme.models.trace import RankFusionTrace, ScoreTrace
from prme.retrieval.scoring import (
    TIE_BREAK_SCALE,
    FactoredWeighted,
    competition_ranks,
    ranking_key,
    round_places,
    rrf_score,
    rrf_scores,
    rrf_value,
    weighted_score,
    weighted_scores,
)

FIELDS = [
    "semantic_similarity",
    "lexical_relevance",
    "graph_proximity",
    "recency_factor",
    "salience",
    "confidence",
    "epistemic_weight",
    "path_score",
    "temporal_affinity",
    "node_type_boost",
]


def trace(**features: float) -> ScoreTrace:
    return ScoreTrace(composite_score=0.0, **features)


CANDIDATE_A = trace(
    semantic_similarity=0.9,
    lexical_relevance=0.1,
    graph_proximity=1.0,
    recency_factor=1.0,
    salience=0.5,
    confidence=0.8,
    epistemic_weight=0.9,
    node_type_boost=1.15,
)
CANDIDATE_B = CANDIDATE_A.model_copy(
    update={"semantic_similarity": 0.2, "lexical_relevance": 0.9, "graph_proximity": 0.0}
)


def test_weighted_vector_m1() -> None:
    w = ScoringWeights()
    additive_a = 0.25 * 0.9 + 0.20 * 0.1 + 0.20 * 1.0 + 0.10 * 1.0 + 0.10 * 0.5 + 0.15 * 0.8
    assert weighted_score(CANDIDATE_A, w) == round(additive_a * 0.9 * 1.15, 10) == 0.740025
    additive_b = 0.25 * 0.2 + 0.20 * 0.9 + 0.20 * 0.0 + 0.10 * 1.0 + 0.10 * 0.5 + 0.15 * 0.8
    assert weighted_score(CANDIDATE_B, w) == round(additive_b * 0.9 * 1.15, 10) == 0.5175


def test_relevance_cap_below_floor() -> None:
    w = ScoringWeights()
    weak = CANDIDATE_A.model_copy(update={"semantic_similarity": 0.1, "lexical_relevance": 0.2})
    # sem + lex = 0.3 < 0.35: the score is capped at 0.1 + 0.2
    assert weighted_score(weak, w) == round(0.1 + 0.2, 10)
    no_floor = w.model_copy(update={"relevance_floor": 0.0})
    additive = 0.25 * 0.1 + 0.20 * 0.2 + 0.20 * 1.0 + 0.10 * 1.0 + 0.10 * 0.5 + 0.15 * 0.8
    assert weighted_score(weak, no_floor) == round(additive * 0.9 * 1.15, 10)


def test_temporal_affinity_adds_boost_before_node_type() -> None:
    w = ScoringWeights()
    timed = CANDIDATE_A.model_copy(update={"temporal_affinity": 0.5})
    additive = 0.25 * 0.9 + 0.20 * 0.1 + 0.20 * 1.0 + 0.10 * 1.0 + 0.10 * 0.5 + 0.15 * 0.8
    assert weighted_score(timed, w) == round((additive * 0.9 + 0.15 * 0.5) * 1.15, 10)


def test_multiplied_weights_change_the_score() -> None:
    applied = adjusted_weights(ScoringWeights(), RankingMultipliers(lexical=2))
    expected = (
        applied.w_semantic * 0.2
        + applied.w_lexical * 0.9
        + applied.w_graph * 0.0
        + applied.w_recency * 1.0
        + applied.w_salience * 0.5
        + applied.w_confidence * 0.8
    ) * 0.9
    assert weighted_score(CANDIDATE_B, applied) == round(expected * 1.15, 10)


def test_rrf_vectors_m3() -> None:
    k = 60
    assert rrf_value(1, 1, 1.0, 1.0, 1.0, None, None, k) == round(
        (1 / (60 + 1) + 1 / (60 + 1)) * (k + 1) / 2, 10
    )
    assert rrf_value(1, 1, 1.0, 1.0, 1.0, None, None, k) == 1.0
    assert rrf_value(1, 2, 1.0, 1.0, 1.0, None, None, k) == round(
        (1 / (60 + 1) + 1 / (60 + 2)) * (k + 1) / 2, 10
    )
    assert rrf_value(1, 2, 1.0, 1.0, 1.0, None, None, k) == 0.9919354839
    assert rrf_value(1, None, 1.0, 1.0, 1.0, None, None, k) == round(1 / (60 + 1) * (k + 1) / 2, 10)
    assert rrf_value(1, None, 1.0, 1.0, 1.0, None, None, k) == 0.5
    three = round((1 / (60 + 3) + 1 / (60 + 3)) * (k + 1) / 2, 10)
    assert three == 0.9682539683
    assert rrf_value(3, 3, 1.0, 1.0, 1.0, None, 0.5, k) == three - 0.5 * 1e-11
    assert rrf_value(3, 3, 1.0, 1.0, 1.0, None, 0.5, k) == 0.968253968295


def test_rrf_factors_multiply_and_no_channel_scores_zero() -> None:
    k = 60
    fused = 1 / (60 + 2) + 1 / (60 + 5)
    assert rrf_value(2, 5, 0.9, 0.8, 1.0, 0.5, None, k) == round(
        fused * (k + 1) / 2 * 0.9 * 0.8 * 1.0 * 0.5, 10
    )
    assert rrf_value(None, None, 1.0, 1.0, 1.0, 1.0, 0.5, k) == 0.0
    # a zero score does not lose the tie-break fraction
    assert rrf_value(1, 1, 0.0, 1.0, 1.0, None, 0.5, k) == 0.0
    assert TIE_BREAK_SCALE == 1e-11


def test_rrf_score_reads_the_trace() -> None:
    fusion = RankFusionTrace(
        semantic_rank=2,
        lexical_rank=None,
        epistemic_factor=0.9,
        node_type_factor=1.0,
        temporal_factor=1.0,
        recency_boost_factor=0.8,
        tie_break=0.25,
    )
    expected = round(1 / (10 + 2) * (10 + 1) / 2 * 0.9 * 1.0 * 1.0 * 0.8, 10) - 0.25 * 1e-11
    assert rrf_score(fusion, 10) == expected


def test_ranking_key_orders_score_then_path_then_id() -> None:
    a, b = UUID(int=1), UUID(int=2)
    keys = [
        ranking_key(0.5, 0.0, b),
        ranking_key(0.5, 0.0, a),
        ranking_key(0.5, 1.0, b),
        ranking_key(0.9, 0.0, b),
    ]
    assert sorted(keys) == [keys[3], keys[2], keys[1], keys[0]]
    assert ranking_key(0.5, 0.3, a) == ranking_key(0.5, 0.3, str(a))


def test_competition_ranks() -> None:
    assert competition_ranks([0.9, 0.5, 0.5, 0.1]) == [1, 2, 2, 4]
    assert competition_ranks([0.1, 0.5, 0.9, 0.5]) == [4, 2, 1, 2]
    assert competition_ranks([]) == []
    assert competition_ranks([3.0, 3.0, 3.0]) == [1, 1, 1]


unit = st.floats(min_value=0.0, max_value=1.0)
feature_rows = st.fixed_dictionaries(
    {
        "semantic_similarity": unit,
        "lexical_relevance": unit,
        "graph_proximity": st.sampled_from([0.0, 0.4, 0.7, 1.0]),
        "recency_factor": unit,
        "salience": unit,
        "confidence": unit,
        "epistemic_weight": st.sampled_from([1.0, 0.9, 0.7, 0.5, 0.3, 0.1]) | unit,
        "path_score": st.sampled_from([1 / 3, 2 / 3, 1.0]),
        "temporal_affinity": st.just(0.0) | unit,
        "node_type_boost": st.sampled_from([1.0, 1.1, 1.15]) | st.floats(0.5, 2.0),
    }
)
weights = st.builds(
    lambda raw, floor, boost: ScoringWeights(
        w_semantic=raw[0] / sum(raw),
        w_lexical=raw[1] / sum(raw),
        w_graph=raw[2] / sum(raw),
        w_recency=raw[3] / sum(raw),
        w_salience=raw[4] / sum(raw),
        w_confidence=1.0 - sum(r / sum(raw) for r in raw[:5]),
        relevance_floor=floor,
        temporal_boost=boost,
    ),
    st.lists(st.floats(0.01, 1.0), min_size=6, max_size=6),
    st.sampled_from([0.0, 0.35]) | st.floats(0.0, 2.0),
    st.floats(0.0, 1.0),
)
multipliers = st.none() | st.builds(
    RankingMultipliers,
    semantic=st.floats(0.25, 4.0),
    lexical=st.floats(0.25, 4.0),
    graph=st.floats(0.25, 4.0),
    recency=st.floats(0.25, 4.0),
    salience=st.floats(0.25, 4.0),
    confidence=st.floats(0.25, 4.0),
)


@given(st.lists(feature_rows, min_size=1, max_size=30), weights, multipliers)
def test_vectorized_equals_scalar_bit_for_bit(
    rows: list[dict[str, float]], base: ScoringWeights, m: RankingMultipliers | None
) -> None:
    applied = adjusted_weights(base, m)
    arrays = {name: np.asarray([r[name] for r in rows], dtype=np.float64) for name in FIELDS}
    vectorized = weighted_scores(arrays, applied)
    scalar = [weighted_score(trace(**r), applied) for r in rows]
    assert [s.hex() for s in vectorized] == [s.hex() for s in scalar]


rank = st.integers(0, 600)  # 0 = not on the channel
factor = st.floats(0.0, 1.0)
fusion_rows = st.tuples(rank, rank, factor, factor, factor, factor, st.floats(0.0, 0.999))


@given(
    st.lists(fusion_rows, min_size=1, max_size=30),
    st.booleans(),
    st.booleans(),
    st.integers(1, 10000),
)
def test_vectorized_rrf_equals_scalar_bit_for_bit(
    rows: list[tuple[int, int, float, float, float, float, float]],
    with_recency: bool,
    with_tie: bool,
    k: int,
) -> None:
    columns = list(zip(*rows, strict=True))
    vectorized = rrf_scores(
        np.asarray(columns[0], dtype=np.int64),
        np.asarray(columns[1], dtype=np.int64),
        np.asarray(columns[2], dtype=np.float64),
        np.asarray(columns[3], dtype=np.float64),
        np.asarray(columns[4], dtype=np.float64),
        np.asarray(columns[5], dtype=np.float64) if with_recency else None,
        np.asarray(columns[6], dtype=np.float64) if with_tie else None,
        k,
    )
    scalar = [
        rrf_value(
            s or None,
            lx or None,
            e,
            t,
            tf,
            r if with_recency else None,
            tie if with_tie else None,
            k,
        )
        for s, lx, e, t, tf, r, tie in rows
    ]
    assert [v.hex() for v in vectorized] == [v.hex() for v in scalar]


def formula_written_out(t: dict[str, float], w: ScoringWeights) -> float:
    """Reference §B.5 steps 3–8 in plain Python floats, term by term."""
    score = (
        w.w_semantic * t["semantic_similarity"]
        + w.w_lexical * t["lexical_relevance"]
        + w.w_graph * t["graph_proximity"]
        + w.w_recency * t["recency_factor"]
        + w.w_salience * t["salience"]
        + w.w_confidence * t["confidence"]
    ) * t["epistemic_weight"]
    if t["temporal_affinity"] != 0.0:
        score = score + w.temporal_boost * t["temporal_affinity"]
    score = score * t["node_type_boost"]
    relevance = t["semantic_similarity"] + t["lexical_relevance"]
    if w.relevance_floor > 0.0 and relevance < w.relevance_floor:
        score = min(score, relevance)
    return round(score, 10)


@given(st.lists(feature_rows, min_size=1, max_size=30), weights, multipliers)
def test_the_one_formula_equals_the_formula_written_out(
    rows: list[dict[str, float]], base: ScoringWeights, m: RankingMultipliers | None
) -> None:
    applied = adjusted_weights(base, m)
    arrays = {name: np.asarray([r[name] for r in rows], dtype=np.float64) for name in FIELDS}
    expected = [formula_written_out(r, applied) for r in rows]
    assert [s.hex() for s in weighted_scores(arrays, applied)] == [s.hex() for s in expected]


@given(st.lists(feature_rows, min_size=1, max_size=30), weights, multipliers)
def test_the_factored_form_is_the_formula_before_rounding(
    rows: list[dict[str, float]], base: ScoringWeights, m: RankingMultipliers | None
) -> None:
    """FactoredWeighted (the fit's form) scores as the weighted formula with adjusted weights,
    up to the final 10-place rounding and float reassociation."""
    chosen = m or RankingMultipliers()
    arrays = {name: np.asarray([r[name] for r in rows], dtype=np.float64) for name in FIELDS}
    formulas = np.asarray([base.formula()] * len(rows), dtype=np.float64)
    factored = FactoredWeighted(arrays, formulas).scores(chosen.as_tuple()).tolist()
    exact = weighted_scores(arrays, adjusted_weights(base, chosen))
    assert np.allclose(factored, exact, rtol=0.0, atol=1e-9)


def near_ties() -> list[float]:
    """Values whose product with 1e10 lies at or next to a half-integer, where ``x * 1e10``
    alone cannot tell which way Python's ``round(x, 10)`` goes."""
    values: list[float] = []
    for n in [0, 1, 2, 7, 12345, 99999999, 4_999_999_999, 123_456_789_012]:
        for sign in (1.0, -1.0):
            tie = sign * (n + 0.5) / 1e10
            values += [tie, np.nextafter(tie, np.inf), np.nextafter(tie, -np.inf)]
    return values


@given(
    st.lists(
        st.floats(allow_nan=True, allow_infinity=True)
        | st.floats(-4.0, 4.0)
        | st.floats(-1e-9, 1e-9)
        | st.sampled_from(near_ties()),
        max_size=50,
    )
)
def test_round_places_is_pythons_round_bit_for_bit(values: list[float]) -> None:
    values = values + near_ties()
    rounded = round_places(np.asarray(values, dtype=np.float64))
    assert [r.hex() for r in rounded] == [round(v, 10).hex() for v in values]
