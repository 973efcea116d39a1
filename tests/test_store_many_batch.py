"""store_many's batch work: ids drawn for the whole batch, and what a batch stores equals what
storing its memories one by one stores."""

from __future__ import annotations

import os
import uuid

import pytest

from prme.services import memories


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
    assert all(type(u) is uuid.UUID for u in made)


def test_random_uuids_are_version_4_and_distinct() -> None:
    made = memories.random_uuids(2000)
    assert len(set(made)) == 2000
    assert {(u.version, u.variant) for u in made} == {(4, uuid.RFC_4122)}
    assert all(uuid.UUID(str(u)) == u for u in made[:50])
    assert memories.random_uuids(0) == []
