"""Saved ANN segment files that no longer serve their owner are deleted: after a delete (every
later position moves) and as the owner grows (smaller segments merge into larger ones); the
graphs built ahead are kept, and other owners' files are never touched."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from prme import MemoryClient
from prme.config import RetrievalConfig
from prme.index.ann import kept_ranges, segment_key
from prme.index.segment_cache import AHEAD
from prme.storage import owner_indexes

AT = datetime(2027, 1, 1, tzinfo=UTC)
WORDS = [
    "aster",
    "postgres",
    "latency",
    "review",
    "lisbon",
    "kestrel",
    "deploy",
    "budget",
    "incident",
    "helm",
]


def _texts(count: int, offset: int = 0) -> list[dict[str, str]]:
    return [
        {"content": f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]} note {i + offset}", "scope": "project"}
        for i in range(count)
    ]


def _files(pack: Path) -> set[str]:
    return {p.name for p in (pack / "index").glob("*.usearch")}


def _kept(client: MemoryClient, owner: str) -> set[str]:
    """The files of the graphs ``owner``'s index keeps at its size (searched and built ahead)."""
    ix = client.engine.store.owner_index(owner)
    assert ix is not None and ix.ann is not None
    return {
        f"{segment_key(ix.ann, ix.dimension, ix.ids, start, end)}.usearch"
        for start, end in kept_ranges(ix.size, ix.ann)
    }


@pytest.mark.sqlite_only  # segment files live in the pack directory
def test_superseded_segment_files_are_deleted(
    pack_path: Path, make_client: Callable[..., MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import make_config

    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save small owners' indexes too
    config = make_config(retrieval=RetrievalConfig(vector_index="hnsw", vector_index_min_rows=64))
    client = make_client(config=config)
    stored = client.store_many(_texts(300), user_id="alice")
    client.store_many(_texts(200, 1000), user_id="bob")

    def retrieve(owner: str) -> set[str]:
        assert client.retrieve("aster latency", user_id=owner, reference_time=AT).results
        AHEAD.drain()  # the graphs built ahead are saved
        client.retrieve("aster latency", user_id=owner, reference_time=AT)  # saves the index
        files = _files(pack_path)
        assert _kept(client, owner) <= files
        return files

    # Chunks of 64, searched a chunk behind. alice, 300 rows: searched 2 + 1 chunks, ahead 4
    alice = retrieve("alice")
    assert alice == _kept(client, "alice") and len(alice) == 3
    bob = retrieve("bob") - alice  # 200 rows: searched 2 chunks, ahead 2 + 1
    assert bob == _kept(client, "bob") and len(bob) == 2

    assert client.delete(stored[-1], user_id="alice")  # the newest: every graph is kept
    assert retrieve("alice") == alice | bob
    # position 0: every position moves, every graph is built again, and the index saved again,
    # which deletes the old graphs' files
    assert client.delete(stored[0], user_id="alice")
    after_delete = retrieve("alice")
    assert after_delete == bob | _kept(client, "alice") and not alice & after_delete
    alice = after_delete - bob

    client.store_many(_texts(150, 2000), user_id="alice")  # 448 rows: 4 + 2 (+ 1 ahead)
    grown = retrieve("alice") - bob
    assert grown == _kept(client, "alice") and len(grown) == 3 and len(alice & grown) == 1
    client.store_many(_texts(100, 3000), user_id="alice")  # 548 rows: 4 + 2 + 1 (+ 8 ahead)
    merged = retrieve("alice") - bob
    assert merged == _kept(client, "alice") and len(merged) == 4 and len(grown & merged) == 3
    assert retrieve("bob") - merged == bob  # bob's graphs survived every save of alice's index
