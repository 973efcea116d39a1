"""store_many's batch work: ids drawn for the whole batch, and what a batch stores equals what
storing its memories one by one stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from prme import InvalidInputError, MemoryClient
from prme.services import memories
from prme.validation import to_utc

NOW = datetime(2026, 9, 1, tzinfo=UTC)


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
