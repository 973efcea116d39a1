"""Approximate vector search (HNSW segments) and the CSR entity graph of the owner index."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.owner_index import build, mapped, sentences

from prme import MemoryClient
from prme.config import PRMEConfig, RetrievalConfig
from prme.embed.hashing import HashingEmbedder
from prme.index.ann import AnnPolicy, kept_ranges, segment_ranges
from prme.index.entity_graph import EntityGraph
from prme.index.owner_index import NUMERIC_COLUMNS, OwnerIndex, QueryScores
from prme.index.segment_cache import AHEAD


def embedded(count: int, seed: int) -> np.ndarray[Any, Any]:
    return np.asarray(HashingEmbedder(dimension=64).embed(sentences(count, seed)), np.float32)


POLICY = AnnPolicy(min_rows=256, chunk_rows=256, max_segment_chunks=4)


def test_segment_ranges_cover_whole_chunks_and_depend_only_on_the_size() -> None:
    policy = AnnPolicy(min_rows=100, chunk_rows=100, max_segment_chunks=4)
    assert segment_ranges(99, policy) == []
    assert segment_ranges(100, policy) == [(0, 100)]
    assert segment_ranges(350, policy) == [(0, 200), (200, 300)]
    # 11 chunks: two groups of 4, then 2 + 1; the tail (50 rows) is scanned exactly
    assert segment_ranges(1150, policy) == [(0, 400), (400, 800), (800, 1000), (1000, 1100)]
    # contiguous whole chunks from position 0, the tail shorter than one chunk
    for size in range(0, 2000, 37):
        ranges = segment_ranges(size, policy)
        assert all(b - a >= policy.min_rows and (b - a) % policy.min_rows == 0 for a, b in ranges)
        assert [a for a, _ in ranges] == [0, *[b for _, b in ranges]][: len(ranges)]
        assert (ranges[-1][1] if ranges else 0) == size - size % policy.min_rows
    # exact below min_rows even when chunks are smaller; then whole chunks of chunk_rows
    later = AnnPolicy(min_rows=300, chunk_rows=100)
    assert segment_ranges(299, later) == []
    assert segment_ranges(350, later) == [(0, 200), (200, 300)]


def test_ann_recall_against_the_exact_scan_on_a_generated_set(tmp_path: Path) -> None:
    vectors = embedded(3000, seed=1)
    queries = np.asarray(HashingEmbedder(dimension=64).embed(sentences(60, seed=2)), np.float32)
    exact = build(vectors, None)
    ann = build(vectors, POLICY, tmp_path / "segments")
    assert ann.uses_ann() and not exact.uses_ann()
    mask = np.ones(ann.size, dtype=np.bool_)
    recalls = []
    for query in queries:
        scores = ann.scores(query)
        assert isinstance(scores, QueryScores)
        got_pos, got_cos = ann.top_k(scores, mask, 10)
        _, want_cos = exact.vector_search(query, mask, 10)
        # tie-aware: a returned row counts when its cosine reaches the exact 10th best
        recalls.append(float(np.mean(got_cos >= want_cos[-1] - 1e-6)))
        # returned cosines are the exact ones, ordered as the exact scan orders them
        np.testing.assert_array_equal(got_cos, exact.cosines(query)[got_pos])
        assert list(np.lexsort((got_pos, -got_cos))) == list(range(len(got_pos)))
    assert float(np.mean(recalls)) >= 0.98
    # one segment file per range, reused by a fresh index over the same rows: same results
    files = sorted((tmp_path / "segments").glob("*.usearch"))
    assert len(files) == len(segment_ranges(ann.size, POLICY)) == 4
    reopened = build(vectors, POLICY, tmp_path / "segments")
    rebuilt = build(vectors, POLICY)
    for query in queries[:20]:
        first = ann.vector_search(query, mask, 50)
        for other in (reopened, rebuilt):
            again = other.vector_search(query, mask, 50)
            np.testing.assert_array_equal(first[0], again[0])
            np.testing.assert_array_equal(first[1], again[1])
    assert sorted((tmp_path / "segments").glob("*.usearch")) == files


def test_ann_respects_the_mask_and_falls_back_to_exact_for_selective_masks() -> None:
    vectors = embedded(1200, seed=3)
    ann, exact = build(vectors, POLICY), build(vectors, None)
    query = vectors[7]
    half = np.arange(ann.size) % 2 == 0
    positions, _ = ann.top_k(ann.scores(query), half, 30)
    assert half[positions].all() and len(positions) == 30
    few = np.zeros(ann.size, dtype=np.bool_)
    few[[3, 500, 901]] = True  # fewer rows than min_rows: scanned exactly
    got = ann.top_k(ann.scores(query), few, 10)
    want = exact.top_k(exact.cosines(query), few, 10)
    np.testing.assert_array_equal(got[0], want[0])
    assert ann.top_k(ann.scores(query), np.zeros(ann.size, np.bool_), 10)[0].size == 0


def test_exact_top_k_keeps_the_lowest_positions_among_rows_tied_at_the_kth_cosine() -> None:
    """Sparse (hashing) embeddings leave most cosines at exactly 0: which of those rows fill the
    vector channel is the documented tie-break, not whatever ``argpartition`` leaves."""
    vectors = np.zeros((2000, 8), np.float32)
    vectors[:, 0] = 1.0
    vectors[[1500, 1700], 1] = 1.0  # two rows with a positive cosine to the query below
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    exact = build(vectors, None)
    query = np.zeros(8, np.float32)
    query[1] = 1.0
    everything = np.ones(exact.size, np.bool_)
    positions, cosines = exact.top_k(exact.cosines(query), everything, 7)
    assert positions.tolist() == [1500, 1700, 0, 1, 2, 3, 4]
    assert cosines[2:].tolist() == [0.0] * 5
    odd = np.arange(exact.size) % 2 == 1
    assert exact.top_k(exact.cosines(query), odd, 4)[0].tolist() == [1, 3, 5, 7]


def test_segments_are_independent_of_when_rows_were_appended(tmp_path: Path) -> None:
    vectors = embedded(1100, seed=4)
    mask = np.ones(len(vectors), dtype=np.bool_)
    grown = build(vectors[:300], POLICY)
    grown.vector_search(vectors[0], mask[:300], 10)  # builds the first segment at 300 rows
    rows = []
    for i in range(300, len(vectors)):
        row: dict[str, Any] = {name: 0 for name, _ in NUMERIC_COLUMNS}
        row.update(rowid=i + 1, id=f"m{i:06d}", content_sha256="", evidence_refs="[]")
        rows.append(row)
    grown.append(rows, vectors[300:], {})
    whole = build(vectors, POLICY)
    for query in vectors[::97]:
        np.testing.assert_array_equal(
            grown.vector_search(query, mask, 40)[0], whole.vector_search(query, mask, 40)[0]
        )


def test_entity_graph_arrays_match_the_appended_links() -> None:
    graph = EntityGraph.empty().merged([["b"], ["a"], ["b"]])
    assert graph.size == 3 and graph.names == ("a", "b")
    assert graph.links("a").tolist() == [1] and graph.links("b").tolist() == [0, 2]
    merged = graph.merged([["a"], ["a", "c"], [], ["c"]])
    assert merged.size == 7
    assert merged.links("a").tolist() == [1, 3, 4]
    assert merged.links("b").tolist() == [0, 2] and merged.links("c").tolist() == [4, 6]
    assert merged.links("missing").tolist() == []
    assert [merged.names_of(p) for p in range(7)] == [
        ["b"],
        ["a"],
        ["b"],
        ["a"],
        ["a", "c"],
        [],
        ["c"],
    ]
    assert graph.links("a").tolist() == [1]  # the old arrays are unchanged (snapshots)


def test_graph_search_is_the_same_before_and_after_compaction() -> None:
    rng = random.Random(5)
    names = [f"E{i}" for i in range(40)]
    ix = OwnerIndex(4)
    entities: dict[int, list[str]] = {}
    rows = []
    for i in range(600):
        row: dict[str, Any] = {name: 0 for name, _ in NUMERIC_COLUMNS}
        row.update(rowid=i + 1, id=f"m{i}", content_sha256="", evidence_refs="[]")
        rows.append(row)
        entities[i + 1] = sorted(rng.sample(names, rng.randint(0, 3)))
    ix.append(rows[:300], np.zeros((300, 4), np.float32), entities)
    snapshot = ix.snapshot()
    ix.append(rows[300:], np.zeros((300, 4), np.float32), entities)
    mask = np.ones(ix.size, dtype=np.bool_)
    before = {seed: ix.graph_search([seed], mask, 3, 40) for seed in names[:10]}
    old = {seed: snapshot.graph_search([seed], mask[:300], 3, 40) for seed in names[:10]}
    assert ix.fresh_links > 0
    ix.compact_graph()
    assert ix.fresh_links == 0 and ix.entity_positions == {} and ix.graph.size == 600
    for seed in names[:10]:
        assert ix.graph_search([seed], mask, 3, 40) == before[seed]
        assert all(p < 300 for p in old[seed])
        assert snapshot.graph_search([seed], mask[:300], 3, 40) == old[seed]


QUERY = "aster postgres latency"
AT = datetime(2027, 1, 1, tzinfo=UTC)


def _config(**retrieval: Any) -> PRMEConfig:
    from conftest import make_config

    return make_config(retrieval=RetrievalConfig(**retrieval))


@pytest.mark.sqlite_only  # segment files live in the pack directory
def test_a_pack_past_the_threshold_retrieves_through_saved_segments(
    pack_path: Path, make_client: Callable[..., MemoryClient]
) -> None:
    config = _config(vector_index="hnsw", vector_index_min_rows=64)
    client = make_client(config=config)
    texts = sentences(300, seed=6)
    client.store_many([{"content": t, "scope": "project"} for t in texts], user_id="alice")
    client.store_many([{"content": t, "scope": "project"} for t in texts[:20]], user_id="bob")
    first = client.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    assert first.results
    identity = client.engine.feature_identity()["vector_search"]
    assert identity["method"] == "usearch-hnsw" and identity["exact_below_rows"] == 64
    receipt = client.get_retrieval_receipt(first.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.execution.features["vector_search"] == identity
    AHEAD.drain()  # the graphs searched a chunk later, built ahead in the background
    saved = sorted((pack_path / "index").glob("*.usearch"))
    assert len(saved) == len(kept_ranges(300, AnnPolicy(min_rows=64, chunk_rows=64))) == 3
    ids = [r.node.id for r in first.results]
    again = make_client(config=config)  # another client on the same pack: the saved graphs
    second = again.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    assert [r.node.id for r in second.results] == ids
    assert [r.composite_score for r in second.results] == [r.composite_score for r in first.results]
    # bob (20 memories, below the threshold) is scanned exactly and never sees alice's rows
    bob = again.retrieve(QUERY, user_id="bob", scope="project", reference_time=AT)
    assert bob.results and {r.node.user_id for r in bob.results} == {"bob"}
    assert sorted((pack_path / "index").glob("*.usearch")) == saved


def test_the_vector_index_is_part_of_the_feature_identity(
    make_client: Callable[..., MemoryClient], tmp_path: Path
) -> None:
    exact = make_client(tmp_path / "a", config=_config(vector_index="exact"))
    hnsw = make_client(tmp_path / "b", config=_config(vector_index="hnsw"))
    lower = make_client(
        tmp_path / "c", config=_config(vector_index="hnsw", vector_index_min_rows=1024)
    )
    assert exact.engine.feature_identity()["vector_search"] == "exact"
    digests = {c.engine.feature_identity_sha256() for c in (exact, hnsw, lower)}
    assert len(digests) == 3


def _same(a: Any, b: Any) -> None:
    assert [(r.node.id, r.composite_score) for r in a.results] == [
        (r.node.id, r.composite_score) for r in b.results
    ]


@pytest.mark.sqlite_only  # the saved owner index lives in the pack directory
def test_a_reopened_pack_loads_the_saved_owner_index(
    pack_path: Path, make_client: Callable[..., MemoryClient]
) -> None:
    from prme.index import index_file
    from prme.storage.sqlite import INDEX_DIR, SAVE_INDEX_ROWS

    texts = sentences(SAVE_INDEX_ROWS + 200, seed=7)
    writer = make_client()
    writer.store_many([{"content": t, "scope": "project"} for t in texts], user_id="alice")
    writer.store_many([{"content": t, "scope": "project"} for t in texts[:30]], user_id="bob")
    first = writer.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    directory = index_file.owner_directory(pack_path / INDEX_DIR, "alice")
    stamp = index_file.read_stamp(directory)
    assert stamp is not None and stamp.size == len(texts) and stamp.user_id == "alice"
    assert index_file.read_stamp(index_file.owner_directory(pack_path / INDEX_DIR, "bob")) is None

    reader = make_client()
    _same(reader.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT), first)
    loaded = reader.engine.store.owner_index("alice")
    assert loaded is not None and loaded.saved_size == len(texts)
    assert mapped(loaded.vectors)  # not read into memory
    # nor anything else: the columns, the graph's arrays and the strings are mapped too, and
    # a string is decoded when read
    from prme.index.strings import StringColumn

    assert all(mapped(loaded.columns[name]) for name, _ in NUMERIC_COLUMNS)
    assert mapped(loaded.graph.positions)
    assert all(isinstance(c, StringColumn) for c in (loaded.ids, loaded.evidence))
    built = writer.engine.store.owner_index("alice")
    assert built is not None and isinstance(built.ids, list)
    assert list(loaded.ids) == built.ids and list(loaded.content_sha256) == built.content_sha256
    assert list(loaded.evidence) == built.evidence

    # rows written since the save are appended to the loaded index: the same results as an
    # index rebuilt from the rows alone
    writer.store("aster postgres latency review in lisbon", user_id="alice", scope="project")
    appended = make_client().retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    assert appended.results[0].node.content == "aster postgres latency review in lisbon"
    import shutil

    shutil.rmtree(directory)
    rebuilt = make_client()
    _same(rebuilt.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT), appended)
    assert index_file.read_stamp(directory) is not None  # saved again by that rebuild

    # a delete moves the delete sequence: the saved index is loaded and the deleted row taken
    # out (not saved again: it has not grown)
    gone = appended.results[0].node.id
    assert writer.delete(gone, user_id="alice")
    caught_up = make_client()
    after = caught_up.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    assert gone not in {r.node.id for r in after.results}
    stamp = index_file.read_stamp(directory)
    assert stamp is not None and (stamp.size, stamp.delete_seq) == (len(texts) + 1, 0)
    held = caught_up.engine.store.owner_index("alice")
    assert held is not None and (held.size, held.saved_size) == (len(texts), len(texts) + 1)

    # an unreadable file is ignored: the index is rebuilt from the rows. (It replaces the
    # file: the clients above still map the old one, and a mapped file cut short under a
    # reader, such as the background build of the vectors' postings, faults the process.)
    (directory / "broken.npy").write_bytes(b"not an array")
    (directory / "broken.npy").replace(directory / "vectors.npy")
    _same(make_client().retrieve(QUERY, user_id="alice", scope="project", reference_time=AT), after)


@pytest.mark.sqlite_only  # the per-snapshot reuse is the SQLite store's
def test_one_read_snapshot_refreshes_an_owner_index_once(
    make_client: Callable[..., MemoryClient],
) -> None:
    reader, writer = make_client(), make_client()
    writer.store("aster uses postgres", user_id="alice", scope="project")
    store = reader.engine.store
    with store.read_snapshot():
        first = store.owner_index("alice")
        writer.store("aster moved to redis", user_id="alice", scope="project")
        again = store.owner_index("alice")
        assert first is again and first is not None and first.size == 1
        assert store.lexical_search("alice", None, ["redis"], 5) == []  # the same snapshot
    later = store.owner_index("alice")
    assert later is not None and later.size == 2
    assert [r for r, _ in store.lexical_search("alice", None, ["redis"], 5)] == [
        int(later.col("rowid")[1])
    ]


@pytest.mark.sqlite_only
def test_a_saved_index_never_serves_another_owner(
    pack_path: Path, make_client: Callable[..., MemoryClient]
) -> None:
    import shutil

    from prme.index import index_file
    from prme.storage.sqlite import INDEX_DIR, SAVE_INDEX_ROWS

    texts = sentences(SAVE_INDEX_ROWS, seed=8)
    writer = make_client()
    writer.store_many([{"content": t, "scope": "project"} for t in texts], user_id="alice")
    writer.store_many([{"content": t, "scope": "project"} for t in texts[:5]], user_id="bob")
    writer.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    alice = index_file.owner_directory(pack_path / INDEX_DIR, "alice")
    bob = index_file.owner_directory(pack_path / INDEX_DIR, "bob")
    assert index_file.read_stamp(alice) is not None and not bob.exists()
    shutil.copytree(alice, bob)  # alice's files under bob's name
    response = make_client().retrieve(QUERY, user_id="bob", scope="project", reference_time=AT)
    assert response.results and {r.node.user_id for r in response.results} == {"bob"}
    ix = make_client().engine.store.owner_index("bob")
    assert ix is not None and ix.size == 5 and ix.saved_size == 0


def test_an_index_read_in_batches_is_the_index_read_at_once(
    make_client: Callable[..., MemoryClient], backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each backend reads an owner's rows into its index in batches of ``INDEX_BATCH_ROWS``."""
    if backend == "postgres":
        import prme.storage.postgres.memory_rows as batching
    else:
        import prme.storage.sqlite.indexes as batching  # type: ignore[no-redef]

    writer = make_client()
    texts = [f"Aster met Basalt in Lisbon about {t}" for t in sentences(50, seed=9)]
    writer.store_many([{"content": t, "scope": "project"} for t in texts], user_id="alice")
    whole = make_client().engine.store.owner_index("alice")
    monkeypatch.setattr(batching, "INDEX_BATCH_ROWS", 7)
    batched = make_client().engine.store.owner_index("alice")
    assert whole is not None and batched is not None and batched.size == whole.size == 50
    for name, _ in NUMERIC_COLUMNS:
        np.testing.assert_array_equal(batched.col(name), whole.col(name))
    np.testing.assert_array_equal(batched.vectors[:50], whole.vectors[:50])
    assert batched.ids == whole.ids
    assert [batched.names_at(p) for p in range(50)] == [whole.names_at(p) for p in range(50)]
    assert whole.names_at(0) == ["aster", "basalt", "lisbon"]  # entity names are folded


def test_other_channels_candidates_compete_for_the_approximate_channels_places() -> None:
    vectors = embedded(1200, seed=11)
    ann, exact = build(vectors, POLICY), build(vectors, None)
    query = vectors[5]
    mask = np.ones(ann.size, dtype=np.bool_)
    best = exact.top_k(exact.cosines(query), mask, 20)
    # what an approximate search that missed the best rows would have returned
    missed = (best[0][10:], best[1][10:])
    scores = ann.scores(query)
    extra = [best[0][:3], np.array([best[0][3], 10_000, -1], np.int64)]  # out of range: ignored
    positions, cosines = ann.widened(scores, missed, extra, mask)
    assert len(positions) == 10  # as many places as the search filled
    np.testing.assert_array_equal(positions[:4], best[0][:4])
    np.testing.assert_array_equal(cosines, exact.cosines(query)[positions])
    assert list(np.lexsort((positions, -cosines))) == list(range(10))
    # out of the mask: not taken
    outside = mask.copy()
    outside[best[0][:3]] = False
    assert not set(ann.widened(scores, missed, extra, outside)[0][:3]) & set(best[0][:3])
    # an exact scan's hits are the best already; a policy may turn the widening off
    assert exact.widened(exact.cosines(query), missed, extra, mask) is missed
    plain = build(vectors, AnnPolicy(min_rows=256, chunk_rows=256, rescore_channels=False))
    assert plain.widened(plain.scores(query), missed, extra, mask) is missed


def test_a_segment_file_does_not_depend_on_search_settings(tmp_path: Path) -> None:
    """Search-time settings change the identity (a profile is inapplicable across them) but
    not the graphs: a saved segment serves every expansion_search."""
    from dataclasses import replace

    from prme.index.ann import segment_key

    vectors = embedded(600, seed=12)
    wide = replace(POLICY, expansion_search=2048)
    assert wide.identity() != POLICY.identity()
    ids = [f"m{i}" for i in range(600)]
    assert segment_key(wide, 64, ids, 0, 256) == segment_key(POLICY, 64, ids, 0, 256)
    assert segment_key(replace(POLICY, connectivity=16), 64, ids, 0, 256) != segment_key(
        POLICY, 64, ids, 0, 256
    )
    mask = np.ones(600, dtype=np.bool_)
    build(vectors, POLICY, tmp_path).vector_search(vectors[0], mask, 10)
    files = sorted(tmp_path.glob("*.usearch"))
    build(vectors, wide, tmp_path).vector_search(vectors[0], mask, 10)
    assert sorted(tmp_path.glob("*.usearch")) == files


def test_a_built_segment_is_searched_through_its_saved_file(tmp_path: Path) -> None:
    """Once saved, a segment's graph is the memory-mapped file (its pages are the page
    cache's), not the copy built in memory; without a directory it stays in memory."""
    vectors = embedded(600, seed=13)
    mask = np.ones(600, dtype=np.bool_)
    saved, kept = build(vectors, POLICY, tmp_path), build(vectors, POLICY)
    first = saved.vector_search(vectors[1], mask, 10)
    second = kept.vector_search(vectors[1], mask, 10)
    np.testing.assert_array_equal(first[0], second[0])
    for (a, b), segment in saved.segments.items():
        graph, built = segment._graph, kept.segments[(a, b)]._graph
        assert graph.memory_usage < built.memory_usage // 10


def test_segments_searched_side_by_side_and_by_many_callers_give_the_serial_results() -> None:
    """The segments of one search run on worker threads, and several retrievals may search
    the same graphs at once: every answer is the one a lone, serial search gives."""
    from concurrent.futures import ThreadPoolExecutor

    vectors = embedded(2600, seed=8)
    ann = build(vectors, POLICY)
    ranges = segment_ranges(ann.size, POLICY)
    assert len(ranges) >= 3
    mask = np.ones(ann.size, dtype=np.bool_)
    queries = vectors[::37]

    def serial(query: np.ndarray[Any, Any]) -> list[list[int]]:
        return [
            sorted(segment.search(query, 40, POLICY.expansion_search).tolist())
            for segment in (ann.segments_for([r])[0] for r in ranges)
        ]

    alone = [serial(q) for q in queries]
    want = [ann.vector_search(q, mask, 40) for q in queries]
    with ThreadPoolExecutor(6) as callers:
        for _ in range(3):
            got = list(callers.map(lambda q: ann.vector_search(q, mask, 40), queries))
            for (gp, gc), (wp, wc) in zip(got, want, strict=True):
                np.testing.assert_array_equal(gp, wp)
                np.testing.assert_array_equal(gc, wc)
            assert list(callers.map(serial, queries)) == alone


def test_missing_segments_built_side_by_side_are_the_segments_built_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The missing graphs of a search are built at once on threads of their own (more
    workers than this machine may have CPUs here): each file is byte for byte the one built
    alone, each is saved and logged as it is built, and each is then read from its file."""
    from prme.index import ann as ann_module

    monkeypatch.setattr(ann_module, "usable_cpus", lambda: 3)
    vectors = embedded(2600, seed=14)
    ranges = segment_ranges(2600, POLICY)
    assert len(ranges) >= 3
    index_dir = tmp_path / "at-once-owner"
    index_dir.mkdir()
    at_once = build(vectors, POLICY, tmp_path / "at-once")
    alone = build(vectors, POLICY, tmp_path / "alone")
    at_once.index_dir = index_dir
    at_once.segments_for(ranges)
    for r in ranges:
        alone.segments_for([r])
    files = sorted(f.name for f in (tmp_path / "at-once").glob("*.usearch"))
    assert len(files) == len(ranges)
    assert files == sorted(f.name for f in (tmp_path / "alone").glob("*.usearch"))
    for name in files:
        built = (tmp_path / "at-once" / name).read_bytes()
        assert built == (tmp_path / "alone" / name).read_bytes()
    logged = (index_dir / "segments.log").read_text().split()
    assert sorted(logged) == [name.removesuffix(".usearch") for name in files]
    in_memory = build(vectors, POLICY)
    for r, segment in zip(ranges, in_memory.segments_for(ranges), strict=True):
        assert at_once.segments[r]._graph.memory_usage < segment._graph.memory_usage // 10
    mask = np.ones(2600, dtype=np.bool_)
    for query in vectors[::101]:
        np.testing.assert_array_equal(
            at_once.vector_search(query, mask, 10)[0], alone.vector_search(query, mask, 10)[0]
        )


@pytest.mark.parametrize("batch", [1, 97, 4096])
def test_a_graph_built_a_batch_at_a_time_is_the_graph_built_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Graphs are built a batch of rows at a time (so a build ahead can stop at exit): the
    saved bytes are those of one insertion of every row, whatever the batch."""
    from prme.index import ann as ann_module

    vectors = embedded(700, seed=15)
    whole = ann_module._new_graph(POLICY, vectors.shape[1])
    whole.add(np.arange(100, 700, dtype=np.uint64), vectors[100:700], threads=1)
    whole.save(str(tmp_path / "whole.usearch"))
    monkeypatch.setattr(ann_module, "BUILD_BATCH_ROWS", batch)
    ann_module.save_segment(ann_module.build_segment(vectors, 100, 700, POLICY), tmp_path / "b")
    assert (tmp_path / "b").read_bytes() == (tmp_path / "whole.usearch").read_bytes()
    with pytest.raises(ann_module.BuildStopped):
        ann_module.build_segment(vectors, 100, 700, POLICY, stop=lambda: True)
