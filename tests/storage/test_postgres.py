"""The PostgreSQL pack: same contract as SQLite, advisory-lock CAS, migrations, clean failures.

Tests marked ``both`` run on SQLite and PostgreSQL in every run (the CI subset); the rest need
the PostgreSQL server (``postgres_url``), which tests/conftest.py starts in a new data directory
per run (a server that cannot start fails them).
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from conftest import BACKENDS, FakeClock, make_config, open_pack, postgres_schema
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from prme import FrozenPackError, IntegrityError, MemoryClient, PRMEConfig
from prme.canonical import sha256_hex
from prme.config import StorageConfig
from prme.errors import InvalidInputError, StorageUnavailableError
from prme.index.bm25 import bm25_idf
from prme.models.enums import Scope
from prme.storage.postgres import PostgresStore, drop_schema, migrations
from prme.storage.registry import BACKENDS as REGISTRY
from prme.storage.registry import StoreOptions, make_store

ClientFactory = Callable[..., MemoryClient]
both = pytest.mark.parametrize("backend", BACKENDS, indirect=True)
FACTS = [
    "Aster stores its data in PostgreSQL",
    "Aster deploys on Kubernetes every Friday",
    "Bob prefers green tea in the morning",
    "The café near the office serves naïve espresso",
    "Running the nightly job runs the database migrations",
    "Generous budgets for the Aster database",
]


@pytest.fixture
def schemas(postgres_url: str) -> Iterator[Callable[[str], str]]:
    """Fresh pack schemas for this test (dropped afterwards)."""
    made: list[str] = []

    def make(name: str) -> str:
        schema = f"t_{name}_{time.monotonic_ns() % 10**12}"
        drop_schema(postgres_url, schema)
        made.append(schema)
        return schema

    yield make
    for schema in made:
        drop_schema(postgres_url, schema)


@pytest.fixture
def pg(postgres_url: str, schemas: Callable[[str], str]) -> Iterator[MemoryClient]:
    store = PostgresStore(postgres_url, schema=schemas("pg"))
    with MemoryClient(config=make_config(), clock=FakeClock(), store=store) as client:
        yield client


def admin(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


# --------------------------------------------------------------- both backends (CI subset)
@both
def test_store_retrieve_list_delete_contract(make_client: ClientFactory, backend: str) -> None:
    client = make_client()
    assert client.engine.store.backend_name == backend
    ids = client.store_many(FACTS, user_id="alice")
    client.store("Aster is Carol's project too", user_id="carol", scope="project")
    start = client.engine.store.pack_identity().write_seq
    response = client.retrieve("Aster data in PostgreSQL", user_id="alice", limit=3)
    assert response.results[0].node.content == FACTS[0]
    assert response.metadata.receipt_persisted
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    # the receipt records alice's own content write sequence (one store_many), not the pack's
    assert receipt is not None and receipt.pack.write_seq == 1 < start
    assert client.engine.store.owner_write_seq("alice") == 1
    assert receipt.execution.features["storage"] == backend
    assert [str(m.id) for m in client.list(user_id="alice", limit=100)] == sorted(ids)
    assert client.list(user_id="alice", scope="project") == []
    assert client.delete(ids[0], user_id="alice")
    assert not client.delete(ids[0], user_id="carol")
    after = client.retrieve("Aster data in PostgreSQL", user_id="alice", limit=3)
    assert FACTS[0] not in [r.node.content for r in after.results]
    assert client.engine.store.pack_identity().write_seq == start + 1
    assert client.engine.store.owner_write_seq("alice") == 2
    assert client.engine.store.owner_write_seq("carol") == 1


@both
def test_frozen_pack_refuses_content_writes(make_client: ClientFactory) -> None:
    writer = make_client()
    kept = writer.store("Aster uses PostgreSQL", user_id="alice")
    writer.close()
    frozen = make_client(frozen=True)
    digest, seq = frozen.pack_digest(), frozen.engine.store.pack_identity().write_seq
    with pytest.raises(FrozenPackError, match="frozen"):
        frozen.store_many(["new", "newer"], user_id="alice")
    with pytest.raises(FrozenPackError, match="delete"):
        frozen.delete(kept, user_id="alice")
    response = frozen.retrieve("Aster", user_id="alice")
    assert response.metadata.receipt_persisted and len(response.results) == 1
    assert (frozen.pack_digest(), frozen.engine.store.pack_identity().write_seq) == (digest, seq)


@both
def test_append_op_is_insert_if_absent(make_client: ClientFactory) -> None:
    store = make_client().engine.store
    args: dict[str, Any] = {
        "op_type": "test",
        "user_id": "alice",
        "target_id": "t1",
        "namespace": "ns",
        "created_at_us": 1,
    }
    assert store.append_op(op_id="op-1", payload='{"a":1}', **args) is True
    assert store.append_op(op_id="op-1", payload='{"a":2}', **args) is False
    assert store.append_op(op_id="op-0", payload='{"b":1}', **{**args, "target_id": "t0"})
    record = store.get_op("op-1")
    assert record is not None and record.payload == '{"a":1}'
    assert [r.op_id for r in store.find_ops("test", "alice", "t1")] == ["op-1"]
    assert [r.op_id for r in store.iter_ops("test", "alice", order_by_target=True)] == [
        "op-0",
        "op-1",
    ]
    assert [r.op_id for r in store.iter_ops("test", "alice", after_target="t0")] == ["op-1"]
    assert store.find_ops("test", "bob", "t1") == []


def test_both_backends_rank_and_score_identically(postgres_url: str, tmp_path: Path) -> None:
    queries = ["Which database does Aster use?", "tea", "cafe espresso", "runs the migration"]
    config = make_config()
    responses = {}
    for backend in BACKENDS:
        with open_pack(
            tmp_path / backend, backend=backend, config=config, clock=FakeClock()
        ) as client:
            client.store_many(FACTS, user_id="alice")
            # (ties are ordered by node id, which differs between the two packs)
            responses[backend] = [
                {r.node.content: (r.composite_score, r.score_trace, r.paths) for r in got.results}
                for got in (client.retrieve(q, user_id="alice") for q in queries)
            ]
    drop_schema(postgres_url, postgres_schema(tmp_path / "postgres"))
    assert responses["postgres"] == responses["sqlite"]


# ------------------------------------------------------------------------ lexical (BM25)
def test_lexical_scores_equal_fts5_bm25_bit_for_bit(postgres_url: str, tmp_path: Path) -> None:
    stores = {}
    for backend in BACKENDS:
        client = open_pack(
            tmp_path / backend, backend=backend, config=make_config(), clock=FakeClock()
        )
        client.store_many([*FACTS, "the the the"], user_id="alice")
        stores[backend] = client
    try:
        for terms in (["aster", "database"], ["running"], ["the"], ["cafe"], ["café", "naive"]):
            sqlite = stores["sqlite"].engine.store.lexical_search("alice", None, terms, 10)
            postgres = stores["postgres"].engine.store.lexical_search("alice", None, terms, 10)
            assert postgres == sqlite, terms
        # "tea" is in one of 7 documents (6, 6, 7, 8, 8, 6 and 3 tokens), once, in the 7-token one
        (hit,) = stores["postgres"].engine.store.lexical_search("alice", None, ["tea"], 10)
        avgdl, length = (6 + 6 + 7 + 8 + 8 + 6 + 3) / 7, 7
        expected = bm25_idf(7, 1) * (1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * length / avgdl)))
        assert math.isclose(hit[1], expected, rel_tol=1e-12)
        assert (
            stores["postgres"].engine.store.lexical_search("alice", [Scope.PROJECT], ["tea"], 9)
            == []
        )
    finally:
        for client in stores.values():
            client.close()
        drop_schema(postgres_url, postgres_schema(tmp_path / "postgres"))


def test_documented_lexical_difference_porter2_stems(pg: MemoryClient, tmp_path: Path) -> None:
    # Porter (SQLite FTS5) stems "generous" and "generate" alike ("gener"); Snowball English
    # (Porter2, PostgreSQL) keeps them apart. Exact-word matches score the same on both.
    with MemoryClient(tmp_path / "sqlite", config=make_config(), clock=FakeClock()) as lite:
        for client in (lite, pg):
            client.store_many(FACTS, user_id="alice")
        assert len(lite.engine.store.lexical_search("alice", None, ["generate"], 5)) == 1
        assert pg.engine.store.lexical_search("alice", None, ["generate"], 5) == []
        # so the lexical backend is part of the feature identity: profiles never cross over
        sqlite_identity = lite.engine.feature_identity()
    identity = pg.engine.feature_identity()
    # both backends search vectors the same way (the engine's policy, not the store's)
    assert identity["storage"] == "postgres"
    assert identity["vector_search"] == sqlite_identity["vector_search"] == "exact"
    assert identity["lexical"]["backend"] == "postgres-tsvector-bm25"
    assert sqlite_identity["lexical"]["backend"] == "sqlite-fts5-bm25"
    assert {**identity, "storage": "", "lexical": ""} == {
        **sqlite_identity,
        "storage": "",
        "lexical": "",
    }


# ------------------------------------------------------------------------ postgres only
def test_oplog_is_append_only_and_checksummed(pg: MemoryClient, postgres_url: str) -> None:
    request_id = pg.retrieve("anything", user_id="alice").metadata.request_id
    schema = pg.engine.store.schema  # type: ignore[attr-defined]
    with admin(postgres_url) as conn:
        for statement in (
            "UPDATE {}.oplog SET payload = '{{}}'",
            "DELETE FROM {}.oplog",
            "TRUNCATE {}.oplog",
        ):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(statement.format(schema))
        assert conn.execute(f"SELECT COUNT(*) FROM {schema}.oplog").fetchone() == (1,)
        conn.execute(f"ALTER TABLE {schema}.oplog DISABLE TRIGGER oplog_append_only")
        conn.execute(f"UPDATE {schema}.oplog SET payload = payload || ' '")
    with pytest.raises(IntegrityError, match="checksum mismatch"):
        pg.get_retrieval_receipt(request_id, user_id="alice")


def test_vectors_are_pgvector_typed_to_the_embedder(pg: MemoryClient, postgres_url: str) -> None:
    pg.store("Aster uses PostgreSQL", user_id="alice")
    schema = pg.engine.store.schema  # type: ignore[attr-defined]
    with admin(postgres_url) as conn:
        (kind,) = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attname = 'vec'",
            (f"{schema}.vectors",),
        ).fetchone() or ("",)
    assert kind == f"vector({pg.engine.embedder.identity.dimension})"


def test_migrations_are_versioned_and_idempotent(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    schema = schemas("mig")
    every = [m.version for m in migrations.MIGRATIONS]
    assert every == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert migrations.pending(postgres_url, schema=schema) == every
    with pytest.raises(IntegrityError, match="prme db upgrade"):
        PostgresStore(postgres_url, schema=schema, upgrade=False)
    assert migrations.upgrade(postgres_url, schema=schema) == every
    assert migrations.upgrade(postgres_url, schema=schema) == []
    assert migrations.pending(postgres_url, schema=schema) == []
    with admin(postgres_url) as conn:
        rows = conn.execute(f"SELECT version, name FROM {schema}.schema_migrations").fetchall()
    assert sorted(rows) == [
        (1, "initial schema"),
        (2, "receipt retention"),
        (3, "per-owner lexical statistics"),
        (4, "per-owner content write sequences"),
        (5, "kept pack digest and compact receipts"),
        (6, "saved owner indexes"),
        (7, "per-owner delete sequences"),
        (8, "owner-keyed lexical index"),
        (9, "lexical search in process"),
        (10, "logged owner changes"),
    ]
    PostgresStore(postgres_url, schema=schema, upgrade=False).close()
    with pytest.raises(InvalidInputError, match="schema"):
        migrations.upgrade(postgres_url, schema="Robert'); DROP TABLE x;--")


@pytest.fixture
def new_database(postgres_url: str) -> Iterator[str]:
    """A brand-new database on the test server: no pgvector, no schemas but ``public``."""
    name = f"fresh_{uuid.uuid4().hex[:12]}"
    with admin(postgres_url) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield make_conninfo(postgres_url, dbname=name)
    with admin(postgres_url) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.parametrize("search_path", [None, "team_a"])
def test_upgrade_on_a_brand_new_database(new_database: str, search_path: str | None) -> None:
    # Regression: with the pack schema first in search_path, CREATE EXTENSION vector ran
    # before that schema existed and failed with 3F000 on every database that had no pgvector.
    url = new_database
    if search_path is not None:
        url = make_conninfo(url, options=f"-csearch_path={search_path}")
    schema = search_path or migrations.DEFAULT_SCHEMA
    assert migrations.upgrade(url) == [m.version for m in migrations.MIGRATIONS]
    with admin(new_database) as conn:
        found = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'vector'"
        ).fetchone()
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchone()
    assert found == ("public",)
    assert tables is not None and tables[0] > 0
    with MemoryClient(postgres_url=url, config=make_config(), clock=FakeClock()) as client:
        stored = client.store(FACTS[0], user_id="alice", scope=Scope.PROJECT)
        response = client.retrieve("Where does Aster store data?", user_id="alice")
    assert [str(r.node.id) for r in response.results] == [stored]


def _lexical_statistics(url: str, schema: str) -> dict[str, Any]:
    with admin(url) as conn:
        return {
            "stats": conn.execute(
                f"SELECT user_id, n_docs, n_tokens FROM {schema}.owner_lexical_stats"
                " WHERE n_docs > 0 ORDER BY user_id"
            ).fetchall(),
            "lexemes": conn.execute(
                f"SELECT user_id, lexeme, df FROM {schema}.owner_lexemes WHERE df > 0"
                " ORDER BY user_id, lexeme"
            ).fetchall(),
        }


def _recomputed_statistics(url: str, schema: str) -> dict[str, Any]:
    """What migration 3 builds, computed from the memories of a pack at the latest version."""
    with admin(url) as conn:
        return {
            "stats": conn.execute(
                f"SELECT user_id, COUNT(*), SUM(doc_len) FROM {schema}.memories"
                " GROUP BY user_id ORDER BY user_id"
            ).fetchall(),
            "lexemes": conn.execute(
                f"SELECT m.user_id, l.lexeme, COUNT(*) FROM {schema}.memories m,"
                " unnest(tsvector_to_array(m.tsv)) AS l(lexeme) GROUP BY m.user_id, l.lexeme"
                ' ORDER BY m.user_id, l.lexeme COLLATE "C"'
            ).fetchall(),
        }


def test_migration_3_builds_per_owner_lexical_statistics_of_an_existing_pack(
    postgres_url: str, schemas: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pack written before per-owner statistics: its memories exist, the statistics are the
    # pack-wide ones. Upgrading builds each owner's, equal to what writes maintain.
    current, old = schemas("current"), schemas("old")
    store = PostgresStore(postgres_url, schema=current)
    with MemoryClient(config=make_config(), clock=FakeClock(), store=store) as client:
        client.store_many(FACTS, user_id="alice")
        client.store_many(["Aster tea for Bob", "tea tea tea"], user_id="bob")
        gone = client.store("Aster goes away", user_id="bob")
        client.delete(gone, user_id="bob")
    expected = _recomputed_statistics(postgres_url, current)
    assert [row[0] for row in expected["stats"]] == ["alice", "bob"]
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:1])
    assert migrations.upgrade(postgres_url, schema=old) == [1]
    monkeypatch.undo()
    columns = (
        "rowid, id, user_id, scope, node_type, content, content_sha256, metadata,"
        " condition_state, session_id, role, created_at, updated_at, event_time, valid_from,"
        " valid_to, confidence, salience, confidence_base, salience_base, epistemic_type,"
        " source_type, lifecycle_state, decay_profile, last_reinforced_at,"
        " reinforcement_boost, pinned, evidence_refs, ttl_days"
    )
    with admin(postgres_url) as conn:
        conn.execute(
            f"INSERT INTO {old}.memories({columns}) SELECT {columns} FROM {current}.memories"
        )
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:3])
    assert migrations.upgrade(postgres_url, schema=old) == [2, 3]
    monkeypatch.undo()
    assert _lexical_statistics(postgres_url, old) == expected
    # migration 9 drops them again: lexical search reads the owner's postings in process
    assert migrations.upgrade(postgres_url, schema=old) == [4, 5, 6, 7, 8, 9, 10]
    with admin(postgres_url) as conn:
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (old,)
            ).fetchall()
        }
    assert not {"owner_lexemes", "owner_lexical_stats", "lexemes", "lexical_stats"} & tables


def test_migration_5_computes_the_digest_state_of_an_existing_pack(
    postgres_url: str, schemas: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pack written before the kept digest (migrations 1-4 only): upgrading computes the
    # state from its rows, equal to what the writes keep, and the same digest.
    current, old = schemas("digest_current"), schemas("digest_old")
    store = PostgresStore(postgres_url, schema=current)
    with MemoryClient(config=make_config(), clock=FakeClock(), store=store) as client:
        ids = client.store_many(FACTS, user_id="alice")
        client.store_many(["Aster tea for Bob", "tea tea tea"], user_id="bob")
        client.delete(ids[0], user_id="alice")
        client.update(ids[1], user_id="alice", content="Aster moved to Valkey")
        expected = store.kept_digest_state()
        value = client.pack_digest()
        assert expected == store.recompute_digest_state() and expected.count == len(FACTS) + 2
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:4])
    assert migrations.upgrade(postgres_url, schema=old) == [1, 2, 3, 4]
    monkeypatch.undo()
    with admin(postgres_url) as conn:
        embedder = conn.execute(
            f"SELECT value FROM {current}.meta WHERE key = 'embedder'"
        ).fetchone()
        conn.execute(f"INSERT INTO {old}.meta VALUES ('embedder', %s)", embedder)
        dimension = json.loads(embedder[0])["dimension"]
        conn.execute(f"ALTER TABLE {old}.vectors ALTER COLUMN vec TYPE vector({dimension})")
        for table in ("memories", "vectors", "entities"):
            # the old schema's columns (later migrations add some)
            columns = ", ".join(
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                    (old, table),
                )
            )
            conn.execute(
                f"INSERT INTO {old}.{table}({columns}) SELECT {columns} FROM {current}.{table}"
            )
        # an operation (and a receipt) stored as text before payloads became bytea
        for op_type, payload in (("note", '{"a":"é"}'), ("retrieval_receipt", '{"r":1}')):
            conn.execute(
                f"INSERT INTO {old}.oplog(op_id, op_type, user_id, target_id, namespace,"
                " created_at, payload, checksum) VALUES (%s, %s, 'alice', NULL, NULL, 1, %s, %s)",
                (f"{op_type}-1", op_type, payload, sha256_hex(payload)),
            )
    assert migrations.upgrade(postgres_url, schema=old) == [5, 6, 7, 8, 9, 10]
    upgraded = PostgresStore(postgres_url, schema=old)
    try:
        assert upgraded.kept_digest_state() == expected == upgraded.recompute_digest_state()
        assert upgraded.pack_digest() == value
        for op_type, payload in (("note", '{"a":"é"}'), ("retrieval_receipt", '{"r":1}')):
            record = upgraded.get_op(f"{op_type}-1")
            assert record is not None and record.payload == payload
    finally:
        upgraded.close()


def test_concurrent_upgrades_apply_once(postgres_url: str, schemas: Callable[[str], str]) -> None:
    schema = schemas("race")
    results: list[list[int]] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(migrations.upgrade(postgres_url, schema=schema))
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == [[], [], [], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]]


def test_serialized_holds_an_advisory_lock_per_key(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    schema = schemas("lock")
    first, second = (PostgresStore(postgres_url, schema=schema) for _ in range(2))
    holding, release = threading.Event(), threading.Event()
    entered: dict[str, float] = {}

    def hold() -> None:
        with first.serialized("alice|project"):
            holding.set()
            release.wait(10)
            entered["released"] = time.monotonic()

    def wait(key: str) -> None:
        with second.serialized(key):
            entered[key] = time.monotonic()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    other = threading.Thread(target=wait, args=("alice|personal",))
    same = threading.Thread(target=wait, args=("alice|project",))
    other.start()
    same.start()
    other.join(10)
    time.sleep(0.2)
    assert "alice|personal" in entered and "alice|project" not in entered
    release.set()
    for thread in (holder, same):
        thread.join(10)
    assert entered["alice|project"] >= entered["released"]
    first.close()
    second.close()


def test_pointer_cas_runs_inside_the_advisory_lock(pg: MemoryClient) -> None:
    statements: list[str] = []
    store = pg.engine.store
    store.tracer = statements.append  # type: ignore[attr-defined]
    with store.serialized("alice|project"):
        store.append_op(
            op_id="state-1",
            op_type="test",
            user_id="alice",
            target_id=None,
            namespace="alice|project",
            created_at_us=1,
            payload="{}",
        )
    assert statements[0] == "BEGIN" and statements[-1] == "COMMIT"
    assert statements[1] == "SELECT pg_advisory_xact_lock(%s)"
    assert [s for s in statements if s.startswith("INSERT INTO oplog")]


def test_two_stores_see_each_others_writes(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    schema = schemas("two")
    config = make_config()
    with (
        MemoryClient(config=config, store=PostgresStore(postgres_url, schema=schema)) as a,
        MemoryClient(config=config, store=PostgresStore(postgres_url, schema=schema)) as b,
    ):
        first = a.store("Aster uses PostgreSQL", user_id="alice")
        assert [r.node.content for r in b.retrieve("Aster", user_id="alice").results] == [
            "Aster uses PostgreSQL"
        ]
        b.store("Aster ships on Fridays", user_id="alice")
        assert len(a.retrieve("Aster", user_id="alice").results) == 2
        assert a.delete(first, user_id="alice")
        assert [r.node.content for r in b.retrieve("Aster", user_id="alice").results] == [
            "Aster ships on Fridays"
        ]
        assert a.pack_digest() == b.pack_digest()


def test_concurrent_writers_never_lose_a_row(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    schema = schemas("writers")
    config = make_config()
    clients = [
        MemoryClient(config=config, store=PostgresStore(postgres_url, schema=schema))
        for _ in range(3)
    ]
    reader = clients[0]
    reader.store("seed", user_id="alice")
    reader.retrieve("seed", user_id="alice")  # builds the reader's index before the race

    def write(client: MemoryClient, worker: int) -> None:
        for batch in range(5):
            client.store_many([f"w{worker} b{batch} m{i}" for i in range(4)], user_id="alice")
            reader.retrieve("m1", user_id="alice")

    threads = [threading.Thread(target=write, args=(c, i)) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    index = reader.engine.store.owner_index("alice")
    assert index is not None and index.size == 1 + 3 * 5 * 4
    assert sorted(index.col("rowid").tolist()) == list(range(1, 62))
    for client in clients:
        client.close()


def test_a_failed_write_leaves_nothing(pg: MemoryClient) -> None:
    pg.store("Aster uses PostgreSQL", user_id="alice")
    store = pg.engine.store
    before = (store.pack_identity(), pg.pack_digest())
    node = pg.get(pg.list(user_id="alice")[0].id, user_id="alice")
    assert node is not None
    fresh = node.model_copy(update={"id": uuid.uuid4()})
    with pytest.raises(psycopg.errors.DataException):
        store.insert_memories([fresh], np.zeros((1, 3), dtype=np.float32), [["Aster"]])
    with pytest.raises(RuntimeError, match="boom"), store.serialized("memories"):
        store.insert_memories(
            [fresh], np.ones((1, pg.engine.embedder.identity.dimension), np.float32), [[]]
        )
        raise RuntimeError("boom")
    assert (store.pack_identity(), pg.pack_digest()) == before


# ------------------------------------------------------------------ round trips per call
def test_a_retrieval_takes_one_connection_and_reads_its_sequences_once(pg: MemoryClient) -> None:
    """A retrieval's reads and its receipt run on one pooled connection (each checkout costs a
    round trip to check it), and the pack's and the owner's sequences are read in one
    statement, once, though the receipt and the owner index (twice) ask for them."""
    for text in FACTS:
        pg.store(text, user_id="alice", scope="project")
    pg.retrieve("Aster database", user_id="alice")  # the owner index is built
    store = pg.engine.store
    statements: list[str] = []
    store.tracer = statements.append  # type: ignore[attr-defined]
    requests = store._pool.get_stats().get("requests_num", 0)
    result = pg.retrieve("Aster database", user_id="alice")
    assert store._pool.get_stats().get("requests_num", 0) - requests == 1
    assert result.metadata.receipt_persisted and result.results
    reads = [s for s in statements if "owner_sequences" in s or "FROM meta" in s]
    assert len(reads) == 1 and "FROM meta" in reads[0], statements
    receipt = pg.get_retrieval_receipt(result.metadata.request_id, user_id="alice")
    assert receipt is not None and receipt.pack.write_seq == len(FACTS)


def test_pinned_calls_share_a_connection_and_survive_a_failed_transaction(
    pg: MemoryClient,
) -> None:
    pg.store("Aster uses PostgreSQL", user_id="alice")
    store = pg.engine.store
    before = store.pack_identity()
    requests = store._pool.get_stats().get("requests_num", 0)
    with store.pinned():
        with store.pinned(), store.transaction() as first:  # nested: pins nothing more
            pid = first.execute("SELECT pg_backend_pid()").fetchone()
        with pytest.raises(RuntimeError, match="boom"), store.serialized("memories"):
            raise RuntimeError("boom")  # rolled back; the pinned connection stays usable
        with store.read_snapshot("alice") as identity, store.transaction() as again:
            assert again.execute("SELECT pg_backend_pid()").fetchone() == pid
            assert (store.owner_write_seq("alice"), identity) == (1, before)
        assert [m.content for m in pg.list(user_id="alice")] == ["Aster uses PostgreSQL"]
    assert store._pool.get_stats().get("requests_num", 0) - requests == 1
    with store.transaction() as later:  # after the block: a pooled connection again
        assert later.execute("SELECT 1").fetchone() == (1,)


# ---------------------------------------------------------------- an unreachable server
class Proxy:
    """A loopback TCP relay to the test server that can be cut and restored."""

    def __init__(self, url: str) -> None:
        info = conninfo_to_dict(url)
        host, port = str(info.get("host") or "localhost"), int(info.get("port") or 5432)
        self.target: Any = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port)
        self.family = socket.AF_UNIX if host.startswith("/") else socket.AF_INET
        self.dbname, self.user = info.get("dbname", "postgres"), info.get("user", "postgres")
        self.port = 0
        self.sockets: list[socket.socket] = []
        self.start()

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.dbname}"

    def start(self) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.port = self.listener.getsockname()[1]
        self.listener.listen(16)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.socket(self.family, socket.SOCK_STREAM)
            server.connect(self.target)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.sockets.clear()


def until_reachable(store: PostgresStore, seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return store.pack_identity()
        except StorageUnavailableError:
            assert time.monotonic() < deadline, "the pool did not reconnect"
            time.sleep(0.05)


def test_unreachable_at_open_is_a_clear_error() -> None:
    with pytest.raises(StorageUnavailableError, match="storage unavailable: postgres") as info:
        PostgresStore("postgresql://prme:secret@/prme?host=/nonexistent-prme-socket", timeout=1)
    assert "host=/nonexistent-prme-socket" in info.value.storage
    assert "secret" not in str(info.value)
    with pytest.raises(StorageUnavailableError, match="schema=prme"):
        migrations.upgrade("postgresql://prme@/prme?host=/nonexistent-prme-socket")
    with pytest.raises(InvalidInputError, match="not a PostgreSQL URL"):
        PostgresStore("postgresql://[nonsense", timeout=1)


def test_server_lost_mid_use_fails_cleanly_and_writes_nothing(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    proxy = Proxy(postgres_url)
    schema = schemas("proxy")
    store = PostgresStore(proxy.url, schema=schema, timeout=1)
    client = MemoryClient(config=make_config(), store=store)
    client.store("Aster uses PostgreSQL", user_id="alice")
    before = store.pack_identity()
    proxy.cut()
    with pytest.raises(StorageUnavailableError, match=f"schema={schema}"):
        client.retrieve("Aster", user_id="alice")
    with pytest.raises(StorageUnavailableError):
        client.store("half-written?", user_id="alice")
    proxy.start()  # same port: the pool reconnects by itself (with its backoff)
    assert until_reachable(store) == before
    assert [m.content for m in client.list(user_id="alice")] == ["Aster uses PostgreSQL"]
    with pytest.raises(StorageUnavailableError), store.serialized("memories"):
        store.bind_embedder(client.engine.embedder.identity.model_dump(mode="json"))
        client.store("lost at commit", user_id="alice")
        proxy.cut()
    proxy.start()
    assert until_reachable(store) == before
    assert len(client.retrieve("Aster", user_id="alice").results) == 1
    client.close()
    proxy.cut()


# ------------------------------------------------------------------- registry, client
def test_registry_lists_every_backend() -> None:
    assert sorted(REGISTRY) == ["postgres", "sqlite"]
    with pytest.raises(InvalidInputError, match="valid: postgres, sqlite") as info:
        make_store("mysql", StoreOptions())
    assert info.value.field == "storage.backend"
    with pytest.raises(InvalidInputError, match="needs a URL"):
        make_store("postgres", StoreOptions())


def test_memory_client_opens_the_configured_backend_by_name(pack_url: str, tmp_path: Path) -> None:
    def storage(**fields: Any) -> PRMEConfig:
        return make_config(storage=StorageConfig(**fields))

    with pytest.raises(InvalidInputError, match="valid: postgres, sqlite") as info:
        MemoryClient(tmp_path, config=storage(backend="mysql"))
    assert info.value.field == "storage.backend"
    with pytest.raises(InvalidInputError, match="needs a URL") as info:
        MemoryClient(tmp_path, config=storage(backend="postgres"))
    assert info.value.field == "storage.postgres_url"
    with pytest.raises(InvalidInputError, match="not a URL") as info:
        MemoryClient(tmp_path, config=storage(backend="sqlite"), postgres_url=pack_url)
    assert info.value.field == "storage.postgres_url"
    assert not (tmp_path / "pack.sqlite3").exists()  # a refused backend creates nothing
    with MemoryClient(tmp_path, config=storage(backend="sqlite")) as client:
        assert client.engine.store.backend_name == "sqlite"
    with MemoryClient(config=storage(backend="postgres", postgres_url=pack_url)) as client:
        assert client.engine.store.backend_name == "postgres"


@pytest.fixture
def pack_url(postgres_url: str, schemas: Callable[[str], str]) -> str:
    """A URL naming its own pack schema (``options=-csearch_path=...``)."""
    return make_conninfo(postgres_url, options=f"-csearch_path={schemas('url')}")


def test_memory_client_selects_postgres_by_url_or_config(
    pack_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with MemoryClient(tmp_path, config=make_config(), postgres_url=pack_url) as client:
        assert client.engine.store.backend_name == "postgres"
        assert client.engine.store.schema.startswith("t_url_")  # type: ignore[attr-defined]
        client.store("Aster uses PostgreSQL", user_id="alice")
    assert not (tmp_path / "pack.sqlite3").exists()
    monkeypatch.setenv("PRME_STORAGE__POSTGRES_URL", pack_url)
    monkeypatch.setenv("PRME_EMBEDDING__PROVIDER", "hash")
    monkeypatch.setenv("PRME_SCORING__FUSION", "weighted")
    with MemoryClient(tmp_path, config=PRMEConfig()) as client:
        assert client.engine.store.backend_name == "postgres"
        assert [m.content for m in client.list(user_id="alice")] == ["Aster uses PostgreSQL"]
