"""An owner's column index follows the owner's own writes only: another owner's deletes and
updates neither rebuild it (in memory or saved) nor refresh it, so an owner can observe nothing
of them and an owner's retrieval cost does not grow with other owners' writes. The owner's own
deletes and updates still invalidate it (never a stale result).

Whether an index was rebuilt or refreshed is observed without timing: ``OwnerIndex.append``,
``build_segments`` and the reading of new rows are made to fail, and the index object kept in
memory is compared by identity."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.owner_index import mapped

from prme import MemoryClient
from prme.index import ann, segment_cache
from prme.index.owner_index import OwnerIndex
from prme.storage import owner_indexes
from prme.storage.sqlite import DB_FILE, indexes

AT = datetime(2027, 1, 1, tzinfo=UTC)
QUERY = "aster postgres latency"
WORDS = ["aster", "postgres", "latency", "review", "lisbon", "kestrel", "deploy", "budget"]


def _texts(count: int, offset: int = 0) -> list[dict[str, str]]:
    return [
        {"content": f"{WORDS[i % 8]} {WORDS[(i * 3) % 8]} note {i + offset}", "scope": "project"}
        for i in range(count)
    ]


def _ranked(client: MemoryClient, user_id: str) -> list[tuple[str, float]]:
    response = client.retrieve(QUERY, user_id=user_id, scope="project", reference_time=AT)
    return [(str(r.node.id), r.composite_score) for r in response.results]


def _refuse(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the owner index was rebuilt or refreshed from the rows")


def _no_rebuild(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(OwnerIndex, "append", _refuse)
    patch.setattr(ann, "build_segment", _refuse)
    patch.setattr(segment_cache.AHEAD, "submit", _refuse)


def _no_refresh(patch: pytest.MonkeyPatch, client: MemoryClient) -> None:
    """Reading the owner's new rows fails too (an index that is fresh reads none)."""
    _no_rebuild(patch)
    store = client.engine.store
    if hasattr(store, "_append_new_rows"):  # PostgreSQL
        patch.setattr(type(store), "_append_new_rows", _refuse)
    patch.setattr(indexes, "append_new_rows", _refuse)


def _bob_deletes_and_updates(client: MemoryClient, bob: list[str]) -> str:
    assert client.delete(bob[0], user_id="bob")
    updated = client.update(bob[1], user_id="bob", content="aster postgres latency rewritten")
    return str(updated.id)


def test_another_owners_delete_and_update_leave_an_owners_index_alone(
    make_client: Callable[..., MemoryClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client()
    client.store_many(_texts(40), user_id="alice")
    bob = client.store_many(_texts(12, 100), user_id="bob")
    store: Any = client.engine.store
    first = _ranked(client, "alice")
    assert first
    before = _ranked(client, "bob")
    assert bob[1] in {node for node, _ in before}
    kept = store._indexes["alice"]

    new_id = _bob_deletes_and_updates(client, bob)
    client.store_many(_texts(3, 200), user_id="bob")  # and writes more

    with monkeypatch.context() as patch:
        _no_refresh(patch, client)
        assert _ranked(client, "alice") == first
    assert store._indexes["alice"] is kept

    # bob's own index does follow bob's delete and update
    found = {node for node, _ in _ranked(client, "bob")}
    assert bob[0] not in found and bob[1] not in found and new_id in found
    ix = store.owner_index("bob")
    assert ix is not None and bob[0] not in list(ix.ids[: ix.size])


def test_an_owners_own_delete_still_invalidates_the_owners_index(
    make_client: Callable[..., MemoryClient],
) -> None:
    client = make_client()
    alice = client.store_many(_texts(40), user_id="alice")
    client.store_many(_texts(12, 100), user_id="bob")
    store: Any = client.engine.store
    first = _ranked(client, "alice")
    kept = store._indexes["alice"]
    gone = first[0][0]
    assert client.delete(gone, user_id="alice")
    after = _ranked(client, "alice")
    assert gone not in {node for node, _ in after}
    assert store._indexes["alice"] is not kept
    ix = store.owner_index("alice")
    assert ix is not None and ix.size == len(alice) - 1 and gone not in list(ix.ids[: ix.size])

    # an update (supersede) of alice's own memory reaches her index too
    target = after[0][0]
    updated = client.update(target, user_id="alice", content="aster postgres latency again")
    ix = store.owner_index("alice")
    assert ix is not None
    lifecycle = ix.columns["lifecycle"][: ix.size].tolist()
    state = dict(zip(list(ix.ids[: ix.size]), lifecycle, strict=True))
    assert state[target] != state[str(updated.id)]


def test_a_saved_index_survives_another_owners_delete_and_update(
    make_client: Callable[..., MemoryClient],
    pack_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save small owners' indexes too
    writer = make_client()
    writer.store_many(_texts(120), user_id="alice")
    bob = writer.store_many(_texts(12, 100), user_id="bob")
    first = _ranked(writer, "alice")
    if backend == "postgres":  # saved in the background
        writer.engine.store.wait_for_index_saves()
    assert writer.engine.store.owner_index("alice").saved_size == 120
    new_id = _bob_deletes_and_updates(writer, bob)
    writer.close()

    reader = make_client(path=pack_path)  # a new process: alice's saved index is loaded
    with monkeypatch.context() as patch:
        _no_rebuild(patch)
        assert _ranked(reader, "alice") == first
    loaded = reader.engine.store.owner_index("alice")
    assert loaded is not None and loaded.size == loaded.saved_size == 120
    assert mapped(loaded.vectors)
    found = {node for node, _ in _ranked(reader, "bob")}
    assert bob[0] not in found and bob[1] not in found and new_id in found

    # alice's own delete: a new process loads her saved index and takes the row out of it
    assert reader.delete(first[0][0], user_id="alice")
    reader.close()
    third = make_client(path=pack_path)
    with monkeypatch.context() as patch:
        _no_rebuild(patch)
        assert first[0][0] not in {node for node, _ in _ranked(third, "alice")}
    caught_up = third.engine.store.owner_index("alice")
    assert caught_up is not None and (caught_up.size, caught_up.saved_size) == (119, 120)
    assert mapped(caught_up.vectors.base)  # the saved rows around the removed one, not copied


def test_a_change_by_a_writer_unaware_of_owner_sequences_still_invalidates(
    make_client: Callable[..., MemoryClient],
) -> None:
    # An earlier version of prme writing the pack bumps only the pack-wide sequences: the
    # pack's triggers still move the owner's delete sequence, so no stale index is served.
    client = make_client()
    client.store_many(_texts(40), user_id="alice")
    store: Any = client.engine.store
    first = _ranked(client, "alice")
    target = first[0][0]
    sql = "UPDATE memories SET lifecycle_state = 'superseded' WHERE id = ? AND user_id = ?"
    if hasattr(store, "_append_new_rows"):  # PostgreSQL
        with store.transaction() as conn:
            conn.execute(sql.replace("?", "%s"), (target, "alice"))
    else:
        with store._write() as conn:
            conn.execute(sql, (target, "alice"))
    assert target not in {node for node, _ in _ranked(client, "alice")}


@pytest.mark.sqlite_only  # the SQLite file itself is edited
def test_an_index_saved_under_the_pack_wide_stamp_is_rebuilt(
    make_client: Callable[..., MemoryClient],
    pack_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    from prme.index import index_file

    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)
    writer = make_client()
    writer.store_many(_texts(120), user_id="alice")
    first = _ranked(writer, "alice")
    writer.close()
    # an earlier version's stamp: the pack-wide delete sequence, which alice's matches
    directory = index_file.owner_directory(pack_path / indexes.INDEX_DIR, "alice")
    meta = json.loads((directory / index_file.META).read_text("utf-8"))
    meta["delete_seq"] = meta.pop("owner_delete_seq")
    (directory / index_file.META).write_text(json.dumps(meta), "utf-8")
    reader = make_client(path=pack_path)
    assert _ranked(reader, "alice") == first
    ix = reader.engine.store.owner_index("alice")
    assert ix is not None and ix.size == 120 and not mapped(ix.vectors)


@pytest.mark.sqlite_only  # the SQLite file itself is edited
def test_a_pack_from_before_owner_delete_sequences_opens(
    make_client: Callable[..., MemoryClient], pack_path: Path
) -> None:
    client = make_client()
    ids = client.store_many(_texts(20), user_id="alice")
    first = _ranked(client, "alice")
    client.close()
    conn = sqlite3.connect(pack_path / DB_FILE)
    for trigger in ("memories_owner_delete", "memories_owner_update"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP TABLE owner_deletes")
    conn.close()
    reopened = make_client(path=pack_path)
    assert _ranked(reopened, "alice") == first
    assert reopened.delete(ids[0], user_id="alice")
    assert ids[0] not in {node for node, _ in _ranked(reopened, "alice")}
