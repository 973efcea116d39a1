"""The MCP server over streamable HTTP: a real subprocess on a loopback port, per-user bearer keys."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from pydantic import SecretStr
from support.mcp_helpers import (
    MISMATCH,
    call,
    gates_and_profile,
    judge,
    open_pack,
    refused,
)

from prme import InvalidInputError, RetrievalReceipt
from prme.config import MCPConfig
from prme.demo.workload import Workload, generate_workload
from prme.mcp import build_server, main, serve

KEYS = {"alice": "alice-key-3f9c", "bob": "bob-key-81d2"}
SERVER_ENV = {
    "PRME_SCORING__FUSION": "weighted",
    "PRME_EMBEDDING__PROVIDER": "hash",
    "PRME_MCP__USER_KEYS": json.dumps(KEYS),
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


@dataclass
class Server:
    url: str
    pack: Path
    workload: Workload
    node_of: dict[str, str]
    log: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``python -m prme.mcp --transport http --port 0`` on a pack where bob judged a workload."""
    pack = tmp_path_factory.mktemp("http") / "pack"
    workload = generate_workload(seed=3, projects=40)  # its holdout passes
    with open_pack(pack) as memory:
        node_of = judge(memory, workload, "bob")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")} | SERVER_ENV
    args = ["--path", str(pack), "--transport", "http", "--host", "127.0.0.1", "--port", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "prme.mcp", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    banner = proc.stderr.readline()
    assert "listening on http://127.0.0.1:" in banner, banner
    running = Server(banner.split("listening on ", 1)[1].strip(), pack, workload, node_of)
    drain = threading.Thread(target=lambda: running.log.extend(proc.stderr or ()), daemon=True)
    drain.start()
    try:
        yield running
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        drain.join(timeout=5)
        proc.stderr.close()


@asynccontextmanager
async def mcp_session(url: str, key: str) -> AsyncIterator[ClientSession]:
    """An initialized SDK session over streamable HTTP, authenticated with ``key``."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


# ------------------------------------------------------------------ credentials
def test_missing_or_wrong_key_is_401(server: Server) -> None:
    async def body() -> list[httpx2.Response]:
        headers = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(timeout=10) as http:
            return [
                await http.post(server.url, json=INITIALIZE, headers=headers | extra)
                for extra in (
                    {},
                    {"Authorization": "Bearer wrong-key"},
                    {"Authorization": f"Bearer {KEYS['alice']}x"},
                    {"Authorization": f"Basic {KEYS['alice']}"},
                )
            ]

    for response in anyio.run(body):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert KEYS["alice"] not in response.text


def test_tools_are_listed_over_http(server: Server) -> None:
    async def body() -> dict[str, Any]:
        async with mcp_session(server.url, KEYS["alice"]) as session:
            return {t.name: t for t in (await session.list_tools()).tools}

    tools = anyio.run(body)
    schemas = {name: tool.input_schema for name, tool in tools.items()}
    assert len(schemas) == 21
    assert schemas["memory_retrieve"]["required"] == ["query"]
    assert schemas["memory_record_relevance"]["required"] == ["request_id", "labels"]
    assert "required" not in schemas["memory_create_ranking_profile"]  # checksums or reports
    assert all(s["additionalProperties"] is False for s in schemas.values())
    # the key binds the owner: no tool offers a user_id, every tool declares its output
    assert not [name for name, s in schemas.items() if "user_id" in s["properties"]]
    assert all(t.output_schema and t.output_schema["type"] == "object" for t in tools.values())


def test_without_keys_http_listens_on_loopback_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PRME_MCP__USER_KEYS", raising=False)
    pack = tmp_path / "pack"
    listen = ["--transport", "http", "--host", "0.0.0.0", "--port", "0", "--multi-owner"]
    with pytest.raises(SystemExit) as exit_info:
        main(["--path", str(pack), *listen])
    assert exit_info.value.code == 2
    assert "only listens on loopback" in capsys.readouterr().err
    assert not pack.exists()  # refused before anything was opened
    with open_pack(pack) as memory, pytest.raises(PermissionError, match="loopback"):
        serve(memory, MCPConfig(multi_owner=True), transport="http", host="0.0.0.0", port=0)
    with open_pack(pack) as memory, pytest.raises(PermissionError, match="no owner is bound"):
        serve(memory, MCPConfig(), transport="http", host="127.0.0.1", port=0)


def test_empty_or_shared_keys_are_refused(tmp_path: Path) -> None:
    with open_pack(tmp_path / "pack") as memory:
        for keys, message in (
            ({"alice": SecretStr(" ")}, "empty"),
            ({"alice": SecretStr("k"), "bob": SecretStr("k")}, "distinct"),
        ):
            with pytest.raises(InvalidInputError, match=message):
                build_server(memory, MCPConfig(user_keys=keys), transport="http")
            build_server(memory, MCPConfig(user_keys=keys), transport="stdio")  # keys unused


# ------------------------------------------------- round trip and key binding
def test_key_binds_the_owner(server: Server) -> None:
    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with mcp_session(server.url, KEYS["alice"]) as s:
            stored = await call(s, "memory_store", content="Alice keeps bees in Lyon.")
            response = await call(s, "memory_retrieve", query="Where does Alice keep bees?")
            rid = response["request_id"]
            receipt = await call(s, "memory_get_retrieval_receipt", request_id=rid)
            record = await call(
                s, "memory_record_relevance", request_id=rid, labels={stored["node_id"]: True}
            )
            out |= {"stored": stored, "response": response, "receipt": receipt, "record": record}
            out["alice_listed"] = await call(s, "memory_list_relevance")
            out["as_bob"] = await refused(s, "memory_retrieve", query="bees", user_id="bob")
            out["store_as_bob"] = await refused(s, "memory_store", content="forged", user_id="bob")
            out["named_self"] = await call(s, "memory_list_relevance", user_id="alice")
        async with mcp_session(server.url, KEYS["bob"]) as s:
            out["bob_receipt"] = await call(s, "memory_get_retrieval_receipt", request_id=rid)
            out["bob_relevance"] = await refused(
                s, "memory_record_relevance", request_id=rid, labels={stored["node_id"]: True}
            )
            out["bob_get"] = await call(
                s, "memory_get_relevance", feedback_id=record["feedback_id"]
            )
            out["bob_as_alice"] = await refused(s, "memory_list_relevance", user_id="alice")
        return out

    out = anyio.run(body)
    response, record = out["response"], out["record"]
    assert response["results"][0]["id"] == out["stored"]["node_id"]
    receipt = RetrievalReceipt.model_validate(out["receipt"])
    assert receipt.user_id == "alice"
    assert record["receipt_checksum"] == receipt.checksum
    assert out["alice_listed"] == [record] == out["named_self"]
    assert MISMATCH in out["as_bob"]
    assert MISMATCH in out["store_as_bob"]
    assert MISMATCH in out["bob_as_alice"]
    assert out["bob_receipt"] is None  # alice's receipt does not exist for bob
    assert "receipt" in out["bob_relevance"]
    assert out["bob_get"] is None
    with open_pack(server.pack) as memory:
        assert [m.content for m in memory.list(user_id="alice")] == ["Alice keeps bees in Lyon."]
        assert "forged" not in {m.content for m in memory.list(user_id="bob", limit=1000)}


def test_invalid_input_is_a_tool_error(server: Server) -> None:
    async def body() -> dict[str, str]:
        async with mcp_session(server.url, KEYS["alice"]) as s:
            return {
                "naive": await refused(
                    s, "memory_retrieve", query="bees", reference_time="2026-09-14T10:00:00"
                ),
                "empty_scope": await refused(s, "memory_retrieve", query="bees", scope=[]),
                "empty_scopes": await refused(s, "memory_get_active_ranking_profile", scopes=[]),
                "unknown": await refused(s, "memory_list_relevance", limt=5),
                "activate": await refused(
                    s, "memory_activate_ranking_profile", profile_id=str(uuid.uuid4())
                ),
            }

    out = anyio.run(body)
    assert "reference_time must include a timezone" in out["naive"]
    assert "scope must not be empty" in out["empty_scope"]
    assert "scope must not be empty" in out["empty_scopes"]
    assert "limt" in out["unknown"]
    assert "Ranking profile not found" in out["activate"]
    assert not any("Traceback" in line for line in server.log)


# ------------------------------------------------------------- the seed workflow
def test_seed_workflow_over_http(server: Server) -> None:
    workload, node_of = server.workload, server.node_of
    scopes = [workload.scope.value]
    artifact = hashlib.sha256(f"workload-seed-{workload.seed}".encode()).hexdigest()
    query = workload.holdout[0].text

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with mcp_session(server.url, KEYS["bob"]) as s:
            pid = await gates_and_profile(s, workload, node_of, scopes, artifact, out)
            out["activated"] = await call(s, "memory_activate_ranking_profile", profile_id=pid)
            out["applied"] = await call(
                s, "memory_retrieve", query=query, scope=scopes, details=True
            )
            out["deactivated"] = await call(s, "memory_deactivate_ranking_profile", scopes=scopes)
            out["base"] = await call(s, "memory_retrieve", query=query, scope=scopes, details=True)
            out["rolled_back"] = await call(
                s, "memory_rollback_ranking_profile", profile_id=pid, scopes=scopes
            )
            out["to_base"] = await call(s, "memory_rollback_ranking_profile", scopes=scopes)
            out["history"] = await call(s, "memory_list_ranking_profile_history", scopes=scopes)
            out["status"] = await call(s, "memory_get_ranking_profile", profile_id=pid)
        async with mcp_session(server.url, KEYS["alice"]) as s:  # bob's profile is not alice's
            out["alice_get"] = await call(s, "memory_get_ranking_profile", profile_id=pid)
            out["alice_list"] = await call(s, "memory_list_ranking_profiles")
            out["alice_activate"] = await refused(
                s, "memory_activate_ranking_profile", profile_id=pid
            )
            out["alice_create"] = await refused(
                s, "memory_create_ranking_profile", proposal=out["proposal"], holdout=out["holdout"]
            )
            out["alice_create_tampered"] = await refused(
                s,
                "memory_create_ranking_profile",
                proposal={**out["proposal"], "decision": "no_improvement"},
                holdout=out["holdout"],
            )
            out["alice_create_by_checksum"] = await refused(
                s,
                "memory_create_ranking_profile",
                proposal_input_checksum=out["proposal"]["input_checksum"],
                holdout_input_checksum=out["holdout"]["input_checksum"],
            )
        return out

    out = anyio.run(body)
    proposal, holdout, profile = out["proposal"], out["holdout"], out["profile"]
    assert proposal["decision"] == "improved_on_observed_candidates"
    assert proposal["user_id"] == "bob"
    assert holdout["decision"] == "improved_full_retrieval"
    assert profile["multipliers"] == proposal["multipliers"] == holdout["candidate_multipliers"]
    pid = profile["profile_id"]
    assert out["activated"]["active_profile_id"] == pid
    applied = out["applied"]["details"]["metadata"]
    assert (applied["ranking_profile_status"], applied["ranking_profile_id"]) == ("applied", pid)
    assert out["deactivated"]["active_profile_id"] is None
    assert out["base"]["details"]["metadata"]["ranking_profile_status"] == "none"
    assert out["rolled_back"]["active_profile_id"] == pid
    assert out["to_base"]["active_profile_id"] is None
    assert [s["action"] for s in out["history"]] == [
        "rollback",
        "rollback",
        "deactivate",
        "activate",
    ]
    assert out["status"] == {
        "profile": profile,
        "active": False,
        "latest_change": out["history"][0],
    }
    assert out["alice_get"] is None
    assert out["alice_list"] == []
    assert "Ranking profile not found" in out["alice_activate"]
    assert "must belong to its owner" in out["alice_create"]
    assert "Proposal report not found" in out["alice_create_by_checksum"]
    # A report sent whole is verified before anything else is checked.
    assert out["alice_create_tampered"].endswith(
        ": proposal: Value error, Learning evaluation decision does not match its metrics"
    )
