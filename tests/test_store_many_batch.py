"""store_many's batch work: ids drawn for the whole batch, and what a batch stores equals what
storing its memories one by one stores."""

from __future__ import annotations

import os
import pickle
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from prme import InvalidInputError, MemoryClient
from prme.services import memories
from prme.validation import to_utc

NOW = datetime(2026, 9, 1, tzinfo=UTC)


def test_random_uuids_are_uuid4s_of_the_same_random_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytes(range(256))[:48] + bytes([0xFF] * 16)
    drawn: list[int] = []

    def urandom(size: int) -> bytes:
        drawn.append(size)
        return data[:size]

    monkeypatch.setattr(os, "urandom", urandom)
    made = memories.random_uuids(4)
    assert drawn == [64]  # one read for the batch
    assert made == [uuid.UUID(bytes=data[i : i + 16], version=4) for i in range(0, 64, 16)]
    for made_one in made:  # an ordinary UUID in every respect
        twin = uuid.UUID(int=made_one.int)
        assert type(made_one) is uuid.UUID and made_one.is_safe is uuid.SafeUUID.unknown
        assert (hash(made_one), str(made_one), made_one.hex) == (hash(twin), str(twin), twin.hex)
        assert pickle.loads(pickle.dumps(made_one)) == twin


def test_random_uuids_are_version_4_and_distinct() -> None:
    made = memories.random_uuids(2000)
    assert len(set(made)) == 2000
    assert {(u.version, u.variant) for u in made} == {(4, uuid.RFC_4122)}
    assert all(uuid.UUID(str(u)) == u for u in made[:50])
    assert memories.random_uuids(0) == []


@pytest.mark.sqlite_only
def test_a_batch_with_fewer_vectors_than_memories_writes_nothing(client: MemoryClient) -> None:
    client.store_many(["Aster runs nightly"], user_id="alice")  # binds the embedder
    store: Any = client.engine.store
    nodes = [memories.build_node(text, user_id="alice", now=NOW) for text in ("one", "two")]
    before = store.kept_digest_state()
    with pytest.raises(ValueError, match="2 memories but vectors of shape"):
        store.insert_memories(nodes, np.zeros((1, 256), dtype=np.float32), [[], []])
    assert len(client.list(user_id="alice")) == 1
    assert store.kept_digest_state() == before


def test_store_time_defaults_stay_bounded_and_right_past_the_memo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Roles are free text: past the memo's limit defaults are still computed, not memoized.
    monkeypatch.setattr(memories, "_DEFAULTS", {})
    for i in range(memories._DEFAULTS_LIMIT + 50):
        got = memories._defaults(None, f"role {i}", None, None)
        assert got[1:] == (
            f"role {i}",
            memories.EpistemicType.ASSERTED,
            memories.SourceType.USER_STATED,
            0.80,
            memories.DecayProfile.MEDIUM,
        )
    assert len(memories._DEFAULTS) <= memories._DEFAULTS_LIMIT
    tool = memories._defaults(memories.NodeType.INSTRUCTION, "tool", None, None)
    assert tool == (
        memories.NodeType.INSTRUCTION,
        "tool",
        memories.EpistemicType.OBSERVED,
        memories.SourceType.TOOL_OUTPUT,
        0.85,
        memories.DecayProfile.SLOW,
    )


def test_to_utc_gives_what_astimezone_gives() -> None:
    class Stamp(datetime):
        pass

    utc = datetime(2026, 9, 1, 12, tzinfo=UTC)
    assert to_utc(utc) is utc  # already UTC: the same object, as astimezone(UTC) returns
    shifted = datetime(2026, 9, 1, 14, tzinfo=timezone(timedelta(hours=2)))
    assert to_utc(shifted) == utc and to_utc(shifted).tzinfo is UTC
    sub = Stamp(2026, 9, 1, 12, tzinfo=UTC)
    assert to_utc(sub) == sub.astimezone(UTC) and type(to_utc(sub)) is type(sub.astimezone(UTC))
    with pytest.raises(InvalidInputError, match="must include a timezone"):
        to_utc(datetime(2026, 9, 1), "event_time")
    with pytest.raises(InvalidInputError, match="must be a datetime"):
        to_utc("2026-09-01", "event_time")  # type: ignore[arg-type]
