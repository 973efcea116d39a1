"""Several processes on one pack: writers, readers, judges and racing activations.

No ``database is locked`` reaches a caller (bounded retries with backoff), each activation race
from one baseline has exactly one winner, and each pointer's history is a single chain.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock, make_config

from prme import MemoryClient

from .conftest import ProfilePack, Scale
from .harness import FIGURES, OWNER, Child

pytestmark = pytest.mark.reliability

STALE_FRAGMENTS = ("inspect and retry", "evaluated baseline")
WRITE_BATCH = 20


def start_time(delay: float = 2.0) -> float:
    """A wall-clock moment far enough ahead for every child to be imported and waiting."""
    return time.time() + delay


def joined(children: list[Child]) -> None:
    for child in children:
        child.join()
        assert child.errors == [], child.errors
        assert "locked" not in child.stderr


def stored_ids(children: list[Child]) -> set[str]:
    return {node_id for child in children for ack in child.acks for node_id in ack["ids"]}


def test_writers_readers_and_judges_on_one_pack(tmp_path: Path, scale: Scale) -> None:
    pack = tmp_path / "pack"
    with MemoryClient(pack, config=make_config(), clock=FakeClock()) as memory:
        memory.store_many([f"Aster fact {i}: PostgreSQL {i}" for i in range(100)], user_id=OWNER)
    count = scale.pick(40, 200)
    begin = start_time()
    writers = [
        Child("store", pack, tag=f"w{i}", batch=WRITE_BATCH, count=count, start_at=begin)
        for i in range(3)
    ]
    readers = [Child("retrieve", pack, count=count, start_at=begin) for _ in range(3)]
    judges = [Child("judge", pack, count=count // 2, start_at=begin)]
    joined(writers + readers + judges)
    with MemoryClient(pack, config=make_config()) as memory:
        report = memory.check_pack()
        assert report.ok, report.problems
        assert report.memories == 100 + 3 * count * WRITE_BATCH
        assert all(memory.get(i, user_id=OWNER) is not None for i in stored_ids(writers))
        receipts = [ack for child in readers for ack in child.acks]
        assert len(receipts) == 3 * count and all(ack["persisted"] for ack in receipts)
        assert report.receipts == 3 * count + count // 2
        assert report.relevance_records == count // 2
    FIGURES["concurrency mixed"] = (
        f"3 writers x {count} batches, 3 readers x {count} retrievals, 1 judge x {count // 2}:"
        " 0 errors, 0 'database is locked'"
    )


def wait_round(children: list[Child], index: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        results = [m for child in children for m in child.messages if m.get("round") == index]
        if len(results) == len(children):
            return results
        assert time.monotonic() < deadline, f"round {index}: {results}"
        time.sleep(0.002)


def test_activation_races_have_one_winner_and_one_history_chain(
    tmp_path: Path, scale: Scale, profile_pack: ProfilePack
) -> None:
    pack, barrier = tmp_path / "pack", tmp_path / "barrier"
    shutil.copytree(profile_pack.path, pack)
    barrier.mkdir()
    scopes = [s.value for s in profile_pack.gold.proposal.scopes or ()]
    rounds = scale.pick(6, 25)
    racers = [
        Child("race", pack, profile=pid, barrier=str(barrier), rounds=rounds)
        for pid in profile_pack.profiles
    ]
    # Background load: a writer and a reader on the same pack during every race.
    load = [
        Child("store", pack, tag="bg", batch=WRITE_BATCH, count=10_000, seconds=600),
        Child("retrieve", pack, count=100_000, seconds=600),
    ]
    winners: list[str] = []
    try:
        for child in racers + load:
            child.wait_ready()
        with MemoryClient(pack, config=make_config()) as memory:
            for index in range(rounds):
                (barrier / f"go-{index}").touch()
                results = wait_round(racers, index)
                won = [r["won"] for r in results if "won" in r]
                stale = [r["stale"] for r in results if "stale" in r]
                assert len(won) == 1 and len(stale) == len(racers) - 1, results
                assert all(any(f in text for f in STALE_FRAGMENTS) for text in stale)
                active = memory.get_active_ranking_profile(user_id=OWNER, scopes=scopes)
                assert active is not None and str(active.profile_id) == won[0]
                winners.append(won[0])
                memory.deactivate_ranking_profile(user_id=OWNER, scopes=scopes)
        joined(racers)
    finally:
        for child in load:
            child.kill()
    for child in load:
        assert child.errors == [] and child.acks, child.errors
    with MemoryClient(pack, config=make_config()) as memory:
        report = memory.check_pack()  # includes the chain check of every pointer
        assert report.ok, report.problems
        history = memory.list_ranking_profile_history(user_id=OWNER, scopes=scopes, limit=1000)
    oldest_first = history[::-1]
    assert [s.action for s in oldest_first] == ["activate", "deactivate"] * rounds
    assert [str(s.active_profile_id) for s in oldest_first[::2]] == winners
    previous = None
    for state in oldest_first:
        assert state.previous_profile_id == previous
        previous = state.active_profile_id
    FIGURES["activation races"] = (
        f"{rounds} rounds x {len(racers)} processes (with a writer and a reader running):"
        f" {rounds} winners (exactly 1 per round), {rounds * (len(racers) - 1)} stale,"
        f" history of {len(history)} transitions is one chain;"
        f" wins per profile {sorted(winners.count(p) for p in set(winners))}"
    )


def test_many_processes_opening_a_new_pack_with_no_busy_timeout(tmp_path: Path) -> None:
    # With busy_timeout_ms=0 SQLite never waits, so switching a new pack to WAL while other
    # processes open it fails unless prme retries; every process must still get in.
    for attempt in range(3):
        pack = tmp_path / f"pack-{attempt}"
        begin = start_time()
        children = [
            Child("store", pack, tag=f"c{i}", batch=5, count=2, busy_timeout_ms=0, start_at=begin)
            for i in range(6)
        ]
        joined(children)
        with MemoryClient(pack, config=make_config()) as memory:
            report = memory.check_pack()
            assert report.ok, report.problems
            assert report.memories == 6 * 2 * 5
