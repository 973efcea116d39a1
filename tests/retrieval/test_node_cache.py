"""Memories fetched for one retrieval are kept for the next (by position in the owner index):
a later retrieval returns the same memories as a fresh read, and an update or a delete (a new
index) never serves an old version."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from prme import MemoryClient

AT = datetime(2027, 1, 1, tzinfo=UTC)
TEXTS = [f"aster postgres latency review {i}" for i in range(30)]


def _nodes(client: MemoryClient, **options: object) -> list[tuple[str, str, str, str | None]]:
    response = client.retrieve("aster latency", user_id="alice", reference_time=AT, **options)
    return [
        (str(r.node.id), r.node.content, r.node.lifecycle_state.value, str(r.node.valid_to))
        for r in response.results
    ]


def test_kept_memories_are_what_a_fresh_read_returns(
    make_client: Callable[..., MemoryClient],
) -> None:
    writer = make_client()
    ids = writer.store_many(TEXTS, user_id="alice")
    first = _nodes(writer)
    again = writer.retrieve("aster latency", user_id="alice", reference_time=AT)
    assert [(str(r.node.id), r.node.content) for r in again.results] == [f[:2] for f in first]
    fresh = make_client()  # another client: nothing kept, every memory read from the pack
    assert _nodes(fresh) == first

    old = first[0][0]
    updated = writer.update(old, user_id="alice", content="aster latency after the update")
    explicit = {n[0]: n for n in _nodes(writer, retrieval_mode="explicit", limit=40)}
    assert explicit[old][2] == "superseded" and explicit[old][3] != "None"  # not the kept one
    assert explicit[str(updated.id)][1] == "aster latency after the update"
    assert old not in {n[0] for n in _nodes(writer)}
    assert _nodes(writer, retrieval_mode="explicit", limit=40) == _nodes(
        make_client(), retrieval_mode="explicit", limit=40
    )

    assert writer.delete(ids[5], user_id="alice")
    assert ids[5] not in {n[0] for n in _nodes(writer, retrieval_mode="explicit", limit=40)}
