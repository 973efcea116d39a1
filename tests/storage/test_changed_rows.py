"""A supersede changes an owner's rows in place: the owner index re-reads those rows instead of
being rebuilt from every row, and ranks exactly as an index rebuilt from the pack would."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.owner_index import owner_ranking

from prme import MemoryClient
from prme.storage import owner_indexes
from prme.storage.sqlite import DB_FILE, INDEX_DIR

ClientFactory = Callable[..., MemoryClient]
SCOPES = ("personal", "project", "organisation")
QUERIES = ("Alice Moreau Kestrel", "budget review Lisbon", "Porto meeting notes")
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _memories(count: int, start: int = 0) -> list[dict[str, Any]]:
    places = ("Lisbon", "Porto", "Kestrel", "Basalt")
    return [
        {
            "content": f"Meeting {i} with Alice Moreau about the {places[i % 4]} budget review",
            "scope": SCOPES[i % len(SCOPES)],
        }
        for i in range(start, start + count)
    ]


def _ranking(client: MemoryClient) -> list[list[Any]]:
    return owner_ranking(client, QUERIES, NOW)


def test_an_index_caught_up_after_updates_ranks_as_one_rebuilt(
    make_client: ClientFactory, tmp_path: Path, backend: str
) -> None:
    client = make_client(tmp_path / "pack")
    ids = client.store_many(_memories(300), user_id="alice")
    client.store_many(_memories(40), user_id="bob")
    before = _ranking(client)
    returned = [str(row[0]) for row in before[0]]
    for node_id in (returned[0], returned[3], ids[5], ids[299]):
        client.update(node_id, user_id="alice", content=f"Alice Moreau revised {node_id[:4]}")
    caught_up = _ranking(client)
    assert caught_up != before
    assert returned[0] not in {str(row[0]) for row in caught_up[0]}  # superseded: not retrieved
    client.close()
    if backend == "sqlite":
        shutil.rmtree(tmp_path / "pack" / INDEX_DIR, ignore_errors=True)
    assert _ranking(make_client(tmp_path / "pack")) == caught_up


@pytest.mark.sqlite_only  # the saved index lies beside the SQLite file
def test_a_saved_index_is_caught_up_in_a_new_process(
    make_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_indexes, "SAVE_INDEX_ROWS", 64)  # save this small owner's index
    pack = tmp_path / "pack"
    client = make_client(pack)
    ids = client.store_many(_memories(300), user_id="alice")
    _ranking(client)  # saves alice's index at 300 rows
    client.close()
    client = make_client(pack)
    for node_id in (ids[1], ids[2], ids[200]):
        client.update(node_id, user_id="alice", content=f"Alice Moreau revised {node_id[:4]}")
    client.close()
    reopened = make_client(pack)
    caught_up = _ranking(reopened)
    store: Any = reopened.engine.store
    assert store.owner_index("alice").saved_size == 300  # loaded, not rebuilt (and re-saved)
    reopened.close()
    shutil.rmtree(pack / INDEX_DIR)
    assert _ranking(make_client(pack)) == caught_up


@pytest.mark.sqlite_only  # writes the SQLite file behind the store's back
def test_an_unlogged_step_rebuilds_the_index(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    pack = tmp_path / "pack"
    client = make_client(pack)
    ids = client.store_many(_memories(300), user_id="alice")
    _ranking(client)
    raw = sqlite3.connect(pack / DB_FILE)
    with raw:  # a writer from before owner_changes: a supersede it does not log
        raw.execute("UPDATE memories SET lifecycle_state = 'superseded' WHERE id = ?", (ids[4],))
        raw.execute("DELETE FROM owner_changes WHERE memory_rowid = ?", (5,))
    raw.close()
    client.delete(ids[9], user_id="alice")  # and a logged delete after it
    found = _ranking(client)
    assert ids[4] not in {str(row[0]) for rows in found for row in rows}
    client.close()
    shutil.rmtree(pack / INDEX_DIR, ignore_errors=True)
    assert _ranking(make_client(pack)) == found


@pytest.mark.sqlite_only  # inspects the SQLite file's triggers
def test_a_pack_from_before_owner_changes_logs_them_once_opened(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    pack = tmp_path / "pack"
    client = make_client(pack)
    ids = client.store_many(_memories(30), user_id="alice")
    client.close()
    raw = sqlite3.connect(pack / DB_FILE)
    with raw:  # the triggers and tables of a pack from before
        raw.execute("DROP TABLE owner_changes")
        for name, event in (
            ("memories_owner_delete", "DELETE"),
            ("memories_owner_update", "UPDATE"),
        ):
            raw.execute(f"DROP TRIGGER {name}")
            raw.execute(
                f"CREATE TRIGGER {name} AFTER {event} ON memories BEGIN"
                " INSERT INTO owner_deletes(user_id, delete_seq) VALUES (OLD.user_id, 1)"
                " ON CONFLICT(user_id) DO UPDATE SET delete_seq = delete_seq + 1; END"
            )
    raw.close()
    client = make_client(pack)
    client.update(ids[3], user_id="alice", content="Alice Moreau revised the notes")
    client.close()
    raw = sqlite3.connect(pack / DB_FILE)
    logged = raw.execute("SELECT user_id, delete_seq, memory_rowid, removed FROM owner_changes")
    assert logged.fetchall() == [("alice", 1, 4, 0)]
    raw.close()
