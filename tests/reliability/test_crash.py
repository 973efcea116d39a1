"""Crash safety: a child killed with SIGKILL at random points loses no acknowledged write.

For each operation a fresh child (``driver.py``) writes in a loop and acknowledges every write
on stdout after it returned; the parent kills it at a random moment, reopens the pack, runs the
full integrity check and looks up every write that was acknowledged. The pack accumulates
across kills, so recovery is exercised on a pack that has already crashed many times.
"""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock, make_config

from prme import MemoryClient

from .conftest import ProfilePack, Scale
from .harness import FIGURES, OWNER, Child

pytestmark = pytest.mark.reliability

KILL_AFTER = (0.02, 0.5)  # seconds after the child is ready (it is writing by then)
BATCH = 50
Verify = Callable[[MemoryClient, list[dict[str, Any]]], None]


def crash_repeatedly(
    pack: Path, operation: str, kills: int, verify: Verify, unit: str = "writes", **args: Any
) -> dict[str, int]:
    """Kill ``kills`` children at random points; after each, the pack must check clean and
    hold every acknowledged write."""
    rng = random.Random(f"{operation}-{kills}")
    acknowledged = 0
    for index in range(kills):
        child = Child(operation, pack, tag=f"k{index}", seed=index, **args)
        child.wait_ready()
        time.sleep(rng.uniform(*KILL_AFTER))
        child.kill()
        assert child.errors == [], child.errors
        with MemoryClient(pack, config=make_config()) as memory:
            report = memory.check_pack()
            assert report.ok, report.problems
            verify(memory, child.acks)
        acknowledged += len(child.acks)
    FIGURES[f"crash {operation}"] = (
        f"{kills} SIGKILLs survived, {acknowledged} acknowledged {unit}, 0 lost"
    )
    return {"kills": kills, "acknowledged": acknowledged}


def all_memories(memory: MemoryClient) -> list[Any]:
    nodes, after = [], None
    while page := memory.list(user_id=OWNER, limit=1000, after_id=after):
        nodes += page
        after = page[-1].id
    return nodes


def test_bulk_store(tmp_path: Path, scale: Scale) -> None:
    acked: set[str] = set()

    def verify(memory: MemoryClient, acks: list[dict[str, Any]]) -> None:
        acked.update(node_id for ack in acks for node_id in ack["ids"])
        nodes = all_memories(memory)
        assert acked <= {str(n.id) for n in nodes}
        # Nothing half-written: every batch that is visible at all is complete.
        sizes = Counter((n.metadata or {})["batch"] for n in nodes)
        assert set(sizes.values()) <= {BATCH}, sizes

    unit = f"batches of {BATCH} memories"
    kills = scale.pick(10, 50)
    totals = crash_repeatedly(tmp_path / "pack", "store", kills, verify, unit, batch=BATCH)
    assert totals["acknowledged"] > 0


def seeded(path: Path) -> Path:
    with MemoryClient(path, config=make_config(), clock=FakeClock()) as memory:
        memory.store_many(
            [
                f"Aster fact {i}: the database is PostgreSQL {i}; Basalt runs on k8s"
                for i in range(200)
            ],
            user_id=OWNER,
        )
    return path


def test_retrieve_receipts(tmp_path: Path, scale: Scale) -> None:
    def verify(memory: MemoryClient, acks: list[dict[str, Any]]) -> None:
        for ack in acks:
            assert ack["persisted"] is True
            receipt = memory.get_retrieval_receipt(ack["request_id"], user_id=OWNER)
            assert receipt is not None
            assert [str(c.node_id) for c in receipt.candidates] == ack["results"]

    totals = crash_repeatedly(seeded(tmp_path / "pack"), "retrieve", scale.pick(10, 50), verify)
    assert totals["acknowledged"] > 0


def test_relevance_judgments(tmp_path: Path, scale: Scale) -> None:
    def verify(memory: MemoryClient, acks: list[dict[str, Any]]) -> None:
        for ack in acks:
            record = memory.get_relevance(ack["feedback_id"], user_id=OWNER)
            assert record is not None
            assert str(record.request_id) == ack["request_id"]
            assert {str(k): v for k, v in record.labels.items()} == ack["labels"]

    totals = crash_repeatedly(seeded(tmp_path / "pack"), "judge", scale.pick(10, 50), verify)
    assert totals["acknowledged"] > 0


def test_profile_transitions(tmp_path: Path, scale: Scale, profile_pack: ProfilePack) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(profile_pack.path, pack)
    scopes = [s.value for s in profile_pack.gold.proposal.scopes or ()]

    def verify(memory: MemoryClient, acks: list[dict[str, Any]]) -> None:
        history = memory.list_ranking_profile_history(user_id=OWNER, scopes=scopes, limit=1000)
        by_change = {str(s.change_id): s for s in history}
        for ack in acks:
            state = by_change[ack["change_id"]]
            assert state.action == ack["action"]
            assert str(state.active_profile_id) == str(ack["active"])
            assert str(state.previous_profile_id) == str(ack["previous"])
        # One chain, newest first: each transition starts where the one before it ended.
        for newer, older in pairwise(history):
            assert newer.previous_profile_id == older.active_profile_id

    totals = crash_repeatedly(
        pack,
        "profiles",
        scale.pick(10, 50),
        verify,
        profiles=profile_pack.profiles[:2],
        scopes=scopes,
    )
    assert totals["acknowledged"] > 0
