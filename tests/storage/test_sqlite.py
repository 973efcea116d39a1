"""The SQLite pack: WAL, append-only log, write sequence, transactions, identity and secret."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from prme import FrozenPackError, IntegrityError, MemoryClient
from prme.canonical import sha256_hex
from prme.index.owner_index import OwnerIndex
from prme.models.enums import Scope
from prme.models.receipt import PackIdentity
from prme.retrieval.query import analyze_query
from prme.storage.payloads import decode
from prme.storage.sqlite import DB_FILE, SQLiteStore
from prme.storage.sqlite.store import CACHE_KIB, WAL_CHECKPOINT_PAGES

ClientFactory = Callable[..., MemoryClient]
pytestmark = pytest.mark.sqlite_only  # the SQLite file itself


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path / DB_FILE, isolation_level=None)


def write_seq(client: MemoryClient) -> int:
    return client.engine.store.pack_identity().write_seq


def test_wal_mode_on_disk(client: MemoryClient, pack_path: Path) -> None:
    client.store("Aster uses PostgreSQL", user_id="alice")
    conn = raw(pack_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert (pack_path / DB_FILE).is_file()
    assert (pack_path / f"{DB_FILE}-wal").exists()


def test_writable_connections_keep_durability_and_checkpoint_less_often(
    client: MemoryClient,
) -> None:
    # WAL with synchronous NORMAL (1) as always; a larger page cache and fewer automatic
    # checkpoints only change how often pages are re-read and copied back.
    conn = client.engine.store.conn
    pragmas = {
        name: conn.execute(f"PRAGMA {name}").fetchone()[0]
        for name in ("journal_mode", "synchronous", "cache_size", "wal_autocheckpoint")
    }
    assert pragmas == {
        "journal_mode": "wal",
        "synchronous": 1,
        "cache_size": -CACHE_KIB,
        "wal_autocheckpoint": WAL_CHECKPOINT_PAGES,
    }


def test_a_retrieval_reads_the_pack_and_owner_sequences_in_one_statement(
    client: MemoryClient, make_client: Callable[..., MemoryClient]
) -> None:
    """The receipt's pack identity, the receipt's owner sequence and the owner index (asked
    twice) all need the sequences; one statement at the start of the snapshot reads them.
    Another connection's write in between is seen by the next retrieval."""
    client.store("Aster uses SQLite", user_id="alice")
    client.retrieve("Aster", user_id="alice")  # the owner index is built
    statements: list[str] = []
    client.engine.store.conn.set_trace_callback(statements.append)
    result = client.retrieve("Aster", user_id="alice")
    client.engine.store.conn.set_trace_callback(None)
    reads = [s for s in statements if "owner_sequences" in s or "FROM meta" in s]
    assert len(reads) == 1 and "owner_deletes" in reads[0], statements
    assert [r.node.content for r in result.results] == ["Aster uses SQLite"]
    other = make_client()  # another connection on the same pack
    other.store("Aster also runs on PostgreSQL", user_id="alice")
    other.close()
    after = client.retrieve("Aster", user_id="alice")
    assert len(after.results) == 2
    receipt = client.get_retrieval_receipt(after.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.pack.write_seq == 2  # the owner's two writes


def test_a_row_changed_outside_prme_is_refused_with_a_typed_error(
    client: MemoryClient, pack_path: Path
) -> None:
    """A stored value no field accepts (here a scope written by another tool) is reported as
    the pack's integrity problem, naming the memory, not as a bare KeyError."""
    node_id = client.store("Aster uses SQLite", user_id="alice")
    conn = raw(pack_path)
    conn.execute("UPDATE memories SET scope = 'bogus'")
    conn.commit()
    conn.close()
    with pytest.raises(IntegrityError, match=f"stored memory '{node_id}'.*bogus"):
        client.get(node_id, user_id="alice")
    with pytest.raises(IntegrityError, match="bogus"):
        client.retrieve("Aster", user_id="alice")
    assert not client.check_pack().ok


def test_oplog_is_append_only(client: MemoryClient, pack_path: Path) -> None:
    client.retrieve("anything", user_id="alice")
    conn = raw(pack_path)
    assert conn.execute("SELECT COUNT(*) FROM oplog").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError, match="operations log is append-only"):
        conn.execute("UPDATE oplog SET payload = '{}'")
    with pytest.raises(sqlite3.IntegrityError, match="operations log is append-only"):
        conn.execute("DELETE FROM oplog")
    assert conn.execute("SELECT COUNT(*) FROM oplog").fetchone()[0] == 1
    conn.close()


def test_append_op_is_insert_if_absent(client: MemoryClient) -> None:
    store = client.engine.store
    args: dict[str, Any] = {
        "op_type": "test",
        "user_id": "alice",
        "target_id": "t1",
        "namespace": None,
        "created_at_us": 1,
    }
    assert store.append_op(op_id="op-1", payload='{"a":1}', **args) is True
    assert store.append_op(op_id="op-1", payload='{"a":2}', **args) is False
    record = store.get_op("op-1")
    assert record is not None and record.payload == '{"a":1}'
    assert [r.op_id for r in store.find_ops("test", "alice", "t1")] == ["op-1"]
    assert store.find_ops("test", "bob", "t1") == []


def test_tampered_op_fails_its_checksum(client: MemoryClient, pack_path: Path) -> None:
    store = client.engine.store
    store.append_op(
        op_id="op-1",
        op_type="test",
        user_id="alice",
        target_id=None,
        namespace=None,
        created_at_us=1,
        payload='{"a":1}',
    )
    conn = raw(pack_path)
    conn.execute("DROP TRIGGER oplog_append_only_update")
    conn.execute("UPDATE oplog SET payload = '{\"a\":2}' WHERE op_id = 'op-1'")
    conn.close()
    with pytest.raises(IntegrityError, match="checksum mismatch"):
        store.get_op("op-1")


def test_write_seq_bumps_on_content_writes_only(client: MemoryClient) -> None:
    start = write_seq(client)
    first = client.store("Aster uses PostgreSQL", user_id="alice")
    after_store = write_seq(client)
    assert after_store > start
    client.store_many(["one", "two", "three"], user_id="alice")
    assert write_seq(client) == after_store + 1  # one bump for the whole batch
    before_reads = write_seq(client)
    response = client.retrieve("Aster", user_id="alice")
    assert response.metadata.receipt_persisted
    client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    client.get(first, user_id="alice")
    client.list(user_id="alice")
    client.pack_digest()
    assert write_seq(client) == before_reads  # receipts and reads do not bump it
    assert client.delete(first, user_id="alice")
    assert write_seq(client) == before_reads + 1
    assert not client.delete(first, user_id="alice")
    assert write_seq(client) == before_reads + 1


def test_receipt_records_the_pack_identity(client: MemoryClient) -> None:
    client.store("Aster uses PostgreSQL", user_id="alice")
    response = client.retrieve("Aster", user_id="alice")
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None
    store = client.engine.store
    # binding the embedder and the store are two pack-wide writes, one of alice's content
    assert store.pack_identity().write_seq == 2 and store.owner_write_seq("alice") == 1
    assert receipt.pack == PackIdentity(pack_id=store.pack_identity().pack_id, write_seq=1)


def transactions(statements: list[str]) -> list[str]:
    keywords = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
    return [s.strip() for s in statements if s.strip().upper().startswith(keywords)]


def test_one_transaction_per_store_many(make_client: ClientFactory) -> None:
    statements: list[str] = []
    client = make_client(tracer=statements.append)
    statements.clear()
    # the first batch also binds the pack's embedder: still one transaction
    client.store_many(["Aster uses PostgreSQL", {"content": "Bob likes tea"}], user_id="alice")
    assert transactions(statements) == ["BEGIN IMMEDIATE", "COMMIT"]
    inserts = [s for s in statements if s.startswith("INSERT INTO memories(")]
    assert len(inserts) == 2  # executemany traces each row
    statements.clear()
    client.store_many([f"memory {i}" for i in range(50)], user_id="alice")
    assert transactions(statements) == ["BEGIN IMMEDIATE", "COMMIT"]
    statements.clear()
    client.store("one more", user_id="alice")
    assert transactions(statements) == ["BEGIN IMMEDIATE", "COMMIT"]


def test_failed_batch_rolls_back(make_client: ClientFactory, pack_path: Path) -> None:
    statements: list[str] = []
    client = make_client(tracer=statements.append)
    client.store("seed", user_id="alice")
    conn = raw(pack_path)
    conn.execute(
        "CREATE TRIGGER reject_boom BEFORE INSERT ON vectors"
        " WHEN NEW.rowid > 1 BEGIN SELECT RAISE(ABORT, 'boom'); END"
    )
    conn.close()
    seq = write_seq(client)
    statements.clear()
    with pytest.raises(sqlite3.IntegrityError, match="boom"):
        client.store_many(["a", "b"], user_id="alice")
    assert transactions(statements) == ["BEGIN IMMEDIATE", "ROLLBACK"]
    assert write_seq(client) == seq
    assert len(client.list(user_id="alice")) == 1


def test_pack_id_and_secret_persist_across_reopen(pack_path: Path, tmp_path: Path) -> None:
    first = SQLiteStore(pack_path)
    identity = first.pack_identity()
    attestation = first.attest({"report": 1})
    first.close()
    again = SQLiteStore(pack_path)
    assert again.pack_identity().pack_id == identity.pack_id
    assert again.attest({"report": 1}) == attestation
    assert again.verify_attestation({"report": 1}, attestation)
    assert not again.verify_attestation({"report": 2}, attestation)
    again.close()
    other = SQLiteStore(tmp_path / "other")
    assert other.pack_identity().pack_id != identity.pack_id
    assert not other.verify_attestation({"report": 1}, attestation)
    other.close()


def _secret(pack_path: Path) -> str:
    conn = raw(pack_path)
    value = str(conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()[0])
    conn.close()
    return value


def _texts(value: object, depth: int = 0) -> list[str]:
    """repr and str of a value and, two levels down, of its public attributes."""
    if isinstance(value, BaseModel):
        return [repr(value), value.model_dump_json()]
    out = [repr(value), str(value)]
    if depth < 2 and hasattr(value, "__dict__"):
        for name, attribute in vars(value).items():
            if not name.startswith("_"):
                out += _texts(attribute, depth + 1)
    return out


def test_secret_is_never_exposed(client: MemoryClient, pack_path: Path) -> None:
    secret = _secret(pack_path)
    assert len(secret) == 64
    node_id = client.store("Aster uses PostgreSQL", user_id="alice")
    outputs: list[object] = [
        client,
        client.store_with_receipt("Bob likes tea", user_id="alice"),
        client.store_many(["Carol"], user_id="alice"),
        client.get(node_id, user_id="alice"),
        client.list(user_id="alice"),
        client.pack_digest(),
        client.config,
        client.engine,
        client.engine.store,
        client.engine.feature_identity(),
    ]
    response = client.retrieve("Aster", user_id="alice")
    outputs += [
        response,
        client.get_retrieval_receipt(response.metadata.request_id, user_id="alice"),
    ]
    for output in outputs:
        for text in _texts(output):
            assert secret not in text
            assert secret.encode() not in text.encode()
            assert bytes.fromhex(secret).hex() not in text
    conn = raw(pack_path)
    stored = [decode(r[0]) for r in conn.execute("SELECT payload FROM oplog")]
    conn.close()
    assert stored and all(secret not in p for p in stored)


def test_frozen_store_refuses_content_writes(pack_path: Path) -> None:
    SQLiteStore(pack_path).close()
    frozen = SQLiteStore(pack_path, frozen=True)
    with pytest.raises(FrozenPackError, match="store"):
        frozen.insert_memories([], np.zeros((0, 8), dtype=np.float32), [])
    with pytest.raises(FrozenPackError, match="delete"):
        frozen.delete_memory("alice", "00000000-0000-0000-0000-000000000001")
    assert frozen.append_op(
        op_id="x",
        op_type="t",
        user_id="alice",
        target_id=None,
        namespace=None,
        created_at_us=0,
        payload="{}",
    )
    frozen.close()


def test_serialized_is_begin_immediate(make_client: ClientFactory) -> None:
    statements: list[str] = []
    client = make_client(tracer=statements.append)
    statements.clear()
    with client.engine.store.serialized("ranking:x"):
        pass
    assert transactions(statements) == ["BEGIN IMMEDIATE", "COMMIT"]


def _index(client: MemoryClient, owner: str) -> OwnerIndex:
    index = client.engine.store.owner_index(owner)
    assert index is not None
    return index


def test_owner_index_is_owner_filtered(client: MemoryClient) -> None:
    assert client.engine.store.owner_index("alice") is None  # no embedder bound yet
    client.store("Aster uses PostgreSQL", user_id="alice", scope="project")
    client.store("Aster uses SQLite", user_id="alice")
    client.store("Aster uses Redis", user_id="bob", scope="project")
    vector = client.engine.embedder.embed(["Aster PostgreSQL"])[0]
    alice = _index(client, "alice")
    assert alice.size == 2
    positions, cosines = alice.vector_search(vector, alice.scope_mask(None), 10)
    assert len(positions) == 2
    assert cosines.tolist() == sorted(cosines.tolist(), reverse=True)
    project, _ = alice.vector_search(vector, alice.scope_mask([Scope.PROJECT]), 10)
    assert [alice.ids[p] for p in project.tolist()] == [alice.ids[0]]
    assert _index(client, "bob").size == 1
    assert _index(client, "carol").size == 0
    store = client.engine.store
    assert len(store.lexical_search("alice", None, ["aster"], 10)) == 2
    assert len(store.lexical_search("alice", [Scope.PROJECT], ["aster"], 10)) == 1
    assert len(store.lexical_search("bob", None, ["aster"], 10)) == 1
    assert store.lexical_search("alice", None, [], 10) == []
    every = alice.scope_mask(None)
    assert len(alice.graph_search(["aster"], every, 3, 10)) == 2
    assert len(alice.graph_search(["aster"], alice.scope_mask([Scope.PERSONAL]), 3, 10)) == 1


def _fts5_bm25(
    pack_path: Path, owner: str, scopes: list[str] | None, terms: list[str], k: int
) -> list[tuple[str, float]]:
    """FTS5's own ``bm25()`` ranking, as ``(content, -bm25)``: its statistics are the whole
    table's, so on a pack holding one owner's memories it is BM25 over that owner's rows."""
    match = " OR ".join(f'"{t}"' for t in terms)
    scope_sql = "" if scopes is None else f" AND m.scope IN ({','.join('?' * len(scopes))})"
    conn = raw(pack_path)
    rows = conn.execute(
        "SELECT m.content, bm25(memories_fts) FROM memories_fts f JOIN memories m"
        f" ON m.rowid = f.rowid WHERE memories_fts MATCH ? AND m.user_id = ?{scope_sql}"
        " ORDER BY bm25(memories_fts), f.rowid LIMIT ?",
        (match, owner, *(scopes or []), k),
    ).fetchall()
    conn.close()
    return [(str(r[0]), -float(r[1])) for r in rows]


def _contents(pack_path: Path, hits: list[tuple[int, float]]) -> list[tuple[str, float]]:
    conn = raw(pack_path)
    found = [
        (str(conn.execute("SELECT content FROM memories WHERE rowid = ?", (r,)).fetchone()[0]), s)
        for r, s in hits
    ]
    conn.close()
    return found


def test_lexical_search_is_fts5_bm25_over_the_owners_memories(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    alice = [
        {"content": f"Aster sync_number {i} ran for the Kestrel team in Lisbon", "scope": s}
        for i in range(60)
        for s in ["project" if i % 3 else "personal"]
    ]
    bob = [f"Aster Aster {i} running" for i in range(40)]
    shared = make_client(tmp_path / "shared")
    shared.store_many(alice, user_id="alice")
    shared.store_many(bob, user_id="bob")
    alone = {"alice": make_client(tmp_path / "alice"), "bob": make_client(tmp_path / "bob")}
    alone["alice"].store_many(alice, user_id="alice")
    alone["bob"].store_many(bob, user_id="bob")
    store = shared.engine.store
    cases = [
        ("alice", None, ["aster"], 30),
        ("alice", None, ["aster", "kestrel"], 5),
        ("alice", None, ["lisbon", "nothing"], 100),
        ("alice", ["project"], ["aster"], 25),
        ("alice", ["personal", "project"], ["team", "aster"], 50),
        ("alice", None, ["sync_number", "running", "ran", "run"], 70),  # a phrase; shared stems
        ("alice", None, ["number_sync", "17"], 10),
        ("bob", None, ["aster"], 10),
        ("bob", None, ["aster", "run", "runs"], 50),
        ("bob", None, ["kestrel"], 10),
    ]
    for owner, scopes, terms, k in cases:
        found = store.lexical_search(
            owner, None if scopes is None else [Scope(s) for s in scopes], terms, k
        )
        expected = _fts5_bm25(tmp_path / owner, owner, scopes, terms, k)
        assert _contents(tmp_path / "shared", found) == expected, (owner, scopes, terms)
    assert store.lexical_search("carol", None, ["aster"], 10) == []
    assert len(store.lexical_search("alice", None, ["aster"], 30)) == 30


_LEXICON = [
    "aster", "Aster", "running", "runs", "ran", "café", "cafe", "naïve", "user_id", "id",
    "user", "the", "a", "x", "42", "kelvor_7", "zorblaxian", "ÉCOLE", "école", "tea",
]  # fmt: skip
_PACKS = itertools.count()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    contents=st.lists(
        st.lists(st.sampled_from(_LEXICON), min_size=1, max_size=9).map(" ".join),
        min_size=1,
        max_size=12,
    ),
    query=st.lists(st.sampled_from(_LEXICON), min_size=1, max_size=5).map(" ".join),
    k=st.integers(min_value=1, max_value=15),
)
def test_lexical_search_is_fts5_bm25_for_a_single_owner(
    make_client: ClientFactory, tmp_path: Path, contents: list[str], query: str, k: int
) -> None:
    # With one owner, the owner's statistics are the table's: scores equal FTS5's bm25()
    # bit for bit (phrases such as "user_id", shared stems, diacritics, repeated terms).
    path = tmp_path / f"pack-{next(_PACKS)}"
    client = make_client(path)
    client.store_many(contents, user_id="alice")
    terms = list(analyze_query(query).terms)
    found = client.engine.store.lexical_search("alice", None, terms, k)
    client.close()
    assert _contents(path, found) == _fts5_bm25(path, "alice", None, terms, k)


def test_a_pack_from_before_owner_sequences_opens_and_counts_from_zero(
    make_client: ClientFactory, pack_path: Path
) -> None:
    # A pack written before issue 17 has no owner_sequences table (and FTS5's index is all
    # the per-owner BM25 needs): it opens, alice's receipts start at 0, her writes count.
    client = make_client()
    client.store_many(["Aster uses PostgreSQL", "Aster runs nightly"], user_id="alice")
    client.store("Aster for bob", user_id="bob")
    expected = client.engine.store.lexical_search("alice", None, ["aster"], 5)
    client.close()
    conn = raw(pack_path)
    conn.execute("DROP TABLE owner_sequences")
    conn.close()
    reopened = make_client()
    store = reopened.engine.store
    assert store.lexical_search("alice", None, ["aster"], 5) == expected
    response = reopened.retrieve("Aster", user_id="alice")
    receipt = reopened.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.pack.write_seq == 0
    reopened.store("Aster moved", user_id="alice")
    assert (store.owner_write_seq("alice"), store.owner_write_seq("bob")) == (1, 0)


def test_graph_hops(client: MemoryClient) -> None:
    a = client.store("Aster runs on Kepler", user_id="alice")
    b = client.store("Kepler is hosted by Orion", user_id="alice")
    c = client.store("Orion lives in Lisbon", user_id="alice")
    client.store("Nothing related here", user_id="alice")
    index = _index(client, "alice")
    every = index.scope_mask(None)
    hops = {index.ids[p]: h for p, h in index.graph_search(["aster"], every, 3, 10).items()}
    assert hops == {a: 1, b: 2, c: 3}
    assert sorted(index.graph_search(["aster"], every, 2, 10).values()) == [1, 2]
    assert len(index.graph_search(["aster"], every, 3, 1)) == 1
    assert index.graph_search(["nobody"], every, 3, 10) == {}


def test_owner_index_follows_writes_and_deletes(client: MemoryClient) -> None:
    keep = client.store("Aster uses PostgreSQL", user_id="alice")
    gone = client.store("Aster uses SQLite", user_id="alice")
    before = _index(client, "alice")
    assert before.size == 2
    client.delete(gone, user_id="alice")
    after = _index(client, "alice")
    assert after.ids[: after.size] == [keep]
    client.store("Aster uses Redis", user_id="alice")
    grown = _index(client, "alice")
    assert grown.size == 2 and grown.ids[0] == keep
    # a snapshot keeps what it showed
    assert before.size == 2 and after.size == 1


def test_iter_ops_ordering(client: MemoryClient) -> None:
    store = client.engine.store
    for i, at in enumerate([3, 1, 2]):
        store.append_op(
            op_id=f"op-{i}",
            op_type="t",
            user_id="alice",
            target_id=f"t{2 - i}",
            namespace="ns",
            created_at_us=at,
            payload="{}",
        )
    assert [o.op_id for o in store.iter_ops("t", "alice")] == ["op-1", "op-2", "op-0"]
    newest = store.iter_ops("t", "alice", newest_first=True, limit=2)
    assert [o.op_id for o in newest] == ["op-0", "op-2"]
    by_target = store.iter_ops("t", "alice", order_by_target=True, after_target="t0")
    assert [o.target_id for o in by_target] == ["t1", "t2"]
    assert list(store.iter_ops("t", "alice", namespace="other")) == []


def test_closed_store(pack_path: Path) -> None:
    store = SQLiteStore(pack_path)
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.pack_identity()


def test_timestamps_round_trip_exactly(client: MemoryClient) -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    node_id = client.store("Aster", user_id="alice", event_time=when, valid_from=when)
    node = client.get(node_id, user_id="alice")
    assert node is not None
    assert (node.event_time, node.valid_from) == (when, when)


def test_judged_receipt_checksums_come_from_a_covering_index(pack_path: Path) -> None:
    # A pack from before the covering index (it had the narrower oplog_target) gets it on open,
    # and the receipt-checksum lookup then never touches the table (no payload pages).
    SQLiteStore(pack_path).close()
    conn = raw(pack_path)
    conn.execute("DROP INDEX oplog_digest")
    conn.execute("CREATE INDEX oplog_target ON oplog(op_type, user_id, target_id)")
    conn.close()
    store = SQLiteStore(pack_path)
    store.append_op(
        op_id="receipt:r1",
        op_type="retrieval_receipt",
        user_id="alice",
        target_id="r1",
        namespace=None,
        created_at_us=0,
        payload="{}",
    )
    assert store.op_checksums("retrieval_receipt", "alice", ["r1", "r2"]) == {
        "r1": sha256_hex("{}")
    }
    assert store.op_checksums("retrieval_receipt", "bob", ["r1"]) == {}
    indexes = {
        row[0] for row in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }
    assert "oplog_digest" in indexes and "oplog_target" not in indexes
    plan = store.conn.execute(
        "EXPLAIN QUERY PLAN SELECT target_id, checksum FROM oplog WHERE op_type = ?"
        " AND user_id = ? AND target_id IN (SELECT value FROM json_each(?))",
        ("retrieval_receipt", "alice", '["r1"]'),
    ).fetchall()
    assert any("COVERING INDEX oplog_digest" in str(step) for step in plan)
    store.close()
