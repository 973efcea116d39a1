"""A real server: ``python -m prme.http.server`` in a subprocess, spoken to over loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from prme import InvalidInputError, MemoryClient, PRMEConfig, ScoringWeights
from prme.config import APIConfig, EmbeddingConfig
from prme.http.server import check_bind, is_loopback, serve

ALICE_KEY = "alice-server-key-0123456789"
BOB_KEY = "bob-server-key-9876543210"
ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
BOB = {"Authorization": f"Bearer {BOB_KEY}"}
STARTUP_SECONDS = 30.0
BODY_LIMIT = 64 * 1024  # small enough that a refused body still fits the socket buffers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    env.update(PRME_EMBEDDING__PROVIDER="hash", PRME_SCORING__FUSION="weighted", **extra)
    return env


def server_command(path: Path, host: str, port: int) -> list[str]:
    module = [sys.executable, "-m", "prme.http.server"]
    return [*module, "--path", str(path), "--host", host, "--port", str(port)]


@dataclass
class Server:
    url: str
    path: Path
    log: Path
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("server")
    path, log = root / "pack", root / "server.log"
    port = free_port()
    keys = json.dumps({"alice": ALICE_KEY, "bob": BOB_KEY})
    with log.open("wb") as out:
        process = subprocess.Popen(
            server_command(path, "127.0.0.1", port),
            env=server_env(PRME_API__USER_KEYS=keys, PRME_API__MAX_BODY_BYTES=str(BODY_LIMIT)),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start: " + log.read_text()
            time.sleep(0.1)
        yield Server(url, path, log, process)
    finally:
        process.terminate()
        process.wait(timeout=15)


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def test_store_retrieve_and_read_the_receipt_over_loopback(http: httpx.Client) -> None:
    health = http.get("/v1/health")
    assert health.json()["status"] == "ok"
    assert health.json()["fusion"] == "weighted"  # the server read PRME_* from its environment

    stored = http.post(
        "/v1/store",
        json={"content": "Aster keeps its records in PostgreSQL 16.", "scope": "project"},
        headers=ALICE,
    )
    assert stored.status_code == 200
    node_id = stored.json()["node_id"]
    found = http.post(
        "/v1/retrieve",
        json={"query": "Aster records PostgreSQL", "scope": "project"},
        headers=ALICE,
    )
    assert found.status_code == 200
    body = found.json()
    assert [r["node"]["id"] for r in body["results"]] == [node_id]
    assert body["metadata"]["receipt_persisted"] is True

    request_id = body["metadata"]["request_id"]
    receipt = http.get(f"/v1/retrievals/{request_id}", headers=ALICE)
    assert receipt.status_code == 200
    assert [c["node_id"] for c in receipt.json()["candidates"]] == [node_id]
    assert http.get(f"/v1/retrievals/{request_id}", headers=BOB).status_code == 404


def test_credentials_bind_the_owner_over_loopback(http: httpx.Client) -> None:
    missing = http.post("/v1/retrieve", json={"query": "Aster"})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = http.post(
        "/v1/retrieve", json={"query": "Aster"}, headers={"Authorization": "Bearer x"}
    )
    assert wrong.status_code == 401
    other = http.post("/v1/retrieve", json={"query": "Aster", "user_id": "bob"}, headers=ALICE)
    assert other.status_code == 403
    assert other.json() == {"detail": "User does not match authenticated identity"}
    bobs = http.post("/v1/retrieve", json={"query": "Aster records PostgreSQL"}, headers=BOB)
    assert bobs.json()["results"] == []


def test_concurrent_requests_are_served_from_the_threadpool(http: httpx.Client) -> None:
    http.post("/v1/store", json={"content": "Basalt runs on Fly.io."}, headers=ALICE)

    def one(index: int) -> tuple[int, str]:
        response = http.post(
            "/v1/retrieve", json={"query": f"Basalt hosting {index}"}, headers=ALICE
        )
        return response.status_code, response.json()["metadata"]["request_id"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(one, range(16)))
    assert {status for status, _ in outcomes} == {200}
    assert len({request_id for _, request_id in outcomes}) == 16


def test_an_oversized_body_is_413_over_loopback(http: httpx.Client) -> None:
    big = http.post("/v1/store", json={"content": "x" * BODY_LIMIT}, headers=ALICE)
    assert big.status_code == 413
    assert str(BODY_LIMIT) in big.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        yield b'{"content": "'
        for _ in range(BODY_LIMIT // 4096 + 1):
            yield b"x" * 4096
        yield b'"}'

    headers = {**ALICE, "content-type": "application/json"}
    streamed = http.post("/v1/store", content=chunks(), headers=headers)
    assert streamed.status_code == 413
    fits = http.post("/v1/store", json={"content": "x" * (BODY_LIMIT // 2)}, headers=ALICE)
    assert fits.status_code == 200


def test_the_log_never_shows_a_key(server: Server, http: httpx.Client) -> None:
    http.get("/v1/relevance", headers=ALICE)
    http.get("/v1/relevance", headers={"Authorization": f"Bearer {ALICE_KEY}-wrong"})
    time.sleep(0.2)  # let the access log reach the file
    text = server.log.read_text()
    assert "GET /v1/relevance" in text
    assert ALICE_KEY not in text
    assert BOB_KEY not in text


def test_the_pack_written_over_http_opens_in_python(server: Server, http: httpx.Client) -> None:
    stored = http.post("/v1/store", json={"content": "Cobalt uses Rust."}, headers=BOB)
    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
    with MemoryClient(server.path, config=config) as memory:
        node = memory.get(stored.json()["node_id"], user_id="bob")
    assert node is not None
    assert node.content == "Cobalt uses Rust."


# ------------------------------------------------------------------------ loopback-only binding
@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_without_keys_only_loopback_is_allowed(tmp_path: Path) -> None:
    open_config = PRMEConfig(embedding=EmbeddingConfig(provider="hash"))
    with pytest.raises(InvalidInputError) as caught:
        serve(tmp_path / "pack", host="0.0.0.0", port=free_port(), config=open_config)
    assert caught.value.field == "host"
    assert "PRME_API__USER_KEYS" in str(caught.value)
    assert not (tmp_path / "pack").exists()  # refused before opening anything
    check_bind("127.0.0.1", open_config)
    keyed = open_config.model_copy(
        update={"api": APIConfig(user_keys={"alice": SecretStr(ALICE_KEY)})}
    )
    check_bind("0.0.0.0", keyed)


def test_the_command_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    result = subprocess.run(
        server_command(tmp_path / "pack", "0.0.0.0", free_port()),
        env=server_env(),
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert b"refusing to listen on '0.0.0.0' without user keys" in result.stderr
