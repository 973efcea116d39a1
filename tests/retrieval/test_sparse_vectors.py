"""The exact vector scan of sparse vectors through their postings: the full scan's top k, bit
for bit, or no answer (then the full scan runs)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.owner_index import build, mapped, sentences

from prme import MemoryClient
from prme.config import RetrievalConfig
from prme.embed.hashing import HashingEmbedder
from prme.index import sparse_vectors
from prme.index.ann import SPARSE_SAMPLE_ROWS, AnnPolicy
from prme.index.arrays import exact_dot
from prme.index.owner_index import OwnerIndex
from prme.index.sparse_vectors import (
    BUILDER,
    TAIL_ROWS,
    Block,
    SharedBlocks,
    SparseScores,
    block_ranges,
    candidate_vectors,
    error_bound,
    float32_below,
    shared_blocks,
    top_k,
)
from prme.index.stacked_rows import StackedRows
from prme.models.enums import Scope

AT = datetime(2027, 1, 1, tzinfo=UTC)

Found = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]


def scanned(matrix: np.ndarray[Any, Any], query: np.ndarray[Any, Any], mask: Any, k: int) -> Found:
    """The full scan's top k: every cosine, best first, then by position."""
    cosines = exact_dot(matrix, query)
    allowed = np.flatnonzero(mask)
    order = np.lexsort((allowed, -cosines[allowed]))[:k]
    return allowed[order].astype(np.int64), cosines[allowed][order]


def same(got: Found, want: Found) -> bool:
    return np.array_equal(got[0], want[0]) and got[1].tobytes() == want[1].tobytes()


@st.composite
def sparse_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    """Rows with a few nonzero components drawn from a handful of values (so many cosines
    tie, many are exactly 0 and some are negative), a query, a mask, ``k`` and where the
    blocks end (the rows after them are the tail)."""
    rows = draw(st.integers(1, 160))
    dimension = draw(st.integers(4, 40))
    values = st.sampled_from([0.25, 0.5, -0.5, 1.0, 1.0 / 3.0, 0.1])
    matrix = np.zeros((rows, dimension), np.float32)
    for row in range(rows):
        for _ in range(draw(st.integers(0, 4))):
            matrix[row, draw(st.integers(0, dimension - 1))] = draw(values)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = np.divide(matrix, norms, out=matrix, where=norms > 0).astype(np.float32)
    query = np.zeros(dimension, np.float32)
    for _ in range(draw(st.integers(1, 4))):
        query[draw(st.integers(0, dimension - 1))] = draw(values)
    query /= max(float(np.linalg.norm(query)), 1e-6)
    mask = np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), np.bool_)
    if draw(st.booleans()):
        mask[:] = True
    cuts = sorted(set(draw(st.lists(st.integers(1, rows), min_size=1, max_size=4))))
    return matrix, query, mask, draw(st.integers(1, 40)), cuts


@settings(max_examples=300, deadline=None)
@given(sparse_cases())
def test_the_postings_give_the_full_scans_top_k_or_nothing(case: tuple[Any, ...]) -> None:
    matrix, query, mask, k, cuts = case
    blocks = [Block.of(matrix[a:b], a) for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]
    found = top_k(blocks, StackedRows.of(matrix), len(matrix), query, mask, k)
    if found is not None:
        assert same(found, scanned(matrix, query, mask, k))


def test_the_postings_answer_when_enough_rows_share_a_component() -> None:
    """A query sharing words with many rows is answered from the postings (no full scan),
    across blocks and a tail, with and without a mask, for k small and large."""
    matrix = np.asarray(HashingEmbedder(dimension=64).embed(sentences(3000, seed=3)), np.float32)
    queries = np.asarray(HashingEmbedder(dimension=64).embed(sentences(40, seed=4)), np.float32)
    vectors = StackedRows.of(matrix)
    blocks = [Block.of(matrix[a:b], a) for a, b in ((0, 1024), (1024, 2048), (2048, 2560))]
    rng = np.random.default_rng(5)
    answered = 0
    for query in queries:
        for mask in (np.ones(len(matrix), np.bool_), rng.random(len(matrix)) < 0.4):
            for k in (1, 10, 80, 500):
                found = top_k(blocks, vectors, len(matrix), query, mask, k)
                if found is not None:
                    answered += 1
                    assert same(found, scanned(matrix, query, mask, k))
    assert answered >= 0.9 * len(queries) * 2 * 4
    # a query sharing no component with any row has no bounded answer: the scan gives it
    assert (
        top_k(blocks, vectors, len(matrix), np.eye(64, dtype=np.float32)[63] * 0, mask, 5) is None
    )


def test_the_error_bound_covers_float32_dot_products() -> None:
    """Half the bound is no smaller than the largest gap between a float32 dot product (any
    summation order: the scan's kernel, the postings' float32 sum, sequential, numpy's) and
    the exact one; the whole bound covers the gap between the postings' sum and the scan's."""
    rng = np.random.default_rng(6)
    worst = worst_gap = 0.0
    dims = np.arange(384)
    for _ in range(200):
        x = rng.standard_normal(384).astype(np.float32)
        y = rng.standard_normal(384).astype(np.float32)
        x /= np.linalg.norm(x)
        y /= np.linalg.norm(y)
        exact = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
        scan = float(exact_dot(x[None, :], y)[0])
        postings = float(Block.of(x[None, :], 0).dots(dims, y)[0])
        sequential = np.float32(0)
        for a, b in zip(x, y, strict=True):
            sequential = np.float32(sequential + np.float32(a * b))
        for value in (scan, postings, float(sequential), float(np.dot(x, y))):
            worst = max(worst, abs(value - exact))
        worst_gap = max(worst_gap, abs(postings - scan))
    assert 0 < worst <= error_bound(384, 1.0, 1.0) / 2
    assert 0 < worst_gap <= error_bound(384, 1.0, 1.0)
    assert error_bound(384, 1.0, 1.0) < 1e-4  # small against the cosines that matter


def test_float32_below_never_rounds_up() -> None:
    """Comparing float32 sums with the floor: the floor as a float32 never exceeds it, and
    is the largest float32 that does not."""
    rng = np.random.default_rng(7)
    for value in [0.1, 1 / 3, 2.0**-30, 0.0, -0.7, *rng.standard_normal(1000).tolist()]:
        below = float32_below(value)
        assert below.dtype == np.float32 and float(below) <= value
        assert float(np.nextafter(below, np.float32(np.inf))) > value


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), st.lists(st.integers(1, 20), min_size=1, max_size=5), st.integers(0, 99))
def test_merged_blocks_equal_the_block_of_their_rows(
    dimension: int, sizes: list[int], seed: int
) -> None:
    """A block merged from consecutive blocks' entries by row has the arrays of the block
    built from all their rows' vectors (zero rows included)."""
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((sum(sizes), dimension)).astype(np.float32)
    matrix[rng.random(matrix.shape) < 0.8] = 0
    cuts = np.cumsum([0, *sizes]).tolist()
    pieces = [Block.of(matrix[a:b], 7 + a) for a, b in itertools.pairwise(cuts)]
    merged, whole = Block.merged(pieces), Block.of(matrix, 7)
    assert (merged.start, merged.end, merged.max_norm) == (whole.start, whole.end, whole.max_norm)
    assert merged.by_row is not None and whole.by_row is not None
    for got, want in [
        (merged.offsets, whole.offsets),
        (merged.rows, whole.rows),
        (merged.values, whole.values),
        (merged.by_row.offsets, whole.by_row.offsets),
        (merged.by_row.dims, whole.by_row.dims),
        (merged.by_row.values, whole.by_row.values),
    ]:
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_a_growing_owners_larger_blocks_read_only_its_new_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the owner grows and blocks merge into a larger one, the larger block is merged
    from the built blocks' rows: only the new chunk's vectors are read."""
    chunk = block_ranges(1 << 30)[0][1] // 64
    vectors = np.asarray(
        HashingEmbedder(dimension=DIMENSION).embed(sentences(4 * chunk, seed=16)), np.float32
    )
    stacked = StackedRows.of(vectors)
    shared = SharedBlocks()
    assert shared.usable(stacked, 3 * chunk) is None  # the first build starts
    BUILDER.drain()
    assert list(shared.built) == [(0, 2 * chunk), (2 * chunk, 3 * chunk)]
    read: list[tuple[int, int]] = []
    getitem = StackedRows.__getitem__

    def recorded(self: StackedRows, key: Any) -> Any:
        if isinstance(key, slice):
            read.append((key.start, key.stop))
        return getitem(self, key)

    monkeypatch.setattr(StackedRows, "__getitem__", recorded)
    shared.usable(stacked, 4 * chunk)
    BUILDER.drain()
    assert list(shared.built) == [(0, 4 * chunk)] and read == [(3 * chunk, 4 * chunk)]
    want = Block.of(vectors, 0)
    got = shared.built[(0, 4 * chunk)]
    assert got.rows.tobytes() == want.rows.tobytes()
    assert got.values.tobytes() == want.values.tobytes()


def test_blocks_grow_as_whole_chunks_and_keep_the_large_ones() -> None:
    chunk = block_ranges(1 << 30)[0][1] // 64
    assert block_ranges(chunk - 1) == []
    assert block_ranges(3 * chunk + 5) == [(0, 2 * chunk), (2 * chunk, 3 * chunk)]
    # growing by a chunk keeps the blocks of 64 chunks
    before, after = block_ranges(130 * chunk), block_ranges(131 * chunk)
    assert before[:2] == after[:2] == [(0, 64 * chunk), (64 * chunk, 128 * chunk)]


DIMENSION = 256  # the hashing embedder's default: 5% of the components of these sentences


def test_the_rows_past_the_whole_chunks_get_a_block_of_their_own() -> None:
    """The tail (the rows past the last whole chunk) is searched through a block of its own
    once TAIL_ROWS of its rows are in none. A tail block built for a smaller size serves (the
    rows after it are scanned) until TAIL_ROWS more rows arrive, but never a snapshot smaller
    than it."""
    chunk = block_ranges(1 << 30)[0][1] // 64
    vectors = np.asarray(
        HashingEmbedder(dimension=DIMENSION).embed(sentences(2 * chunk + TAIL_ROWS, seed=17)),
        np.float32,
    )
    stacked, shared = StackedRows.of(vectors), SharedBlocks()
    queries = np.asarray(
        HashingEmbedder(dimension=DIMENSION).embed(sentences(12, seed=18)), np.float32
    )
    mask = np.ones(len(vectors), np.bool_)
    mask[::3] = False

    def searched(size: int) -> list[tuple[int, int]]:
        """The blocks searched at ``size`` once built, after checking the top k they give."""
        shared.usable(stacked, size)  # starts what is missing
        BUILDER.drain()
        blocks = shared.usable(stacked, size) or []
        for query in queries:
            for k in (10, 300):
                found = top_k(blocks, stacked, size, query, mask[:size], k)
                assert found is not None
                assert same(found, scanned(vectors[:size], query, mask[:size], k))
        return [(b.start, b.end) for b in blocks]

    assert searched(chunk + TAIL_ROWS - 1) == [(0, chunk)]  # too few rows past the chunk
    assert searched(chunk + TAIL_ROWS) == [(0, chunk), (chunk, chunk + TAIL_ROWS)]
    assert searched(chunk + 2 * TAIL_ROWS - 1) == [(0, chunk), (chunk, chunk + TAIL_ROWS)]
    assert searched(chunk + 2 * TAIL_ROWS) == [(0, chunk), (chunk, chunk + 2 * TAIL_ROWS)]
    older = shared.usable(stacked, chunk + TAIL_ROWS) or []
    assert [(b.start, b.end) for b in older] == [(0, chunk)]
    assert searched(2 * chunk + TAIL_ROWS) == [(0, 2 * chunk), (2 * chunk, 2 * chunk + TAIL_ROWS)]
    tail = (shared.usable(stacked, len(vectors)) or [])[-1]
    want = Block.of(vectors[2 * chunk :], 2 * chunk)
    assert tail.rows.tobytes() == want.rows.tobytes()
    assert tail.values.tobytes() == want.values.tobytes()


def sparse_index(rows: int, policy: AnnPolicy | None = None) -> OwnerIndex:
    vectors = np.asarray(
        HashingEmbedder(dimension=DIMENSION).embed(sentences(rows, seed=9)), np.float32
    )
    return build(vectors, policy)


def built_scores(ix: OwnerIndex, query: np.ndarray[Any, Any]) -> SparseScores:
    """The index's scores once its postings are built (the first call starts the build)."""
    ix.scores(query)
    BUILDER.drain()
    scores = ix.scores(query)
    assert isinstance(scores, SparseScores)
    return scores


def test_an_owner_index_of_sparse_vectors_scans_through_its_postings() -> None:
    ix = sparse_index(SPARSE_SAMPLE_ROWS + 1500)
    queries = np.asarray(
        HashingEmbedder(dimension=DIMENSION).embed(sentences(30, seed=10)), np.float32
    )
    assert ix.sparse() and not ix.uses_ann()
    assert not isinstance(sparse_index(SPARSE_SAMPLE_ROWS - 1).scores(queries[0]), SparseScores)
    scores = built_scores(ix, queries[0])
    # the whole chunk, then the 1,500 rows past it (the tail) in a block of their own
    assert [(b.start, b.end) for b in scores.blocks] == [(0, 4096), (4096, ix.size)]
    mask = ix.scope_mask(None)
    for query in queries:
        for k in (10, 500):
            got = ix.top_k(ix.scores(query), mask, k)
            assert same(got, ix.top_k(ix.cosines(query), mask, k))
    # a dense embedding (every component nonzero) is never sparse
    dense = build(np.abs(ix.vectors[0 : ix.size]) + 0.01, None)
    assert not dense.sparse() and not isinstance(dense.scores(queries[0]), SparseScores)


def test_candidates_are_rescored_from_the_blocks_rows_not_the_vectors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A block's entries by row rebuild its rows' vectors (the same dot products, bit for
    bit), so the candidates of a query whose rows all lie in blocks are rescored without
    reading the vectors; blocks without them (an older save), or fewer rows than
    ``REBUILD_ROWS``, read the vectors instead, with the same results."""
    monkeypatch.setattr(sparse_vectors, "REBUILD_ROWS", 2 * SPARSE_SAMPLE_ROWS)
    ix = sparse_index(2 * SPARSE_SAMPLE_ROWS)  # whole blocks: no tail
    queries = np.asarray(
        HashingEmbedder(dimension=DIMENSION).embed(sentences(20, seed=14)), np.float32
    )
    blocks = built_scores(ix, queries[0]).blocks
    rows = np.sort(np.random.default_rng(3).choice(ix.size, 300, replace=False))
    stored = np.asarray(ix.vectors[rows], np.float32)
    rebuilt = candidate_vectors(blocks, ix.vectors, rows.astype(np.int64))
    assert np.array_equal(rebuilt, stored)
    for query in queries:
        assert exact_dot(rebuilt, query).tobytes() == exact_dot(stored, query).tobytes()
    mask = ix.scope_mask(None)
    want = [ix.top_k(ix.cosines(q), mask, k) for q in queries for k in (10, 500)]
    older = [dataclasses.replace(block, by_row=None) for block in blocks]
    for through in (older, blocks):
        answers = [top_k(through, ix.vectors, ix.size, q, mask, k) for q in queries for k in (10, 500)]
        assert all(a is not None and same(a, w) for a, w in zip(answers, want, strict=True))

    def unread(self: Any, key: Any) -> Any:
        raise AssertionError("the vectors were read")

    monkeypatch.setattr(StackedRows, "__getitem__", unread)
    answers = [top_k(blocks, ix.vectors, ix.size, q, mask, 500) for q in queries]
    assert all(a is not None and same(a, w) for a, w in zip(answers, want[1::2], strict=True))
    with pytest.raises(AssertionError, match="vectors were read"):
        top_k(older, ix.vectors, ix.size, queries[0], mask, 500)
    monkeypatch.setattr(sparse_vectors, "REBUILD_ROWS", 2 * SPARSE_SAMPLE_ROWS + 1)
    with pytest.raises(AssertionError, match="vectors were read"):
        top_k(blocks, ix.vectors, ix.size, queries[0], mask, 500)


def test_a_sparse_owner_past_the_vector_index_threshold_is_scanned_exactly() -> None:
    """Under a vector index policy, an owner of sparse vectors builds no graph, and its
    results are the exact scan's."""
    policy = AnnPolicy(min_rows=256, chunk_rows=256, max_segment_chunks=4)
    ix = sparse_index(SPARSE_SAMPLE_ROWS + 300, policy)
    query = np.asarray(
        HashingEmbedder(dimension=DIMENSION).embed(["aster postgres lisbon"]), np.float32
    )[0]
    assert ix.sparse() and not ix.uses_ann()
    assert ix.complete_segments() == [] and ix.segments == {}
    mask = ix.scope_mask(None)
    assert same(ix.top_k(built_scores(ix, query), mask, 50), ix.top_k(ix.cosines(query), mask, 50))
    assert "exact_when_sparse" in policy.identity()


def test_removed_rows_keep_the_blocks_before_them() -> None:
    from prme.index.removed_rows import without_rows

    ix = sparse_index(3 * 4096 + 100)
    query = np.asarray(
        HashingEmbedder(dimension=DIMENSION).embed(["kafka outage in oslo"]), np.float32
    )[0]
    first = built_scores(ix, query).blocks
    assert [(b.start, b.end) for b in first] == [(0, 8192), (8192, 12288)]
    after = without_rows(ix, np.array([9000], np.int64))
    kept = shared_blocks(after.derived_values).built
    assert list(kept) == [(0, 8192)] and kept[(0, 8192)] is first[0]
    rebuilt = build(np.delete(ix.vectors[0 : ix.size], 9000, axis=0), None)
    mask = after.scope_mask(None)
    for index in (after, rebuilt):
        assert same(
            index.top_k(built_scores(index, query), mask, 200),
            rebuilt.top_k(rebuilt.cosines(query), mask, 200),
        )


ASKED = [("aster postgres lisbon", None), ("kafka outage", "project"), ("chess ramen", None)]


def _filled(client: MemoryClient, texts: list[str]) -> None:
    for start in range(0, len(texts), 1000):
        scopes = ("project", "personal")
        batch = [
            {"content": t, "scope": scopes[(start + i) % 2]}
            for i, t in enumerate(texts[start : start + 1000])
        ]
        client.store_many(batch, user_id="alice")


def _ranked(client: MemoryClient) -> list[list[tuple[str, float, Any]]]:
    responses = [
        client.retrieve(q, user_id="alice", scope=s, limit=20, reference_time=AT) for q, s in ASKED
    ]
    assert all(len(r.results) == 20 for r in responses)
    return [
        [(r.node.content, r.composite_score, r.score_trace) for r in rs.results] for rs in responses
    ]


@pytest.mark.sqlite_only
def test_retrieval_through_the_postings_equals_the_full_scan(
    make_client: Callable[..., MemoryClient], tmp_path: Any
) -> None:
    """Whole retrievals (results, scores, traces) through the postings and through the full
    scan are the same, with and without a scope; so are those of an engine whose vector index
    policy would search graphs at this size (the owner's vectors are sparse)."""
    from conftest import make_config

    texts = sentences(SPARSE_SAMPLE_ROWS + TAIL_ROWS + 100, seed=11)
    client = make_client()
    _filled(client, texts)
    _ranked(client)  # the first retrievals scan in full and start building the postings
    BUILDER.drain()
    ix = client.engine.store.owner_index("alice")
    query = np.asarray(client.engine.embedder.embed(["aster"]), np.float32)[0]
    assert ix is not None
    scores = ix.scores(query)
    assert isinstance(scores, SparseScores)
    assert [(b.start, b.end) for b in scores.blocks] == [(0, 4096), (4096, ix.size)]  # the tail's
    through_postings = _ranked(client)
    shared_blocks(ix.derived_values).sparse = False  # from now on every cosine is computed
    assert not isinstance(ix.scores(query), SparseScores)
    assert _ranked(client) == through_postings

    retrieval = RetrievalConfig(vector_index="hnsw", vector_index_min_rows=2048)
    indexed = make_client(tmp_path / "indexed", config=make_config(retrieval=retrieval))
    _filled(indexed, texts)
    _ranked(indexed)
    BUILDER.drain()
    held = indexed.engine.store.owner_index("alice")
    assert held is not None and held.sparse() and not held.uses_ann()
    for text, scope in ASKED:
        query = np.asarray(indexed.engine.embedder.embed([text]), np.float32)[0]
        mask = held.scope_mask(None if scope is None else [Scope(scope)])
        scores = held.scores(query)
        assert isinstance(scores, SparseScores)
        assert same(held.top_k(scores, mask, 500), held.top_k(held.cosines(query), mask, 500))
    assert held.segments == {}  # no graph was built


def test_a_saved_index_keeps_the_postings(
    make_client: Callable[..., MemoryClient], pack_path: Any
) -> None:
    """The save of a sparse owner's index writes the postings (built for it if need be); a
    new process maps them and searches through them at once, with the full scan's results."""
    texts = sentences(SPARSE_SAMPLE_ROWS + 500, seed=12)
    writer = make_client()
    _filled(writer, texts)
    written = _ranked(writer)  # the index is built from the rows, and saved
    writer.engine.store.wait_for_index_saves()
    reader = make_client()
    ix = reader.engine.store.owner_index("alice")
    assert ix is not None and ix.saved_size == len(texts)
    shared = shared_blocks(ix.derived_values)
    assert ix.index_dir is not None
    saved = json.loads((ix.index_dir / "sparse.json").read_text("utf-8"))["blocks"]
    assert [block[:2] for block in saved] == [[0, 4096]] and list(shared.built) == [(0, 4096)]
    block = shared.built[(0, 4096)]
    assert mapped(block.rows) and mapped(block.values) and block.by_row is not None
    assert mapped(block.by_row.offsets) and mapped(block.by_row.dims)
    assert mapped(block.by_row.values)
    query = np.asarray(reader.engine.embedder.embed(["aster"]), np.float32)[0]
    assert isinstance(ix.scores(query), SparseScores)  # no build was needed
    assert _ranked(reader) == written
    shared.sparse = False
    assert _ranked(reader) == written


@pytest.mark.sqlite_only
def test_postings_saved_without_their_rows_are_saved_again_with_them(
    make_client: Callable[..., MemoryClient],
) -> None:
    """An index saved before the postings kept their entries by row counts as unsaved: the
    first process to load it builds them and saves it again, and the next one maps them."""
    texts = sentences(SPARSE_SAMPLE_ROWS + 500, seed=15)
    writer = make_client()
    _filled(writer, texts)
    written = _ranked(writer)
    ix = writer.engine.store.owner_index("alice")
    assert ix is not None and ix.index_dir is not None
    row_files = sorted(ix.index_dir.glob("sparse.*.row_*.npy"))
    assert [f.name for f in row_files] == [
        "sparse.0.row_dims.npy", "sparse.0.row_offsets.npy", "sparse.0.row_values.npy"
    ]
    for path in row_files:
        path.unlink()
    reader = make_client()
    loaded = reader.engine.store.owner_index("alice")
    assert loaded is not None and loaded.saved_size == len(texts)  # saved again
    assert sorted(ix.index_dir.glob("sparse.*.row_*.npy")) == row_files
    assert shared_blocks(loaded.derived_values).built[(0, 4096)].by_row is not None
    assert _ranked(reader) == written
    third = make_client().engine.store.owner_index("alice")
    assert third is not None and third.saved_size == len(texts)
    entries = shared_blocks(third.derived_values).built[(0, 4096)].by_row
    assert entries is not None and mapped(entries.values)
    # entries by row that do not fit their block: the saved postings are not used, and the
    # index is saved again with new ones (the file is replaced, not overwritten: the clients
    # above still map it)
    count = len(entries.dims)
    np.save(ix.index_dir / "replacement.npy", np.zeros(3, np.uint16))
    (ix.index_dir / "replacement.npy").replace(ix.index_dir / "sparse.0.row_dims.npy")
    fourth = make_client()
    loaded = fourth.engine.store.owner_index("alice")
    assert loaded is not None and loaded.saved_size == len(texts)
    assert len(np.load(ix.index_dir / "sparse.0.row_dims.npy")) == count
    assert _ranked(fourth) == written
