"""Refreshing a SQLite owner index after a write reads the owner's new rows only: its work does
not grow with how many memories the owner already has."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prme import MemoryClient

ClientFactory = Callable[..., MemoryClient]
SCOPES = ("personal", "project", "organisation")


def _memories(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "content": f"Meeting {i} with Alice Moreau about Kestrel in Lisbon",
            "scope": SCOPES[i % len(SCOPES)],
        }
        for i in range(start, start + count)
    ]


def _refresh_steps(client: MemoryClient, new: list[dict[str, Any]]) -> tuple[int, list[Any]]:
    """SQLite's virtual-machine steps to refresh alice's index after ``new`` is stored, and
    the refreshed rows' entity names."""
    store: Any = client.engine.store
    before = store.owner_index("alice").size
    client.store_many(new, user_id="alice")
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    store.conn.set_progress_handler(count, 1)
    try:
        index = store.owner_index("alice")
    finally:
        store.conn.set_progress_handler(None, 1)
    return steps[0], [index.names_at(p) for p in range(before, index.size)]


@pytest.mark.sqlite_only  # counts SQLite's work on the pack's connection
def test_a_refresh_reads_only_the_owners_new_rows(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    found = []
    for size in (300, 3000):
        client = make_client(tmp_path / str(size))
        for start in range(0, size, 1000):
            client.store_many(_memories(min(1000, size - start), start), user_id="alice")
        client.store_many(_memories(500), user_id="bob")
        found.append([_refresh_steps(client, _memories(n, 10_000 + 10 * n)) for n in (1, 4)])
    small, large = found
    assert [names for _, names in small] == [names for _, names in large]
    assert all(names and all(n for n in names) for _, names in small)  # entities were read
    assert [steps for steps, _ in small] == [steps for steps, _ in large]
