"""Pointer changes are one serialized compare-and-swap, across threads and across processes."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import postgres_schema, session_postgres_url
from support.golden import OWNER, SCOPES, Golden, fresh_pack

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


# ---- one change_id, many identical copies: every copy returns the one stored transition.
RETRY_ROUNDS = 52  # 13 cycles of activate → deactivate → rollback(P) → rollback(base)
RETRY_COPIES = 6

# Each copy opens the pack (SQLite directory or PostgreSQL schema), says it is ready, then for
# every round waits for the round's spec and immediately sends exactly that request.
RETRY_RACER = r"""
import json, sys, time
from pathlib import Path
from prme import MemoryClient, PRMEConfig, Scope, ScoringWeights
from prme.config import EmbeddingConfig

pack, url, barrier, name, rounds = sys.argv[1:6]
barrier = Path(barrier)
config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
with MemoryClient(pack, config=config, postgres_url=url or None) as memory:
    (barrier / f"ready-{name}").touch()
    for index in range(int(rounds)):
        go, deadline = barrier / f"go-{index}", time.monotonic() + 60
        while not go.exists():
            if time.monotonic() > deadline:
                raise SystemExit("barrier timeout")
            time.sleep(0.0002)
        spec = json.loads(go.read_text())
        action, pid, cid = spec["action"], spec["profile_id"], spec["change_id"]
        try:
            if action == "activate":
                state = memory.activate_ranking_profile(pid, user_id="alice", change_id=cid)
            elif action == "deactivate":
                state = memory.deactivate_ranking_profile(
                    user_id="alice", scopes=[Scope.PROJECT], change_id=cid
                )
            else:
                state = memory.rollback_ranking_profile(
                    pid, user_id="alice", scopes=[Scope.PROJECT], change_id=cid
                )
            result = {"state": None if state is None else state.model_dump(mode="json")}
        except Exception as exc:
            result = {"error": f"{type(exc).__name__}: {exc}"}
        out = barrier / f"result-{name}-{index}"
        out.with_suffix(".tmp").write_text(json.dumps(result))
        out.with_suffix(".tmp").rename(out)
"""


def retry_rounds(profile_id: str) -> list[dict[str, str | None]]:
    """Round specs: the pointer cycles P → base → P → base with all three kinds of change."""
    cycle: list[tuple[str, str | None]] = [
        ("activate", profile_id),
        ("deactivate", None),
        ("rollback", profile_id),
        ("rollback", None),
    ]
    return [
        {"action": action, "profile_id": pid, "change_id": str(uuid.uuid4())}
        for action, pid in (cycle[i % len(cycle)] for i in range(RETRY_ROUNDS))
    ]


def stored_transition(memory: MemoryClient, change_id: str) -> dict[str, Any]:
    """The pointer's newest transition, which must be the one ``change_id`` wrote."""
    latest = memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES, limit=1)
    assert latest and str(latest[0].change_id) == change_id, (change_id, latest)
    return latest[0].model_dump(mode="json")


def postgres_pack_url(pack: Path) -> str:
    """The URL of the PostgreSQL schema standing in for ``pack`` in this session."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(session_postgres_url(), options=f"-csearch_path={postgres_schema(pack)}")


def test_identical_change_id_requests_from_several_processes_return_the_stored_transition(
    memory: MemoryClient, gold: Golden, pack: Path, backend: str, tmp_path: Path
) -> None:
    (profile,) = base_evaluated(memory, gold, 1)
    url = postgres_pack_url(pack) if backend == "postgres" else ""
    rounds = retry_rounds(str(profile.profile_id))
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    names = [f"p{i}" for i in range(RETRY_COPIES)]
    racers = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-c",
                RETRY_RACER,
                str(pack),
                url,
                str(barrier),
                name,
                str(len(rounds)),
            ],
            stderr=subprocess.PIPE,
        )
        for name in names
    }
    wrong: list[tuple[int, str, object]] = []
    try:
        wait_for([barrier / f"ready-{name}" for name in names])
        for index, spec in enumerate(rounds):
            go = barrier / f"go-{index}"
            go.with_suffix(".tmp").write_text(json.dumps(spec))
            go.with_suffix(".tmp").rename(go)
            outputs = [barrier / f"result-{name}-{index}" for name in names]
            wait_for(outputs)
            stored = stored_transition(memory, str(spec["change_id"]))
            for name, path in zip(names, outputs, strict=True):
                result = json.loads(path.read_text())
                if result.get("state") != stored:
                    wrong.append((index, name, result))
        for name, racer in racers.items():
            _, err = racer.communicate(timeout=60)
            assert racer.returncode == 0, f"{name}: {err.decode()}"
    finally:
        for racer in racers.values():
            if racer.poll() is None:
                racer.kill()
                racer.wait()
    assert not wrong, f"{len(wrong)} wrong answers in {len(rounds)} rounds: {wrong[:3]}"
    history = memory.list_ranking_profile_history(user_id=OWNER, scopes=SCOPES, limit=1000)
    assert [str(s.change_id) for s in history] == [str(r["change_id"]) for r in reversed(rounds)]


def _loopback_server(pack: Path, url: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m prme.http.server`` over the pack on a free loopback port, once healthy."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    where = ["--postgres", url] if url else ["--path", str(pack)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    env.update(PRME_EMBEDDING__PROVIDER="hash", PRME_SCORING__FUSION="weighted")
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "prme.http.server", *where, "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert process.poll() is None, log.read_text()
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base}/v1/health", timeout=1.0).status_code == 200:
                return process, base
        assert time.monotonic() < deadline, "server did not start: " + log.read_text()
        time.sleep(0.1)


def _http_change(http: httpx.Client, spec: dict[str, str | None]) -> object:
    body: dict[str, Any] = {"user_id": OWNER, "change_id": spec["change_id"]}
    if spec["action"] == "activate":
        response = http.post(f"/v1/learning/profiles/{spec['profile_id']}/activate", json=body)
    elif spec["action"] == "deactivate":
        response = http.post(
            "/v1/learning/profiles/deactivate", json={**body, "scopes": ["project"]}
        )
    else:
        body.update(scopes=["project"], profile_id=spec["profile_id"])
        response = http.post("/v1/learning/profiles/rollback", json=body)
    return response.json() if response.status_code == 200 else (response.status_code, response.text)


def test_identical_change_id_requests_through_one_http_server_return_the_stored_transition(
    memory: MemoryClient, gold: Golden, pack: Path, backend: str, tmp_path: Path
) -> None:
    (profile,) = base_evaluated(memory, gold, 1)
    url = postgres_pack_url(pack) if backend == "postgres" else ""
    rounds = retry_rounds(str(profile.profile_id))
    process, base = _loopback_server(pack, url, tmp_path / "server.log")
    clients = [httpx.Client(base_url=base, timeout=30.0) for _ in range(RETRY_COPIES)]
    wrong: list[tuple[int, object]] = []
    try:
        with ThreadPoolExecutor(RETRY_COPIES) as pool:
            for index, spec in enumerate(rounds):
                start = threading.Barrier(RETRY_COPIES)

                def send(
                    http: httpx.Client,
                    spec: dict[str, str | None] = spec,
                    start: threading.Barrier = start,
                ) -> object:
                    start.wait()
                    return _http_change(http, spec)

                answers = list(pool.map(send, clients))
                stored = stored_transition(memory, str(spec["change_id"]))
                wrong += [(index, answer) for answer in answers if answer != stored]
    finally:
        for http in clients:
            http.close()
        process.terminate()
        process.wait(timeout=15)
    assert not wrong, f"{len(wrong)} wrong answers in {len(rounds)} rounds: {wrong[:3]}"
