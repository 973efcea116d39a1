"""Relevance judgments through MemoryClient on a real pack (reference §D)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from prme import MemoryClient
from prme.errors import IntegrityError, InvalidInputError, NotFoundError
from prme.models.relevance import RelevanceRecord, RelevanceSubmission
from prme.models.retrieval import RetrievalResponse
from prme.services.records import RELEVANCE_OP, parse_record, relevance_op_id
from prme.storage.base import OpRecord

FACTS = [
    "Aster uses PostgreSQL as its primary database",
    "Aster deploys the database on Fridays",
    "The Aster team prefers dark mode",
    "Aster's database backups run nightly",
]


def _retrieve(client: MemoryClient, user_id: str = "alice", **kwargs: Any) -> RetrievalResponse:
    client.store_many([{"content": t, "scope": "project"} for t in FACTS], user_id=user_id)
    response = client.retrieve(
        "Which database does Aster use?", user_id=user_id, scope="project", **kwargs
    )
    assert response.metadata.receipt_persisted and len(response.results) == 4
    return response


def _submission(response: RetrievalResponse, **kwargs: Any) -> RelevanceSubmission:
    results = response.results
    kwargs.setdefault("labels", {results[0].node.id: True, results[1].node.id: False})
    return RelevanceSubmission(request_id=response.metadata.request_id, **kwargs)


def test_record_binds_the_judgment_to_the_receipt(client: MemoryClient) -> None:
    response = _retrieve(client)
    submission = _submission(response)
    stored = client.record_relevance(submission, user_id="alice")
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None
    assert stored.matches(submission)
    assert stored.user_id == "alice" and stored.schema_version == 1
    assert stored.receipt_checksum == receipt.checksum
    assert stored.recorded_at.tzinfo is not None
    assert client.get_relevance(submission.feedback_id, user_id="alice") == stored
    assert client.get_relevance(str(submission.feedback_id), user_id="alice") == stored
    assert client.list_relevance(user_id="alice") == [stored]


def test_identical_retry_returns_the_original_record(client: MemoryClient) -> None:
    response = _retrieve(client)
    submission = _submission(response)
    first = client.record_relevance(submission, user_id="alice")
    again = client.record_relevance(submission, user_id="alice")
    assert again == first  # the original recorded_at, although the clock moved on
    assert len(client.list_relevance(user_id="alice")) == 1


def test_reused_feedback_id_with_other_content_is_refused(client: MemoryClient) -> None:
    response = _retrieve(client)
    first = client.record_relevance(_submission(response), user_id="alice")
    changes: list[dict[str, Any]] = [
        {"labels": {response.results[0].node.id: False}},
        {"method": "structured_evaluation"},
        {"surface": "context"},
    ]
    for change in changes:
        clash = _submission(response, feedback_id=first.feedback_id, **change)
        with pytest.raises(InvalidInputError, match="already identifies a different") as info:
            client.record_relevance(clash, user_id="alice")
        assert info.value.field == "feedback_id"
    assert client.list_relevance(user_id="alice") == [first]


def test_owners_are_isolated(client: MemoryClient) -> None:
    alice = _retrieve(client, "alice")
    bob = _retrieve(client, "bob")
    mine = client.record_relevance(_submission(alice), user_id="alice")
    # Bob cannot judge Alice's request: it looks missing.
    with pytest.raises(NotFoundError, match="owned by this user is required") as info:
        client.record_relevance(_submission(alice), user_id="bob")
    assert info.value.kind == "retrieval receipt"
    # The same feedback id is independent per owner.
    theirs = client.record_relevance(_submission(bob, feedback_id=mine.feedback_id), user_id="bob")
    assert theirs.user_id == "bob" and theirs.request_id == bob.metadata.request_id
    assert client.get_relevance(mine.feedback_id, user_id="alice") == mine
    assert client.list_relevance(user_id="alice") == [mine]
    assert client.list_relevance(user_id="bob") == [theirs]
    assert client.get_relevance(uuid.uuid4(), user_id="alice") is None


def test_unknown_request_is_not_found(client: MemoryClient) -> None:
    unknown = RelevanceSubmission(request_id=uuid.uuid4(), labels={uuid.uuid4(): True})
    with pytest.raises(NotFoundError, match="A saved retrieval receipt owned by this user"):
        client.record_relevance(unknown, user_id="alice")


def test_labels_must_name_returned_candidates(client: MemoryClient) -> None:
    response = _retrieve(client)
    outsider = client.store("Unrelated note about gardening", user_id="alice", scope="personal")
    bad = _submission(response, labels={uuid.UUID(outsider): True})
    with pytest.raises(InvalidInputError, match="must refer to saved response candidates") as info:
        client.record_relevance(bad, user_id="alice")
    assert info.value.field == "labels"
    assert client.list_relevance(user_id="alice") == []


def test_context_labels_require_included_entries(client: MemoryClient) -> None:
    # A budget that fits only the first line: the rest are returned but not in the context.
    response = _retrieve(client, token_budget=15)
    included = [r.node.id for r in response.results if r.in_context]
    excluded = [r.node.id for r in response.results if not r.in_context]
    assert included and excluded
    ok = _submission(response, labels={included[0]: True}, surface="context")
    assert client.record_relevance(ok, user_id="alice").surface == "context"
    for labels in ({excluded[0]: False}, {excluded[0]: True}):
        bad = _submission(response, labels=labels, surface="context")
        with pytest.raises(InvalidInputError, match="Context labels require included entries"):
            client.record_relevance(bad, user_id="alice")
    # The results surface may judge any returned candidate.
    results = _submission(response, labels={excluded[0]: False})
    assert client.record_relevance(results, user_id="alice").surface == "results"


@pytest.mark.parametrize(
    "labels",
    [
        {},
        {"00000000-0000-0000-0000-000000000001": 1},
        {"00000000-0000-0000-0000-000000000001": "true"},
        {"not-a-uuid": True},
        {str(uuid.UUID(int=i)): True for i in range(1001)},
        {uuid.UUID(int=1): True, "00000000-0000-0000-0000-000000000001": False},
    ],
)
def test_submission_validation(labels: dict[Any, Any]) -> None:
    with pytest.raises(ValidationError):
        RelevanceSubmission(request_id=uuid.uuid4(), labels=labels)


def test_submission_accepts_string_ids_and_mappings(client: MemoryClient) -> None:
    response = _retrieve(client)
    node = response.results[0].node.id
    submission = RelevanceSubmission(
        request_id=str(response.metadata.request_id),
        labels={str(node): True},
    )
    assert submission.labels == {node: True}
    assert len(RelevanceSubmission(request_id=uuid.uuid4(), labels={node: True}).labels) == 1
    stored = client.record_relevance(
        {"request_id": str(response.metadata.request_id), "labels": {str(node): False}},
        user_id="alice",
    )
    assert stored.labels == {node: False} and stored.method == "explicit_user"
    with pytest.raises(InvalidInputError) as info:
        client.record_relevance({"request_id": "x", "labels": {}}, user_id="alice")
    assert info.value.field == "request_id"
    with pytest.raises(InvalidInputError) as info:
        client.record_relevance(_submission(response), user_id=" ")
    assert info.value.field == "user_id"


def test_list_pages_by_feedback_id(client: MemoryClient) -> None:
    response = _retrieve(client)
    ids = sorted((uuid.uuid4() for _ in range(5)), key=str)
    for fid in reversed(ids):
        client.record_relevance(_submission(response, feedback_id=fid), user_id="alice")
    first = client.list_relevance(user_id="alice", limit=2)
    rest = client.list_relevance(user_id="alice", after_id=first[-1].feedback_id)
    assert [r.feedback_id for r in first + rest] == ids
    assert client.list_relevance(user_id="alice", after_id=str(ids[-1])) == []
    for bad in (0, 1001, True, "5"):
        with pytest.raises(InvalidInputError) as info:
            client.list_relevance(user_id="alice", limit=bad)  # type: ignore[arg-type]
        assert info.value.field == "limit"
    with pytest.raises(InvalidInputError):
        client.list_relevance(user_id="alice", after_id="nope")


def test_operation_id_matches_the_reference() -> None:
    # §M.7: owner alice, feedback id UUID(int=1).
    assert relevance_op_id("alice", uuid.UUID(int=1)) == "40ec4b1d-c08d-5409-b9b3-e6aa959abeb5"


def test_stored_records_are_verified_on_read(
    client: MemoryClient, make_client: Callable[..., MemoryClient]
) -> None:
    response = _retrieve(client)
    stored = client.record_relevance(_submission(response), user_id="alice")
    op = client.engine.store.get_op(relevance_op_id("alice", stored.feedback_id))
    assert op is not None and op.op_type == RELEVANCE_OP
    assert parse_record(op, "alice") == stored
    tampered_labels = stored.model_copy(update={"labels": {response.results[2].node.id: True}})
    variants = [
        (replace_payload(op, tampered_labels.model_dump_json()), "checksum mismatch"),
        (replace_payload(op, op.payload, user_id="bob"), "owner or identity"),
        (replace_payload(op, op.payload, target_id=str(uuid.uuid4())), "owner or identity"),
    ]
    for bad, fragment in variants:
        with pytest.raises(IntegrityError, match=fragment):
            parse_record(bad, bad.user_id)
    # A second client on the same pack reads the same verified record.
    assert make_client().get_relevance(stored.feedback_id, user_id="alice") == stored


def replace_payload(op: OpRecord, payload: str, **changes: str) -> OpRecord:
    fields = {f: getattr(op, f) for f in OpRecord.__dataclass_fields__}
    fields.update(payload=payload, **changes)
    return OpRecord(**fields)


def test_record_model_round_trips() -> None:
    record = RelevanceRecord(
        feedback_id=uuid.UUID(int=1),
        request_id=uuid.UUID(int=2),
        labels={uuid.UUID(int=3): True},
        surface="results",
        method="explicit_user",
        user_id="alice",
        recorded_at="2026-09-01T00:00:00+02:00",
        receipt_checksum="a" * 64,
    )
    assert record.recorded_at.isoformat() == "2026-08-31T22:00:00+00:00"
    assert RelevanceRecord.model_validate_json(record.model_dump_json()) == record
