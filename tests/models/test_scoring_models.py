"""ScoringWeights validation and version ids; bounded multipliers and adjusted_weights (§B.7, §M)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from prme.models.scoring import (
    ADDITIVE_FEATURES,
    MULTIPLIER_MAX,
    MULTIPLIER_MIN,
    RankingMultipliers,
    ScoringWeights,
    adjusted_weights,
    is_neutral,
    product_default_scoring,
)


def test_class_defaults() -> None:
    w = ScoringWeights()
    assert w.additive() == (0.25, 0.20, 0.20, 0.10, 0.10, 0.15)
    assert (w.w_epistemic, w.w_paths, w.recency_lambda) == (0.05, 0.0, 0.02)
    assert (w.temporal_boost, w.relevance_floor, w.current_update_multiplier) == (0.15, 0.35, 1.30)
    assert w.node_type_boost == {
        "fact": 1.15,
        "preference": 1.15,
        "decision": 1.15,
        "summary": 1.10,
        "instruction": 1.15,
    }
    assert (w.fusion, w.rrf_k, w.rrf_recency_boost, w.rrf_tie_break) == (
        "weighted",
        None,
        None,
        None,
    )


def test_version_id_vectors() -> None:
    # the weighted default reads the graph channel by its specificity (graph_specificity
    # "hop_idf"); the earlier weighted default (raw proximity) keeps its identity
    assert ScoringWeights().version_id == "105aa8efe1b0"
    assert ScoringWeights(graph_specificity=None).version_id == "95f3ec502933"
    # the reference's rrf (prme's earlier default) …
    assert ScoringWeights(
        fusion="rrf", rrf_recency_boost=0.25, rrf_tie_break="event_time"
    ).version_id == ("50b6b46ae105")
    # … and prme's default: k 10 and confidence-weighted channels are another base scoring
    assert product_default_scoring().version_id == "cd7ac23333a7"
    plain = product_default_scoring().model_copy(update={"rrf_channel_weights": None})
    assert plain.version_id != product_default_scoring().version_id


def test_rrf_k_defaults_to_60_only_under_rrf() -> None:
    assert ScoringWeights(fusion="rrf").rrf_k == 60
    assert ScoringWeights(fusion="rrf", rrf_k=10).rrf_k == 10
    dropped = ScoringWeights(rrf_k=10, rrf_recency_boost=0.5, rrf_tie_break="event_time")
    assert (dropped.rrf_k, dropped.rrf_recency_boost, dropped.rrf_tie_break) == (None, None, None)
    assert dropped == ScoringWeights()
    assert dropped.version_id == "105aa8efe1b0"
    channels = ScoringWeights(rrf_channel_weights="score_gap")
    assert channels.rrf_channel_weights is None and channels == ScoringWeights()


@pytest.mark.parametrize(
    "fields",
    [
        {"w_semantic": 0.5},  # sum 1.25
        {"w_semantic": -0.05, "w_lexical": 0.5},
        {"w_semantic": math.nan},
        {"w_graph": math.inf},
        {"recency_lambda": -1.0},
        {"current_update_multiplier": 2.5},
        {"current_update_multiplier": 0.9},
        {"fusion": "sum"},
        {"fusion": "rrf", "rrf_k": 0},
        {"fusion": "rrf", "rrf_recency_boost": 5.0},
        {"fusion": "rrf", "rrf_tie_break": "id"},
        {"unknown": 1},
    ],
)
def test_invalid_weights(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ScoringWeights.model_validate(fields)


def test_sum_tolerance_is_1e_6() -> None:
    ScoringWeights(w_semantic=0.25 + 5e-7)
    with pytest.raises(ValidationError, match="sum to 1"):
        ScoringWeights(w_semantic=0.25 + 2e-6)


def test_weights_are_frozen() -> None:
    with pytest.raises(ValidationError):
        ScoringWeights().w_semantic = 0.3  # type: ignore[misc]


def test_adjusted_weights_vector_m2() -> None:
    base = ScoringWeights()
    out = adjusted_weights(base, RankingMultipliers(lexical=2))
    assert out.w_semantic == 0.20833333333333334
    assert out.w_lexical == 0.33333333333333337
    assert out.w_graph == 0.16666666666666669
    assert out.w_recency == 0.08333333333333334
    assert out.w_salience == 0.08333333333333334
    assert out.w_confidence == 0.125
    # the formula written out: w_f·m_f / Σ w_g·m_g with Σ = 1.2
    total = 0.25 + 0.20 * 2 + 0.20 + 0.10 + 0.10 + 0.15
    assert out.w_lexical == 0.20 * 2 / total
    untouched = {f"w_{f}" for f in ADDITIVE_FEATURES}
    for name, value in base.model_dump().items():
        if name not in untouched:
            assert getattr(out, name) == value, name


def test_neutral_multipliers_are_bit_exact_identity() -> None:
    base = ScoringWeights(w_semantic=0.3, w_lexical=0.15)
    assert adjusted_weights(base, None) is base
    assert adjusted_weights(base, RankingMultipliers()) is base
    assert RankingMultipliers().is_neutral and is_neutral(None)
    assert not RankingMultipliers(graph=1.0000001).is_neutral


def test_zero_weight_stays_zero() -> None:
    base = ScoringWeights(w_graph=0.0, w_semantic=0.45)
    out = adjusted_weights(base, RankingMultipliers(graph=4.0, semantic=0.25))
    assert out.w_graph == 0.0
    assert math.isclose(sum(out.additive()), 1.0, abs_tol=1e-12)


def test_adjusted_weights_rejects_all_zero_products() -> None:
    base = ScoringWeights.model_construct(
        w_semantic=0.0, w_lexical=0.0, w_graph=0.0, w_recency=0.0, w_salience=0.0, w_confidence=0.0
    )
    with pytest.raises(ValueError, match="finite nonnegative additive weights"):
        adjusted_weights(base, RankingMultipliers(semantic=2))


@pytest.mark.parametrize("value", [MULTIPLIER_MIN, 1.0, MULTIPLIER_MAX])
def test_multiplier_bounds_are_inclusive(value: float) -> None:
    for name in ADDITIVE_FEATURES:
        assert getattr(RankingMultipliers.model_validate({name: value}), name) == value


@pytest.mark.parametrize("value", [0.0, 0.2499999, 4.0000001, math.nan, math.inf, -1.0])
def test_multiplier_out_of_bounds(value: float) -> None:
    for name in ADDITIVE_FEATURES:
        with pytest.raises(ValidationError):
            RankingMultipliers.model_validate({name: value})


def test_multipliers_forbid_extra_fields() -> None:
    with pytest.raises(ValidationError):
        RankingMultipliers.model_validate({"paths": 2.0})


multiplier = st.floats(min_value=MULTIPLIER_MIN, max_value=MULTIPLIER_MAX)


@given(st.tuples(*[multiplier] * 6))
def test_adjusted_weights_renormalize(values: tuple[float, ...]) -> None:
    m = RankingMultipliers(**dict(zip(ADDITIVE_FEATURES, values, strict=True)))
    out = adjusted_weights(ScoringWeights(), m)
    assert math.isclose(sum(out.additive()), 1.0, abs_tol=1e-9)
    assert all(w > 0 for w in out.additive())
