"""Every size a caller supplies is bounded: a typed error naming the field, nothing written."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from prme import InvalidInputError, MemoryClient
from prme.config import RetrievalConfig
from prme.limits import MAX_PAGE_SIZE, MAX_RECORDS_LIMIT, MAX_RESULT_LIMIT, MAX_TOKEN_BUDGET
from prme.storage.sqlite import DB_FILE


def oplog_rows(pack_path: Path) -> int:
    with sqlite3.connect(pack_path / DB_FILE) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM oplog").fetchone()[0])


RETRIEVE_BOUNDS: list[tuple[str, Any]] = [
    ("limit", 10**30),
    ("limit", MAX_RESULT_LIMIT + 1),
    ("token_budget", 10**30),
    ("token_budget", MAX_TOKEN_BUDGET + 1),
    ("max_per_source", 10**30),
    ("max_per_evidence", MAX_RESULT_LIMIT + 1),
]


@pytest.mark.parametrize(("field", "value"), RETRIEVE_BOUNDS)
@pytest.mark.sqlite_only
def test_retrieve_sizes_are_bounded(
    client: MemoryClient, pack_path: Path, field: str, value: int
) -> None:
    client.store("Aster stores its data in PostgreSQL", user_id="alice")
    with pytest.raises(InvalidInputError, match=f"{field} must be") as info:
        client.retrieve("Aster", user_id="alice", **{field: value})
    assert info.value.field == field
    assert str(MAX_RESULT_LIMIT if field != "token_budget" else MAX_TOKEN_BUDGET) in str(info.value)
    assert oplog_rows(pack_path) == 0  # no receipt


def test_retrieve_accepts_each_bound_itself(client: MemoryClient) -> None:
    client.store("Aster stores its data in PostgreSQL", user_id="alice")
    response = client.retrieve(
        "Aster",
        user_id="alice",
        limit=MAX_RESULT_LIMIT,
        token_budget=MAX_TOKEN_BUDGET,
        max_per_source=MAX_RESULT_LIMIT,
        max_per_evidence=MAX_RESULT_LIMIT,
    )
    assert response.metadata.result_limit == MAX_RESULT_LIMIT
    assert response.bundle.token_budget == MAX_TOKEN_BUDGET
    assert response.metadata.receipt_persisted


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.list(user_id="alice", limit=MAX_PAGE_SIZE + 1),
        lambda c: c.list_relevance(user_id="alice", limit=10**30),
        lambda c: c.list_ranking_profiles(user_id="alice", limit=10**30),
        lambda c: c.list_ranking_profile_history(user_id="alice", limit=MAX_PAGE_SIZE + 1),
        lambda c: c.evaluate_learning(user_id="alice", max_records=10**30),
    ],
)
def test_page_sizes_and_record_bounds_are_bounded(client: MemoryClient, call: Any) -> None:
    with pytest.raises(InvalidInputError, match="must be an integer from 1 to") as info:
        call(client)
    assert info.value.field in ("limit", "max_records")


def test_query_groups_are_bounded_before_any_read(client: MemoryClient) -> None:
    groups = {f"{i:032x}": "g" for i in range(MAX_RECORDS_LIMIT + 1)}
    with pytest.raises(InvalidInputError, match="at most") as info:
        client.evaluate_learning(user_id="alice", query_groups=groups)
    assert info.value.field == "query_groups"


@pytest.mark.parametrize(
    ("field", "value"),
    [("default_limit", MAX_RESULT_LIMIT + 1), ("token_budget", MAX_TOKEN_BUDGET + 1)],
)
def test_configured_defaults_share_the_request_bounds(field: str, value: int) -> None:
    with pytest.raises(ValidationError, match=field):
        RetrievalConfig(**{field: value})
