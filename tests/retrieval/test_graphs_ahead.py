"""The graphs searched lag a chunk behind the owner, so the graphs a growing owner needs next
are built in the background, not inside a retrieval: the retrieval right after a chunk fills
returns without building anything, its results are those of a process where every graph was
built long before, and an owner that outgrows a build waits for that build (never builds
twice)."""

from __future__ import annotations

import multiprocessing
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prme import MemoryClient
from prme.config import PRMEConfig, RetrievalConfig
from prme.index import ann
from prme.index.ann import AnnPolicy, kept_ranges, searched_ranges, segment_ranges
from prme.index.segment_cache import AHEAD, GraphSource, SegmentCache
from prme.storage import owner_indexes

AT = datetime(2027, 1, 1, tzinfo=UTC)
QUERY = "aster postgres latency"
WORDS = ["aster", "basalt", "cobalt", "fjord", "garnet", "harbor", "iris", "postgres", "redis", "latency", "budget"]
CHUNK = 64


def _config(lag_chunks: int = 1) -> PRMEConfig:
    from conftest import make_config

    retrieval = RetrievalConfig(
        vector_index="hnsw", vector_index_min_rows=CHUNK, vector_index_lag_chunks=lag_chunks
    )
    return make_config(retrieval=retrieval)


def _texts(count: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return [
        {"content": " ".join(rng.sample(WORDS, rng.randint(3, 7))), "scope": "project"}
        for _ in range(count)
    ]


def _ranked(client: MemoryClient) -> list[tuple[str, float, float]]:
    response = client.retrieve(QUERY, user_id="alice", limit=15, reference_time=AT)
    assert response.results
    return [(str(r.node.id), r.composite_score, r.semantic_score) for r in response.results]


def test_the_searched_graphs_lag_a_chunk_and_the_next_ones_are_kept() -> None:
    policy = AnnPolicy(min_rows=100, chunk_rows=100, max_segment_chunks=4)
    assert policy.identity()["graphs_lag_chunks"] == 1
    assert searched_ranges(99, policy) == searched_ranges(199, policy) == []
    assert searched_ranges(200, policy) == segment_ranges(100, policy) == [(0, 100)]
    # 1150 rows: the graphs of 1050 (two groups of 4 chunks, then 2), 350 rows scanned exactly
    assert searched_ranges(1150, policy) == [(0, 400), (400, 800), (800, 1000)]
    assert kept_ranges(1150, policy) == [(0, 400), (400, 800), (800, 1000), (1000, 1100)]
    for size in range(0, 3000, 41):
        kept = kept_ranges(size, policy)
        # what is searched a chunk later is kept now, and all its rows exist already
        assert set(searched_ranges(size + 100, policy)) <= set(kept)
        assert set(searched_ranges(size, policy)) <= set(kept)
        assert all(end <= size for _, end in kept)
        assert len(kept) == len(set(kept))
    eager = AnnPolicy(min_rows=100, chunk_rows=100, max_segment_chunks=4, lag_chunks=0)
    assert searched_ranges(1150, eager) == kept_ranges(1150, eager) == segment_ranges(1150, eager)


class Builds(list[Any]):
    """``(thread, range)`` of each graph build, in call order; a test waits for a build ahead
    to start (it is submitted to another thread, so a retrieval may return before it starts)."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = threading.Condition()

    def append(self, item: Any) -> None:
        with self.changed:
            super().append(item)
            self.changed.notify_all()

    def started(self, item: tuple[str, tuple[int, int]]) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: item in self, 60), list(self)


@pytest.fixture
def held_builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Builds, threading.Event]]:
    """Every graph build, by thread and range; builds ahead wait until the event is set."""
    AHEAD.drain()  # no earlier test's build ahead is recorded here
    calls = Builds()
    release = threading.Event()
    build = ann.build_segment

    def recorded(vectors: Any, start: int, end: int, policy: AnnPolicy, *stop: Any) -> Any:
        calls.append((threading.current_thread().name, (start, end)))
        if threading.current_thread().name == "prme-ann-ahead":
            assert release.wait(60)
        return build(vectors, start, end, policy, *stop)

    monkeypatch.setattr(ann, "build_segment", recorded)
    yield calls, release
    release.set()
    AHEAD.drain()


def test_a_retrieval_after_a_chunk_fills_builds_nothing_and_matches_a_prepared_pack(
    make_client: Callable[..., MemoryClient],
    held_builds: tuple[Builds, threading.Event],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save this small owner's index
    calls, release = held_builds
    writer = make_client(config=_config())
    writer.store_many(_texts(300, seed=1), user_id="alice")
    writer.build_index(user_id="alice")  # 300 rows: searched 2 + 1 chunks, 4 built ahead
    assert {r for _, r in calls} == {(0, 128), (128, 192), (0, 256)}
    calls.clear()
    writer.store_many(_texts(30, seed=2), user_id="alice")  # 330 rows: a fifth chunk filled

    grown = _ranked(writer)  # searches (0, 256), built ahead; (256, 320) is next
    calls.started(("prme-ann-ahead", (256, 320)))
    assert searched_ranges(330, writer.engine.store.owner_index("alice").ann) == [(0, 256)]
    assert calls == [("prme-ann-ahead", (256, 320))]  # only ahead, and still held
    release.set()
    AHEAD.drain()
    assert _ranked(writer) == grown  # the same whether or not the build ahead finished

    # Another process (on PostgreSQL, another host: the searched graphs are downloaded) builds
    # nothing itself, and ranks the same.
    fresh = make_client(config=_config())
    assert _ranked(fresh) == grown
    assert [thread for thread, _ in calls[1:] if thread != "prme-ann-ahead"] == []


def test_without_a_lag_every_whole_chunk_is_searched_and_the_retrieval_builds_it(
    make_client: Callable[..., MemoryClient],
    held_builds: tuple[Builds, threading.Event],
) -> None:
    """``vector_index_lag_chunks = 0`` (a pack loaded once, then read): the exact tail is under
    a chunk, and the first retrieval after a chunk fills builds the new graph itself."""
    calls, release = held_builds
    release.set()
    client = make_client(config=_config(lag_chunks=0))
    identity = client.engine.feature_identity()["vector_search"]
    assert identity["graphs_lag_chunks"] == 0
    lagging = make_client(config=_config()).engine
    assert client.engine.feature_identity_sha256() != lagging.feature_identity_sha256()
    client.store_many(_texts(300, seed=1), user_id="alice")
    report = client.build_index(user_id="alice")
    assert (report.hnsw_segments, report.exact_rows) == (1, 300 - 256)  # one graph of 4 chunks
    calls.clear()
    client.store_many(_texts(30, seed=2), user_id="alice")  # 330 rows: a fifth chunk filled
    _ranked(client)
    assert [r for _, r in calls] == [(256, 320)]
    assert calls[0][0] != "prme-ann-ahead"  # built in the retrieval, nothing ahead
    with pytest.raises(ValueError, match="vector_index_lag_chunks"):
        RetrievalConfig(vector_index_lag_chunks=9)


def test_an_owner_that_outgrows_a_build_waits_for_it(
    make_client: Callable[..., MemoryClient],
    held_builds: tuple[Builds, threading.Event],
) -> None:
    calls, release = held_builds
    client = make_client(config=_config())
    client.store_many(_texts(330, seed=3), user_id="alice")
    client.build_index(user_id="alice")
    calls.clear()
    client.store_many(_texts(60, seed=4), user_id="alice")  # 390: a sixth chunk filled
    _ranked(client)  # searches (0, 256) and (256, 320): built; (256, 384) ahead, held
    calls.started(("prme-ann-ahead", (256, 384)))
    assert calls == [("prme-ann-ahead", (256, 384))]
    client.store_many(_texts(70, seed=5), user_id="alice")  # 460: (256, 384) is searched now

    done: list[Any] = []
    waiting = threading.Thread(target=lambda: done.append(_ranked(client)))
    waiting.start()
    waiting.join(1.0)
    assert waiting.is_alive()  # it waits for the build ahead, and builds nothing itself
    assert [r for _, r in calls] == [(256, 384)]
    release.set()
    waiting.join(60)
    assert done
    assert (256, 384) in client.engine.store.owner_index("alice").segments
    assert [r for _, r in calls if r == (256, 384)] == [(256, 384)]  # built once
    assert _ranked(make_client(config=_config())) == done[0]  # another process ranks the same


def _child_gets(cache: SegmentCache, vectors: Any, policy: AnnPolicy) -> None:
    found = cache.get([(0, 128)], GraphSource(vectors, policy, lambda r: None, lambda s: s))
    sys.exit(0 if [(s.start, s.end) for s in found] == [(0, 128)] else 3)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_builds_what_its_parent_was_building() -> None:
    """A build in progress at a fork is the parent's: the child builds the graph itself
    instead of waiting forever for a thread it does not have."""
    cache = SegmentCache()
    policy = AnnPolicy(min_rows=64, chunk_rows=64)
    vectors = np.random.default_rng(1).normal(size=(200, 16)).astype(np.float32)
    assert cache._claim([(0, 128)], lambda r: None) == [(0, 128)]  # as a build ahead does
    child = multiprocessing.get_context("fork").Process(
        target=_child_gets, args=(cache, vectors, policy)
    )
    with cache.lock:  # held at the fork, as another thread of the parent may hold it
        child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert (0, 128) in cache.building  # the parent's claim is still the parent's


@pytest.mark.sqlite_only  # segment files live in the pack directory
def test_a_closed_pack_gets_no_graph_built_ahead(
    pack_path: Path,
    make_client: Callable[..., MemoryClient],
    held_builds: tuple[Builds, threading.Event],
) -> None:
    calls, release = held_builds
    client = make_client(config=_config())
    client.store_many(_texts(300, seed=6), user_id="alice")
    client.build_index(user_id="alice")
    files = set((pack_path / "index").glob("*.usearch"))
    client.store_many(_texts(30, seed=7), user_id="alice")
    _ranked(client)
    calls.started(("prme-ann-ahead", (256, 320)))
    assert calls[-1] == ("prme-ann-ahead", (256, 320))  # held
    client.close()
    release.set()
    AHEAD.drain()
    assert set((pack_path / "index").glob("*.usearch")) == files  # nothing written after close


EXITS_DURING_A_BUILD_AHEAD = """
import sys, time
from prme import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig, RetrievalConfig
from prme.index import ann
words = "aster basalt cobalt fjord garnet harbor iris postgres redis latency budget".split()
config = PRMEConfig(
    embedding=EmbeddingConfig(provider="hash", dimension=64),
    retrieval=RetrievalConfig(vector_index="hnsw", vector_index_min_rows=4096),
)
client = MemoryClient(sys.argv[1], config=config)
texts = [" ".join(words[(i * 7 + j * 3) % 11] for j in range(5)) + f" {i}" for i in range(16484)]
client.store_many(texts[:8000], user_id="alice")
client.store_many(texts[8000:], user_id="alice")
built = ann.build_segment
def noted(vectors, start, end, policy, *stop):
    print("building", start, end, flush=True)
    return built(vectors, start, end, policy, *stop)
ann.build_segment = noted
client.retrieve("aster latency", user_id="alice")  # 4 chunks: (0, 16384) is built ahead
time.sleep(0.2)
print("exiting", flush=True)
"""


def test_a_process_exits_cleanly_while_a_graph_is_built_ahead(tmp_path: Path) -> None:
    """The builder is a daemon thread inside usearch's C++ code when the interpreter exits:
    exit stops it between two batches of rows (before, the process aborted)."""
    done = subprocess.run(
        [sys.executable, "-c", EXITS_DURING_A_BUILD_AHEAD, str(tmp_path / "pack")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "building 0 16384" in done.stdout and done.stdout.rstrip().endswith("exiting")
    assert "terminate" not in done.stderr
