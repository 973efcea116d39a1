"""The PostgreSQL pack saves large owners' indexes in the pack itself (``owner_indexes``), so a
new process loads them instead of rebuilding them; a saved index that does not match the
database (stale after a write, update or delete, another owner's, tampered) is never served.

Whether an index was loaded or rebuilt is observed without timing: a loaded index maps its saved
vectors (memory-mapped) and records its saved size, and a reader that must not rebuild has
``OwnerIndex.append`` and ``build_segments`` made to fail."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import FakeClock, make_config
from support.owner_index import mapped

from prme import MemoryClient
from prme.config import RetrievalConfig
from prme.index import ann, segment_cache
from prme.index.ann import kept_ranges
from prme.index.lexical import shared_postings
from prme.index.owner_index import OwnerIndex
from prme.storage import owner_indexes
from prme.storage.postgres import PostgresStore, drop_schema, saved_index

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)

QUERY = "aster postgres latency"
AT = datetime(2027, 1, 1, tzinfo=UTC)
ROWS = 300
WORDS = [
    "aster",
    "basalt",
    "cobalt",
    "postgres",
    "redis",
    "latency",
    "lisbon",
    "review",
    "budget",
    "deploy",
    "friday",
]


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(8)) + f" item {i}" for i in range(count)]


@pytest.fixture
def pack(
    postgres_url: str, backend: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., MemoryClient]]:
    """Clients on one fresh schema; each opens its own store (a new process's view)."""
    del backend
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save small owners' indexes too
    schema = f"t_saved_{time.monotonic_ns() % 10**12}"
    drop_schema(postgres_url, schema)
    opened: list[MemoryClient] = []

    def open_client(
        *, trace: list[str] | None = None, cache: Path | None = None, **retrieval: Any
    ) -> MemoryClient:
        store = PostgresStore(
            postgres_url,
            schema=schema,
            tracer=None if trace is None else trace.append,
            index_cache=cache,
        )
        config = make_config(retrieval=RetrievalConfig(**retrieval))
        client = MemoryClient(config=config, clock=FakeClock(), store=store)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        client.close()
    drop_schema(postgres_url, schema)


def _ranked(client: MemoryClient, user_id: str = "alice") -> list[tuple[str, float]]:
    """The retrieve's ranking, once the index save it scheduled (if any) has finished."""
    response = client.retrieve(QUERY, user_id=user_id, scope="project", reference_time=AT)
    _store(client).wait_for_index_saves()
    return [(str(r.node.id), r.composite_score) for r in response.results]


def _store(client: MemoryClient) -> PostgresStore:
    store = client.engine.store
    assert isinstance(store, PostgresStore)
    return store


def _fill(writer: MemoryClient) -> None:
    texts = sentences(ROWS, seed=7)
    writer.store_many([{"content": t, "scope": "project"} for t in texts], user_id="alice")
    writer.store_many([{"content": t, "scope": "project"} for t in texts[:20]], user_id="bob")


def _no_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the owner index was rebuilt from the rows")

    monkeypatch.setattr(OwnerIndex, "append", refuse)
    monkeypatch.setattr(ann, "build_segment", refuse)
    monkeypatch.setattr(segment_cache.AHEAD, "submit", refuse)


def _saved_owners(client: MemoryClient) -> list[str]:
    store = client.engine.store
    assert isinstance(store, PostgresStore)
    with store.transaction() as conn:
        rows = conn.execute("SELECT user_id FROM owner_indexes ORDER BY user_id").fetchall()
    return [str(r[0]) for r in rows]


def _sql(client: MemoryClient, sql: str, params: tuple[Any, ...] = ()) -> int:
    """Run one statement on the pack's schema; how many rows it changed."""
    store = client.engine.store
    assert isinstance(store, PostgresStore)
    with store.transaction() as conn:
        return int(conn.execute(sql, params).rowcount)


def test_a_new_process_loads_the_saved_index_and_does_not_rebuild_it(
    pack: Callable[..., MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = pack()
    _fill(writer)
    first = _ranked(writer)
    assert _saved_owners(writer) == ["alice"]  # bob (20 rows) stays below the threshold

    trace: list[str] = []
    reader = pack(trace=trace)
    with monkeypatch.context() as patch:
        _no_rebuild(patch)
        assert _ranked(reader) == first
    assert any("FROM owner_index_parts" in sql for sql in trace)
    # nor its lexical postings: no row's lexemes are read again
    assert not any("unnest(m.tsv)" in sql for sql in trace)
    loaded = reader.engine.store.owner_index("alice")
    assert loaded is not None and loaded.size == loaded.saved_size == ROWS
    assert mapped(loaded.vectors)  # the saved vectors, not rows read again
    assert mapped(shared_postings(loaded).postings.segments[0].positions)

    # rows written since the save are appended to the loaded index: the same results as an
    # index rebuilt from the rows alone
    new = writer.store("aster postgres latency lisbon", user_id="alice", scope="project")
    appended = pack()
    ranked = _ranked(appended)
    ix = appended.engine.store.owner_index("alice")
    assert ix is not None and ix.saved_size == ROWS and ix.size == ROWS + 1
    assert new in {node_id for node_id, _ in ranked}
    _sql(writer, "DELETE FROM owner_indexes")
    rebuilt = pack()
    assert _ranked(rebuilt) == ranked
    ix = rebuilt.engine.store.owner_index("alice")
    assert ix is not None and not mapped(ix.vectors)


class _HeldSave:
    """``saved_index.save`` held until released (and failing when asked): each call waits for
    :attr:`release`, so a test decides when a background save may finish."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail: BaseException | None = None):
        self.started, self.release, self.finished = (threading.Event() for _ in range(3))
        self.fail = fail
        self.threads: list[str] = []
        real = saved_index.save

        def held(*args: Any, **kwargs: Any) -> bool:
            self.threads.append(threading.current_thread().name)
            self.started.set()
            assert self.release.wait(timeout=60), "the save was never released"
            if self.fail is not None:
                raise self.fail
            saved = real(*args, **kwargs)
            self.finished.set()
            return saved

        monkeypatch.setattr(saved_index, "save", held)


def test_a_retrieve_returns_while_its_index_is_saved_in_the_background(
    pack: Callable[..., MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = pack()
    _fill(writer)
    held = _HeldSave(monkeypatch)
    store = _store(writer)
    response = writer.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    # returned with the save scheduled and still held: nothing saved yet
    first = [(str(r.node.id), r.composite_score) for r in response.results]
    assert first and held.started.wait(timeout=60) and not held.finished.is_set()
    assert held.threads[0].startswith("prme-index-save-")  # not the retrieve's thread
    assert _saved_owners(writer) == []
    live = store.owner_index("alice")
    assert live is not None and live.saved_size == 0
    # the index keeps serving (and growing) meanwhile; a due index is not saved twice at once
    new = writer.store("aster postgres latency in lisbon", user_id="alice", scope="project")
    assert writer.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT).results
    held.release.set()
    store.wait_for_index_saves()
    assert held.finished.is_set() and len(held.threads) == 1
    assert _saved_owners(writer) == ["alice"]
    live = store.owner_index("alice")
    assert live is not None and live.size == ROWS + 1 and live.saved_size == ROWS
    # a new process loads it (a loaded index records its saved size) and appends the new row
    loaded = _store(pack()).owner_index("alice")
    assert loaded is not None and loaded.saved_size == ROWS and loaded.size == ROWS + 1
    writer.delete(new, user_id="alice")
    assert _ranked(pack()) == first  # what the retrieve returned during the save


def test_close_waits_for_a_save_in_progress(
    pack: Callable[..., MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    from prme.storage.postgres import index_saves

    writer = pack()
    _fill(writer)
    held = _HeldSave(monkeypatch)
    closing = threading.Event()
    shutdown = index_saves.ThreadPoolExecutor.shutdown

    def announced(executor: Any, *args: Any, **kwargs: Any) -> None:
        closing.set()
        shutdown(executor, *args, **kwargs)

    monkeypatch.setattr(index_saves.ThreadPoolExecutor, "shutdown", announced)
    writer.retrieve(QUERY, user_id="alice", scope="project", reference_time=AT)
    assert held.started.wait(timeout=60)
    closed = threading.Event()
    closer = threading.Thread(target=lambda: (writer.close(), closed.set()))
    closer.start()
    assert closing.wait(timeout=60)  # close() is waiting for the saving thread
    assert not closed.is_set()
    held.release.set()
    closer.join()
    assert closed.is_set() and held.finished.is_set()  # the save ended before close() did
    reader = pack()
    assert _saved_owners(reader) == ["alice"]
    with monkeypatch.context() as patch:
        _no_rebuild(patch)
        loaded = _store(reader).owner_index("alice")
    assert loaded is not None and loaded.size == loaded.saved_size == ROWS
    assert mapped(loaded.vectors)


@pytest.mark.parametrize("error", ["database", "disk"])
def test_a_failed_background_save_is_retried_when_due_again(
    pack: Callable[..., MemoryClient], monkeypatch: pytest.MonkeyPatch, error: str
) -> None:
    writer = pack()
    _fill(writer)
    failure = psycopg.OperationalError("lost") if error == "database" else OSError("disk full")
    held = _HeldSave(monkeypatch, fail=failure)
    held.release.set()
    first = _ranked(writer)  # the save failed in the background, not in the retrieve
    assert first and held.threads and _saved_owners(writer) == []
    live = _store(writer).owner_index("alice")
    assert live is not None and live.saved_size == 0
    assert _ranked(writer) == first  # retrieval keeps working
    held.fail = None
    new = writer.store("aster postgres latency in lisbon", user_id="alice", scope="project")
    ranked = _ranked(writer)  # refreshed and still due: saved this time
    assert new in {node_id for node_id, _ in ranked} and held.finished.is_set()
    assert _saved_owners(writer) == ["alice"]
    live = _store(writer).owner_index("alice")
    assert live is not None and live.saved_size == ROWS + 1
    reader = pack()
    with monkeypatch.context() as patch:
        _no_rebuild(patch)
        assert _ranked(reader) == ranked


@pytest.mark.parametrize("change", ["delete", "update"])
def test_a_saved_index_is_caught_up_after_a_change(
    pack: Callable[..., MemoryClient], tmp_path: Path, change: str
) -> None:
    writer = pack()
    _fill(writer)
    top = _ranked(writer)[0][0]
    held = pack()
    held.engine.store.owner_index("alice")  # loaded from the save, held by that process
    if change == "delete":
        assert writer.delete(top, user_id="alice")
    else:
        writer.update(top, user_id="alice", content="nothing relevant here at all")
    reader = pack()
    ranked = _ranked(reader)
    assert top not in {node_id for node_id, _ in ranked}
    ix = reader.engine.store.owner_index("alice")
    # loaded, the deleted row taken out or the superseded one re-read (before: rebuilt from
    # every row, and saved again)
    size = ROWS - 1 if change == "delete" else ROWS + 1
    assert ix is not None and ix.size == size and ix.saved_size == ROWS
    assert _ranked(held) == ranked  # the index held in memory is caught up too
    assert _sql(writer, "DELETE FROM owner_indexes") == 1
    assert _ranked(pack(cache=tmp_path / "rebuilt")) == ranked  # as an index rebuilt


def test_a_saved_index_never_serves_another_owner(pack: Callable[..., MemoryClient]) -> None:
    writer = pack()
    _fill(writer)
    _ranked(writer)
    # alice's saved index (manifest, attestation and parts) under bob's name
    _sql(writer, "DELETE FROM owner_indexes WHERE user_id = 'bob'")
    _sql(
        writer,
        "INSERT INTO owner_indexes SELECT 'bob', manifest, attestation FROM owner_indexes"
        " WHERE user_id = 'alice'",
    )
    _sql(
        writer,
        "INSERT INTO owner_index_parts SELECT 'bob', name, part, data FROM owner_index_parts"
        " WHERE user_id = 'alice'",
    )
    reader = pack()
    response = reader.retrieve(QUERY, user_id="bob", scope="project", reference_time=AT)
    assert response.results and {r.node.user_id for r in response.results} == {"bob"}
    ix = reader.engine.store.owner_index("bob")
    assert ix is not None and ix.size == 20 and ix.saved_size == 0


@pytest.mark.parametrize("damage", ["part", "manifest", "missing part"])
def test_a_tampered_saved_index_is_rejected_and_rebuilt(
    pack: Callable[..., MemoryClient], damage: str
) -> None:
    writer = pack()
    _fill(writer)
    first = _ranked(writer)
    # each damage changes at least one stored row, so one that names no saved file fails here
    if damage == "part":  # one byte of the saved vectors changed
        changed = _sql(
            writer,
            "UPDATE owner_index_parts SET data = overlay(data placing '\\x01'::bytea from 200)"
            " WHERE user_id = 'alice' AND name = 'vectors.npy' AND part = 0",
        )
    elif damage == "manifest":  # the stamp edited without the pack's secret
        changed = _sql(
            writer,
            "UPDATE owner_indexes SET manifest = replace(manifest, '\"owner_delete_seq\": ',"
            " '\"owner_delete_seq\": 1') WHERE user_id = 'alice'",
        )
    else:
        changed = _sql(
            writer,
            "DELETE FROM owner_index_parts WHERE user_id = 'alice' AND name = 'ids.blob.npy'",
        )
    assert changed > 0
    reader = pack()
    assert _ranked(reader) == first
    ix = reader.engine.store.owner_index("alice")
    assert ix is not None and ix.size == ROWS and not mapped(ix.vectors)
    assert pack().engine.store.owner_index("alice").saved_size == ROWS  # saved again


def test_saved_segments_are_loaded_not_rebuilt(
    pack: Callable[..., MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"vector_index": "hnsw", "vector_index_min_rows": 64}
    writer = pack(**settings)
    _fill(writer)
    first = _ranked(writer)
    store = writer.engine.store
    assert isinstance(store, PostgresStore)
    with store.transaction() as conn:
        (names,) = conn.execute(
            "SELECT count(DISTINCT name) FROM owner_index_parts WHERE user_id = 'alice'"
            " AND name LIKE 'ann/%%'"
        ).fetchone() or (0,)
    ix = store.owner_index("alice")
    assert ix is not None and ix.ann is not None
    assert names == len(kept_ranges(ROWS, ix.ann)) > 0  # those searched later included
    reader = pack(**settings)
    with monkeypatch.context() as patch:
        _no_rebuild(patch)
        assert _ranked(reader) == first


def test_an_import_drops_saved_indexes(
    pack: Callable[..., MemoryClient], postgres_url: str
) -> None:
    writer = pack()
    _fill(writer)
    _ranked(writer)
    assert _saved_owners(writer) == ["alice"]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        schema = writer.engine.store.schema  # type: ignore[attr-defined]
        conn.execute(f"SET search_path TO {schema}")
        from prme.storage.postgres.pack import finish_import

        finish_import(conn)
    assert _saved_owners(writer) == []


def test_a_host_cache_serves_later_processes_while_the_pack_still_names_it(
    pack: Callable[..., MemoryClient], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = pack(cache=tmp_path / "writer")
    _fill(writer)
    first = _ranked(writer)
    # a process on the writer's host maps the copy the save left there: no part is read
    trace: list[str] = []
    same_host = pack(trace=trace, cache=tmp_path / "writer")
    with monkeypatch.context() as patch:
        _no_rebuild(patch)
        assert _ranked(same_host) == first
    assert not any("FROM owner_index_parts" in sql for sql in trace)
    # another host reads the parts once, then its later processes use its own copy
    trace = []
    other = pack(trace=trace, cache=tmp_path / "other")
    assert _ranked(other) == first and any("FROM owner_index_parts" in sql for sql in trace)
    trace = []
    assert _ranked(pack(trace=trace, cache=tmp_path / "other")) == first
    assert not any("FROM owner_index_parts" in sql for sql in trace)
    # a new save (the owner grew) is not the copy the other host holds: read again
    more = sentences(ROWS, seed=11)
    writer.store_many([{"content": t, "scope": "project"} for t in more], user_id="alice")
    grown = _ranked(writer)
    trace = []
    again = pack(trace=trace, cache=tmp_path / "other")
    assert _ranked(again) == grown and any("FROM owner_index_parts" in sql for sql in trace)
    ix = again.engine.store.owner_index("alice")
    assert ix is not None and ix.saved_size == 2 * ROWS
    # after a delete, a host's copy is still read, and the deleted row taken out of it
    assert writer.delete(grown[0][0], user_id="alice")
    trace = []
    after = pack(trace=trace, cache=tmp_path / "other")
    assert grown[0][0] not in {node_id for node_id, _ in _ranked(after)}
    assert not any("FROM owner_index_parts" in sql for sql in trace)
    ix = after.engine.store.owner_index("alice")
    assert ix is not None and (ix.size, ix.saved_size) == (2 * ROWS - 1, 2 * ROWS)
    assert mapped(ix.vectors.base)


UNCLOSED_STORE = """
import sys, tempfile
from pathlib import Path
from prme import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig
from prme.storage import owner_indexes
from prme.storage.postgres import PostgresStore
owner_indexes.SAVE_INDEX_ROWS = 64
store = PostgresStore(sys.argv[1], schema=sys.argv[2])
client = MemoryClient(config=PRMEConfig(embedding=EmbeddingConfig(provider="hash")), store=store)
client.store_many([f"aster latency note {i}" for i in range(300)], user_id="alice")
client.retrieve("aster latency", user_id="alice")
store.wait_for_index_saves()
print(sorted(p.name for p in Path(tempfile.gettempdir()).glob("prme-pg-index-*/*")))
"""


def test_a_private_index_directory_is_removed_when_the_process_exits_unclosed(
    postgres_url: str, backend: str, tmp_path: Path
) -> None:
    """The owner indexes saved for a store without ``index_cache`` live in a private temporary
    directory: removed by close, and also when a process exits without closing the store."""
    del backend
    schema = f"t_unclosed_{time.monotonic_ns() % 10**12}"
    drop_schema(postgres_url, schema)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    try:
        done = subprocess.run(
            [sys.executable, "-c", UNCLOSED_STORE, postgres_url, schema],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TMPDIR": str(temporary)},
        )
    finally:
        drop_schema(postgres_url, schema)
    assert done.returncode == 0, done.stderr
    assert "owner-" in done.stdout, done.stdout  # it saved an owner index there
    assert list(temporary.iterdir()) == []
