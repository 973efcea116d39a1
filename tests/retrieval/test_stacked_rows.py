"""An owner index's vectors as a read-only base and the rows appended after it: read as one
array, and a saved index that grows keeps its mapped rows instead of copying them."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_config
from hypothesis import given, settings
from hypothesis import strategies as st
from support.owner_index import mapped

from prme import MemoryClient
from prme.config import RetrievalConfig
from prme.index.arrays import exact_dot
from prme.index.stacked_rows import StackedRows
from prme.storage import owner_indexes
from prme.storage.sqlite import INDEX_DIR

AT = datetime(2026, 6, 1, tzinfo=UTC)
WORDS = ["aster", "basalt", "cobalt", "lisbon", "review", "budget", "deploy", "latency"]


@settings(max_examples=60, deadline=None)
@given(
    base_rows=st.integers(0, 40),
    after_rows=st.integers(0, 40),
    cut=st.tuples(st.integers(0, 80), st.integers(0, 80)),
    picks=st.lists(st.integers(0, 79), max_size=30),
)
def test_stacked_rows_read_as_the_rows_one_after_another(
    base_rows: int, after_rows: int, cut: tuple[int, int], picks: list[int]
) -> None:
    rng = np.random.default_rng(base_rows * 100 + after_rows)
    whole = rng.standard_normal((base_rows + after_rows, 4)).astype(np.float32)
    base = whole[:base_rows].copy()
    base.flags.writeable = False  # as a mapped saved file
    rows = StackedRows((base,), whole[base_rows:].copy())
    total = base_rows + after_rows
    start, end = min(cut), min(max(cut), total)
    start = min(start, end)
    assert rows.shape == (total, 4)
    np.testing.assert_array_equal(rows[start:end], whole[start:end])
    blocks = rows.blocks(start, end)
    np.testing.assert_array_equal(np.concatenate(blocks), whole[start:end])
    views = [b for b in blocks if len(b)]  # each a view of one block, never a copy
    assert all(np.shares_memory(b, base) or np.shares_memory(b, rows.after) for b in views)
    positions = np.array([p for p in picks if p < total], dtype=np.int64)
    np.testing.assert_array_equal(rows[positions], whole[positions])
    query = rng.standard_normal(4).astype(np.float32)
    # a scan block by block has the bits of a scan of the rows as one array
    np.testing.assert_array_equal(
        np.concatenate([exact_dot(b, query) for b in rows.blocks(0, total)]),
        exact_dot(whole, query),
    )


def test_a_full_base_is_kept_and_the_rows_after_it_grow() -> None:
    data = np.arange(24, dtype=np.float32).reshape(6, 4)
    mapped_base = data.copy()
    mapped_base.flags.writeable = False
    grown = StackedRows.of(mapped_base).reserved(6, 10)
    assert grown.base is mapped_base and grown.shape == (10, 4) and len(grown.after) == 4
    grown.write(6, np.full((2, 4), 7, np.float32))
    again = grown.reserved(8, 20)  # the rows after the base are carried over
    assert again.base is mapped_base and again.shape == (20, 4)
    np.testing.assert_array_equal(again[6:8], np.full((2, 4), 7, np.float32))
    np.testing.assert_array_equal(again[0:6], data)

    built = data.copy()  # rows built in memory, the block full: kept, never copied again
    in_memory = StackedRows.of(built).reserved(6, 12)
    assert in_memory.base is built and len(in_memory.after) == 6
    np.testing.assert_array_equal(in_memory[0:6], data)
    room = StackedRows.of(np.zeros((8, 4), np.float32))  # not full: one larger block instead
    room.write(0, data)
    larger = room.reserved(6, 16)
    assert len(larger.after) == 0 and larger.shape == (16, 4)
    np.testing.assert_array_equal(larger[0:6], data)
    fresh = StackedRows.of(np.zeros((0, 4), np.float32)).reserved(0, 5)
    assert fresh.shape == (5, 4) and len(fresh.after) == 0  # a new index's first fill


def _texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(6)) + f" item {i}" for i in range(count)]


def _ranked(client: MemoryClient) -> list[tuple[str, float]]:
    found = []
    for query in ("aster basalt review", "lisbon budget latency"):
        response = client.retrieve(query, user_id="alice", reference_time=AT, limit=15)
        found += [(str(r.node.id), r.composite_score) for r in response.results]
    return found


@pytest.mark.sqlite_only  # the saved owner index lives in the pack directory
@pytest.mark.parametrize("vector_index", ["exact", "hnsw"])
def test_a_loaded_index_grows_without_copying_its_mapped_vectors(
    pack_path: Path,
    make_client: Callable[..., MemoryClient],
    monkeypatch: pytest.MonkeyPatch,
    vector_index: Any,
) -> None:
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save this small owner's index
    retrieval = RetrievalConfig(vector_index=vector_index, vector_index_min_rows=128)
    config = make_config(retrieval=retrieval)
    texts = _texts(600, seed=3)
    writer = make_client(config=config)
    writer.store_many(texts[:400], user_id="alice")
    _ranked(writer)  # saves alice's index at 400 rows
    writer.close()
    client = make_client(config=config)
    _ranked(client)  # loads it
    for start in (400, 450, 500):  # grows it in the same process, past chunks of 128 rows
        client.store_many(texts[start : start + 50], user_id="alice")
        grown = _ranked(client)
    ix = client.engine.store.owner_index("alice")
    assert ix is not None and ix.size == 550  # (saved again meanwhile: its base stays)
    # the saved rows stay mapped; only the rows appended since are in memory (before: all
    # 400 were copied into memory by the first store)
    assert mapped(ix.vectors.base) and len(ix.vectors.base) == 400
    assert not mapped(ix.vectors.after) and ix.vectors.shape[0] >= 550
    client.close()
    shutil.rmtree(pack_path / INDEX_DIR)
    assert _ranked(make_client(config=config)) == grown  # as an index rebuilt from the rows
