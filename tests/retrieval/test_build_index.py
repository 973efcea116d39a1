"""``MemoryClient.build_index``: a first retrieval's work (reading the owner's rows, saving
the index, building the HNSW segments) done ahead of it, on both backends."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from prme import MemoryClient
from prme.config import PRMEConfig, RetrievalConfig
from prme.errors import InvalidInputError
from prme.index import ann, segment_cache
from prme.index.ann import AnnPolicy, searched_ranges
from prme.index.owner_index import OwnerIndex
from prme.storage import owner_indexes

QUERY = "aster postgres latency"
AT = datetime(2027, 1, 1, tzinfo=UTC)


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [*QUERY.split(), "lisbon", "review", "deploy", "friday", "cache", "index", "graph"]
    return [" ".join(rng.sample(words, rng.randint(3, 7))) + f" note {i}" for i in range(count)]


def _config() -> PRMEConfig:
    from conftest import make_config

    return make_config(retrieval=RetrievalConfig(vector_index="hnsw", vector_index_min_rows=64))


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("a retrieval after build_index read rows or built a graph")


def test_build_index_leaves_nothing_for_the_next_process_to_build(
    make_client: Callable[..., MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save this small owner's index
    writer = make_client(config=_config())
    texts = sentences(300, seed=21)
    writer.store_many([{"content": t, "scope": "project"} for t in texts], user_id="alice")
    writer.store_many([{"content": t, "scope": "project"} for t in texts[:20]], user_id="bob")

    report = writer.build_index(user_id="alice")
    ranges = searched_ranges(300, AnnPolicy(min_rows=64, chunk_rows=64))  # a chunk behind
    assert ranges == [(0, 128), (128, 192)]
    assert report.model_dump(exclude={"elapsed_ms"}) == {
        "user_id": "alice",
        "rows": 300,
        "vector_search": "hnsw",
        "hnsw_segments": len(ranges),
        "exact_rows": 300 - ranges[-1][1],
    }
    assert report.elapsed_ms > 0
    small = writer.build_index(user_id="bob")  # below the threshold: scanned exactly
    assert (small.rows, small.vector_search, small.hnsw_segments, small.exact_rows) == (
        20,
        "exact",
        0,
        20,
    )
    empty = writer.build_index(user_id="carol")
    assert (empty.rows, empty.vector_search, empty.hnsw_segments) == (0, "exact", 0)

    reader = make_client(config=_config())  # another process: it maps what was saved
    with monkeypatch.context() as patch:
        patch.setattr(OwnerIndex, "append", _refuse)
        patch.setattr(ann, "build_segment", _refuse)
        patch.setattr(segment_cache.AHEAD, "submit", _refuse)
        got = reader.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    expected = writer.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    assert got.results and [(r.node.id, r.composite_score) for r in got.results] == [
        (r.node.id, r.composite_score) for r in expected.results
    ]


def test_build_index_names_a_bad_owner_and_writes_nothing(client: MemoryClient) -> None:
    client.store("Aster uses PostgreSQL.", user_id="alice")
    digest = client.pack_digest()
    for bad in ("", "   ", None, 7):
        with pytest.raises(InvalidInputError) as info:
            client.build_index(user_id=bad)  # type: ignore[arg-type]
        assert info.value.field == "user_id"
    assert client.pack_digest() == digest
