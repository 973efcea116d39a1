"""PostgreSQL lexical search reads only the querying owner's index entries (migration 8), so
what other owners store never changes what an owner's query costs, not only what it returns.

The cost is observed without timing: PostgreSQL's per-transaction statistics count the entries
each index of ``memories`` returned and the heap rows fetched through them during the search
(``pg_stat_get_xact_tuples_returned`` / ``_fetched``), the heap pages read
(``pg_stat_get_xact_blocks_fetched``) and the sequential scans. (The index pages read are left
out: the depth of the index's entry tree depends on every key in it, a logarithmic cost that
one shared index cannot avoid.)"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from conftest import FakeClock, make_config

from prme import MemoryClient
from prme.storage.postgres import PostgresStore, drop_schema, migrations
from prme.storage.postgres import store as store_module

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)

ALICE = [
    "Aster stores its data in PostgreSQL",
    "Aster deploys on Kubernetes every Friday",
    "Bob prefers green tea in the morning",
    "The Aster budget review is on Friday",
]
# Bob's documents match Alice's query terms 50 times as often as hers do.
BOB = [f"Aster {word} review number {i}" for i in range(75) for word in ("tea", "Friday")]
QUERIES = (["aster"], ["aster", "friday"], ["tea"], ["review", "kubernetes"])


@pytest.fixture
def schemas(postgres_url: str, backend: str) -> Iterator[Callable[[str], str]]:
    """Fresh pack schemas for this test (dropped afterwards)."""
    del backend
    made: list[str] = []

    def make(name: str) -> str:
        schema = f"t_{name}_{time.monotonic_ns() % 10**12}"
        drop_schema(postgres_url, schema)
        made.append(schema)
        return schema

    yield make
    for schema in made:
        drop_schema(postgres_url, schema)


def client_on(store: PostgresStore) -> MemoryClient:
    return MemoryClient(config=make_config(), clock=FakeClock(), store=store)


COUNTED = ("index_entries", "heap_rows", "heap_blocks", "seq_scans")
COUNTERS = (
    "SELECT (SELECT COALESCE(SUM(pg_stat_get_xact_tuples_returned(i.indexrelid)), 0)"
    " FROM pg_index i WHERE i.indrelid = t.oid), pg_stat_get_xact_tuples_fetched(t.oid),"
    " pg_stat_get_xact_blocks_fetched(t.oid),"
    " pg_stat_get_xact_numscans(t.oid) FROM (SELECT 'memories'::regclass::oid AS oid) t"
)


def search_cost(
    store: PostgresStore, user_id: str, terms: list[str]
) -> tuple[list[tuple[int, float]], dict[str, int]]:
    """The owner's lexical hits, and what the search read of ``memories``: index entries
    returned (all its indexes), heap rows fetched through them, heap pages read, sequential
    scans. (The counters also hold a connection's earlier, unreported transactions: the
    search's are the difference, inside one transaction.)"""
    with store.transaction() as conn:
        before = conn.execute(COUNTERS).fetchone()
        found = store.lexical_search(user_id, None, terms, 500)
        after = conn.execute(COUNTERS).fetchone()
    assert before is not None and after is not None
    read = [int(a) - int(b) for a, b in zip(after, before, strict=True)]
    return found, dict(zip(COUNTED, read, strict=True))


def matching(store: PostgresStore, user_id: str, terms: list[str]) -> int:
    """How many of the owner's memories hold one of the terms' lexemes (read without index)."""
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM memories WHERE user_id = %s AND tsv @@ to_tsquery("
            "'prme_english', array_to_string(%s::text[], ' | '))",
            (user_id, terms),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_an_owners_lexical_query_reads_none_of_another_owners_documents(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    store = PostgresStore(postgres_url, schema=schemas("owner_lexical"))
    with client_on(store) as client:
        client.store_many(ALICE, user_id="alice")
        alone = {tuple(terms): search_cost(store, "alice", terms) for terms in QUERIES}
        for terms in QUERIES:
            found, cost = alone[tuple(terms)]
            count = matching(store, "alice", terms)
            assert len(found) == count > 0, terms
            assert (cost["index_entries"], cost["heap_rows"], cost["seq_scans"]) == (
                count,
                count,
                0,
            )
        client.store_many(BOB, user_id="bob")
        assert matching(store, "bob", ["aster"]) == 50 * matching(store, "alice", ["aster"])
        for terms in QUERIES:
            # same hits, same scores, and the same entries, rows and heap pages read as before
            # Bob wrote
            assert search_cost(store, "alice", terms) == alone[tuple(terms)], terms
        # Bob's own query reads his documents (the index is used, and is per owner)
        found, cost = search_cost(store, "bob", ["aster"])
        assert len(found) == cost["index_entries"] == cost["heap_rows"] == len(BOB)


def owner_lexeme_key(user_id: str, lexeme: str) -> int:
    """The documented key: 8 bytes of SHA-256(SHA-256(user_id) + lexeme), signed big-endian."""
    owner = hashlib.sha256(user_id.encode("utf-8")).digest()
    return int.from_bytes(
        hashlib.sha256(owner + lexeme.encode("utf-8")).digest()[:8], "big", signed=True
    )


def keys_and_lexemes(url: str, schema: str, node_id: str) -> tuple[str, list[int], list[str]]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT user_id, owner_lexeme_keys, tsvector_to_array(tsv) FROM {schema}.memories"
            " WHERE id = %s",
            (node_id,),
        ).fetchone()
    assert row is not None
    return str(row[0]), list(row[1]), list(row[2])


def test_the_index_keys_follow_the_rows_owner_and_content(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    schema = schemas("owner_keys")
    long_word = "q" * 2040  # a lexeme near PostgreSQL's 2047-byte limit still has its key
    store = PostgresStore(postgres_url, schema=schema)
    with client_on(store) as client:
        (node,) = client.store_many([f"Crème brûlée at Aster {long_word}"], user_id="ålice")
        user, keys, lexemes = keys_and_lexemes(postgres_url, schema, node)
        assert long_word in lexemes and "creme" in lexemes
        assert sorted(keys) == sorted(owner_lexeme_key(user, lexeme) for lexeme in lexemes)
        assert [r for r, _ in store.lexical_search("ålice", None, [long_word], 5)] != []
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"UPDATE {schema}.memories SET user_id = 'carol' WHERE id = %s", (node,))
            user, moved, same = keys_and_lexemes(postgres_url, schema, node)
            assert user == "carol" and same == lexemes
            assert sorted(moved) == sorted(owner_lexeme_key("carol", lexeme) for lexeme in same)
            assert not set(moved) & set(keys)
            conn.execute(f"UPDATE {schema}.memories SET content = 'tea' WHERE id = %s", (node,))
        assert keys_and_lexemes(postgres_url, schema, node)[1:] == (
            [owner_lexeme_key("carol", "tea")],
            ["tea"],
        )


def _write(client: MemoryClient) -> None:
    ids = client.store_many(ALICE, user_id="alice")
    client.store_many(BOB[:20], user_id="bob")
    client.delete(ids[0], user_id="alice")
    client.update(ids[1], user_id="alice", content="Aster moved its Friday deploys to Nomad")


def _state(url: str, schema: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {
            table: conn.execute(f"SELECT * FROM {schema}.{table} ORDER BY 1").fetchall()
            for table in ("owner_deletes", "owner_sequences", "owner_lexical_stats")
        } | {
            "memories": conn.execute(
                f"SELECT rowid, id, user_id, content, lifecycle_state, tsv::text, doc_len"
                f" FROM {schema}.memories ORDER BY rowid"
            ).fetchall()
        }


def _lexical(store: PostgresStore) -> dict[str, list[tuple[str, float]]]:
    """Each query's hits as (content, score), for both owners (row ids differ between packs)."""
    with store.transaction() as conn:
        content = dict(conn.execute("SELECT rowid, content FROM memories").fetchall())
    return {
        f"{owner}:{' '.join(terms)}": [
            (content[r], s) for r, s in store.lexical_search(owner, None, terms, 50)
        ]
        for owner in ("alice", "bob")
        for terms in QUERIES
    }


def test_migration_8_indexes_an_existing_packs_memories_by_owner(
    postgres_url: str, schemas: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pack written at version 7 (the pack-wide tsv index), upgraded in place: its rows and
    # sequences unchanged (the rewrite counts as no owner's delete), its searches the same as
    # a pack written at version 8, and the pack-wide index and its search function gone.
    current, old = schemas("lexical_current"), schemas("lexical_old")
    with client_on(PostgresStore(postgres_url, schema=current)) as client:
        _write(client)
        expected = _lexical(client.engine.store)  # type: ignore[arg-type]
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:7])
    monkeypatch.setattr(store_module, "LATEST_VERSION", 7)
    with client_on(PostgresStore(postgres_url, schema=old)) as client:
        _write(client)
        digest = client.pack_digest()
    monkeypatch.undo()
    before = _state(postgres_url, old)
    assert migrations.pending(postgres_url, schema=old) == [8]
    assert migrations.upgrade(postgres_url, schema=old) == [8]
    assert _state(postgres_url, old) == before
    upgraded = PostgresStore(postgres_url, schema=old, upgrade=False)
    try:
        assert upgraded.pack_digest() == digest
        assert upgraded.kept_digest_state() == upgraded.recompute_digest_state()
        assert _lexical(upgraded) == expected
        assert sum(len(hits) for hits in expected.values()) > 10
        _, cost = search_cost(upgraded, "alice", ["aster"])
        assert cost["index_entries"] == matching(upgraded, "alice", ["aster"])
    finally:
        upgraded.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        indexes = dict(
            conn.execute(
                "SELECT c.relname, c.reloptions FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass",
                (f"{old}.memories",),
            ).fetchall()
        )
        functions = {
            r[0]
            for r in conn.execute(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE n.nspname = %s",
                (old,),
            ).fetchall()
        }
    assert "memories_tsv" not in indexes
    assert indexes["memories_owner_lexeme_keys"] == ["fastupdate=off"]
    assert "prme_lexical_hits" not in functions and "prme_owner_lexical_hits" in functions
