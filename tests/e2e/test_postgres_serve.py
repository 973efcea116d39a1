"""Two API servers on one PostgreSQL: shared writes, and one winner per compare-and-swap.

``python -m prme.http.server --postgres URL`` runs twice (stateless processes in front of one
pack); the pack's schema travels in the URL (``options=-csearch_path=...``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from conftest import FakeClock
from psycopg.conninfo import make_conninfo
from support.golden import (
    HOLDOUT_TIME,
    OWNER,
    SCOPES,
    holdout_queries,
    judge_learning_queries,
)
from support.server import free_port, server_env

from prme import MemoryClient, PRMEConfig
from prme.demo.workload import generate_workload
from prme.models.holdout import FullRetrievalEvaluationConfig
from prme.storage.postgres import drop_schema

KEY = "alice-postgres-key-0123456789"
ALICE = {"Authorization": f"Bearer {KEY}"}
CONTENDERS = 6
STARTUP_SECONDS = 30.0
QUICK = FullRetrievalEvaluationConfig(bootstrap_samples=500)
ENV = {"PRME_EMBEDDING__PROVIDER": "hash", "PRME_SCORING__FUSION": "weighted"}


@pytest.fixture(scope="module")
def pack_url(postgres_url: str) -> Iterator[str]:
    schema = f"t_serve_{time.monotonic_ns() % 10**12}"
    yield make_conninfo(postgres_url, options=f"-csearch_path={schema}")
    drop_schema(postgres_url, schema)


@pytest.fixture(scope="module")
def evidence(pack_url: str) -> list[str]:
    """Judged retrievals, a passing gate 1 and gate 2 on this pack, and N profiles from them
    that may each activate only over base scoring (same config as the servers')."""
    env = pytest.MonkeyPatch()
    for key, value in ENV.items():
        env.setenv(key, value)
    try:
        with MemoryClient(config=PRMEConfig(), clock=FakeClock(), postgres_url=pack_url) as memory:
            workload = generate_workload(0)
            stored = memory.store_many(workload.store_items(), user_id=OWNER)
            ids = {m.key: n for m, n in zip(workload.memories, stored, strict=True)}
            judge_learning_queries(memory, workload)
            proposal = memory.evaluate_learning(user_id=OWNER, scopes=SCOPES)
            holdout = memory.run_full_retrieval_holdout(
                holdout_queries(workload, ids),
                user_id=OWNER,
                scopes=SCOPES,
                proposal=proposal,
                reference_time=HOLDOUT_TIME,
                memory_artifact_sha256=memory.pack_digest(),
                config=QUICK,
            )
            assert holdout.decision == "improved_full_retrieval", holdout.decision
            return [
                str(memory.create_ranking_profile(proposal, holdout, user_id=OWNER).profile_id)
                for _ in range(CONTENDERS)
            ]
    finally:
        env.undo()


@pytest.fixture(scope="module")
def servers(
    pack_url: str, evidence: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    root = tmp_path_factory.mktemp("pg-servers")
    started: list[tuple[subprocess.Popen[bytes], Path]] = []
    urls = []
    for name in ("a", "b"):
        port, log = free_port(), root / f"{name}.log"
        command = [sys.executable, "-m", "prme.http.server", "--postgres", pack_url]
        command += ["--port", str(port), "--log-level", "warning"]
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                env=server_env(PRME_API__USER_KEYS=json.dumps({OWNER: KEY})),  # + ENV
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        started.append((process, log))
        urls.append(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        for url, (process, log) in zip(urls, started, strict=True):
            while True:
                assert process.poll() is None, log.read_text()
                try:
                    if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "server did not start: " + log.read_text()
                time.sleep(0.1)
        yield urls
    finally:
        for process, _ in started:
            process.terminate()
            process.wait(timeout=15)


@pytest.fixture
def clients(servers: list[str]) -> Iterator[list[httpx.Client]]:
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(httpx.Client(base_url=url, headers=ALICE, timeout=60.0))
            for url in servers
        ]


def test_writes_on_one_server_are_read_on_the_other(clients: list[httpx.Client]) -> None:
    a, b = clients
    stored = a.post("/v1/store", json={"content": "Zephyr moved to Reykjavik", "scope": "project"})
    assert stored.status_code == 200, stored.text
    found = b.post("/v1/retrieve", json={"query": "Zephyr Reykjavik", "scope": "project"})
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["results"][0]["node"]["id"] == stored.json()["node_id"]
    receipt = a.get(f"/v1/retrievals/{body['metadata']['request_id']}")
    assert receipt.status_code == 200
    assert receipt.json()["candidates"][0]["node_id"] == stored.json()["node_id"]
    assert receipt.json()["execution"]["features"]["storage"] == "postgres"


def test_concurrent_activations_across_servers_have_one_winner(
    clients: list[httpx.Client], evidence: list[str]
) -> None:
    def activate(index: int) -> httpx.Response:
        client = clients[index % len(clients)]
        return client.post(f"/v1/learning/profiles/{evidence[index]}/activate", json={})

    with ThreadPoolExecutor(max_workers=CONTENDERS) as pool:
        responses = list(pool.map(activate, range(CONTENDERS)))
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [409] * (CONTENDERS - 1), [r.text for r in responses]
    (won,) = [r.json() for r in responses if r.status_code == 200]
    for client in clients:
        active = client.get("/v1/learning/profiles/active", params={"scopes": "project"})
        assert active.json()["profile_id"] == won["active_profile_id"]
        history = client.get("/v1/learning/profiles/history", params={"scopes": "project"})
        assert [s["action"] for s in history.json()] == ["activate"]
        applied = client.post("/v1/retrieve", json={"query": "Aster database", "scope": "project"})
        assert applied.json()["metadata"]["ranking_profile_status"] == "applied"
