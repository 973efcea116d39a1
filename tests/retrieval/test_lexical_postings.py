"""The lexical channel of a small owner takes its postings from the owner's own rows: the same
hits and scores as reading the pack's FTS5 postings, without reading them."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prme import MemoryClient
from prme.models.enums import Scope
from prme.retrieval.query import analyze_query
from prme.storage import fts5_lexical

ClientFactory = Callable[..., MemoryClient]
WORDS = [
    "aster", "kestrel", "lisbon", "running", "ran", "runs", "café", "cafe", "naïve", "user_id",
    "deploy", "deployed", "incident", "postgres", "helm", "rollback", "migration", "review",
    "budget", "the", "a", "of", "42", "x",
]  # fmt: skip


def _generated(rng: random.Random, count: int) -> list[dict[str, Any]]:
    scopes = ("personal", "project", "organisation")
    return [
        {
            "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))),
            "scope": rng.choice(scopes),
        }
        for _ in range(count)
    ]


def _queries(rng: random.Random, count: int) -> list[list[str]]:
    found = []
    for _ in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))
        found.append(list(analyze_query(text).terms) or ["aster"])
    return found


@pytest.mark.parametrize("seed", [1, 2])
def test_owner_postings_give_the_pack_postings_hits(
    make_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    client = make_client(tmp_path / f"pack-{seed}")
    owners = [f"owner-{i}" for i in range(6)]
    for round_ in range(3):  # interleaved writes: an owner's rowids are not one range
        for owner in owners:
            client.store_many(_generated(rng, 20 + 15 * round_), user_id=owner)
    store = client.engine.store
    cases = [
        (owner, scopes, terms, k)
        for owner in owners
        for scopes in (None, [Scope.PROJECT], [Scope.PERSONAL, Scope.ORGANISATION])
        for terms, k in zip(_queries(rng, 8), (1, 5, 20, 200) * 2, strict=True)
    ]
    from_owner = [store.lexical_search(*case) for case in cases]
    monkeypatch.setattr(fts5_lexical, "OWNER_POSTINGS_ROWS", 0)  # every owner: pack postings
    from_pack = [store.lexical_search(*case) for case in cases]
    assert from_owner == from_pack
    assert sum(len(hits) for hits in from_pack) > 500  # the queries do match


@pytest.mark.sqlite_only  # counts the SQL statements SQLite runs for the FTS5 postings
def test_a_small_owner_reads_no_pack_postings(make_client: ClientFactory) -> None:
    client = make_client()
    rng = random.Random(7)
    client.store_many(_generated(rng, 50), user_id="alice")
    client.store_many(_generated(rng, 3000), user_id="bob")  # past the owner threshold
    store = client.engine.store
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    try:
        alice = store.lexical_search("alice", None, ["aster", "incident"], 10)
        alice_reads = [s for s in statements if "prme_fts_instance" in s]
        statements.clear()
        bob = store.lexical_search("bob", None, ["aster", "incident"], 10)
        bob_reads = [s for s in statements if "prme_fts_instance" in s]
    finally:
        store.conn.set_trace_callback(None)
    assert alice and bob
    assert alice_reads == []
    assert len(bob_reads) == 2  # one read of the pack's postings per query token


def test_owner_postings_follow_the_owners_writes(make_client: ClientFactory) -> None:
    client = make_client()
    client.store_many(["aster runs", "kestrel"], user_id="alice")
    store = client.engine.store
    assert [s for _, s in store.lexical_search("alice", None, ["lisbon"], 10)] == []
    client.store("lisbon aster", user_id="alice")
    hits = store.lexical_search("alice", None, ["lisbon", "aster"], 10)
    assert len(hits) == 2 and hits[0][1] > hits[1][1]  # the new row matches both terms
