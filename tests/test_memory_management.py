"""update (supersede), delete and duplicate detection through MemoryClient, on both backends."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import FakeClock

from prme import MemoryClient
from prme.errors import FrozenPackError, InvalidInputError, NotFoundError
from prme.models.enums import LifecycleState


def _ids(client: MemoryClient, query: str, **kwargs: object) -> list[str]:
    response = client.retrieve(query, user_id="alice", **kwargs)  # type: ignore[arg-type]
    return [str(r.node.id) for r in response.results]


def test_update_supersedes_and_keeps_the_past_truthful(
    make_client: Callable[..., MemoryClient], clock: FakeClock, backend: str
) -> None:
    client = make_client()
    old = client.store("Aster deploys on Fridays", user_id="alice", metadata={"team": "ops"})
    before = client.retrieve("when does Aster deploy", user_id="alice")
    known_before_update = clock.now
    seq = client.engine.store.pack_identity().write_seq
    client.store("Bob's unrelated note", user_id="bob")
    owners = {o: client.engine.store.owner_write_seq(o) for o in ("alice", "bob")}

    new = client.update(old, user_id="alice", content="Aster deploys on Tuesdays")
    # The owner's own content sequence moves (a frozen holdout notices); another owner's not.
    assert client.engine.store.owner_write_seq("alice") > owners["alice"]
    assert client.engine.store.owner_write_seq("bob") == owners["bob"]

    assert new.supersedes is not None and str(new.supersedes) == old
    assert new.content == "Aster deploys on Tuesdays"
    assert new.metadata == {"team": "ops"}  # unchanged fields are carried over
    assert new.valid_from > known_before_update
    previous = client.get(old, user_id="alice")
    assert previous is not None
    assert previous.content == "Aster deploys on Fridays"  # nothing is rewritten
    assert previous.lifecycle_state is LifecycleState.SUPERSEDED
    assert previous.valid_to == new.valid_from
    assert previous.superseded_by == new.id
    assert client.engine.store.pack_identity().write_seq > seq

    assert _ids(client, "when does Aster deploy") == [str(new.id)]
    then = _ids(client, "when does Aster deploy", knowledge_at=known_before_update)
    assert then == [old]
    # The earlier receipt still loads, and on SQLite the whole pack (every replay) is sound.
    receipt = client.get_retrieval_receipt(before.metadata.request_id, user_id="alice")
    assert receipt is not None and [str(c.node_id) for c in receipt.candidates] == [old]
    if backend == "sqlite":
        report = client.check_pack()
        assert report.ok, report.problems


def test_update_refuses_bad_input_and_writes_nothing(
    make_client: Callable[..., MemoryClient],
) -> None:
    client = make_client()
    old = client.store("Aster uses PostgreSQL", user_id="alice")
    seq = client.engine.store.pack_identity().write_seq
    with pytest.raises(InvalidInputError) as unknown:
        client.update(old, user_id="alice", colour="red")
    assert unknown.value.field == "colour"
    with pytest.raises(InvalidInputError) as fixed:
        client.update(old, user_id="alice", valid_from=None)
    assert fixed.value.field == "valid_from"
    with pytest.raises(InvalidInputError) as nothing:
        client.update(old, user_id="alice")
    assert nothing.value.field == "changes"
    with pytest.raises(InvalidInputError) as bad:
        client.update(old, user_id="alice", confidence=2.0)
    assert bad.value.field == "confidence"
    with pytest.raises(InvalidInputError) as blank:
        client.update(old, user_id="alice", content="  ")
    assert blank.value.field == "content"
    with pytest.raises(NotFoundError):  # another owner's id looks missing
        client.update(old, user_id="mallory", content="taken over")
    with pytest.raises(InvalidInputError) as bad_id:
        client.update("not-a-uuid", user_id="alice", content="x")
    assert bad_id.value.field == "node_id"
    assert client.engine.store.pack_identity().write_seq == seq
    assert client.list(user_id="alice")[0].lifecycle_state is not LifecycleState.SUPERSEDED

    client.update(old, user_id="alice", content="Aster uses SQLite")
    with pytest.raises(InvalidInputError) as twice:  # only the latest version is updated
        client.update(old, user_id="alice", content="Aster uses MySQL")
    assert twice.value.field == "node_id" and "superseded by" in str(twice.value)
    assert len(client.list(user_id="alice")) == 2


def test_frozen_pack_refuses_update_and_delete(
    make_client: Callable[..., MemoryClient], pack_path: object
) -> None:
    writer = make_client()
    node = writer.store("Aster uses PostgreSQL", user_id="alice")
    frozen = make_client(frozen=True)
    with pytest.raises(FrozenPackError):
        frozen.update(node, user_id="alice", content="changed")
    with pytest.raises(FrozenPackError):
        frozen.delete(node, user_id="alice")
    record = writer.get(node, user_id="alice")
    assert record is not None and record.content == "Aster uses PostgreSQL"


def test_delete_moves_the_write_sequence_and_receipts_survive(
    make_client: Callable[..., MemoryClient], backend: str
) -> None:
    client = make_client()
    node = client.store("Aster uses PostgreSQL", user_id="alice")
    response = client.retrieve("what does Aster use", user_id="alice")
    seq = client.engine.store.pack_identity().write_seq
    assert client.delete(node, user_id="mallory") is False  # foreign: nothing happens
    assert client.engine.store.pack_identity().write_seq == seq
    assert client.delete(node, user_id="alice") is True
    assert client.engine.store.pack_identity().write_seq == seq + 1
    assert client.get(node, user_id="alice") is None
    assert client.delete(node, user_id="alice") is False
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and str(receipt.candidates[0].node_id) == node
    if backend == "sqlite":
        report = client.check_pack()
        assert report.ok, report.problems


def test_store_dedupe_returns_the_existing_memory(
    make_client: Callable[..., MemoryClient],
) -> None:
    client = make_client()
    first = client.store_with_receipt("Aster  uses PostgreSQL", user_id="alice", dedupe=True)
    assert first["duplicate"] is False
    seq = client.engine.store.pack_identity().write_seq
    again = client.store_with_receipt("aster uses\tpostgresql ", user_id="alice", dedupe=True)
    assert again["duplicate"] is True and again["node_id"] == first["node_id"]
    assert client.engine.store.pack_identity().write_seq == seq  # nothing written
    assert client.store("ASTER USES POSTGRESQL", user_id="alice", dedupe=True) == first["node_id"]
    # Another scope, another owner, or no dedupe: a new memory.
    other_scope = client.store_with_receipt(
        "Aster uses PostgreSQL", user_id="alice", scope="project", dedupe=True
    )
    other_owner = client.store_with_receipt("Aster uses PostgreSQL", user_id="bob", dedupe=True)
    assert not other_scope["duplicate"] and not other_owner["duplicate"]
    assert client.store("Aster uses PostgreSQL", user_id="alice") != first["node_id"]
    assert "duplicate" not in client.store_with_receipt("plain", user_id="alice")
    # A superseded version is no longer a duplicate of anything.
    updated = client.update(first["node_id"], user_id="alice", content="Aster uses SQLite")
    fresh = client.store_with_receipt("Aster uses PostgreSQL", user_id="bob", dedupe=True)
    assert fresh["duplicate"] is True  # bob's own copy
    after = client.store_with_receipt("aster uses sqlite", user_id="alice", dedupe=True)
    assert after["node_id"] == str(updated.id)
    with pytest.raises(InvalidInputError) as bad:
        client.store_with_receipt("x", user_id="alice", dedupe="yes")  # type: ignore[arg-type]
    assert bad.value.field == "dedupe"
