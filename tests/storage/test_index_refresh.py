"""Refreshing a SQLite owner index after a write reads the owner's new rows only, and after an
update the superseded row: its work does not grow with how many memories the owner already
has."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support.owner_index import refresh_steps

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
    steps = refresh_steps(store, "alice")
    index = store.owner_index("alice")  # the same index: nothing was written since
    return steps, [index.names_at(p) for p in range(before, index.size)]


def _filled(make_client: ClientFactory, path: Path, size: int) -> tuple[MemoryClient, list[str]]:
    """A client on a new pack where alice has ``size`` memories and bob 500; alice's ids."""
    client = make_client(path)
    ids: list[str] = []
    for start in range(0, size, 1000):
        ids += client.store_many(_memories(min(1000, size - start), start), user_id="alice")
    client.store_many(_memories(500), user_id="bob")
    return client, ids


@pytest.mark.sqlite_only  # counts SQLite's work on the pack's connection
def test_a_refresh_reads_only_the_owners_new_rows(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    found = []
    for size in (300, 3000):
        client, _ = _filled(make_client, tmp_path / str(size), size)
        found.append([_refresh_steps(client, _memories(n, 10_000 + 10 * n)) for n in (1, 4)])
    small, large = found
    assert [names for _, names in small] == [names for _, names in large]
    assert all(names and all(n for n in names) for _, names in small)  # entities were read
    assert [steps for steps, _ in small] == [steps for steps, _ in large]


Changes = Callable[[MemoryClient, list[str], int], list[Callable[[], object]]]


def _steps_after_changes(
    make_client: ClientFactory, path: Path, changes: Changes
) -> tuple[list[list[int]], list[object], list[int]]:
    """For alice with 300 and with 3,000 memories: SQLite's steps to refresh her index after
    each of the changes ``changes(client, ids, size)`` makes, what the changes returned, and
    her index's size after them."""
    steps, returned, sizes = [], [], []
    for size in (300, 3000):
        client, ids = _filled(make_client, path / str(size), size)
        store: Any = client.engine.store
        counted = []
        for change in changes(client, ids, size):
            store.owner_index("alice")
            returned.append(change())
            counted.append(refresh_steps(store, "alice"))
        sizes.append(store.owner_index("alice").size)
        steps.append(counted)
    return steps, returned, sizes


@pytest.mark.sqlite_only  # counts SQLite's work on the pack's connection
def test_a_refresh_after_an_update_reads_the_changed_rows_only(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    def updates(client: MemoryClient, ids: list[str], size: int) -> list[Callable[[], object]]:
        content = "Alice Moreau moved the review"
        return [
            partial(client.update, ids[at], user_id="alice", content=content) for at in (7, 150)
        ]

    (small, large), _, _ = _steps_after_changes(make_client, tmp_path, updates)
    assert small == large  # before: the index was rebuilt, reading every row of the owner


@pytest.mark.sqlite_only  # counts SQLite's work on the pack's connection
def test_a_refresh_after_a_delete_reads_no_row(make_client: ClientFactory, tmp_path: Path) -> None:
    def deletes(client: MemoryClient, ids: list[str], size: int) -> list[Callable[[], object]]:
        # an old memory, then the newest
        return [partial(client.delete, ids[at], user_id="alice") for at in (7, size - 1)]

    (small, large), deleted, sizes = _steps_after_changes(make_client, tmp_path, deletes)
    assert all(deleted) and sizes == [300 - 2, 3000 - 2]
    assert small == large  # before: the index was rebuilt, reading every row of the owner
