"""The kept pack digest: maintained by every content write, O(1) to read, recomputable."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FakeClock, make_config
from hypothesis import given, settings
from hypothesis import strategies as st
from support.read_only import read_only, unprivileged

from prme import MemoryClient
from prme.services import memories
from prme.services.integrity import check_pack
from prme.storage import digest
from prme.storage.columns import VALUE_COLUMNS
from prme.storage.digest import DigestState
from prme.storage.sqlite import DB_FILE, SQLiteStore

ClientFactory = Callable[..., MemoryClient]
# The digest of the pack filled in test_a_batch_stores_what_earlier_versions_stored.
GOLDEN_DIGEST = "8193525505965157b1175c517ae91cbe7b1339aec33ad0bf3b9564d1fa2a7628"
ITEMS: list[Any] = [
    "Aster runs on PostgreSQL in Lisbon",
    {"content": "Bruno Keller prefers Redis", "node_type": "preference", "scope": "project"},
    {
        "content": "Chen Wei leads Basalt; Chen Wei reports to Dana Okafor",
        "metadata": {"condition_state": "active", "nested": {"k": [1, 2.5, None]}},
        "pinned": True,
        "ttl_days": 30,
        "event_time": datetime(2026, 3, 1, 12, tzinfo=UTC),
        "salience": 0.75,
    },
]


def row_hashes_of(rows: Any, names: Any, vectors: Any) -> list[int]:
    """The batch hashes of ``rows`` (tuples of column values), as a store computes them."""
    return digest.column_hashes([list(c) for c in zip(*rows, strict=True)], names, vectors)


def _write_everything(client: MemoryClient) -> None:
    ids = client.store_many(ITEMS, user_id="alice")
    client.store("Carol keeps the Cobalt budget", user_id="carol", scope="project")
    gone = client.store("a temporary note about Dunmore", user_id="alice")
    client.delete(gone, user_id="alice")
    client.update(ids[1], user_id="alice", content="Bruno Keller prefers Valkey now")


def _states(client: MemoryClient) -> tuple[DigestState | None, DigestState]:
    store: Any = client.engine.store
    return store.kept_digest_state(), store.recompute_digest_state()


def test_every_content_write_keeps_the_digest_state_equal_to_a_recomputation(
    client: MemoryClient,
) -> None:
    empty = client.pack_digest()
    assert _states(client) == (DigestState(), DigestState())
    seen = {empty}
    client.store_many(ITEMS, user_id="alice")
    kept, recomputed = _states(client)
    assert kept == recomputed and kept is not None and kept.count == 3
    seen.add(client.pack_digest())
    _write_everything(client)
    kept, recomputed = _states(client)
    # 3 + 3 stored, 2 more, 1 deleted, and an update adds a version and supersedes the old one
    assert kept == recomputed and kept is not None and kept.count == 3 + 3 + 2 - 1 + 1
    seen.add(client.pack_digest())
    assert len(seen) == 3  # each content write moved the digest
    assert client.pack_digest() == digest.pack_digest(
        client.engine.store.embedder_identity(), recomputed
    )


@pytest.mark.sqlite_only  # rewrites rows through the SQLite store's own insert
def test_the_digest_does_not_depend_on_write_order_and_survives_reopening(
    tmp_path: Path,
) -> None:
    with MemoryClient(tmp_path / "a", config=make_config(), clock=FakeClock()) as first:
        ids = first.store_many(ITEMS, user_id="alice")
        value = first.pack_digest()
    with MemoryClient(tmp_path / "a", config=make_config(), clock=FakeClock()) as first:
        assert first.pack_digest() == value
        source = first.engine.store
        assert isinstance(source, SQLiteStore)
        # The same rows written one at a time in reverse order: the same digest.
        with MemoryClient(tmp_path / "b", config=make_config(), clock=FakeClock()) as second:
            target = second.engine.store
            assert isinstance(target, SQLiteStore)
            target.bind_embedder(second.engine.embedder.identity.model_dump(mode="json"))
            for node_id in reversed(ids):
                node = source.get_memory("alice", node_id)
                assert node is not None
                (blob,) = source.conn.execute(
                    "SELECT v.vec FROM vectors v JOIN memories m ON m.rowid = v.rowid"
                    " WHERE m.id = ?",
                    (node_id,),
                ).fetchone()
                names = [
                    r[0]
                    for r in source.conn.execute(
                        "SELECT e.name FROM entities e JOIN memories m"
                        " ON m.rowid = e.memory_rowid WHERE m.id = ? ORDER BY e.name DESC",
                        (node_id,),
                    )
                ]
                vector = np.frombuffer(blob, dtype="<f4").reshape(1, -1)
                target.insert_memories([node], vector, [names])
            assert target.kept_digest_state() == source.kept_digest_state()
            assert second.pack_digest() == value


def test_reading_the_digest_reads_no_memory_row(pack_path: Path) -> None:
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        client.store_many([f"memory number {i} about Aster" for i in range(50)], user_id="a")
    statements: list[str] = []
    store = SQLiteStore(pack_path, tracer=statements.append)
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock(), store=store) as client:
        statements.clear()
        value = client.pack_digest()
        assert len(value) == 64
    touched = [s for s in statements if "memories" in s or "vectors" in s or "entities" in s]
    assert touched == []


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path / DB_FILE, isolation_level=None)


@pytest.fixture
def traversable() -> Iterator[Path]:
    """A directory an unprivileged child can traverse (pytest's temp dirs are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="prme-digest-"))
    root.chmod(0o755)
    yield root
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(root)


def test_a_pack_from_before_the_kept_digest_upgrades_on_open(traversable: Path) -> None:
    pack_path = traversable / "pack"
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        _write_everything(client)
        value = client.pack_digest()
    conn = _raw(pack_path)
    conn.execute("DELETE FROM meta WHERE key IN ('digest_count', 'digest_sum')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()

    def read_only_open() -> dict[str, Any]:
        with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
            store: Any = client.engine.store
            report = check_pack(client.engine)
            return {
                "read_only": client.read_only,
                "kept": store.kept_digest_state(),
                "digest": client.pack_digest(),
                "skipped": [s for s in report.skipped if s.startswith("digest:")],
            }

    read_only(pack_path)
    seen = unprivileged(read_only_open)
    # Read-only, so no upgrade: the digest is recomputed from the rows, the same value.
    assert seen == {
        "read_only": True,
        "kept": None,
        "digest": value,
        "skipped": [seen["skipped"][0]],
    }
    for item in [pack_path, *pack_path.iterdir()]:
        item.chmod(0o755 if item.is_dir() else 0o644)
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        assert client.pack_digest() == value
        kept = client.engine.store.kept_digest_state()  # type: ignore[attr-defined]
        assert kept is not None and kept.count == 5
        assert check_pack(client.engine).ok
    conn = _raw(pack_path)
    keys = {k for (k,) in conn.execute("SELECT key FROM meta")}
    conn.close()
    assert {"digest_count", "digest_sum"} <= keys


@pytest.mark.parametrize("tamper", ["state", "row"])
def test_pack_check_reports_a_kept_digest_that_differs_from_the_rows(
    pack_path: Path, tamper: str
) -> None:
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        _write_everything(client)
        assert check_pack(client.engine).ok
    conn = _raw(pack_path)
    if tamper == "state":
        conn.execute("UPDATE meta SET value = ? WHERE key = 'digest_sum'", ("0" * 64,))
    else:  # a stored column changed behind the engine's back
        conn.execute("UPDATE memories SET salience = 0.123 WHERE rowid = 1")
    conn.close()
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        report = check_pack(client.engine)
    assert not report.ok
    assert [p.check for p in report.problems] == ["digest"]
    assert "differs from the stored memories" in report.problems[0].message


def test_a_failed_write_leaves_the_kept_state_unchanged(client: MemoryClient) -> None:
    client.store_many(ITEMS, user_id="alice")
    before = _states(client)
    with pytest.raises(Exception, match="items\\[1\\]"):
        client.store_many(["fine", {"content": "   "}], user_id="alice")
    assert _states(client) == before


def test_gate_2_on_a_reopened_pack_reads_no_memory_row(pack_path: Path) -> None:
    from prme.models.scoring import RankingMultipliers

    candidate = RankingMultipliers(semantic=1.25)
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock()) as client:
        ids = client.store_many(
            [f"note {i} about Aster and Basalt" for i in range(40)], user_id="a"
        )
        trials = []
        for i in range(4):
            arms = [
                client.retrieve(
                    f"Aster note {i}",
                    user_id="a",
                    ranking_multipliers=m,
                    reference_time=datetime(2026, 9, 1, tzinfo=UTC),
                )
                for m in (None, candidate)
            ]
            trials.append(
                {
                    "group_id": f"g{i}",
                    "baseline_request_id": arms[0].metadata.request_id,
                    "candidate_request_id": arms[1].metadata.request_id,
                    "relevant_node_ids": [ids[i]],
                }
            )
    statements: list[str] = []
    store = SQLiteStore(pack_path, tracer=statements.append)
    with MemoryClient(pack_path, config=make_config(), clock=FakeClock(), store=store) as client:
        statements.clear()
        report = client.evaluate_full_retrieval(
            trials,
            user_id="a",
            scopes=None,
            proposal_input_checksum="a" * 64,
            memory_artifact_sha256="b" * 64,
            candidate_multipliers=candidate,
            config={"min_query_groups": 2, "bootstrap_samples": 100},
        )
        assert report.pack_digest == client.pack_digest()
    touched = [s for s in statements if any(t in s for t in ("memories", "vectors", "entities"))]
    assert touched == []


_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 0.5, 1.0, 1e-320, 0.1])
    | st.text(max_size=12)
    | st.sampled_from(['"', "\\", "\x00\x1f\x7f", "é ü 日本", "\u2028", "\ud7ff"])
)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=0, max_value=6).flatmap(
        lambda n: st.tuples(
            st.lists(
                st.lists(_SCALAR, min_size=len(VALUE_COLUMNS), max_size=len(VALUE_COLUMNS)),
                min_size=n,
                max_size=n,
            ),
            st.lists(
                st.lists(st.sampled_from(["aster", "b", "é", '"q"', "aster"])),
                min_size=n,
                max_size=n,
            ),
            st.lists(st.none() | st.binary(max_size=16), min_size=n, max_size=n),
        )
    )
)
def test_a_batch_of_row_hashes_equals_each_row_hash(batch: Any) -> None:
    # Any JSON scalars, columns of one type or mixed (1 and True, 0.0 and -0.0, a NaN the
    # encoder refuses): the batch computes each row's row_hash, or fails as it does.
    rows, names, vectors = batch
    rows = [tuple(r) for r in rows]
    try:
        expected: Any = [digest.row_hash(*args) for args in zip(rows, names, vectors, strict=True)]
    except ValueError as exc:
        expected = type(exc)
    try:
        got: Any = row_hashes_of(rows, names, vectors)
    except ValueError as exc:
        got = type(exc)
    assert got == expected


def test_a_batch_of_stored_rows_hashes_as_each_row(client: MemoryClient) -> None:
    ids = client.store_many(ITEMS, user_id="alice")
    store: Any = client.engine.store
    kept = store.kept_digest_state()
    assert kept == store.recompute_digest_state() and kept.count == len(ids)


def test_a_batch_of_row_hashes_tells_apart_values_that_compare_equal() -> None:
    # 0.0 and -0.0 (and 1, 1.0 and True) are equal keys but different JSON texts.
    base = ["x"] * len(VALUE_COLUMNS)
    columns = [[0.0, -0.0, 0.5, 0.5], [1, True, 1.0, 0], [-0.0, -0.0, 2.5, 2.5]]
    rows = []
    for i in range(4):
        row = list(base)
        for at, column in zip((15, 16, 24), columns, strict=True):
            row[at] = column[i]
        rows.append(tuple(row))
    names = [["b", "a", "b"]] * 4
    vectors = [b"\x01\x02", None, b"", b"\x03"]
    expected = [digest.row_hash(*args) for args in zip(rows, names, vectors, strict=True)]
    assert row_hashes_of(rows, names, vectors) == expected
    assert len(set(expected)) == 4


def test_a_batch_stores_what_earlier_versions_stored(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fixed ids and clock: the pack digest and row hashes earlier versions of store_many
    # computed for these inputs (before its rows were built and hashed by column), so a pack
    # filled with the same inputs keeps its digest. The ids are those earlier versions drew
    # (version 4, from one 16-byte read of os.urandom per id, here a seeded stream).
    stream = np.random.default_rng(7)

    def drawn_ids(owner: str, count: int) -> list[uuid.UUID]:
        data = stream.bytes(16 * count)
        return [uuid.UUID(bytes=data[i : i + 16], version=4) for i in range(0, 16 * count, 16)]

    monkeypatch.setattr(memories, "new_ids", drawn_ids)
    items = [
        *ITEMS,
        *(
            {"content": f"Note {i} about Aster and Basalt", "confidence": 0.3 + i / 100}
            for i in range(40)
        ),
        {"content": 'Émile\'s "quoted" note\tabout Zürich', "role": "assistant", "pinned": True},
    ]
    client.store_many(items, user_id="alice")
    assert client.pack_digest() == GOLDEN_DIGEST
