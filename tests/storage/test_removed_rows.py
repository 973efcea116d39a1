"""A delete takes the owner's rows out of its index without rebuilding it from the pack: the
index it leaves holds exactly what an index rebuilt from the remaining rows holds, so retrieval
ranks as it would after a rebuild, in this process and in a new one."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_config
from hypothesis import example, given, settings
from hypothesis import strategies as st
from support.owner_index import owner_ranking

from prme import MemoryClient
from prme.config import RetrievalConfig
from prme.index import stacked_rows, strings
from prme.index.arrays import exact_dot
from prme.index.entity_graph import EntityGraph
from prme.index.lexical import POSTINGS, shared_postings
from prme.index.owner_index import NUMERIC_COLUMNS, OwnerIndex
from prme.index.stacked_rows import StackedRows
from prme.storage import owner_indexes
from prme.storage.sqlite import INDEX_DIR

ClientFactory = Callable[..., MemoryClient]
SCOPES = ("personal", "project", "organisation")
PLACES = ("Lisbon", "Porto", "Kestrel", "Basalt", "Cobalt")
QUERIES = ("Alice Moreau Kestrel", "budget review Lisbon", "Porto meeting notes", "Cobalt")
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _memories(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "content": f"Meeting {i} with {PLACES[i % 5]} team and Alice Moreau about the "
            f"{PLACES[i * 7 % 5]} budget review {'again ' * (i % 3)}",
            "scope": SCOPES[i % len(SCOPES)],
        }
        for i in range(start, start + count)
    ]


def _ranking(client: MemoryClient) -> list[list[Any]]:
    return owner_ranking(client, QUERIES, NOW)


def _held(index: OwnerIndex) -> dict[str, Any]:
    """Everything an owner index holds, by position: columns, vectors, strings, entity links
    both ways, and the lexical postings of every token (as FTS5 tokenized the rows)."""
    size = index.size
    names = {n for p in range(size) for n in index.names_at(p)}
    held: dict[str, Any] = {
        "size": size,
        "max_rowid": index.max_rowid,
        "columns": {name: index.col(name).tolist() for name, _ in NUMERIC_COLUMNS},
        "vectors": index.vectors[:size].tobytes(),
        "strings": [
            list(index.ids[:size]),
            list(index.content_sha256[:size]),
            list(index.evidence[:size]),
        ],
        "names": [index.names_at(p) for p in range(size)],
        "links": {name: index.entity_links(name).tolist() for name in sorted(names)},
    }
    if POSTINGS in index.derived_values:
        postings = shared_postings(index).postings.upto(size)
        tokens = sorted(postings.vocabulary._index())
        held["postings"] = {
            token: [
                a.tolist()
                for a in (*postings.lookup([token])[token], *postings.documents([token])[token])
            ]
            for token in tokens
        }
        held["postings"] = {t: v for t, v in held["postings"].items() if v[0]}  # held by a row
    return held


def _rebuilt(make_client: ClientFactory, pack: Path, **settings: Any) -> MemoryClient:
    """A client whose index of alice is rebuilt from the pack's rows (none saved is read)."""
    shutil.rmtree(pack / INDEX_DIR, ignore_errors=True)
    return make_client(pack, **settings)


def test_deleted_rows_leave_the_index_a_rebuild_would_make(
    make_client: ClientFactory, tmp_path: Path, backend: str
) -> None:
    pack = tmp_path / "pack"
    client = make_client(pack)
    ids = client.store_many(_memories(300), user_id="alice")
    client.store_many(_memories(40), user_id="bob")
    before = _ranking(client)  # builds alice's index and its postings
    returned = [str(row[0]) for row in before[0]]
    client.update(ids[11], user_id="alice", content="Alice Moreau reviewed the Kestrel budget")
    for node_id in (returned[0], returned[4], ids[0], ids[11], ids[150], ids[299]):
        assert client.delete(node_id, user_id="alice")  # ids[11]: superseded, then deleted
    store: Any = client.engine.store
    caught_up = _ranking(client)
    held = _held(store.owner_index("alice"))
    deleted = {returned[0], returned[4], ids[0], ids[11], ids[150], ids[299]}
    assert not deleted & {str(row[0]) for rows in caught_up for row in rows}
    assert held["size"] == 300 + 1 - 6  # the update's new version stays
    client.close()
    rebuilt = _rebuilt(make_client, pack)
    assert _ranking(rebuilt) == caught_up
    assert _held(rebuilt.engine.store.owner_index("alice")) == held


def test_the_newest_row_deleted_then_a_new_one_stored(
    make_client: ClientFactory, tmp_path: Path, backend: str
) -> None:
    """SQLite gives the next row the deleted row's rowid when that was the table's largest:
    the index must read it as a new row, not take it for the row it removed."""
    pack = tmp_path / "pack"
    client = make_client(pack)
    ids = client.store_many(_memories(200), user_id="alice")
    _ranking(client)
    assert client.delete(ids[-1], user_id="alice")
    _ranking(client)
    new_id = client.store("Cobalt budget review moved to Porto by Alice Moreau", user_id="alice")
    found = _ranking(client)
    assert new_id in {str(row[0]) for row in found[6]}
    held = _held(client.engine.store.owner_index("alice"))
    assert held["size"] == 200
    client.close()
    rebuilt = _rebuilt(make_client, pack)
    assert _ranking(rebuilt) == found
    assert _held(rebuilt.engine.store.owner_index("alice")) == held


@pytest.mark.sqlite_only  # the saved index lies beside the SQLite file
@pytest.mark.parametrize("deleted", [(1, 150, 299), (299,)])  # or the newest alone
def test_a_saved_index_loses_the_rows_deleted_since_in_a_new_process(
    make_client: ClientFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    deleted: tuple[int, ...],
) -> None:
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save this small owner's index
    pack = tmp_path / "pack"
    client = make_client(pack)
    ids = client.store_many(_memories(300), user_id="alice")
    _ranking(client)  # saves alice's index at 300 rows, with its postings
    client.close()
    client = make_client(pack)
    for at in deleted:
        client.delete(ids[at], user_id="alice")
    client.update(ids[2], user_id="alice", content="Alice Moreau revised the Lisbon budget")
    client.close()
    reopened = make_client(pack)
    caught_up = _ranking(reopened)
    index = reopened.engine.store.owner_index("alice")
    assert index.saved_size == 300  # loaded and caught up, not rebuilt (and saved again)
    held = _held(index)
    reopened.close()
    rebuilt = _rebuilt(make_client, pack)
    assert _ranking(rebuilt) == caught_up
    assert _held(rebuilt.engine.store.owner_index("alice")) == held


@pytest.mark.sqlite_only  # the graphs are saved beside the SQLite file
def test_a_delete_keeps_the_graphs_before_the_removed_row(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    config = make_config(retrieval=RetrievalConfig(vector_index="hnsw", vector_index_min_rows=128))
    pack = tmp_path / "pack"
    client = make_client(pack, config=config)
    ids = client.store_many(_memories(700), user_id="alice")
    _ranking(client)
    store: Any = client.engine.store
    graphs = dict(store.owner_index("alice").segments)
    assert graphs
    client.delete(ids[-1], user_id="alice")  # after every graph's rows
    newest_gone = _ranking(client)
    kept = store.owner_index("alice").segments
    assert all(kept.get(bounds) is graph for bounds, graph in graphs.items())
    client.delete(ids[3], user_id="alice")  # inside the first graph: every graph is new
    found = _ranking(client)
    assert not set(store.owner_index("alice").segments.values()) & set(graphs.values())
    assert newest_gone != found
    client.close()
    assert _ranking(_rebuilt(make_client, pack, config=config)) == found


@settings(max_examples=80, deadline=None)
@given(
    stored=st.integers(0, 30),
    appended=st.integers(0, 30),
    picks=st.sets(st.integers(0, 59), max_size=20),
)
def test_strings_without_positions_are_those_kept(
    stored: int, appended: int, picks: set[int]
) -> None:
    size = stored + appended
    removed = np.array(sorted(p for p in picks if p < size), dtype=np.int64)
    values = [f"value {i} é" * (i % 3) for i in range(size)]
    kept = [v for i, v in enumerate(values) if i not in set(removed.tolist())]
    column = strings.StringColumn(*strings.encode(values[:stored], stored))
    for value in values[stored:]:
        column.append(value)
    assert list(strings.without(values, size, removed)) == kept
    assert list(strings.without(column, size, removed)) == kept
    newest = np.arange(max(size - len(picks), 0), size, dtype=np.int64)  # or the newest alone
    assert list(strings.without(column, size, newest)) == values[: size - newest.size]


@settings(max_examples=60, deadline=None)
@given(
    base_rows=st.integers(0, 70),
    after_rows=st.integers(0, 40),
    deletes=st.lists(st.lists(st.integers(0, 109), max_size=4), max_size=12),
    picks=st.lists(st.integers(0, 109), max_size=30),
)
# Every full block's row deleted: the rows after them become the full block (a copy, rightly).
@example(base_rows=1, after_rows=1, deletes=[[0]], picks=[])
def test_rows_without_positions_read_as_those_kept(
    base_rows: int, after_rows: int, deletes: list[list[int]], picks: list[int]
) -> None:
    """Deletes one after another: the rows left read (slices, gathers, cosines to the bit) as
    the kept rows copied into one array; the full blocks' rows are never copied while at most
    MAX_FULL_BLOCKS runs of them are left; appending after them still works."""
    rng = np.random.default_rng(base_rows * 1000 + after_rows)
    whole = rng.standard_normal((base_rows + after_rows, 8)).astype(np.float32)
    base = whole[:base_rows].copy()
    base.flags.writeable = False  # as a mapped saved file
    rows = StackedRows((base,), whole[base_rows:].copy())
    kept = whole
    query = rng.standard_normal(8).astype(np.float32)
    for positions in deletes:
        removed = np.array(sorted({p for p in positions if p < len(kept)}), dtype=np.int64)
        before = rows.full if len(rows.base) else ()
        # the full blocks' rows this delete leaves (with none left, the rows after them become
        # the one full block: a copy)
        full_rows = sum(len(block) for block in before)
        full_left = full_rows - int((removed < full_rows).sum())
        rows, kept = rows.without(len(kept), removed), np.delete(kept, removed, 0)
        size = len(kept)
        assert rows.shape[0] == size
        np.testing.assert_array_equal(rows[0:size], kept)
        np.testing.assert_array_equal(rows.cosines(0, size, query), exact_dot(kept, query))
        gathered = np.array([p for p in picks if p < size], dtype=np.int64)
        np.testing.assert_array_equal(rows[gathered], kept[gathered])
        if full_left and len(rows.full) <= stacked_rows.MAX_FULL_BLOCKS:  # views, never copies
            assert all(any(np.shares_memory(b, f) for f in before) for b in rows.full if len(b))
    size = len(kept)
    grown = rows.reserved(size, size + 5)
    grown.write(size, np.ones((3, 8), np.float32))
    np.testing.assert_array_equal(grown[0 : size + 3], np.concatenate((kept, np.ones((3, 8)))))


@settings(max_examples=80, deadline=None)
@given(
    names=st.lists(st.lists(st.sampled_from("abcdef"), unique=True, max_size=3), max_size=25),
    picks=st.sets(st.integers(0, 24), max_size=6),
    newest=st.integers(0, 3),
)
def test_an_entity_graph_without_positions_links_those_kept(
    names: list[list[str]], picks: set[int], newest: int
) -> None:
    size = len(names)
    graph = EntityGraph.empty().merged(names)
    for gone in ({p for p in picks if p < size}, set(range(max(size - newest, 0), size))):
        removed = np.array(sorted(gone), dtype=np.int64)
        left = [ns for p, ns in enumerate(names) if p not in gone]
        expected = EntityGraph.empty().merged(left)
        found = graph.without(removed)
        assert found.size == len(left)
        assert [found.names_of(p) for p in range(found.size)] == left
        for name in "abcdef":
            assert found.links(name).tolist() == expected.links(name).tolist()
