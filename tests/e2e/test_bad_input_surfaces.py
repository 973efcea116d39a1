"""Bad input and temporary storage failures over a real HTTP server and a real MCP session.

Extreme datetimes and bad identifiers are 422 naming the field (a clear tool error over MCP),
never a 500 or a reset connection; a write lock held past the busy timeout and a full disk are
503 with ``Retry-After`` (a tool error saying the storage is unavailable over MCP).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from support.mcp_helpers import SOURCE_ENV, call, open_pack, refused
from support.server import free_port, running_server, server_env

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig
from prme.storage.sqlite import DB_FILE

EXTREMES = ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+01:00")
STORE_TIMES = ("event_time", "valid_from", "valid_to")
RETRIEVE_TIMES = (
    "reference_time",
    "time_from",
    "time_to",
    "knowledge_at",
    "event_time_from",
    "event_time_to",
)
OUT_OF_RANGE = "within years 1 to 9999"
SERVER_ENV = {"PRME_SCORING__FUSION": "weighted", "PRME_EMBEDDING__PROVIDER": "hash", **SOURCE_ENV}
BIG = "x" * 20000  # a few of these fill the 1 MiB disk
CONFIG = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))


@contextmanager
def write_lock(pack: Path) -> Iterator[None]:
    """Hold the pack's write lock (``BEGIN IMMEDIATE``) from another connection."""
    db = sqlite3.connect(pack / DB_FILE, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()


def small_disk(mount: Path, *command: str) -> list[str]:
    """``command`` in a private user and mount namespace with a 1 MiB tmpfs at ``mount``."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare(1) for a private tmpfs")
    namespaces = [unshare, "--user", "--map-root-user", "--mount"]
    if subprocess.run([*namespaces, "true"], check=False).returncode != 0:
        pytest.skip("user and mount namespaces are not available here")
    mount.mkdir()
    quoted = " ".join(f"'{part}'" for part in command)
    return [*namespaces, "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {mount} && exec {quoted}"]


# ------------------------------------------------------------------------------------ HTTP
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("bad-input")
    with running_server(root, PRME_STORAGE__BUSY_TIMEOUT_MS="100") as running:
        yield running


@pytest.fixture
def http(server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60.0) as client:
        yield client


def test_extreme_datetimes_are_422_naming_the_field_over_http(http: httpx.Client) -> None:
    for value in EXTREMES:
        for field in STORE_TIMES + RETRIEVE_TIMES:
            if field in STORE_TIMES:
                body = {"content": "Aster uses PostgreSQL.", "user_id": "dates", field: value}
                response = http.post("/v1/store", json=body)
            else:
                body = {"query": "Aster", "user_id": "dates", field: value}
                response = http.post("/v1/retrieve", json=body)
            assert response.status_code == 422, (field, value, response.text)
            detail = response.json()["detail"]
            assert detail.startswith(f"{field}: ") and OUT_OF_RANGE in detail, detail
    # the same connection still works, and nothing was stored or receipted
    found = http.post("/v1/retrieve", json={"query": "Aster PostgreSQL", "user_id": "dates"})
    assert found.status_code == 200 and found.json()["results"] == []
    assert http.get("/v1/health").status_code == 200


def test_bad_owner_and_group_names_are_422_over_http(http: httpx.Client, server: Any) -> None:
    stored = http.post("/v1/store", json={"content": "Aster uses PostgreSQL.", "user_id": "g"})
    node = stored.json()["node_id"]
    first, second = (
        http.post("/v1/retrieve", json={"query": "Aster", "user_id": "g"}).json()["metadata"][
            "request_id"
        ]
        for _ in range(2)
    )
    for owner in ("alice\x00", "al\x1bice", "alice\ud800"):
        raw = json.dumps({"content": "x", "user_id": owner})  # \u escapes, as a client sends
        response = http.post("/v1/store", content=raw, headers={"Content-Type": "application/json"})
        assert response.status_code == 422, (owner, response.text)
        assert "user_id" in response.text
        raw = json.dumps({"query": "x", "user_id": owner})
        response = http.post(
            "/v1/retrieve", content=raw, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422 and "user_id" in response.text, response.text
    for group in ("group\x00", "group\ud800"):
        raw = json.dumps({"user_id": "g", "query_groups": {first: group}})
        response = http.post(
            "/v1/learning/evaluate", content=raw, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422 and "query_groups" in response.text, response.text
        trial = {
            "group_id": group,
            "baseline_request_id": first,
            "candidate_request_id": second,
            "relevant_node_ids": [node],
        }
        raw = json.dumps(
            {
                "user_id": "g",
                "proposal_input_checksum": "0" * 64,
                "memory_artifact_sha256": "0" * 64,
                "candidate_multipliers": {},
                "trials": [trial],
            }
        )
        response = http.post(
            "/v1/learning/evaluate-full-retrieval",
            content=raw,
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 422 and "group_id" in response.text, response.text
    with open_pack(server.path) as memory:
        assert [str(m.id) for m in memory.list(user_id="g")] == [node]
        assert memory.engine.store.find_ops("learning_evaluation", "g") == []


def test_a_held_write_lock_is_503_with_retry_after_over_http(
    http: httpx.Client, server: Any
) -> None:
    body = {"content": "Locked out for a moment.", "user_id": "locks"}
    with write_lock(server.path):
        started = time.monotonic()
        response = http.post("/v1/store", json=body)
        waited = time.monotonic() - started
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "1"
    assert "storage unavailable" in response.json()["detail"]
    assert waited < 8  # the configured busy timeout (the 2 s retry floor), not 10 s
    assert http.post("/v1/store", json=body).status_code == 200  # temporary indeed
    found = http.post("/v1/retrieve", json={"query": "Locked out", "user_id": "locks"})
    assert len(found.json()["results"]) == 1  # the refused store wrote nothing


@contextmanager
def started(command: list[str], port: int, log: Path) -> Iterator[str]:
    """Run an HTTP server ``command`` listening on ``port``; yields its URL once healthy."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=server_env(), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=15)


def test_a_lock_timeout_on_postgresql_is_503_with_retry_after_over_http(
    postgres_url: str, tmp_path: Path
) -> None:
    from psycopg.conninfo import make_conninfo

    from prme.storage.postgres import drop_schema

    schema = f"t_lock_{time.monotonic_ns() % 10**12}"
    pack_url = make_conninfo(postgres_url, options=f"-csearch_path={schema}")
    impatient = make_conninfo(postgres_url, options=f"-csearch_path={schema} -c lock_timeout=300")
    port = free_port()
    command = [sys.executable, "-m", "prme.http.server", "--postgres", impatient]
    try:
        with (
            MemoryClient(config=CONFIG, postgres_url=pack_url) as holder,
            started([*command, "--port", str(port)], port, tmp_path / "server.log") as url,
            httpx.Client(base_url=url, timeout=60.0) as http,
        ):
            body = {"content": "Locked out for a moment.", "user_id": "locks"}
            with holder.engine.store.serialized("memories"):  # a concurrent content write
                response = http.post("/v1/store", json=body)
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"] == "1"
            assert "lock timeout" in response.json()["detail"]
            assert http.post("/v1/store", json=body).status_code == 200
            assert len(holder.list(user_id="locks")) == 1  # the refused store wrote nothing
    finally:
        drop_schema(postgres_url, schema)


def test_a_full_disk_is_503_with_retry_after_over_http(tmp_path: Path) -> None:
    port = free_port()
    mount = tmp_path / "disk"
    command = small_disk(
        mount,
        sys.executable,
        *("-m", "prme.http.server", "--create", "--path", str(mount / "pack")),
        *("--port", str(port)),
    )
    with started(command, port, tmp_path / "server.log") as url:
        statuses = []
        with httpx.Client(base_url=url, timeout=60.0) as http:
            for index in range(200):
                body = {"content": f"memory {index} {BIG}", "user_id": "disk"}
                response = http.post("/v1/store", json=body)
                statuses.append(response.status_code)
                if response.status_code != 200:
                    break
            assert statuses[:-1] and set(statuses[:-1]) == {200}, statuses
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"] == "30"
            assert "disk is full" in response.json()["detail"]
            found = http.post("/v1/retrieve", json={"query": "memory", "user_id": "disk"})
            assert found.status_code == 200
            assert len(found.json()["results"]) == len(statuses) - 1  # nothing half-written


# ------------------------------------------------------------------------------------- MCP
@asynccontextmanager
async def session(command: list[str], errlog: Path, **env: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command[0], args=command[1:], env={**SERVER_ENV, **env})
    with errlog.open("a") as stderr:
        async with (
            stdio_client(params, errlog=stderr) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            yield s


def test_bad_input_and_a_held_lock_are_clear_tool_errors_over_mcp(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    with open_pack(pack) as memory:
        memory.store("Aster uses PostgreSQL.", user_id="alice")
    command = [sys.executable, "-m", "prme.mcp", "--path", str(pack), "--multi-owner"]

    async def body() -> dict[str, str]:
        out: dict[str, str] = {}
        async with session(command, tmp_path / "err.log", PRME_STORAGE__BUSY_TIMEOUT_MS="100") as s:
            for value in EXTREMES:
                for field in STORE_TIMES:
                    out[f"{field}{value}"] = await refused(
                        s, "memory_store", content="x", user_id="alice", **{field: value}
                    )
                for field in RETRIEVE_TIMES:
                    out[f"{field}{value}"] = await refused(
                        s, "memory_retrieve", query="Aster", user_id="alice", **{field: value}
                    )
            out["nul_owner"] = await refused(s, "memory_store", content="x", user_id="alice\x00")
            out["escape_owner"] = await refused(s, "memory_retrieve", query="x", user_id="a\x1b")
            with write_lock(pack):
                out["locked"] = await refused(
                    s, "memory_store", content="Locked out.", user_id="alice"
                )
            await call(s, "memory_store", content="After the lock.", user_id="alice")
        return out

    out = anyio.run(body)
    for value in EXTREMES:
        for field in STORE_TIMES + RETRIEVE_TIMES:
            text = out[f"{field}{value}"]
            assert f"{field}: {field} must lie {OUT_OF_RANGE}" in text, text
    assert "user_id: must not contain control characters" in out["nul_owner"]
    assert "user_id: must not contain control characters" in out["escape_owner"]
    assert "storage unavailable:" in out["locked"] and "stayed locked" in out["locked"]
    with open_pack(pack) as memory:
        contents = [m.content for m in memory.list(user_id="alice")]
        assert sorted(contents) == ["After the lock.", "Aster uses PostgreSQL."]


def test_a_full_disk_is_a_clear_tool_error_over_mcp(tmp_path: Path) -> None:
    mount = tmp_path / "disk"
    command = small_disk(
        mount, sys.executable, "-m", "prme.mcp", "--create", "--path", str(mount / "pack"),
        *("--user-id", "a"),
    )

    async def body() -> tuple[int, str, int]:
        async with session(command, tmp_path / "err.log") as s:
            for index in range(200):
                result = await s.call_tool("memory_store", {"content": f"m{index} {BIG}"})
                if result.is_error:
                    text: str = result.content[0].text  # type: ignore[union-attr]
                    found = await call(s, "memory_retrieve", query="m", limit=100)
                    return index, text, len(found["results"])
        raise AssertionError("the disk never filled")

    stored, text, listed = anyio.run(body)
    assert stored > 0 and listed == stored
    assert "storage unavailable:" in text and "disk is full" in text, text
