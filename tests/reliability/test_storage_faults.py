"""Storage faults: a full disk and a write lock held too long give clear errors on writes, keep
retrieval answering (``receipt_persisted=False``) and lose nothing already committed."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock, make_config

from prme import MemoryClient
from prme.config import StorageConfig
from prme.errors import StorageUnavailableError
from prme.storage.sqlite import LOCK_RETRY_SECONDS

from .harness import OWNER, Child

pytestmark = pytest.mark.reliability

QUERY = "Which database does Aster use?"
FACTS = [f"Aster fact {i}: the database is PostgreSQL {i}" for i in range(30)]


def state(memory: MemoryClient) -> dict[str, Any]:
    """Everything a fault must not change: content digest, sequences, log and memory counts."""
    report = memory.check_pack()
    assert report.ok, report.problems
    return {
        "digest": memory.pack_digest(),
        "write_seq": report.write_seq,
        "operations": report.operations,
        "memories": report.memories,
    }


def test_full_disk_fails_writes_clearly_and_keeps_retrieval_answering(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    with MemoryClient(pack, config=make_config(), clock=FakeClock()) as memory:
        ids = memory.store_many(FACTS, user_id=OWNER)
        response = memory.retrieve(QUERY, user_id=OWNER, limit=5)
        labels = {str(r.node.id): True for r in response.results[:2]}
        before = state(memory)
    # The child exhausts a 1-byte file-size limit (EFBIG on every write that grows a file).
    child = Child(
        "disk_full",
        pack,
        request_id=str(response.metadata.request_id),
        labels=labels,
        delete=ids[0],
    )
    child.join()
    steps = {m["step"]: m for m in child.messages if "step" in m}
    for write in ("store", "store_many", "judge", "delete"):
        assert not steps[write]["ok"], steps[write]
        # The real cause, not "cannot rollback - no transaction is active".
        assert steps[write]["error"] == "OperationalError: disk I/O error", steps[write]
    persisted, results = steps["retrieve"]["value"]
    assert steps["retrieve"]["ok"] and persisted is False and results
    assert steps["store_after"]["ok"] and steps["retrieve_after"]["value"] is True
    with MemoryClient(pack, config=make_config()) as memory:
        after = state(memory)
        assert after["memories"] == before["memories"] + 1  # only "Aster recovered"
        assert after["operations"] == before["operations"] + 1  # only retrieve_after's receipt
        assert after["write_seq"] == before["write_seq"] + 1
        assert all(memory.get(node_id, user_id=OWNER) is not None for node_id in ids)
        assert memory.list_relevance(user_id=OWNER) == []


def test_a_write_lock_held_past_the_busy_timeout(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    config = make_config(storage=StorageConfig(busy_timeout_ms=100))
    with MemoryClient(pack, config=config, clock=FakeClock()) as memory:
        ids = memory.store_many(FACTS, user_id=OWNER)
        before = state(memory)
        blocker = sqlite3.connect(pack / "pack.sqlite3", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another process's long write transaction
        try:
            started = time.monotonic()
            # temporary (HTTP 503 with Retry-After), caused by SQLite's "database is locked"
            with pytest.raises(StorageUnavailableError, match="retry later") as info:
                memory.store("Aster moved to MySQL", user_id=OWNER)
            waited = time.monotonic() - started
            assert LOCK_RETRY_SECONDS <= waited < LOCK_RETRY_SECONDS + 1.5
            cause = info.value.__cause__
            assert isinstance(cause, sqlite3.OperationalError)
            assert "database is locked" in str(cause)
            assert any("retry later" in note for note in cause.__notes__)
            response = memory.retrieve(QUERY, user_id=OWNER, limit=5)
            assert response.results and response.metadata.receipt_persisted is False
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert state(memory) == before
        memory.store("Aster moved to MySQL", user_id=OWNER)
        assert memory.retrieve(QUERY, user_id=OWNER).metadata.receipt_persisted
        assert all(memory.get(node_id, user_id=OWNER) is not None for node_id in ids)
