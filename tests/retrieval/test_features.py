"""Candidate filters and features over an owner's column index (reference §A.2, §B.4, §B.5, §B.9)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from prme.config import DEFAULT_EPISTEMIC_WEIGHTS
from prme.index.owner_index import (
    CONDITIONS,
    DECAYS,
    EPISTEMIC,
    LIFECYCLES,
    NO_TIME,
    NO_TTL,
    NODE_TYPES,
    SCOPES,
    SOURCES,
    OwnerIndex,
)
from prme.models.scoring import ScoringWeights, product_default_scoring
from prme.retrieval import scoring
from prme.retrieval.features import (
    US_PER_DAY,
    FilterSettings,
    competition_ranks,
    decayed_salience_confidence,
    epistemic_weights,
    fusion_inputs,
    keep_mask,
    minmax,
    node_type_boosts,
    recency,
    stated_times,
    weighted_features,
)
from prme.storage.timeutil import to_us

NOW = datetime(2026, 9, 1, tzinfo=UTC)
NOW_US = to_us(NOW)
DAY = int(US_PER_DAY)


def row(**overrides: Any) -> dict[str, Any]:
    """One memory as readable values (names, None for unset times)."""
    base: dict[str, Any] = {
        "scope": "personal",
        "node_type": "note",
        "epistemic": "asserted",
        "source": "user_stated",
        "lifecycle": "tentative",
        "decay": "medium",
        "condition": None,
        "created_at": NOW_US,
        "updated_at": NOW_US,
        "event_time": None,
        "valid_from": NOW_US,
        "valid_to": None,
        "last_reinforced_at": NOW_US,
        "confidence": 0.8,
        "salience": 0.5,
        "confidence_base": 0.8,
        "salience_base": 0.5,
        "reinforcement_boost": 0.0,
        "pinned": False,
        "ttl_days": None,
        "doc_len": 5,
    }
    base.update(overrides)
    return base


def index(*rows: dict[str, Any]) -> tuple[OwnerIndex, np.ndarray[Any, np.dtype[np.int64]]]:
    """An OwnerIndex holding ``rows`` (encoded as the store encodes them) and all positions."""
    tables = {
        "scope": SCOPES,
        "node_type": NODE_TYPES,
        "epistemic": EPISTEMIC,
        "source": SOURCES,
        "lifecycle": LIFECYCLES,
        "decay": DECAYS,
    }
    encoded = []
    for i, r in enumerate(rows, start=1):
        e = dict(r)
        for name, values in tables.items():
            e[name] = values.index(r[name])
        e["condition"] = CONDITIONS.index(r["condition"] or "unknown")
        for name in ("event_time", "valid_to"):
            e[name] = NO_TIME if r[name] is None else r[name]
        e["ttl_days"] = NO_TTL if r["ttl_days"] is None else r["ttl_days"]
        e.update(rowid=i, id=f"id-{i}", content_sha256="0" * 64, evidence_refs=f"[{i}]")
        encoded.append(e)
    ix = OwnerIndex(4)
    ix.append(encoded, np.zeros((len(rows), 4), dtype=np.float32), {})
    return ix, np.arange(len(rows), dtype=np.int64)


def settings(**overrides: Any) -> FilterSettings:
    values: dict[str, Any] = {
        "mode": "default",
        "time_from": None,
        "time_to": None,
        "knowledge_at": None,
        "event_time_from": None,
        "event_time_to": None,
        "exclude_node_types": frozenset(),
        "source_types": None,
        "unverified_threshold": 0.30,
    }
    values.update(overrides)
    return FilterSettings(**values)


def kept(rows: list[dict[str, Any]], **filters: Any) -> list[bool]:
    ix, pos = index(*rows)
    mask: list[bool] = keep_mask(ix, pos, settings(**filters)).tolist()
    return mask


def test_ttl_keeps_a_memory_until_its_stated_time_plus_ttl_days() -> None:
    event = NOW_US + 10 * DAY
    rows = [
        row(),  # no TTL: never expires
        row(ttl_days=0),  # lives through its created_at instant only
        row(ttl_days=30),
        row(ttl_days=1, event_time=event),  # the event time is the stated time
        row(ttl_days=0, node_type="preference"),  # no type is exempt
    ]
    assert kept(rows, clock_us=NOW_US) == [True, True, True, True, True]
    assert kept(rows, clock_us=NOW_US + 1) == [True, False, True, True, False]
    assert kept(rows, clock_us=NOW_US + 30 * DAY) == [True, False, True, False, False]
    assert kept(rows, clock_us=NOW_US + 30 * DAY + 1) == [True, False, False, False, False]
    assert kept(rows, clock_us=event + DAY) == [True, False, True, True, False]
    assert kept(rows, clock_us=event + DAY + 1) == [True, False, True, False, False]
    assert kept(rows) == [True] * 5  # no clock given: no TTL filter


DEFAULT_DROPS = [
    row(lifecycle="superseded"),
    row(lifecycle="archived"),
    row(epistemic="hypothetical"),
    row(epistemic="deprecated"),
    row(epistemic="conditional"),
    row(epistemic="conditional", condition="unknown"),
    row(epistemic="conditional", condition="false"),
    row(epistemic="conditional", condition="expired"),
    row(epistemic="unverified", confidence=0.3),  # <= threshold
]
DEFAULT_KEEPS = [
    row(),
    row(lifecycle="stable"),
    row(lifecycle="contested"),
    row(lifecycle="deprecated"),
    row(epistemic="conditional", condition="true"),
    row(epistemic="unverified", confidence=0.31),
    row(epistemic="inferred"),
    row(epistemic="observed"),
]


def test_default_mode_filters_and_explicit_keeps() -> None:
    rows = DEFAULT_DROPS + DEFAULT_KEEPS
    assert kept(rows) == [False] * len(DEFAULT_DROPS) + [True] * len(DEFAULT_KEEPS)
    assert kept(rows, mode="explicit") == [True] * len(rows)


def test_unverified_threshold_is_configurable() -> None:
    rows = [row(epistemic="unverified", confidence=0.5)]
    assert kept(rows, unverified_threshold=0.5) == [False]
    assert kept(rows, unverified_threshold=0.49) == [True]


def test_validity_filters() -> None:
    ended = row(valid_from=NOW_US - 10 * DAY, valid_to=NOW_US - 5 * DAY)
    open_ended = row(valid_from=NOW_US - 10 * DAY)
    exempt = [
        row(node_type=t, valid_from=NOW_US, valid_to=NOW_US + 1) for t in ("entity", "preference")
    ]
    rows = [ended, open_ended, *exempt]
    at = NOW - timedelta(days=5)
    # survives time_from only when valid_to is None or valid_to > time_from
    assert kept(rows, time_from=at) == [False, True, True, True]
    assert kept(rows, time_from=at - timedelta(microseconds=1)) == [True, True, True, True]
    assert kept(rows, time_from=NOW + timedelta(days=9)) == [False, True, True, True]
    # survives time_to only when valid_from <= time_to; entity/preference are exempt
    start = NOW - timedelta(days=10)
    assert kept(rows, time_to=start) == [True, True, True, True]
    assert kept(rows, time_to=start - timedelta(microseconds=1)) == [False, False, True, True]


def test_event_time_and_knowledge_filters() -> None:
    rows = [row(event_time=NOW_US - 3 * DAY), row(created_at=NOW_US - DAY)]
    day3 = NOW - timedelta(days=3)
    tick = timedelta(microseconds=1)
    assert kept(rows, event_time_from=day3, event_time_to=day3) == [True, False]  # inclusive
    assert kept(rows, event_time_from=day3 + tick) == [False, True]
    assert kept(rows, event_time_to=day3 - tick) == [False, False]
    # without event_time the stated time is created_at
    assert kept(rows, event_time_to=NOW - timedelta(days=1)) == [True, True]
    assert kept(rows, knowledge_at=NOW - timedelta(days=1)) == [False, True]
    assert kept(rows, knowledge_at=NOW - timedelta(days=1) - tick) == [False, False]


def test_type_filters() -> None:
    rows = [row(node_type="task"), row(), row(source="tool_output")]
    assert kept(rows, exclude_node_types=frozenset({"task"})) == [False, True, True]
    assert kept(rows, source_types=frozenset({"tool_output"})) == [False, False, True]
    assert kept(rows, source_types=frozenset()) == [False, False, False]


def test_epistemic_weights() -> None:
    ix, pos = index(
        row(epistemic="observed"),
        row(epistemic="asserted"),
        row(epistemic="conditional", condition="true"),
        row(epistemic="conditional"),
        row(epistemic="conditional", condition="false"),
        row(epistemic="conditional", condition="expired"),
        row(epistemic="inferred"),
        row(epistemic="unverified"),
    )
    weights = epistemic_weights(ix, pos, DEFAULT_EPISTEMIC_WEIGHTS)
    assert weights.tolist() == [1.0, 0.9, 0.9, 0.3, 0.1, 0.1, 0.7, 0.5]
    # an epistemic type missing from the map falls back to 0.7
    assert epistemic_weights(ix, pos, {"observed": 1.0})[1:2].tolist() == [0.7]


def test_node_type_boosts() -> None:
    ix, pos = index(row(node_type="fact"), row(node_type="summary"), row(node_type="note"))
    assert node_type_boosts(ix, pos, ScoringWeights()).tolist() == [1.15, 1.10, 1.0]


def test_virtual_decay() -> None:
    later = NOW_US + 10 * DAY
    late = NOW_US + 200 * DAY
    ix, pos = index(
        row(),
        row(reinforcement_boost=0.2, decay="fast"),
        row(epistemic="observed", decay="slow"),
        row(pinned=True),
        row(decay="permanent"),
        row(lifecycle="archived"),
        row(lifecycle="deprecated"),
        row(salience_base=0.9, reinforcement_boost=0.5),
    )
    sal, conf = decayed_salience_confidence(ix, pos, later)
    assert sal[0] == 0.5 * math.exp(-0.02 * 10)
    assert conf[0] == 0.8 * math.exp(-(0.02 / 2) * 10)
    assert sal[1] == 0.5 * math.exp(-0.07 * 10) + 0.2 * math.exp(-0.1 * 10)
    assert conf[2] == 0.8  # observed keeps confidence_base while t < 180 days
    assert sal[3:7].tolist() == [0.5] * 4 and conf[3:7].tolist() == [0.8] * 4
    sal, conf = decayed_salience_confidence(ix, pos, late)
    assert conf[2] == 0.8 * math.exp(-(0.005 / 2) * 200)
    assert sal[3:7].tolist() == [0.5] * 4 and conf[3:7].tolist() == [0.8] * 4
    # clamped to [0, 1]; a reinforcement in the future counts as t = 0
    sal, conf = decayed_salience_confidence(ix, pos, NOW_US - DAY)
    assert sal[7] == 1.0
    assert (sal[0], conf[0]) == (0.5, 0.8)


def test_recency_and_stated_times() -> None:
    times = np.array([NOW_US, NOW_US - 5 * DAY, NOW_US + DAY], dtype=np.int64)
    assert recency(times, NOW_US, 0.02).tolist() == [1.0, math.exp(-0.02 * 5), 1.0]
    ix, pos = index(row(event_time=NOW_US - DAY), row(created_at=NOW_US - 2 * DAY))
    assert stated_times(ix, pos).tolist() == [NOW_US - DAY, NOW_US - 2 * DAY]


def test_minmax() -> None:
    assert minmax(np.array([], dtype=np.float64)).tolist() == []
    assert minmax(np.array([3.0, 3.0])).tolist() == [1.0, 1.0]
    assert minmax(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, (3.0 - 2.0) / (4.0 - 2.0)]


def test_weighted_features_columns() -> None:
    ix, pos = index(
        row(node_type="fact", updated_at=NOW_US - 2 * DAY),
        row(epistemic="observed", decay="slow"),
    )
    f = weighted_features(
        ix,
        pos,
        np.array([0.9, 0.0]),
        np.array([0.5, 1.0]),
        np.array([0.7, 0.0]),
        np.array([3, 1], dtype=np.int64),
        NOW_US,
        ScoringWeights(),
        DEFAULT_EPISTEMIC_WEIGHTS,
    )
    assert f["semantic_similarity"].tolist() == [0.9, 0.0]
    assert f["lexical_relevance"].tolist() == [0.5, 1.0]
    assert f["graph_proximity"].tolist() == [0.7, 0.0]
    assert f["recency_factor"].tolist() == [math.exp(-0.02 * 2), 1.0]
    assert f["epistemic_weight"].tolist() == [0.9, 1.0]
    assert f["node_type_boost"].tolist() == [1.15, 1.0]
    assert f["path_score"].tolist() == [1.0, 1 / 3]
    assert f["temporal_affinity"].tolist() == [0.0, 0.0]
    assert f["salience"].tolist() == [0.5, 0.5]
    assert f["confidence"].tolist() == [0.8, 0.8]


def test_competition_ranks_vectorized() -> None:
    assert competition_ranks(np.array([0.9, 0.5, 0.5, 0.1])).tolist() == [1, 2, 2, 4]
    assert competition_ranks(np.array([], dtype=np.float64)).tolist() == []


@given(st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]) | st.floats(-1, 1), max_size=40))
def test_competition_ranks_match_the_scalar_form(values: list[float]) -> None:
    vectorized = competition_ranks(np.array(values, dtype=np.float64)).tolist()
    assert vectorized == scoring.competition_ranks(values)


def test_fusion_inputs_ranks_factors_and_tie_break() -> None:
    ix, pos = index(
        row(node_type="fact", created_at=NOW_US - 2 * DAY),
        row(epistemic="observed", event_time=NOW_US - DAY),
        row(created_at=NOW_US - 3 * DAY),
        row(),  # on no channel
    )
    fi = fusion_inputs(
        ix,
        pos,
        semantic=np.array([0.8, 0.8, 0.2, 0.0]),
        lexical=np.array([0.0, 1.0, 0.5, 0.0]),
        on_vector=np.array([True, True, True, False]),
        on_lexical=np.array([False, True, True, False]),
        weights=product_default_scoring(),
        epistemic_map=DEFAULT_EPISTEMIC_WEIGHTS,
        current_state=False,
    )
    assert fi.ranked.tolist() == [True, True, True, False]
    assert fi.semantic_rank.tolist() == [1, 1, 3, 0]  # 0: not on the channel
    assert fi.lexical_rank.tolist() == [0, 1, 2, 0]
    # factors: raw value / pool max over ranked candidates, capped at 1
    assert fi.epistemic_factor.tolist() == [0.9 / 1.0, 1.0, 0.9, 0.9]
    assert fi.node_type_factor.tolist() == [1.0, 1.0 / 1.15, 1.0 / 1.15, 1.0 / 1.15]
    assert fi.temporal_factor.tolist() == [1.0, 1.0, 1.0, 1.0]
    assert fi.recency_boost_factor is None  # not a current-state query
    assert fi.recency_raw.tolist() == [0.0] * 4
    # stated times newest first: row 1 (−1 d), row 0 (−2 d), row 2 (−3 d); (rank − 1)/count
    assert fi.tie_break is not None
    assert fi.tie_break[:3].tolist() == [1 / 3, 0 / 3, 2 / 3]


def test_fusion_inputs_recency_boost_on_current_state() -> None:
    ix, pos = index(row(created_at=NOW_US), row(created_at=NOW_US - 10 * DAY))
    fi = fusion_inputs(
        ix,
        pos,
        np.array([0.5, 0.4]),
        np.array([0.0, 0.0]),
        np.array([True, True]),
        np.array([False, False]),
        product_default_scoring(),
        DEFAULT_EPISTEMIC_WEIGHTS,
        current_state=True,
    )
    lam = max(0.02, 0.05)
    assert fi.recency_raw.tolist() == [1.0, math.exp(-lam * 10)]
    raw = [1 + 0.25 * 1.0, 1 + 0.25 * math.exp(-lam * 10)]
    assert fi.recency_boost_factor is not None
    assert fi.recency_boost_factor.tolist() == [1.0, raw[1] / raw[0]]


def test_fusion_without_opt_ins() -> None:
    ix, pos = index(row(), row())
    fi = fusion_inputs(
        ix,
        pos,
        np.array([0.5, 0.0]),
        np.array([0.0, 0.0]),
        np.array([True, False]),
        np.array([False, False]),
        ScoringWeights(fusion="rrf"),
        DEFAULT_EPISTEMIC_WEIGHTS,
        current_state=True,
    )
    assert fi.tie_break is None and fi.recency_boost_factor is None
    assert fi.semantic_rank.tolist() == [1, 0]


@pytest.mark.parametrize("mode", ["default", "explicit"])
def test_empty_pool(mode: str) -> None:
    ix, _ = index(row())
    empty = np.zeros(0, dtype=np.int64)
    assert keep_mask(ix, empty, settings(mode=mode)).tolist() == []
