"""Saved ANN segment files that no longer serve their owner are deleted: after a delete (every
later position moves) and as the owner grows (smaller segments merge into larger ones); other
owners' files are never touched."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from prme import MemoryClient
from prme.config import RetrievalConfig
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
        return _files(pack_path)

    alice = retrieve("alice")  # 300 rows, chunks of 64: one segment of 4 chunks
    bob = retrieve("bob") - alice
    assert len(alice) == 1 and len(bob) == 2  # bob: 3 chunks, segments of 2 and 1

    assert client.delete(stored[0], user_id="alice")  # position 0: every position moves
    after_delete = retrieve("alice")
    assert bob <= after_delete and not alice & after_delete  # alice's old graph is gone
    alice = after_delete - bob
    assert len(alice) == 1

    client.store_many(_texts(150, 2000), user_id="alice")  # 449 rows: segments of 4, 2, 1 chunks
    grown = retrieve("alice") - bob
    assert alice <= grown and len(grown) == 3
    client.store_many(_texts(100, 3000), user_id="alice")  # 549 rows: one segment of 8 chunks
    merged = retrieve("alice")
    assert bob <= merged and len(merged - bob) == 1 and not grown & merged
    assert retrieve("bob") == merged  # bob's graph survived every save of alice's index
