"""Receipts: exact replay (weighted and rrf), canonical round trip, owner checks, tampering."""

from __future__ import annotations

import json
import math
import sqlite3
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock, make_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prme import IntegrityError, MemoryClient, RankingMultipliers, RetrievalReceipt
from prme.canonical import canonical_json, checksum, sha256_hex
from prme.models.scoring import PRODUCT_RRF_K, ScoringWeights, adjusted_weights
from prme.retrieval.replay import replay_ranking, replay_scores
from prme.retrieval.scoring import weighted_score
from prme.storage.payloads import decode
from prme.storage.sqlite import DB_FILE

ClientFactory = Callable[..., MemoryClient]
NOW = datetime(2026, 9, 15, tzinfo=UTC)
TEXTS: list[tuple[str, dict[str, Any]]] = [
    ("Aster stores its data in PostgreSQL", {"node_type": "fact"}),
    ("The Aster team moved from MySQL to PostgreSQL last spring", {"node_type": "event"}),
    ("Kepler is the telescope I use for Saturn", {"node_type": "preference"}),
    ("I currently use the Kepler telescope at the Orion club", {}),
    ("Orion club meets on Fridays", {"scope": "project"}),
    ("Maybe Aster should try SQLite", {"epistemic_type": "hypothetical"}),
    ("Remember to renew the Orion membership", {"node_type": "task"}),
    ("Aster decided to keep PostgreSQL for now", {"node_type": "decision", "pinned": True}),
]
QUERIES = [
    "Which database does Aster use?",
    "what telescope do I currently use",
    "Orion club",
    "PostgreSQL",
    "zebra",
]


def fill(client: MemoryClient) -> None:
    for i, (text, fields) in enumerate(TEXTS):
        when = NOW - timedelta(days=3 * i + 1)
        client.store(text, user_id="alice", event_time=when, **fields)


def receipt_of(client: MemoryClient, response: Any) -> RetrievalReceipt:
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None
    return receipt


def check_replay(client: MemoryClient, response: Any) -> RetrievalReceipt:
    receipt = receipt_of(client, response)
    scores = [r.composite_score for r in response.results]
    ids = [r.node.id for r in response.results]
    assert [c.node_id for c in receipt.candidates] == ids
    assert [c.score for c in receipt.candidates] == scores
    assert [s.hex() for s in replay_scores(receipt)] == [s.hex() for s in scores]
    assert replay_ranking(receipt) == ids
    return receipt


@pytest.mark.parametrize(
    "multipliers",
    [None, RankingMultipliers(), RankingMultipliers(lexical=2, graph=0.25, recency=4.0)],
)
def test_weighted_replay_is_exact(
    client: MemoryClient, multipliers: RankingMultipliers | None
) -> None:
    fill(client)
    for query in QUERIES:
        response = client.retrieve(
            query,
            user_id="alice",
            reference_time=NOW,
            ranking_multipliers=multipliers,
            retrieval_mode="explicit",
        )
        receipt = check_replay(client, response)
        assert receipt.fusion == "weighted"
        assert receipt.ranking_multipliers == multipliers
        applied = adjusted_weights(receipt.weights, multipliers)
        assert receipt.applied_weights() == applied
        assert [weighted_score(c.trace, applied) for c in receipt.candidates] == [
            c.score for c in receipt.candidates
        ]
        for candidate in receipt.candidates:
            assert candidate.trace.composite_score == candidate.score
            assert candidate.rank_fusion is None and candidate.semantic_relevance is None


def test_replay_under_other_multipliers_reorders_only_from_traces(client: MemoryClient) -> None:
    fill(client)
    response = client.retrieve("Aster PostgreSQL", user_id="alice", reference_time=NOW)
    receipt = receipt_of(client, response)
    trial = RankingMultipliers(lexical=4.0, semantic=0.25)
    applied = adjusted_weights(receipt.weights, trial)
    assert replay_scores(receipt, trial) == [
        weighted_score(c.trace, applied) for c in receipt.candidates
    ]
    assert replay_scores(receipt, RankingMultipliers()) == replay_scores(receipt)


def test_rrf_replay_is_exact(make_client: ClientFactory) -> None:
    client = make_client(fusion="rrf")
    fill(client)
    for query in QUERIES:
        for multipliers in (None, RankingMultipliers()):
            response = client.retrieve(
                query, user_id="alice", reference_time=NOW, ranking_multipliers=multipliers
            )
            receipt = check_replay(client, response)
            assert receipt.fusion == "rrf" and receipt.scoring.rrf_k == PRODUCT_RRF_K
            for candidate in receipt.candidates:
                assert candidate.rank_fusion is not None
                weights = (
                    candidate.rank_fusion.semantic_weight,
                    candidate.rank_fusion.lexical_weight,
                )
                assert None not in weights and math.isclose(sum(weights), 2.0)
                assert candidate.semantic_relevance is not None
                assert candidate.trace.salience == candidate.trace.confidence == 0.0
    # a current-state question turns the recency boost on
    response = client.retrieve(
        "what telescope do I currently use", user_id="alice", reference_time=NOW
    )
    receipt = check_replay(client, response)
    boosts = [c.rank_fusion.recency_boost_factor for c in receipt.candidates if c.rank_fusion]
    assert boosts and all(b is not None for b in boosts)
    assert any(c.trace.recency_factor > 0 for c in receipt.candidates)
    ties = [c.rank_fusion.tie_break for c in receipt.candidates if c.rank_fusion]
    assert all(t is not None and 0 <= t < 1 for t in ties)


def test_plain_rrf_receipts_replay_with_their_old_bytes(make_client: ClientFactory) -> None:
    """Receipts of the earlier default (plain rrf, k=60, reference weights) carry no channel
    weights: they replay exactly and re-serialize to the bytes they were stored with."""
    old = ScoringWeights(fusion="rrf", rrf_recency_boost=0.25, rrf_tie_break="event_time")
    client = make_client(config=make_config("rrf").model_copy(update={"scoring": old}))
    fill(client)
    for query in QUERIES:
        receipt = check_replay(client, client.retrieve(query, user_id="alice", reference_time=NOW))
        assert receipt.scoring == old and receipt.scoring.rrf_k == 60
        assert all(
            c.rank_fusion is not None
            and c.rank_fusion.semantic_weight is None
            and c.rank_fusion.lexical_weight is None
            for c in receipt.candidates
        )
        text = canonical_json(receipt)
        assert "semantic_weight" not in text and "rrf_channel_weights" not in text
        again = RetrievalReceipt.from_canonical_json(text)
        assert again == receipt and canonical_json(again) == text


def test_rrf_scores_follow_formula_2(make_client: ClientFactory) -> None:
    client = make_client(fusion="rrf")
    fill(client)
    response = client.retrieve("Aster PostgreSQL", user_id="alice", reference_time=NOW)
    receipt = receipt_of(client, response)
    k = receipt.scoring.rrf_k
    assert k == PRODUCT_RRF_K
    for c in receipt.candidates:
        f = c.rank_fusion
        assert f is not None and f.semantic_weight is not None and f.lexical_weight is not None
        fused = 0.0
        if f.semantic_rank is not None:
            fused = fused + f.semantic_weight / (k + f.semantic_rank)
        if f.lexical_rank is not None:
            fused = fused + f.lexical_weight / (k + f.lexical_rank)
        value = fused * (k + 1) / 2 * f.epistemic_factor * f.node_type_factor * f.temporal_factor
        if f.recency_boost_factor is not None:
            value = value * f.recency_boost_factor
        expected = round(value, 10)
        if f.tie_break is not None and expected > 0:
            expected = expected - f.tie_break * 1e-11
        assert c.score == expected


@pytest.mark.sqlite_only
def test_round_trip_through_canonical_json(client: MemoryClient) -> None:
    fill(client)
    response = client.retrieve(
        "Aster PostgreSQL", user_id="alice", reference_time=NOW, ranking_multipliers={"lexical": 2}
    )
    receipt = receipt_of(client, response)
    text = canonical_json(receipt)
    again = RetrievalReceipt.model_validate_json(text)
    assert again == receipt
    assert canonical_json(again) == text
    assert again.checksum == receipt.checksum == checksum(receipt) == sha256_hex(text)
    assert RetrievalReceipt.model_validate(json.loads(text)).checksum == receipt.checksum
    assert '"reference_time":"2026-09-15T00:00:00Z"' in text
    # the stored bytes are the canonical JSON, compressed (storage/payloads.py)
    conn = sqlite3.connect(client.path / DB_FILE)
    stored = conn.execute("SELECT payload FROM oplog").fetchone()[0]
    conn.close()
    assert isinstance(stored, bytes) and len(stored) < len(text.encode())
    assert decode(stored) == text


def test_receipt_contents(client: MemoryClient) -> None:
    fill(client)
    response = client.retrieve("Aster PostgreSQL", user_id="alice", reference_time=NOW, limit=3)
    receipt = receipt_of(client, response)
    assert receipt.request_id == response.metadata.request_id
    assert receipt.user_id == "alice" and receipt.query == "Aster PostgreSQL"
    assert receipt.reference_time == NOW and receipt.result_limit == 3
    assert receipt.ranking_policy == "score_path_id"
    assert receipt.execution.features == client.engine.feature_identity()
    assert set(receipt.execution.outcomes) >= {"candidates_generated", "tokens_used"}
    assert "candidates_generated" not in receipt.execution.inputs
    nodes = {r.node.id: r.node for r in response.results}
    for c in receipt.candidates:
        assert c.content_sha256 == sha256_hex(nodes[c.node_id].content)
        assert c.scope == nodes[c.node_id].scope


def test_foreign_owner_sees_nothing(client: MemoryClient) -> None:
    fill(client)
    response = client.retrieve("Aster", user_id="alice")
    request = response.metadata.request_id
    assert client.get_retrieval_receipt(request, user_id="bob") is None
    assert client.get_retrieval_receipt(str(request), user_id="alice") is not None
    import uuid

    assert client.get_retrieval_receipt(uuid.uuid4(), user_id="alice") is None


def _rewrite(pack: Path, payload: str, *, fix_checksum: bool) -> None:
    conn = sqlite3.connect(pack / DB_FILE, isolation_level=None)
    conn.execute("DROP TRIGGER oplog_append_only_update")
    if fix_checksum:
        conn.execute("UPDATE oplog SET payload = ?, checksum = ?", (payload, sha256_hex(payload)))
    else:
        conn.execute("UPDATE oplog SET payload = ?", (payload,))
    conn.close()


def _stored_receipt(client: MemoryClient) -> tuple[Any, str]:
    fill(client)
    response = client.retrieve("Aster", user_id="alice", reference_time=NOW)
    conn = sqlite3.connect(client.path / DB_FILE)
    payload = decode(conn.execute("SELECT payload FROM oplog").fetchone()[0])
    conn.close()
    return response.metadata.request_id, payload


@pytest.mark.sqlite_only
def test_tampered_payload_raises(client: MemoryClient, pack_path: Path) -> None:
    request, payload = _stored_receipt(client)
    _rewrite(pack_path, payload.replace('"query":"Aster"', '"query":"Astor"'), fix_checksum=False)
    with pytest.raises(IntegrityError, match="checksum mismatch"):
        client.get_retrieval_receipt(request, user_id="alice")


@pytest.mark.sqlite_only
def test_non_canonical_payload_raises(client: MemoryClient, pack_path: Path) -> None:
    request, payload = _stored_receipt(client)
    spaced = json.dumps(json.loads(payload), indent=1)
    _rewrite(pack_path, spaced, fix_checksum=True)
    with pytest.raises(IntegrityError, match="Retrieval receipt identity or checksum mismatch"):
        client.get_retrieval_receipt(request, user_id="alice")


@pytest.mark.sqlite_only
def test_foreign_identity_in_payload_raises(client: MemoryClient, pack_path: Path) -> None:
    request, payload = _stored_receipt(client)
    forged = canonical_json({**json.loads(payload), "user_id": "mallory"})
    _rewrite(pack_path, forged, fix_checksum=True)
    with pytest.raises(IntegrityError, match="Retrieval receipt identity or checksum mismatch"):
        client.get_retrieval_receipt(request, user_id="alice")


@pytest.mark.sqlite_only
def test_a_schema_1_receipt_still_parses_replays_and_keeps_its_bytes(
    client: MemoryClient, pack_path: Path
) -> None:
    # Packs written before per-owner write sequences hold schema-1 receipts, whose
    # pack.write_seq is the pack-wide sequence; they read back byte for byte and replay.
    request, payload = _stored_receipt(client)
    data = json.loads(payload)
    assert data["schema_version"] == 2
    pack_wide = client.engine.store.pack_identity().write_seq
    assert data["pack"]["write_seq"] != pack_wide  # the owner's sequence, not the pack's
    legacy = canonical_json(
        {**data, "schema_version": 1, "pack": {**data["pack"], "write_seq": pack_wide}}
    )
    _rewrite(pack_path, legacy, fix_checksum=True)
    receipt = client.get_retrieval_receipt(request, user_id="alice")
    assert receipt is not None and receipt.schema_version == 1
    assert canonical_json(receipt) == legacy and receipt.checksum == sha256_hex(legacy)
    assert replay_scores(receipt) == [c.score for c in receipt.candidates]
    assert replay_ranking(receipt) == [c.node_id for c in receipt.candidates]


@pytest.mark.sqlite_only
def test_edited_score_fails_replay(client: MemoryClient, pack_path: Path) -> None:
    request, payload = _stored_receipt(client)
    data = json.loads(payload)
    data["candidates"][0]["score"] += 0.5
    _rewrite(pack_path, canonical_json(data), fix_checksum=True)
    with pytest.raises(ValueError, match="replay"):
        client.get_retrieval_receipt(request, user_id="alice")


VOCABULARY = (
    "Aster Kepler Orion PostgreSQL telescope club database Friday Saturn moved uses keeps "
    "the a of project team data night sky"
)
words = st.sampled_from(VOCABULARY.split(" "))
memories = st.lists(
    st.tuples(
        st.lists(words, min_size=1, max_size=8).map(" ".join),
        st.sampled_from(["note", "fact", "event", "task", "preference", "summary"]),
        st.sampled_from(["personal", "project"]),
        st.integers(0, 400),
    ),
    min_size=1,
    max_size=12,
)
queries = st.lists(words, min_size=1, max_size=4).map(" ".join)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    memories,
    st.lists(queries, min_size=1, max_size=3),
    st.sampled_from(["weighted", "rrf"]),
    st.none() | st.floats(0.25, 4.0),
    st.integers(0, 10),
)
def test_random_stores_and_queries_replay(
    stored: list[tuple[str, str, str, int]],
    asked: list[str],
    fusion: str,
    lexical: float | None,
    limit: int,
) -> None:
    multipliers = None
    if lexical is not None and fusion == "weighted":
        multipliers = RankingMultipliers(lexical=lexical, graph=1 / lexical**0.5)
    with (
        tempfile.TemporaryDirectory() as tmp,
        MemoryClient(Path(tmp), config=make_config(fusion), clock=FakeClock()) as client,
    ):
        for text, node_type, scope, age in stored:
            client.store(
                text,
                user_id="alice",
                node_type=node_type,
                scope=scope,
                event_time=NOW - timedelta(days=age),
            )
        for query in asked:
            response = client.retrieve(
                query,
                user_id="alice",
                reference_time=NOW,
                ranking_multipliers=multipliers,
                limit=limit,
            )
            check_replay(client, response)
