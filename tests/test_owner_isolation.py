"""Owner isolation of ranking: another owner's content never shows in an owner's responses.

An owner's scores, ranking and receipts depend on that owner's memories only (per-owner BM25
statistics, issue 17 item 1), and the write sequence in an owner's receipts is the owner's own
content sequence (item 2). Checked on both backends.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from conftest import BACKENDS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prme import MemoryClient

ClientFactory = Callable[..., MemoryClient]
NOW = datetime(2026, 10, 1, tzinfo=UTC)
_PACKS = count()

ALICE = [
    {"content": "Aster uses PostgreSQL for the billing service", "scope": "project"},
    {"content": "The Aster migration to SQLite finished on Tuesday", "scope": "project"},
    {"content": "Alice prefers green tea in the morning"},
    {"content": "Kestrel team meets in Lisbon every quarter", "scope": "project"},
    {"content": "Billing service outage was caused by a stale cache"},
    {"content": "Remember to renew the passport before the Lisbon trip"},
    {"content": "Aster billing runs nightly reports at midnight", "scope": "project"},
    {"content": "Green tea and a croissant at the Lisbon cafe"},
]
QUERIES = [
    "Aster billing",
    "Lisbon tea",
    "zorblaxian protocol stale cache",  # zorblaxian: only ever in the other owner's memories
    "the",
]
WORDS = [
    "aster", "billing", "lisbon", "tea", "cache", "the", "a", "zorblaxian", "protocol",
    "Kestrel", "Orion", "midnight", "reports", "service", "team", "green", "stale", "runs",
]  # fmt: skip
bob_text = st.lists(
    st.sampled_from(WORDS) | st.text(st.characters(categories=["Ll", "Lu", "Nd"]), min_size=1),
    min_size=1,
    max_size=12,
).map(" ".join)
bob_item = st.fixed_dictionaries(
    {"content": bob_text, "scope": st.sampled_from(["personal", "project", "organisation"])}
)


def _response(client: MemoryClient, query: str, **kwargs: Any) -> dict[str, Any]:
    """The owner's response and stored receipt, without the request id and timings."""
    response = client.retrieve(query, user_id="alice", reference_time=NOW, limit=6, **kwargs)
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert receipt is not None
    dumped = response.model_dump(mode="json")
    del dumped["metadata"]["request_id"], dumped["metadata"]["timing_ms"]
    stored = receipt.model_dump(mode="json")
    del stored["request_id"]
    return {"response": dumped, "receipt": stored}


def _alice_view(clients: list[MemoryClient]) -> list[dict[str, Any]]:
    return [
        _response(client, query, **scope)
        for client in clients
        for query in QUERIES
        for scope in ({}, {"scope": "project"})
    ]


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    writes=st.lists(bob_item, min_size=1, max_size=6),
    delete_one=st.booleans(),
    one_by_one=st.lists(bob_item, max_size=2),
)
def test_another_owners_writes_never_change_an_owners_responses_or_receipts(
    make_client: ClientFactory,
    tmp_path: Path,
    writes: list[dict[str, str]],
    delete_one: bool,
    one_by_one: list[dict[str, str]],
) -> None:
    path = tmp_path / f"pack-{next(_PACKS)}"
    weighted = make_client(path)
    weighted.store_many(ALICE, user_id="alice")
    clients = [weighted, make_client(path, fusion="rrf")]
    try:
        before = _alice_view(clients)
        ids = weighted.store_many(writes, user_id="bob")
        if delete_one:
            weighted.delete(ids[0], user_id="bob")
        for item in one_by_one:
            weighted.store(item["content"], user_id="bob", scope=item["scope"])
        assert _alice_view(clients) == before
    finally:  # every example opens a pack; keep the server's connections few
        for client in clients:
            client.close()


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_another_owners_rare_word_does_not_show_in_lexical_scores(
    make_client: ClientFactory,
) -> None:
    # The probe of issue 17: bob holds two near-identical rare words and reads his own
    # lexical scores for each; alice then stores one of them. Before the fix bob's score for
    # "zorblaxian" moved (BM25 statistics were the whole pack's) while "zorblaxiam" did not.
    client = make_client()
    client.store_many(
        ["zorblaxian probe marker", "zorblaxiam probe marker", "probe marker words here"],
        user_id="bob",
    )

    def probe(word: str) -> list[tuple[str, float, float]]:
        response = client.retrieve(f"{word} probe", user_id="bob", reference_time=NOW)
        return [(r.node.content, r.lexical_score, r.composite_score) for r in response.results]

    before = {word: probe(word) for word in ("zorblaxian", "zorblaxiam")}
    assert [s for _, s, _ in before["zorblaxian"]] == [s for _, s, _ in before["zorblaxiam"]]
    client.store("The zorblaxian protocol ships on Friday", user_id="alice")
    client.store_many([f"zorblaxian notes {i}" for i in range(5)], user_id="alice")
    assert {word: probe(word) for word in before} == before


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_another_owners_writes_do_not_reorder_an_owners_results(
    make_client: ClientFactory,
) -> None:
    # alice ranks "tea" above "lisbon" documents by idf; bob flooding the pack with "tea"
    # would make "tea" common pack-wide and flip her order under pack-wide statistics.
    client = make_client()
    client.store_many(
        ["tea at home", "lisbon trip", "lisbon food", "lisbon museum"], user_id="alice"
    )

    def order() -> list[str]:
        response = client.retrieve("tea lisbon", user_id="alice", reference_time=NOW)
        return [r.node.content for r in response.results if r.lexical_score > 0]

    before = order()
    assert before[0] == "tea at home"
    client.store_many([f"tea number {i}" for i in range(40)], user_id="bob")
    assert order() == before


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_receipts_record_the_owners_own_content_write_sequence(
    make_client: ClientFactory,
) -> None:
    # Item 2: bob's receipts do not move with alice's writes (he would observe her activity);
    # his own stores and deletes move them, and the pack-wide sequence still counts everything.
    client = make_client()
    client.store("bob keeps a note", user_id="bob")

    def bob_seq() -> int:
        response = client.retrieve("note", user_id="bob", reference_time=NOW)
        receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="bob")
        assert receipt is not None and receipt.schema_version == 2
        return receipt.pack.write_seq

    start, pack_start = bob_seq(), client.engine.store.pack_identity().write_seq
    client.store_many(["alice one", "alice two"], user_id="alice")
    client.delete(client.store("alice three", user_id="alice"), user_id="alice")
    assert bob_seq() == start
    assert client.engine.store.pack_identity().write_seq == pack_start + 3
    second = client.store("bob keeps another note", user_id="bob")
    assert bob_seq() == start + 1
    client.delete(second, user_id="bob")
    assert bob_seq() == start + 2
