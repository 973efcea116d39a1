"""The SQLite pack's schema upgrades: a pack an earlier version wrote opens, is upgraded in
place when it can be written, and reads the same either way."""

from __future__ import annotations

import io
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock, make_config
from support.read_only import read_only, unprivileged

from prme import MemoryClient
from prme.services.integrity import check_pack
from prme.storage.sqlite import DB_FILE
from prme.storage.sqlite.upgrades import ENTITIES_BY_MEMORY, ENTITIES_BY_NAME, entity_key

pytestmark = pytest.mark.sqlite_only  # the SQLite file itself

# The entities table and its second index as packs before the re-keying declared them.
ENTITIES_V1 = (
    "CREATE TABLE entities (user_id TEXT NOT NULL, name TEXT NOT NULL,"
    " memory_rowid INTEGER NOT NULL, PRIMARY KEY (user_id, name, memory_rowid)) WITHOUT ROWID",
    "CREATE INDEX entities_by_memory ON entities(memory_rowid)",
)
ITEMS: list[Any] = [
    "Aster runs on PostgreSQL in Lisbon",
    {"content": "Bruno Keller prefers Redis for Aster", "node_type": "preference"},
    {"content": "a note on Basalt", "metadata": {"entities": ["Dunmore", "Chen Wei"]}},
    "Chen Wei leads Basalt with Dana Okafor",
]


def _raw(pack: Path) -> sqlite3.Connection:
    return sqlite3.connect(pack / DB_FILE, isolation_level=None)


def _state(pack: Path) -> dict[str, Any]:
    """What a reader sees: the entity links, the digest, a retrieval, and the export."""
    with MemoryClient(pack, config=make_config(), clock=FakeClock()) as client:
        store: Any = client.engine.store
        exported = io.StringIO()
        client.export_pack(exported)
        response = client.retrieve("Chen Wei Basalt Aster", user_id="alice", limit=10)
        return {
            "links": list(store.iter_rows("entity")),
            "digest": client.pack_digest(),
            "results": [(str(r.node.id), r.composite_score) for r in response.results],
            # The rows: past the header (its time), before the log and the end's counts (each
            # retrieval adds a receipt).
            "export": [
                line
                for line in exported.getvalue().splitlines()[1:]
                if not line.startswith(('{"kind":"op"', '{"kind":"end"'))
            ],
        }


def _entity_layout(pack: Path) -> tuple[tuple[str, ...], list[str]]:
    conn = _raw(pack)
    try:
        indexes = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'entities'"
                " AND sql IS NOT NULL"
            )
        ]
        return entity_key(conn), indexes
    finally:
        conn.close()


def _downgrade_entities(pack: Path) -> None:
    """Give the pack the entities table packs had before the re-keying (same rows)."""
    conn = _raw(pack)
    conn.execute("BEGIN")
    conn.execute("ALTER TABLE entities RENAME TO entities_now")
    for statement in ENTITIES_V1:
        conn.execute(statement)
    conn.execute("INSERT INTO entities SELECT user_id, name, memory_rowid FROM entities_now")
    conn.execute("DROP TABLE entities_now")
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert _entity_layout(pack) == (ENTITIES_BY_NAME, ["entities_by_memory"])


@pytest.fixture
def traversable() -> Iterator[Path]:
    """A directory an unprivileged child can traverse (pytest's temp dirs are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="prme-upgrade-"))
    root.chmod(0o755)
    yield root
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(root)


def _fill(pack: Path) -> None:
    with MemoryClient(pack, config=make_config(), clock=FakeClock()) as client:
        client.store_many(ITEMS, user_id="alice")
        client.store("Carol keeps the Cobalt budget for Aster", user_id="carol")
        gone = client.store("a temporary note about Dunmore", user_id="alice")
        client.delete(gone, user_id="alice")


def test_a_new_pack_keys_entities_by_memory_and_reads_them_by_key(pack_path: Path) -> None:
    _fill(pack_path)
    assert _entity_layout(pack_path) == (ENTITIES_BY_MEMORY, [])
    conn = _raw(pack_path)
    for sql, params in (
        ("DELETE FROM entities WHERE memory_rowid = ?", (1,)),
        (
            "SELECT memory_rowid, name FROM entities WHERE user_id = ?"
            " AND memory_rowid BETWEEN ? AND ? ORDER BY memory_rowid, name",
            ("alice", 1, 3),
        ),
    ):
        plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
        assert plan.startswith("SEARCH entities USING PRIMARY KEY (memory_rowid"), plan
    conn.close()


def test_a_pack_with_entities_keyed_by_name_is_rekeyed_on_open(pack_path: Path) -> None:
    _fill(pack_path)
    before = _state(pack_path)
    _downgrade_entities(pack_path)
    after = _state(pack_path)  # opened for writing: upgraded, everything reads the same
    assert _entity_layout(pack_path) == (ENTITIES_BY_MEMORY, [])
    assert after == before and len(before["links"]) >= 8
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        more = client.store_many(["Aster moved to Porto with Bruno Keller"], user_id="alice")
        assert client.delete(more[0], user_id="alice")
        assert check_pack(client.engine).ok
    assert _state(pack_path)["digest"] == before["digest"]


def test_a_read_only_pack_with_entities_keyed_by_name_reads_the_same(traversable: Path) -> None:
    pack = traversable / "pack"
    _fill(pack)
    before = _state(pack)
    _downgrade_entities(pack)
    read_only(pack)

    def read() -> dict[str, Any]:
        with MemoryClient(pack, config=make_config(), clock=FakeClock()) as client:
            assert client.read_only
            store: Any = client.engine.store
            response = client.retrieve("Chen Wei Basalt Aster", user_id="alice", limit=10)
            return {
                "links": [list(r) for r in store.iter_rows("entity")],
                "digest": client.pack_digest(),
                "results": [[str(r.node.id), r.composite_score] for r in response.results],
            }

    seen = unprivileged(read)
    assert seen == {
        "links": [list(r) for r in before["links"]],
        "digest": before["digest"],
        "results": [list(r) for r in before["results"]],
    }
    assert _entity_layout(pack) == (ENTITIES_BY_NAME, ["entities_by_memory"])  # not upgraded
