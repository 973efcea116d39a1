"""Validating a RetrievalRequest once, without a pack: defaults from the configuration, values
normalized, and each bad value an InvalidInputError naming its field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from prme.config import RetrievalConfig
from prme.errors import InvalidInputError
from prme.models.enums import RetrievalMode, Scope
from prme.models.request import PARAMETERS, RetrievalRequest
from prme.models.scoring import RankingMultipliers, ScoringWeights, product_default_scoring
from prme.retrieval.validate import validate_request

CFG = RetrievalConfig(default_limit=7, token_budget=99)


def valid(**values: Any) -> Any:
    request = RetrievalRequest.unchecked({"query": "Aster", "user_id": "alice", **values})
    return validate_request(request, CFG, ScoringWeights())


def test_defaults_come_from_the_configuration() -> None:
    r = valid()
    assert (r.owner, r.query, r.scopes) == ("alice", "Aster", None)
    assert (r.result_limit, r.token_budget) == (7, 99)
    assert r.base == ScoringWeights() and r.multipliers is None
    assert r.mode is RetrievalMode.DEFAULT and r.include_cross_scope is True
    assert r.reference_time is None and r.min_score is None


def test_values_are_normalized() -> None:
    east = timezone(timedelta(hours=2))
    r = valid(
        scope="project",
        reference_time=datetime(2026, 9, 1, 12, tzinfo=east),
        limit=3,
        token_budget=0,
        min_score=0,
        exclude_node_types=["task", "task"],
        source_types=("user_stated",),
        weights={"fusion": "rrf"},
        retrieval_mode="explicit",
    )
    assert r.scopes == [Scope.PROJECT]
    assert r.reference_time == datetime(2026, 9, 1, 10, tzinfo=UTC)
    assert (r.result_limit, r.token_budget, r.min_score) == (3, 0, 0.0)
    assert r.exclude_node_types == frozenset({"task"})
    assert r.source_types == frozenset({"user_stated"})
    assert r.base.fusion == "rrf" and r.mode is RetrievalMode.EXPLICIT


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"query": "   "}, "query"),
        ({"query": "x" * 10_001}, "query"),
        ({"user_id": ""}, "user_id"),
        ({"scope": []}, "scope"),
        ({"time_from": datetime(2026, 1, 1)}, "time_from"),
        ({"event_time_to": datetime(2026, 1, 1)}, "event_time_to"),
        ({"limit": -1}, "limit"),
        ({"token_budget": True}, "token_budget"),
        ({"min_score": float("nan")}, "min_score"),
        ({"max_per_source": 0}, "max_per_source"),
        ({"exclude_node_types": "task"}, "exclude_node_types"),
        ({"source_types": ["rumour"]}, "source_types"),
        ({"weights": {"fusion": "magic"}}, "weights.fusion"),
        ({"ranking_multipliers": {"lexical": 9}}, "ranking_multipliers.lexical"),
        ({"retrieval_mode": "loose"}, "retrieval_mode"),
        ({"include_cross_scope": 1}, "include_cross_scope"),
        (
            {"weights": product_default_scoring(), "ranking_multipliers": RankingMultipliers(lexical=2)},
            "ranking_multipliers",
        ),
    ],
)
def test_each_bad_value_names_its_field(values: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        valid(**values)
    assert caught.value.field == field


def test_unchecked_takes_only_parameters() -> None:
    with pytest.raises(TypeError, match="limt"):
        RetrievalRequest.unchecked({"query": "x", "user_id": "a", "limt": 3})
    request = RetrievalRequest.unchecked({"query": "x", "user_id": "a"})
    assert {name: getattr(request, name) for name in PARAMETERS} == {
        name: RetrievalRequest.model_fields[name].default if name not in ("query", "user_id")
        else {"query": "x", "user_id": "a"}[name]
        for name in PARAMETERS
    }


def test_filter_settings_carry_the_request_and_the_clock() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    f = valid(time_from=start, retrieval_mode="explicit").filter_settings(0.4, 123)
    assert (f.mode, f.time_from, f.time_to, f.clock_us) == ("explicit", start, None, 123)
    assert f.exclude_node_types == frozenset() and f.source_types is None
    assert f.unverified_threshold == 0.4
    g = valid(exclude_node_types=["task"], source_types=[]).filter_settings(0.3, 0)
    assert g.exclude_node_types == frozenset({"task"}) and g.source_types == frozenset()
