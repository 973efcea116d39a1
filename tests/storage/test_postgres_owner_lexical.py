"""PostgreSQL lexical search is BM25 over the querying owner's own postings, in process
(:mod:`prme.storage.postgres.lexical`): what other owners store changes neither what an owner's
query returns nor what it costs. Once the owner's postings are built (read from the owner's
rows' ``tsvector``), a query reads no row of ``memories`` at all.

The cost is observed without timing: PostgreSQL's per-transaction statistics count the entries
each index of ``memories`` returned and the heap rows fetched through them during the search
(``pg_stat_get_xact_tuples_returned`` / ``_fetched``), the heap pages read
(``pg_stat_get_xact_blocks_fetched``) and the sequential scans. The owner-keyed GIN index of
migration 8 is still kept by the writes."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from conftest import FakeClock, make_config

from prme import MemoryClient
from prme.index.bm25 import BM25_B, BM25_K1, bm25_idf
from prme.models.enums import Scope
from prme.storage.postgres import PostgresStore, drop_schema, lexical, migrations
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


def reference_search(
    store: PostgresStore, user_id: str, scopes: list[str] | None, terms: list[str], k: int
) -> list[tuple[int, float]]:
    """The documented BM25, computed here in plain Python from the owner's rows as the server
    analyses them: each (term, lexeme) pair in term order, then byte order; tf = the lexeme's
    position count; the owner's row count, token total and document frequencies."""
    with store.transaction() as conn:
        pairs = conn.execute(
            "SELECT t.ord, l.lexeme FROM unnest(%s::text[]) WITH ORDINALITY AS t(term, ord)"
            " CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('prme_english',"
            ' prme_lexical_text(t.term)))) AS l(lexeme) ORDER BY t.ord, l.lexeme COLLATE "C"',
            (terms,),
        ).fetchall()
        rows = conn.execute(
            "SELECT rowid, scope, doc_len FROM memories WHERE user_id = %s", (user_id,)
        ).fetchall()
        postings = conn.execute(
            "SELECT m.rowid, u.lexeme, cardinality(u.positions) FROM memories m,"
            " unnest(m.tsv) AS u WHERE m.user_id = %s",
            (user_id,),
        ).fetchall()
    n_docs, total = len(rows), sum(int(r[2]) for r in rows)
    tf = {(int(r), str(lexeme)): int(c) for r, lexeme, c in postings}
    df: dict[str, int] = {}
    for _, lexeme in tf:
        df[lexeme] = df.get(lexeme, 0) + 1
    scores = []
    for rowid, scope, doc_len in rows:
        if scopes is not None and scope not in scopes:
            continue
        score, matched = 0.0, False
        for _, lexeme in pairs:
            f = tf.get((int(rowid), str(lexeme)), 0)
            if f:
                matched = True
                norm = BM25_K1 * (1 - BM25_B + BM25_B * float(doc_len) / (total / n_docs))
                score += bm25_idf(n_docs, df[lexeme]) * ((f * (BM25_K1 + 1.0)) / (f + norm))
        if matched:
            scores.append((int(rowid), score))
    return sorted(scores, key=lambda hit: (-hit[1], hit[0]))[:k]


@pytest.mark.parametrize("batch_rows", [7, lexical.BATCH_ROWS])
def test_lexical_search_is_bm25_over_the_owners_own_rows(
    postgres_url: str,
    schemas: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    batch_rows: int,
) -> None:
    # owners, scopes, a delete, an update, repeated words and terms of several lexemes; the
    # postings read in one batch or in many
    monkeypatch.setattr(lexical, "BATCH_ROWS", batch_rows)
    store = PostgresStore(postgres_url, schema=schemas("owner_bm25"))
    rng = random.Random(3)
    words = ["aster", "friday", "tea", "review", "deploys", "deploying", "e-mail", "Nomad", "x"]

    def write(client: MemoryClient, owner: str, count: int) -> list[str]:
        texts = [
            " ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(count)
        ]
        scopes = ["project", "personal"] * (count // 2)
        memories = [{"content": t, "scope": s} for t, s in zip(texts, scopes, strict=True)]
        return client.store_many(memories, user_id=owner)

    def searched_as_documented() -> None:
        for owner in ("alice", "bob"):
            for terms in (["aster"], ["deploy", "e-mail"], ["tea", "friday", "nomad"], ["zzz"]):
                for scopes in (None, ["project"]):
                    scope_values = None if scopes is None else [Scope(s) for s in scopes]
                    found = store.lexical_search(owner, scope_values, terms, 25)
                    assert found == reference_search(store, owner, scopes, terms, 25), terms

    with client_on(store) as client:
        for owner in ("alice", "bob"):
            ids = write(client, owner, 40)
            client.delete(ids[3], user_id=owner)
            client.update(ids[5], user_id=owner, content="aster aster tea e-mail review")
        searched_as_documented()
        for owner in ("alice", "bob"):  # the postings grow with the rows written since
            write(client, owner, 20)
        searched_as_documented()
        assert store.lexical_search("alice", None, ["aster"], 500) != []


def test_an_owners_lexical_query_reads_no_rows_once_its_postings_are_built(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    store = PostgresStore(postgres_url, schema=schemas("owner_lexical"))
    with client_on(store) as client:
        client.store_many(ALICE, user_id="alice")
        search_cost(store, "alice", ["aster"])  # builds Alice's index and postings
        alone = {tuple(terms): search_cost(store, "alice", terms) for terms in QUERIES}
        for terms in QUERIES:
            found, cost = alone[tuple(terms)]
            assert len(found) == matching(store, "alice", terms) > 0, terms
            assert (cost["heap_rows"], cost["heap_blocks"], cost["seq_scans"]) == (0, 0, 0)
        client.store_many(BOB, user_id="bob")
        assert matching(store, "bob", ["aster"]) == 50 * matching(store, "alice", ["aster"])
        for terms in QUERIES:
            # same hits, same scores, and nothing more read than before Bob wrote
            assert search_cost(store, "alice", terms) == alone[tuple(terms)], terms
        found, _ = search_cost(store, "bob", ["aster"])
        assert len(found) == len(BOB)


def _write(client: MemoryClient) -> None:
    ids = client.store_many(ALICE, user_id="alice")
    client.store_many(BOB[:20], user_id="bob")
    client.delete(ids[0], user_id="alice")
    client.update(ids[1], user_id="alice", content="Aster moved its Friday deploys to Nomad")


def _state(url: str, schema: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {
            table: conn.execute(f"SELECT * FROM {schema}.{table} ORDER BY 1").fetchall()
            for table in ("owner_deletes", "owner_sequences")
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


def test_migrations_8_and_9_keep_an_existing_packs_rows_and_searches(
    postgres_url: str, schemas: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pack written at version 7 (the pack-wide tsv index, BM25 in SQL), upgraded in place:
    # its rows and sequences unchanged (the rewrite counts as no owner's delete), its searches
    # the same as a pack written at the latest version, and what served search in the server
    # gone (migration 8's owner-keyed index, then, with migration 9, all of it).
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
    assert migrations.pending(postgres_url, schema=old) == [8, 9, 10]
    assert migrations.upgrade(postgres_url, schema=old) == [8, 9, 10]
    assert _state(postgres_url, old) == before
    upgraded = PostgresStore(postgres_url, schema=old, upgrade=False)
    try:
        assert upgraded.pack_digest() == digest
        assert upgraded.kept_digest_state() == upgraded.recompute_digest_state()
        assert _lexical(upgraded) == expected
        assert sum(len(hits) for hits in expected.values()) > 10
    finally:
        upgraded.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE i.indrelid = %s::regclass",
                (f"{old}.memories",),
            ).fetchall()
        }
        functions = {
            r[0]
            for r in conn.execute(
                "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                " WHERE n.nspname = %s",
                (old,),
            ).fetchall()
        }
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (old,)
            ).fetchall()
        }
    assert not {"memories_tsv", "memories_owner_lexeme_keys"} & indexes
    assert (
        not {"prme_lexical_hits", "prme_owner_lexical_hits", "prme_owner_lexeme_keys"} & functions
    )
    assert not {"owner_lexemes", "owner_lexical_stats"} & tables


def test_an_owners_search_does_the_same_work_whether_or_not_another_owner_asked_it(
    postgres_url: str, schemas: Callable[[str], str]
) -> None:
    # Nothing one owner's query leaves behind (a cache of its terms' lexemes, say) changes the
    # statements another owner's identical query runs, hence its time.
    terms = ["review", "budget"]
    schema = schemas("owner_terms")
    with client_on(PostgresStore(postgres_url, schema=schema)) as client:
        client.store_many(ALICE, user_id="alice")
        client.store_many(BOB[:20], user_id="bob")

    def bobs_statements(alice_first: bool) -> list[str]:
        trace: list[str] = []
        store = PostgresStore(postgres_url, schema=schema, tracer=trace.append)
        try:
            store.lexical_search("bob", None, ["number"], 50)  # Bob's index and postings
            if alice_first:
                store.lexical_search("alice", None, terms, 50)
            del trace[:]
            found = store.lexical_search("bob", None, terms, 50)
            assert found
        finally:
            store.close()
        return trace

    alone = bobs_statements(alice_first=False)  # (terms no other test asks)
    assert bobs_statements(alice_first=True) == alone
