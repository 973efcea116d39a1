"""retrieve(): validation, filters, selection, packing, profile status and receipt persistence."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from prme import (
    InvalidInputError,
    MemoryClient,
    RankingMultipliers,
    RetrievalResponse,
    Scope,
    ScoringWeights,
)
from prme.retrieval.packing import count_tokens, render_line
from prme.storage.sqlite import DB_FILE

ClientFactory = Callable[..., MemoryClient]
NOW = datetime(2026, 9, 15, tzinfo=UTC)


def oplog_rows(pack_path: Path) -> int:
    conn = sqlite3.connect(pack_path / DB_FILE)
    count = int(conn.execute("SELECT COUNT(*) FROM oplog").fetchone()[0])
    conn.close()
    return count


def contents(response: RetrievalResponse) -> list[str]:
    return [r.node.content for r in response.results]


@pytest.fixture
def seeded(client: MemoryClient) -> MemoryClient:
    client.store("Aster stores its data in PostgreSQL", user_id="alice")
    client.store("The Aster project uses PostgreSQL 16", user_id="alice", scope="project")
    client.store(
        "Aster's organisation standard is PostgreSQL", user_id="alice", scope="organisation"
    )
    client.store("Bob's Aster notes mention PostgreSQL", user_id="bob")
    return client


# ------------------------------------------------------------------------ scopes
def test_scope_none_one_many(seeded: MemoryClient) -> None:
    everything = seeded.retrieve("Aster PostgreSQL", user_id="alice")
    assert len(everything.results) == 3
    project = seeded.retrieve("Aster PostgreSQL", user_id="alice", scope="project")
    assert [r.node.scope for r in project.results] == [Scope.PROJECT]
    several = seeded.retrieve(
        "Aster PostgreSQL", user_id="alice", scope=["project", Scope.PERSONAL, "project"]
    )
    assert {r.node.scope for r in several.results} == {Scope.PROJECT, Scope.PERSONAL}
    receipts = [
        seeded.get_retrieval_receipt(r.metadata.request_id, user_id="alice")
        for r in (everything, project, several)
    ]
    assert [r.scopes if r else "missing" for r in receipts] == [
        None,
        (Scope.PROJECT,),
        (Scope.PROJECT, Scope.PERSONAL, Scope.PROJECT),  # caller order, duplicates kept
    ]


@pytest.mark.parametrize(
    ("scope", "message"),
    [
        ([], "scope must not be empty; use None for an unfiltered request"),
        ("organization", "scope contains an invalid scope name"),
        (["project", "nope"], "scope contains an invalid scope name"),
        (b"project", "scope must be a scope name"),
    ],
)
@pytest.mark.sqlite_only
def test_invalid_scope(client: MemoryClient, pack_path: Path, scope: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as info:
        client.retrieve("anything", user_id="alice", scope=scope)
    assert info.value.field == "scope"
    assert oplog_rows(pack_path) == 0


# -------------------------------------------------------------------- validation
BAD_REQUESTS: list[tuple[dict[str, Any], str, str]] = [
    ({"user_id": ""}, "user_id", "non-blank"),
    ({"query": " "}, "query", "non-blank"),
    ({"query": "x" * 10_001}, "query", "10000"),
    (
        {"reference_time": datetime(2026, 9, 1)},
        "reference_time",
        "reference_time must include a timezone",
    ),
    ({"time_from": datetime(2026, 9, 1)}, "time_from", "must include a timezone"),
    ({"time_to": datetime(2026, 9, 1)}, "time_to", "must include a timezone"),
    ({"knowledge_at": datetime(2026, 9, 1)}, "knowledge_at", "must include a timezone"),
    ({"event_time_from": datetime(2026, 9, 1)}, "event_time_from", "must include a timezone"),
    ({"event_time_to": datetime(2026, 9, 1)}, "event_time_to", "must include a timezone"),
    ({"limit": -1}, "limit", "limit must be a nonnegative integer"),
    ({"limit": True}, "limit", "limit must be a nonnegative integer"),
    ({"limit": 2.0}, "limit", "limit must be a nonnegative integer"),
    ({"token_budget": -5}, "token_budget", "token_budget must be a nonnegative integer"),
    ({"min_score": math.nan}, "min_score", "min_score must be a finite nonnegative number"),
    ({"min_score": math.inf}, "min_score", "min_score must be a finite nonnegative number"),
    ({"min_score": -0.1}, "min_score", "min_score must be a finite nonnegative number"),
    ({"min_score": True}, "min_score", "min_score must be a finite nonnegative number"),
    ({"max_per_source": 0}, "max_per_source", "integer"),
    ({"max_per_evidence": False}, "max_per_evidence", "integer"),
    ({"exclude_node_types": ["memo"]}, "exclude_node_types", "invalid value"),
    ({"exclude_node_types": "fact"}, "exclude_node_types", "collection"),
    ({"source_types": ["rumour"]}, "source_types", "invalid value"),
    ({"weights": {"w_semantic": 0.9}}, "weights", "sum to 1"),
    ({"weights": {"fusion": "sum"}}, "weights.fusion", "weighted"),
    (
        {"ranking_multipliers": {"lexical": 4.5}},
        "ranking_multipliers.lexical",
        "less than or equal to 4",
    ),
    (
        {"ranking_multipliers": {"semantic": 0.2}},
        "ranking_multipliers.semantic",
        "greater than or equal to 0.25",
    ),
    ({"ranking_multipliers": {"paths": 2.0}}, "ranking_multipliers.paths", "Extra inputs"),
    (
        {"ranking_multipliers": {"graph": math.nan}},
        "ranking_multipliers.graph",
        "ranking_multipliers.graph",
    ),
    ({"retrieval_mode": "loose"}, "retrieval_mode", "default"),
    ({"include_cross_scope": "yes"}, "include_cross_scope", "boolean"),
]


@pytest.mark.parametrize(("kwargs", "field", "message"), BAD_REQUESTS)
@pytest.mark.sqlite_only
def test_bad_requests_name_the_field_and_write_nothing(
    seeded: MemoryClient, pack_path: Path, kwargs: dict[str, Any], field: str, message: str
) -> None:
    request: dict[str, Any] = {"query": "Aster", "user_id": "alice", **kwargs}
    query = request.pop("query")
    with pytest.raises(InvalidInputError, match=message) as info:
        seeded.retrieve(query, **request)
    assert info.value.field == field
    assert oplog_rows(pack_path) == 0
    assert info.value.field in str(info.value)


@pytest.mark.parametrize("value", [0.25, 4.0])
def test_multiplier_bounds_are_inclusive(seeded: MemoryClient, value: float) -> None:
    response = seeded.retrieve("Aster", user_id="alice", ranking_multipliers={"lexical": value})
    assert response.metadata.ranking_multipliers == RankingMultipliers(lexical=value)


@pytest.mark.sqlite_only
def test_rrf_rejects_non_neutral_multipliers_before_any_work(
    make_client: ClientFactory, pack_path: Path
) -> None:
    client = make_client(fusion="rrf")
    client.store("Aster stores its data in PostgreSQL", user_id="alice")
    for multipliers in (RankingMultipliers(lexical=2), {"semantic": 0.5}):
        with pytest.raises(InvalidInputError, match="do not apply to fusion='rrf'") as info:
            client.retrieve("Aster", user_id="alice", ranking_multipliers=multipliers)
        assert info.value.field == "ranking_multipliers"
        assert isinstance(info.value, ValueError)
    assert oplog_rows(pack_path) == 0
    # a weighted base for this request accepts them
    response = client.retrieve(
        "Aster", user_id="alice", weights=ScoringWeights(), ranking_multipliers={"lexical": 2}
    )
    assert response.metadata.fusion == "weighted"
    # and an rrf override on a weighted pack rejects them
    weighted = make_client(pack_path.parent / "weighted")
    with pytest.raises(InvalidInputError, match="do not apply to fusion='rrf'"):
        weighted.retrieve(
            "Aster",
            user_id="alice",
            weights={"fusion": "rrf"},
            ranking_multipliers={"lexical": 2},
        )


def test_neutral_multipliers_under_rrf_are_a_request_override(make_client: ClientFactory) -> None:
    client = make_client(fusion="rrf")
    client.store("Aster stores its data in PostgreSQL", user_id="alice")
    plain = client.retrieve("Aster", user_id="alice", reference_time=NOW)
    neutral = client.retrieve(
        "Aster", user_id="alice", reference_time=NOW, ranking_multipliers=RankingMultipliers()
    )
    meta = neutral.metadata
    assert meta.fusion == "rrf"
    assert meta.ranking_profile_status == "request_override"
    assert meta.ranking_profile_reason == "explicit_multipliers"
    assert meta.ranking_profile_id is None
    assert meta.ranking_multipliers == RankingMultipliers()
    assert [r.composite_score for r in neutral.results] == [
        r.composite_score for r in plain.results
    ]
    assert plain.metadata.ranking_profile_status == "none"
    assert plain.metadata.ranking_multipliers is None
    assert plain.metadata.ranking_profile_reason is None


def test_profile_status_none_and_request_override(seeded: MemoryClient) -> None:
    plain = seeded.retrieve("Aster", user_id="alice")
    assert (plain.metadata.ranking_profile_status, plain.metadata.ranking_profile_id) == (
        "none",
        None,
    )
    receipt = seeded.get_retrieval_receipt(plain.metadata.request_id, user_id="alice")
    assert receipt is not None
    assert receipt.execution.inputs["ranking_profile"] == {
        "status": "none",
        "profile_id": None,
        "reason": None,
    }
    assert receipt.execution.inputs["ranking_multipliers"] is None
    override = seeded.retrieve("Aster", user_id="alice", ranking_multipliers={"lexical": 2})
    assert override.metadata.ranking_profile_status == "request_override"
    receipt = seeded.get_retrieval_receipt(override.metadata.request_id, user_id="alice")
    assert receipt is not None
    assert receipt.execution.inputs["ranking_profile"]["status"] == "request_override"
    assert receipt.execution.inputs["ranking_multipliers"]["lexical"] == 2.0
    assert receipt.ranking_multipliers == RankingMultipliers(lexical=2)
    assert receipt.weights == receipt.scoring == ScoringWeights()


def test_weights_override(seeded: MemoryClient) -> None:
    custom = ScoringWeights(w_semantic=0.45, w_lexical=0.1, w_graph=0.1)
    response = seeded.retrieve("Aster PostgreSQL", user_id="alice", weights=custom)
    assert response.metadata.scoring_config_version == custom.version_id
    assert response.metadata.fusion == "weighted"
    receipt = seeded.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.scoring == custom
    as_dict = seeded.retrieve("Aster", user_id="alice", weights=custom.model_dump())
    assert as_dict.metadata.scoring_config_version == custom.version_id
    default = seeded.retrieve("Aster", user_id="alice")
    assert default.metadata.scoring_config_version == "105aa8efe1b0"


def test_weighted_scores_follow_the_formula(seeded: MemoryClient) -> None:
    response = seeded.retrieve("Aster PostgreSQL", user_id="alice", reference_time=NOW)
    w = ScoringWeights()
    for result in response.results:
        t = result.score_trace
        expected = (
            w.w_semantic * t.semantic_similarity
            + w.w_lexical * t.lexical_relevance
            + w.w_graph * t.graph_proximity
            + w.w_recency * t.recency_factor
            + w.w_salience * t.salience
            + w.w_confidence * t.confidence
        ) * t.epistemic_weight
        expected = expected * t.node_type_boost
        if t.semantic_similarity + t.lexical_relevance < w.relevance_floor:
            expected = min(expected, t.semantic_similarity + t.lexical_relevance)
        assert result.composite_score == round(expected, 10)
        assert t.path_score == min(result.path_count / 3, 1.0)
    scores = [r.composite_score for r in response.results]
    assert scores == sorted(scores, reverse=True)


def test_reference_time_is_used_and_recorded(seeded: MemoryClient) -> None:
    later = NOW + timedelta(days=100)
    response = seeded.retrieve("Aster", user_id="alice", reference_time=later)
    assert response.metadata.reference_time == later
    for result in response.results:
        days = (later - result.node.updated_at) / timedelta(days=1)
        assert result.score_trace.recency_factor == min(1.0, math.exp(-0.02 * days))


# ---------------------------------------------------------------- owner isolation
def test_owner_isolation(seeded: MemoryClient) -> None:
    bob = seeded.retrieve("Aster PostgreSQL", user_id="bob", limit=50)
    assert contents(bob) == ["Bob's Aster notes mention PostgreSQL"]
    assert all(r.node.user_id == "bob" for r in bob.results)
    assert bob.cross_scope_hints == []
    scoped = seeded.retrieve("Aster PostgreSQL", user_id="bob", scope="project")
    assert scoped.results == []
    # hints come from bob's own other scopes only
    bob_ids = {r.node.id for r in bob.results}
    assert {h.node_id for h in scoped.cross_scope_hints} == bob_ids
    alice = seeded.retrieve("Aster PostgreSQL", user_id="alice", limit=50)
    assert all(r.node.user_id == "alice" for r in alice.results)
    request = alice.metadata.request_id
    assert seeded.get_retrieval_receipt(request, user_id="bob") is None
    assert seeded.get_retrieval_receipt(request, user_id="alice") is not None
    carol = seeded.retrieve("Aster PostgreSQL", user_id="carol")
    assert carol.results == [] and carol.metadata.receipt_persisted


# ------------------------------------------------------------ DEFAULT vs EXPLICIT
def test_default_mode_filters_explicit_mode_keeps(client: MemoryClient) -> None:
    kept = client.store("Kepler telescope fact", user_id="alice", node_type="fact")
    hidden = [
        client.store("Kepler telescope maybe", user_id="alice", epistemic_type="hypothetical"),
        client.store("Kepler telescope old", user_id="alice", epistemic_type="deprecated"),
        client.store("Kepler telescope if", user_id="alice", epistemic_type="conditional"),
        client.store(
            "Kepler telescope if false",
            user_id="alice",
            epistemic_type="conditional",
            metadata={"condition_state": "false"},
        ),
        client.store(
            "Kepler telescope rumour",
            user_id="alice",
            epistemic_type="unverified",
            source_type="system_inferred",
        ),
    ]
    true_condition = client.store(
        "Kepler telescope if true",
        user_id="alice",
        epistemic_type="conditional",
        metadata={"condition_state": "true"},
    )
    confident = client.store(
        "Kepler telescope checked",
        user_id="alice",
        epistemic_type="unverified",
        source_type="system_inferred",
        confidence=0.31,
    )
    default = client.retrieve("Kepler telescope", user_id="alice", limit=50)
    ids = {str(r.node.id) for r in default.results}
    assert ids == {kept, true_condition, confident}
    assert default.metadata.candidates_filtered == len(hidden)
    explicit = client.retrieve(
        "Kepler telescope", user_id="alice", limit=50, retrieval_mode="explicit"
    )
    assert {str(r.node.id) for r in explicit.results} == ids | set(hidden)
    assert explicit.metadata.candidates_filtered == 0
    receipt = client.get_retrieval_receipt(explicit.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.retrieval_mode.value == "explicit"


def test_type_filters(client: MemoryClient) -> None:
    fact = client.store("Kepler fact", user_id="alice", node_type="fact")
    task = client.store("Kepler task", user_id="alice", node_type="task")
    tool = client.store("Kepler tool", user_id="alice", role="tool")
    response = client.retrieve("Kepler", user_id="alice", exclude_node_types=["task"])
    assert {str(r.node.id) for r in response.results} == {fact, tool}
    response = client.retrieve("Kepler", user_id="alice", source_types={"tool_output"})
    assert [str(r.node.id) for r in response.results] == [tool]
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.execution.inputs["source_types"] == ["tool_output"]
    assert task


# ---------------------------------------------------------------- time filters
def test_validity_and_knowledge_filters(client: MemoryClient, clock: Any) -> None:
    jan = datetime(2026, 1, 1, tzinfo=UTC)
    feb = datetime(2026, 2, 1, tzinfo=UTC)
    mar = datetime(2026, 3, 1, tzinfo=UTC)
    ended = client.store("Kepler in January", user_id="alice", valid_from=jan, valid_to=feb)
    current = client.store("Kepler from March", user_id="alice", valid_from=mar)
    pref = client.store(
        "Kepler preference", user_id="alice", node_type="preference", valid_from=mar, valid_to=mar
    )

    def ids(**kwargs: Any) -> set[str]:
        response = client.retrieve("Kepler", user_id="alice", **kwargs)
        return {str(r.node.id) for r in response.results}

    assert ids() == {ended, current, pref}
    assert ids(time_from=feb) == {current, pref}  # valid_to must be > time_from
    assert ids(time_from=feb - timedelta(microseconds=1)) == {ended, current, pref}
    assert ids(time_to=feb) == {ended, pref}  # valid_from must be <= time_to
    assert ids(time_to=mar) == {ended, current, pref}
    # knowledge_at: created_at <= knowledge_at (the FakeClock advanced 1 ms per store)
    first = client.get(ended, user_id="alice")
    assert first is not None
    assert ids(knowledge_at=first.created_at) == {ended}
    assert ids(knowledge_at=first.created_at - timedelta(microseconds=1)) == set()
    response = client.retrieve("Kepler", user_id="alice", time_from=feb, time_to=mar)
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and (receipt.time_from, receipt.time_to) == (feb, mar)


def test_event_time_filters(client: MemoryClient) -> None:
    jan = datetime(2026, 1, 1, tzinfo=UTC)
    old = client.store("Kepler launch", user_id="alice", event_time=jan)
    new = client.store("Kepler repair", user_id="alice", event_time=jan + timedelta(days=30))
    response = client.retrieve(
        "Kepler", user_id="alice", event_time_from=jan, event_time_to=jan + timedelta(days=1)
    )
    assert [str(r.node.id) for r in response.results] == [old]
    response = client.retrieve("Kepler", user_id="alice", event_time_from=jan + timedelta(days=2))
    assert [str(r.node.id) for r in response.results] == [new]


# ------------------------------------------------------------------- selection
def test_limit(seeded: MemoryClient) -> None:
    zero = seeded.retrieve("Aster PostgreSQL", user_id="alice", limit=0)
    assert zero.results == []
    assert zero.bundle.rendered_context == "" and zero.bundle.included_count == 0
    assert zero.metadata.result_limit == 0 and zero.metadata.receipt_persisted
    receipt = seeded.get_retrieval_receipt(zero.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.candidates == () and receipt.result_limit == 0
    one = seeded.retrieve("Aster PostgreSQL", user_id="alice", limit=1)
    full = seeded.retrieve("Aster PostgreSQL", user_id="alice")
    assert len(one.results) == 1 and one.results[0].node.id == full.results[0].node.id
    assert full.metadata.result_limit == 20


def test_min_score_floor_is_inclusive(seeded: MemoryClient) -> None:
    full = seeded.retrieve("Aster PostgreSQL", user_id="alice", reference_time=NOW)
    second = full.results[1].composite_score
    floored = seeded.retrieve(
        "Aster PostgreSQL", user_id="alice", reference_time=NOW, min_score=second
    )
    assert [r.node.id for r in floored.results] == [r.node.id for r in full.results[:2]]
    assert floored.metadata.min_score == second


def test_max_per_source_and_evidence(client: MemoryClient) -> None:
    for _ in range(3):
        client.store("Kepler duplicate line", user_id="alice")
    client.store("Kepler other line", user_id="alice")
    full = client.retrieve("Kepler", user_id="alice")
    assert len(full.results) == 4  # every store has its own evidence event
    capped = client.retrieve("Kepler", user_id="alice", max_per_source=1, max_per_evidence=1)
    assert len(capped.results) == 4


# --------------------------------------------------------------------- packing
def test_token_budget_packing(client: MemoryClient) -> None:
    client.store("Kepler short", user_id="alice", node_type="fact", confidence=1.0)
    client.store(
        "Kepler long " + " ".join(f"word{i}" for i in range(40)), user_id="alice", confidence=0.9
    )
    client.store("Kepler tiny", user_id="alice", confidence=0.1)
    full = client.retrieve("Kepler", user_id="alice", reference_time=NOW)
    lines = [
        render_line(r.node.content, r.node.event_time or r.node.created_at) for r in full.results
    ]
    costs = [count_tokens(line) + 1 for line in lines]
    assert [r.token_cost for r in full.results] == costs
    assert full.bundle.rendered_context == "\n".join(lines)
    assert full.bundle.tokens_used == sum(costs)
    assert full.bundle.token_budget == 4096
    long_index = next(i for i, r in enumerate(full.results) if "word0" in r.node.content)
    budget = sum(costs) - costs[long_index]  # everything but the long one fits
    packed = client.retrieve("Kepler", user_id="alice", reference_time=NOW, token_budget=budget)
    assert [r.node.id for r in packed.results] == [r.node.id for r in full.results]
    assert [r.in_context for r in packed.results] == [i != long_index for i in range(3)]
    assert packed.bundle.rendered_context == "\n".join(
        line for i, line in enumerate(lines) if i != long_index
    )
    assert packed.bundle.excluded_ids == (packed.results[long_index].node.id,)
    assert packed.bundle.included_count == 2
    assert packed.bundle.tokens_used == budget
    assert packed.bundle.budget_remaining == 0
    receipt = client.get_retrieval_receipt(packed.metadata.request_id, user_id="alice")
    assert receipt is not None
    assert [c.in_context for c in receipt.candidates] == [i != long_index for i in range(3)]
    assert [c.has_content for c in receipt.candidates] == [i != long_index for i in range(3)]
    assert [c.token_cost for c in receipt.candidates] == costs
    assert receipt.packing.token_budget == budget
    from prme.canonical import sha256_hex

    assert receipt.context_sha256 == sha256_hex(packed.bundle.rendered_context)
    empty = client.retrieve("Kepler", user_id="alice", token_budget=0)
    assert empty.bundle.rendered_context == "" and len(empty.results) == 3
    assert all(not r.in_context for r in empty.results)


# ---------------------------------------------------------------- cross scope
def test_cross_scope_hints_are_not_results_or_receipt(seeded: MemoryClient) -> None:
    response = seeded.retrieve("Aster PostgreSQL", user_id="alice", scope="project")
    assert [r.node.scope for r in response.results] == [Scope.PROJECT]
    hints = response.cross_scope_hints
    assert {h.scope for h in hints} == {"personal", "organisation"}
    result_ids = {r.node.id for r in response.results}
    assert not result_ids & {h.node_id for h in hints}
    receipt = seeded.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None
    assert {c.node_id for c in receipt.candidates} == result_ids
    assert receipt.execution.outcomes["cross_scope_hint_count"] == len(hints)
    off = seeded.retrieve(
        "Aster PostgreSQL", user_id="alice", scope="project", include_cross_scope=False
    )
    assert off.cross_scope_hints == []
    unfiltered = seeded.retrieve("Aster PostgreSQL", user_id="alice")
    assert unfiltered.cross_scope_hints == []


# --------------------------------------------------------- receipt persistence
@pytest.mark.sqlite_only
def test_receipt_persisted_false_when_the_write_fails(
    seeded: MemoryClient, pack_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conn = sqlite3.connect(pack_path / DB_FILE, isolation_level=None)
    conn.execute(
        "CREATE TRIGGER reject_receipts BEFORE INSERT ON oplog"
        " BEGIN SELECT RAISE(ABORT, 'receipts rejected'); END"
    )
    response = seeded.retrieve("Aster PostgreSQL", user_id="alice")
    assert response.metadata.receipt_persisted is False
    assert len(response.results) == 3
    assert response.bundle.rendered_context
    assert "was not persisted" in caplog.text
    assert seeded.get_retrieval_receipt(response.metadata.request_id, user_id="alice") is None
    conn.execute("DROP TRIGGER reject_receipts")
    conn.close()
    again = seeded.retrieve("Aster PostgreSQL", user_id="alice")
    assert again.metadata.receipt_persisted is True
    assert seeded.get_retrieval_receipt(again.metadata.request_id, user_id="alice") is not None


def test_metadata_counts_and_timings(seeded: MemoryClient) -> None:
    response = seeded.retrieve("Aster PostgreSQL", user_id="alice")
    meta = response.metadata
    assert meta.candidates_included == len(response.results) == 3
    assert set(meta.candidates_generated) == {"vector", "lexical", "graph", "pinned", "merged"}
    assert meta.candidates_generated["merged"] == 3
    assert {"embed_query", "candidates", "score", "pack", "receipt", "total"} <= set(meta.timing_ms)
    assert all(v >= 0 for v in meta.timing_ms.values())
    for result in response.results:
        assert result.path_count == len(result.paths)
        assert set(result.paths) <= {"GRAPH", "LEXICAL", "PINNED", "VECTOR"}


def test_pinned_memories_are_candidates(client: MemoryClient) -> None:
    pinned = client.store("Always remember the launch code", user_id="alice", pinned=True)
    task = client.store("Renew the passport", user_id="alice", node_type="task")
    response = client.retrieve("zebra xylophone", user_id="alice")
    paths = {str(r.node.id): r.paths for r in response.results}
    assert "PINNED" in paths[pinned] and "PINNED" in paths[task]


def test_results_are_lists_owned_by_each_response(client: MemoryClient) -> None:
    # Regression: results were a tuple, so `response.results == []` was False when empty.
    assert client.retrieve("anything", user_id="alice").results == []
    client.store("Aster keeps its database in PostgreSQL", user_id="alice")
    first = client.retrieve("Aster database", user_id="alice")
    assert isinstance(first.results, list) and isinstance(first.cross_scope_hints, list)
    first.results.clear()
    again = client.get_retrieval_receipt(first.metadata.request_id, user_id="alice")
    assert again is not None and len(again.candidates) == 1


def test_a_retrieval_reads_its_memories_from_the_snapshot_it_ranked(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection deletes and updates the returned memories between the ranking and
    the read of their rows: the retrieval still returns them as it ranked them (one read
    snapshot), where it raised ``KeyError`` for the deleted ones before."""
    client, other = make_client(), make_client()
    ids = [client.store(f"Aster note {i}", user_id="alice") for i in range(4)]
    store = client.engine.store
    fetch = store.get_memories_by_rowid
    seen: list[int] = []

    def meanwhile(rowids: list[int]) -> Any:
        seen.extend(rowids)
        assert other.delete(ids[0], user_id="alice") and other.delete(ids[1], user_id="alice")
        other.update(ids[2], user_id="alice", content="Aster note two, rewritten")
        return fetch(rowids)

    monkeypatch.setattr(store, "get_memories_by_rowid", meanwhile)
    response = client.retrieve("Aster note", user_id="alice")
    assert seen and sorted(contents(response)) == [f"Aster note {i}" for i in range(4)]
    monkeypatch.undo()
    after = client.retrieve("Aster note", user_id="alice")
    assert sorted(contents(after)) == ["Aster note 3", "Aster note two, rewritten"]
