"""Pointer changes are one serialized compare-and-swap, across threads and across processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_learning_workflow import OWNER, SCOPES, Golden, fresh_pack, golden

from prme import MemoryClient, StaleRankingProfileError
from prme.models.profiles import RankingProfile

ROUNDS = 4
STALE_FRAGMENTS = ("inspect and retry", "evaluated baseline")

# Each racer opens the pack, says it is ready, then for every round waits for the round's go
# file and immediately tries to activate its profile from the same (empty) baseline.
RACER = r"""
import json, sys, time
from pathlib import Path
from prme import MemoryClient, PRMEConfig, ScoringWeights, StaleRankingProfileError
from prme.config import EmbeddingConfig

pack, profile_id, barrier, name, rounds = sys.argv[1:6]
barrier = Path(barrier)
config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
with MemoryClient(pack, config=config) as memory:
    (barrier / f"ready-{name}").touch()
    for index in range(int(rounds)):
        go, deadline = barrier / f"go-{index}", time.monotonic() + 60
        while not go.exists():
            if time.monotonic() > deadline:
                raise SystemExit("barrier timeout")
            time.sleep(0.0002)
        try:
            state = memory.activate_ranking_profile(profile_id, user_id="alice")
            result = {"won": str(state.active_profile_id)}
        except StaleRankingProfileError as exc:
            result = {"stale": str(exc)}
        out = barrier / f"result-{name}-{index}"
        out.with_suffix(".tmp").write_text(json.dumps(result))
        out.with_suffix(".tmp").rename(out)
"""


@pytest.fixture
def gold(tmp_path_factory: pytest.TempPathFactory) -> Golden:
    return golden(tmp_path_factory)


@pytest.fixture
def pack(gold: Golden, pack_path: Path) -> Path:
    return fresh_pack(gold.memories, pack_path)


@pytest.fixture
def memory(pack: Path, make_client: Callable[..., MemoryClient]) -> MemoryClient:
    return make_client()


def base_evaluated(memory: MemoryClient, gold: Golden, count: int) -> list[RankingProfile]:
    """``count`` distinct profiles that may each activate only from base scoring."""
    return [
        memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
        for _ in range(count)
    ]


def wait_for(paths: list[Path], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"timed out waiting for {paths}"
        time.sleep(0.001)


@pytest.mark.sqlite_only
def test_two_processes_activating_from_one_baseline_exactly_one_wins(
    memory: MemoryClient, gold: Golden, pack: Path, tmp_path: Path
) -> None:
    contenders = {p.profile_id for p in base_evaluated(memory, gold, 2)}
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racers = {
        f"p{i}": subprocess.Popen(
            [sys.executable, "-c", RACER, str(pack), str(pid), str(barrier), f"p{i}", str(ROUNDS)],
            stderr=subprocess.PIPE,
        )
        for i, pid in enumerate(sorted(contenders, key=str))
    }
    try:
        wait_for([barrier / f"ready-{name}" for name in racers])
        for index in range(ROUNDS):
            (barrier / f"go-{index}").touch()
            outputs = [barrier / f"result-{name}-{index}" for name in racers]
            wait_for(outputs)
            results = [json.loads(path.read_text()) for path in outputs]
            winners = [r["won"] for r in results if "won" in r]
            losers = [r["stale"] for r in results if "stale" in r]
            assert len(winners) == 1 and len(losers) == 1, results
            assert any(fragment in losers[0] for fragment in STALE_FRAGMENTS)
            active = memory.get_active_ranking_profile(user_id=OWNER, scopes=SCOPES)
            assert active is not None and str(active.profile_id) == winners[0]
            response = memory.retrieve(
                "Which database does Aster use?", user_id=OWNER, scope=SCOPES
            )
            assert str(response.metadata.ranking_profile_id) == winners[0]
            assert response.metadata.ranking_profile_status == "applied"
            memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)
        for name, racer in racers.items():
            _, err = racer.communicate(timeout=60)
            assert racer.returncode == 0, f"{name}: {err.decode()}"
    finally:
        for racer in racers.values():
            if racer.poll() is None:
                racer.kill()
                racer.wait()
    history = memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES)
    assert [s.action for s in history] == ["deactivate", "activate"] * ROUNDS
    assert all(s.previous_profile_id is None for s in history if s.action == "activate")
    assert {s.active_profile_id for s in history if s.action == "activate"} <= contenders
    times = [s.changed_at for s in history]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)


def test_threads_activating_from_one_baseline_exactly_one_wins(
    memory: MemoryClient, gold: Golden, make_client: Callable[..., MemoryClient]
) -> None:
    candidates = base_evaluated(memory, gold, 6)
    clients = [make_client() for _ in candidates]
    start = threading.Barrier(len(candidates))
    outcomes: list[object] = [None] * len(candidates)

    def race(index: int) -> None:
        start.wait()
        try:
            outcomes[index] = clients[index].activate_ranking_profile(
                candidates[index].profile_id, user_id=OWNER
            )
        except StaleRankingProfileError as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(candidates))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    won = [o for o in outcomes if not isinstance(o, StaleRankingProfileError)]
    assert len(won) == 1 and all(
        isinstance(o, StaleRankingProfileError) for o in outcomes if o is not won[0]
    )
    history = memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES)
    assert history == won


@pytest.mark.sqlite_only
def test_the_compare_and_swap_runs_inside_begin_immediate(
    memory: MemoryClient, gold: Golden, make_client: Callable[..., MemoryClient]
) -> None:
    (profile,) = base_evaluated(memory, gold, 1)
    statements: list[str] = []
    traced = make_client(tracer=statements.append)
    statements.clear()
    traced.activate_ranking_profile(profile.profile_id, user_id=OWNER)
    begin = statements.index("BEGIN IMMEDIATE")
    inside = statements[begin:]
    commit = inside.index("COMMIT")
    reads = [i for i, s in enumerate(inside[:commit]) if s.startswith("SELECT") and "oplog" in s]
    writes = [i for i, s in enumerate(inside[:commit]) if "INSERT OR IGNORE INTO oplog" in s]
    # Inside one transaction: the change id and the latest state are re-read, then appended.
    assert len(reads) >= 2 and len(writes) == 1 and max(reads) < writes[0]
    assert statements.count("BEGIN IMMEDIATE") == 1
