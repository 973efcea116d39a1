"""store / store_with_receipt / store_many / get / list: defaults (§A.1) and bad input."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from prme import (
    DecayProfile,
    EpistemicType,
    InvalidInputError,
    MemoryClient,
    NodeType,
    Scope,
    SourceType,
)
from prme.models.enums import LifecycleState

ClientFactory = Callable[..., MemoryClient]


def stored(client: MemoryClient, content: str = "Aster uses PostgreSQL", **fields: Any) -> Any:
    node = client.get(client.store(content, user_id="alice", **fields), user_id="alice")
    assert node is not None
    return node


@pytest.mark.parametrize(
    ("fields", "epistemic", "source", "confidence", "decay"),
    [
        ({}, "asserted", "user_stated", 0.80, "medium"),
        ({"role": "human"}, "asserted", "user_stated", 0.80, "medium"),
        ({"role": "participant"}, "asserted", "user_stated", 0.80, "medium"),
        ({"role": "assistant"}, "inferred", "system_inferred", 0.55, "fast"),
        ({"role": "system"}, "inferred", "system_inferred", 0.55, "fast"),
        ({"role": "tool"}, "asserted", "tool_output", 0.50, "medium"),
        ({"node_type": "summary"}, "inferred", "user_stated", 0.50, "fast"),
        ({"node_type": "event"}, "observed", "user_stated", 0.90, "slow"),
        ({"node_type": "event", "role": "tool"}, "observed", "tool_output", 0.85, "slow"),
        ({"node_type": "instruction"}, "observed", "user_stated", 0.90, "slow"),
        ({"node_type": "fact"}, "asserted", "user_stated", 0.80, "medium"),
        ({"epistemic_type": "hypothetical"}, "hypothetical", "user_stated", 0.35, "rapid"),
        ({"epistemic_type": "conditional"}, "conditional", "user_stated", 0.45, "medium"),
        (
            {"epistemic_type": "unverified", "source_type": "system_inferred"},
            "unverified",
            "system_inferred",
            0.20,
            "rapid",
        ),
        (
            {"epistemic_type": "asserted", "source_type": "system_inferred"},
            "asserted",
            "system_inferred",
            0.60,
            "medium",
        ),
        (
            {"source_type": "user_demonstrated", "node_type": "event"},
            "observed",
            "user_demonstrated",
            0.90,
            "slow",
        ),
        ({"epistemic_type": "deprecated"}, "deprecated", "user_stated", 0.50, "permanent"),
        ({"source_type": "external_document"}, "asserted", "external_document", 0.50, "medium"),
        # instructions: confidence at least 0.7 and always the slow profile
        (
            {"node_type": "instruction", "role": "assistant"},
            "inferred",
            "system_inferred",
            0.70,
            "slow",
        ),
        (
            {"node_type": "instruction", "epistemic_type": "hypothetical"},
            "hypothetical",
            "user_stated",
            0.70,
            "slow",
        ),
    ],
)
def test_store_defaults(
    client: MemoryClient,
    fields: dict[str, Any],
    epistemic: str,
    source: str,
    confidence: float,
    decay: str,
) -> None:
    node = stored(client, **fields)
    assert node.epistemic_type == EpistemicType(epistemic)
    assert node.source_type == SourceType(source)
    assert node.confidence == node.confidence_base == confidence
    assert node.decay_profile == DecayProfile(decay)


def test_store_other_defaults(client: MemoryClient, clock: Callable[[], datetime]) -> None:
    node = stored(client)
    assert node.scope is Scope.PERSONAL
    assert node.node_type is NodeType.NOTE
    assert node.user_id == "alice"
    assert node.salience == node.salience_base == 0.5
    assert node.lifecycle_state is LifecycleState.TENTATIVE
    assert node.created_at == node.updated_at == node.valid_from == node.last_reinforced_at
    assert node.created_at.tzinfo is not None
    assert node.valid_to is None and node.event_time is None
    assert node.reinforcement_boost == 0.0 and node.pinned is False
    assert len(node.evidence_refs) == 1
    assert node.metadata is None and node.session_id is None and node.role == "user"


def test_explicit_fields_win(client: MemoryClient) -> None:
    when = datetime(2026, 1, 1, 12, tzinfo=UTC)
    node = stored(
        client,
        scope="project",
        node_type="decision",
        confidence=0.33,
        salience=1.0,
        pinned=True,
        event_time=when,
        valid_from=when,
        valid_to=when + timedelta(days=3),
        metadata={"entities": ["Kepler"], "n": 1},
        session_id="s1",
        ttl_days=7,
    )
    assert (node.scope, node.node_type) == (Scope.PROJECT, NodeType.DECISION)
    assert node.confidence == node.confidence_base == 0.33
    assert (node.salience, node.pinned, node.ttl_days) == (1.0, True, 7)
    assert (node.event_time, node.valid_from) == (when, when)
    assert node.valid_to == when + timedelta(days=3)
    assert node.metadata == {"entities": ["Kepler"], "n": 1}
    assert node.session_id == "s1"


def test_store_returns_a_string_id(client: MemoryClient) -> None:
    node_id = client.store("Aster uses PostgreSQL", user_id="alice")
    assert isinstance(node_id, str)
    assert str(uuid.UUID(node_id)) == node_id


def test_store_with_receipt_shape(client: MemoryClient) -> None:
    receipt = client.store_with_receipt("Aster uses PostgreSQL", user_id="alice")
    assert set(receipt) == {"event_id", "node_id", "processing_status"}
    assert receipt["processing_status"] == "processed"
    node = client.get(receipt["node_id"], user_id="alice")
    assert node is not None
    assert node.evidence_refs == (uuid.UUID(receipt["event_id"]),)
    assert receipt["event_id"] != receipt["node_id"]


def test_store_many(client: MemoryClient) -> None:
    ids = client.store_many(
        [
            "plain text",
            {"content": "a project fact", "scope": "project", "node_type": "fact"},
            {"content": "explicit owner", "user_id": "alice"},
        ],
        user_id="alice",
    )
    assert len(ids) == len(set(ids)) == 3
    nodes = [client.get(i, user_id="alice") for i in ids]
    assert [n.content for n in nodes if n] == ["plain text", "a project fact", "explicit owner"]
    assert nodes[1] is not None and nodes[1].scope is Scope.PROJECT
    assert nodes[1].node_type is NodeType.FACT
    # one clock reading for the batch, one evidence event per memory
    assert len({n.created_at for n in nodes if n}) == 1
    assert len({n.evidence_refs for n in nodes if n}) == 3
    assert client.store_many([], user_id="alice") == []


def test_get_and_list_through_the_owner(client: MemoryClient) -> None:
    mine = [client.store(f"alice memory {i}", user_id="alice") for i in range(5)]
    project = client.store("alice project", user_id="alice", scope="project")
    theirs = client.store("bob memory", user_id="bob")
    assert client.get(theirs, user_id="alice") is None
    assert client.get(mine[0], user_id="bob") is None
    assert client.get(uuid.UUID(mine[0]), user_id="alice") is not None
    assert client.get(uuid.uuid4(), user_id="alice") is None
    listed = client.list(user_id="alice")
    assert sorted(str(n.id) for n in listed) == sorted([*mine, project])
    assert [str(n.id) for n in listed] == sorted(str(n.id) for n in listed)
    assert [str(n.id) for n in client.list(user_id="alice", scope="project")] == [project]
    assert [str(n.id) for n in client.list(user_id="bob")] == [theirs]
    first = client.list(user_id="alice", limit=2)
    rest = client.list(user_id="alice", after_id=first[-1].id)
    assert [n.id for n in first + rest] == [n.id for n in listed]
    assert not client.delete(theirs, user_id="alice")
    assert client.get(theirs, user_id="bob") is not None


def write_seq(client: MemoryClient) -> int:
    return client.engine.store.pack_identity().write_seq


BAD_STORES: list[tuple[dict[str, Any], str]] = [
    ({"user_id": ""}, "user_id"),
    ({"user_id": "   "}, "user_id"),
    ({"user_id": None}, "user_id"),
    ({"user_id": "x" * 257}, "user_id"),
    ({"content": ""}, "content"),
    ({"content": " \n "}, "content"),
    ({"content": "x" * 1_000_001}, "content"),
    ({"content": "é" * 500_001}, "content"),  # 1,000,002 bytes in UTF-8
    ({"content": 42}, "content"),
    ({"event_time": datetime(2026, 1, 1)}, "event_time"),
    ({"valid_from": datetime(2026, 1, 1)}, "valid_from"),
    ({"valid_to": datetime(2026, 1, 1)}, "valid_to"),
    ({"event_time": "2026-01-01"}, "event_time"),
    (
        {
            "valid_from": datetime(2026, 1, 2, tzinfo=UTC),
            "valid_to": datetime(2026, 1, 1, tzinfo=UTC),
        },
        "valid_to",
    ),
    ({"scope": "organization"}, "scope"),
    ({"scope": ["personal", "project"]}, "scope"),
    ({"scope": []}, "scope"),
    ({"scope": b"personal"}, "scope"),
    ({"node_type": "memo"}, "node_type"),
    ({"epistemic_type": "certain"}, "epistemic_type"),
    ({"source_type": "rumour"}, "source_type"),
    ({"confidence": math.nan}, "confidence"),
    ({"confidence": math.inf}, "confidence"),
    ({"confidence": 1.5}, "confidence"),
    ({"confidence": -0.1}, "confidence"),
    ({"confidence": True}, "confidence"),
    ({"confidence": "0.5"}, "confidence"),
    ({"salience": math.nan}, "salience"),
    ({"salience": 2.0}, "salience"),
    ({"salience": "high"}, "salience"),
    ({"salience": "0.5"}, "salience"),
    ({"metadata": "not a dict"}, "metadata"),
    ({"metadata": {"x": math.nan}}, "metadata"),
    ({"metadata": {"x": object()}}, "metadata"),
    ({"ttl_days": -1}, "ttl_days"),
    ({"ttl_days": True}, "ttl_days"),
    ({"role": ""}, "role"),
    ({"session_id": 12}, "session_id"),
]


@pytest.mark.parametrize(("fields", "field"), BAD_STORES)
def test_bad_input_names_the_field_and_writes_nothing(
    client: MemoryClient, fields: dict[str, Any], field: str
) -> None:
    client.store("existing", user_id="alice")
    seq = write_seq(client)
    kwargs: dict[str, Any] = {"content": "Aster uses PostgreSQL", "user_id": "alice", **fields}
    content = kwargs.pop("content")
    with pytest.raises(InvalidInputError) as info:
        client.store(content, **kwargs)
    assert info.value.field == field
    assert field in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(InvalidInputError):
        client.store_with_receipt(content, **kwargs)
    assert write_seq(client) == seq
    assert len(client.list(user_id="alice")) == 1


def test_bad_batch_item_names_its_index_and_writes_nothing(client: MemoryClient) -> None:
    seq = write_seq(client)
    with pytest.raises(InvalidInputError) as info:
        client.store_many(
            ["fine", {"content": "also fine"}, {"content": "bad", "confidence": math.nan}],
            user_id="alice",
        )
    assert info.value.field == "items[2].confidence"
    bad_batches: list[tuple[Any, str]] = [
        (["fine", {"no": "content"}], "items[1]"),
        (["fine", 3], "items[1]"),
        ([{"content": "x", "user_id": "bob"}], "items[0].user_id"),
        ([{"content": "x", "unknown_field": 1}], "items[0].unknown_field"),
        ([{"content": "x", "event_time": datetime(2026, 1, 1)}], "items[0].event_time"),
        ("just a string", "items"),
    ]
    for items, field in bad_batches:
        with pytest.raises(InvalidInputError) as info:
            client.store_many(items, user_id="alice")
        assert info.value.field == field
    with pytest.raises(InvalidInputError) as info:
        client.store_many(["x"], user_id=" ")
    assert info.value.field == "user_id"
    assert write_seq(client) == seq
    assert client.list(user_id="alice") == []
    assert client.list(user_id="bob") == []


def test_store_converts_offsets_to_utc(client: MemoryClient) -> None:
    local = datetime(2026, 3, 1, 9, 0, tzinfo=UTC) + timedelta(hours=0)
    offset = local.astimezone(__import__("datetime").timezone(timedelta(hours=-5)))
    node = stored(client, event_time=offset)
    assert node.event_time == local
    assert node.event_time.utcoffset() == timedelta(0)


def test_unknown_store_field_is_named_and_nothing_is_written(client: MemoryClient) -> None:
    seq = write_seq(client)
    with pytest.raises(InvalidInputError) as info:
        client.store("text", user_id="alice", colour="blue")
    assert info.value.field == "colour"
    assert write_seq(client) == seq


EXACT_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"content": 42}, "content: must be a string"),
    ({"content": " \n "}, "content: must not be blank"),
    ({"content": "x" * 1_000_001}, "content: exceeds 1000000 bytes"),
    ({"scope": ["personal", "project"]}, "scope: a memory belongs to exactly one scope"),
    ({"scope": None}, "scope: a memory belongs to exactly one scope"),
    ({"node_type": "memo"}, "node_type: invalid value 'memo' (valid: entity, event, fact, "
     "decision, preference, task, summary, note, instruction)"),
    ({"role": ""}, "role: must be a non-blank string"),
    ({"session_id": 12}, "session_id: must be a string"),
    ({"confidence": True}, "confidence: must be a number in [0, 1]"),
    ({"salience": math.inf}, "salience: must be a finite number in [0, 1]"),
    ({"metadata": "x"}, "metadata: must be a JSON object"),
    ({"metadata": {1: "a"}}, "metadata.1.[key]: Input should be a valid string"),
    ({"event_time": "2026-01-01"}, "event_time: must be a datetime"),
    ({"valid_to": datetime(2026, 1, 1)}, "valid_to: valid_to must include a timezone"),
    ({"valid_to": datetime(2026, 8, 1, tzinfo=UTC)}, "valid_to: must not be before valid_from"),
    ({"ttl_days": 1.0}, "ttl_days: must be an integer from 0 to 1000000"),
    # several bad fields: the first in the engine's order is the one reported
    ({"confidence": 5, "metadata": "x", "role": ""}, "role: must be a non-blank string"),
    (
        {"ttl_days": -1, "valid_to": datetime(2020, 1, 1, tzinfo=UTC)},
        "valid_to: must not be before valid_from",
    ),
]


@pytest.mark.parametrize(("fields", "message"), EXACT_ERRORS)
def test_store_errors_keep_their_exact_messages(
    client: MemoryClient, fields: dict[str, Any], message: str
) -> None:
    item: dict[str, Any] = {"content": "Aster uses PostgreSQL", **fields}
    with pytest.raises(InvalidInputError) as info:
        client.store(item["content"], user_id="alice", **{k: v for k, v in fields.items() if k != "content"})
    assert str(info.value) == message
    with pytest.raises(InvalidInputError) as batch:
        client.store_many([item], user_id="alice")
    field = message.split(": ", 1)[0]
    assert (batch.value.field, str(batch.value)) == (f"items[0].{field}", f"items[0].{field}: {message}")
    assert client.list(user_id="alice") == []
