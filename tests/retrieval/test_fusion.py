"""Confidence-weighted rank fusion: pure inputs → outputs, no pack."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from prme.canonical import canonical_json
from prme.models.scoring import ScoringWeights, product_default_scoring
from prme.models.trace import RankFusionTrace
from prme.retrieval.fusion import HEAD, channel_confidence, channel_weights
from prme.retrieval.scoring import rrf_score, rrf_scores, rrf_value


def test_confidence_is_head_spread_over_deviation() -> None:
    scores = np.arange(20, dtype=np.float64)  # 19 … 0
    expected = (19.0 - (19.0 - (HEAD - 1))) / float(np.std(scores))
    assert channel_confidence(scores) == expected
    assert channel_confidence(scores[::-1].copy()) == expected  # order does not matter
    short = np.array([3.0, 1.0])  # fewer than HEAD scores: the head is all of them
    assert channel_confidence(short) == 2.0 / 1.0


def test_confidence_undefined_is_zero() -> None:
    assert channel_confidence(np.array([], dtype=np.float64)) == 0.0
    assert channel_confidence(np.array([0.7])) == 0.0
    assert channel_confidence(np.full(5, 0.3)) == 0.0


@given(
    st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=40),
    st.floats(0.01, 100.0),
    st.floats(-100.0, 100.0),
)
def test_confidence_ignores_positive_affine_maps(values: list[float], a: float, b: float) -> None:
    raw = np.array(values, dtype=np.float64)
    if np.std(raw) < 1e-6:
        return
    assert math.isclose(
        channel_confidence(raw), channel_confidence(a * raw + b), rel_tol=1e-6, abs_tol=1e-9
    )


def test_weights_follow_confidence_and_sum_to_two() -> None:
    peaked = np.array([10.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    flat = np.linspace(0.5, 0.4, 12)
    ws, wl = channel_weights(flat, peaked)
    assert wl > ws and math.isclose(ws + wl, 2.0)
    assert channel_weights(peaked, peaked) == (1.0, 1.0)  # equal confidence: plain rrf
    assert channel_weights(np.array([]), np.array([])) == (1.0, 1.0)
    assert channel_weights(flat, np.array([])) == (2.0, 0.0)  # no lexical hits


def test_weighted_rrf_scalar_and_vector_agree_bit_for_bit() -> None:
    sem = np.array([1, 2, 0, 3], dtype=np.int64)
    lex = np.array([2, 0, 1, 3], dtype=np.int64)
    ones = np.ones(4)
    weights = (0.6180339887, 1.3819660113)
    vector = rrf_scores(sem, lex, ones, ones, ones, None, None, 10, weights)
    scalar = [
        rrf_value(int(s) or None, int(x) or None, 1.0, 1.0, 1.0, None, None, 10, *weights)
        for s, x in zip(sem, lex, strict=True)
    ]
    assert vector == scalar
    assert vector[2] == round(weights[1] / 11 * 11 / 2, 10)


def test_plain_rrf_is_unchanged_by_absent_weights() -> None:
    """Receipts recorded before channel weights replay exactly as the plain formula."""
    sem = np.array([1, 5, 0], dtype=np.int64)
    lex = np.array([3, 0, 2], dtype=np.int64)
    ones = np.ones(3)
    plain = rrf_scores(sem, lex, ones, ones, ones, None, None, 60)
    assert plain == rrf_scores(sem, lex, ones, ones, ones, None, None, 60, (1.0, 1.0))
    expected = [round((1 / 61 + 1 / 63) * 61 / 2, 10), round(1 / 65 * 61 / 2, 10)]
    assert plain[:2] == expected
    trace = RankFusionTrace(
        semantic_rank=1, lexical_rank=3, epistemic_factor=1.0, node_type_factor=1.0,
        temporal_factor=1.0,
    )  # fmt: skip
    assert rrf_score(trace, 60) == plain[0]


def test_absent_fields_keep_old_bytes() -> None:
    """Version-1 bytes never change: the new fields are omitted while absent."""
    trace = RankFusionTrace(
        semantic_rank=2, epistemic_factor=1.0, node_type_factor=1.0, temporal_factor=1.0
    )
    assert "semantic_weight" not in json.loads(canonical_json(trace))
    old = ScoringWeights(fusion="rrf", rrf_recency_boost=0.25, rrf_tie_break="event_time")
    assert "rrf_channel_weights" not in json.loads(canonical_json(old))
    assert ScoringWeights.model_validate_json(canonical_json(old)) == old
    weighted = RankFusionTrace.model_validate(
        {**json.loads(canonical_json(trace)), "semantic_weight": 1.5, "lexical_weight": 0.5}
    )
    assert json.loads(canonical_json(weighted))["lexical_weight"] == 0.5
    assert product_default_scoring().rrf_channel_weights == "score_gap"
