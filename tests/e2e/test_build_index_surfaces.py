"""``build_index`` over HTTP (``POST /v1/index``) and MCP (``memory_build_index``): the owner comes
from the credential, the report is the Python client's, and the graphs are built before any
retrieval asks for them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
from support.mcp_helpers import call, mcp_session
from support.server import ALICE, ALICE_KEY, BOB, BOB_KEY, running_server

from prme import MemoryClient, PRMEConfig
from prme.config import EmbeddingConfig, RetrievalConfig

HNSW = {"PRME_RETRIEVAL__VECTOR_INDEX": "hnsw", "PRME_RETRIEVAL__VECTOR_INDEX_MIN_ROWS": "64"}
WORDS = ["aster", "basalt", "cobalt", "fjord", "garnet", "harbor", "iris", "postgres", "redis", "latency", "budget"]


# the servers' settings (HNSW above), as the in-process clients give them
CONFIG = PRMEConfig(
    embedding=EmbeddingConfig(provider="hash"),
    retrieval=RetrievalConfig(vector_index="hnsw", vector_index_min_rows=64),
)


def _fill(pack: Path) -> None:
    texts = [" ".join(WORDS[(i * 7 + j * 3) % 11] for j in range(5)) + f" {i}" for i in range(300)]
    with MemoryClient(pack, config=CONFIG) as memory:
        memory.store_many(texts, user_id="alice")
        memory.store_many(texts[:20], user_id="bob")


def _graphs(pack: Path) -> list[str]:
    return sorted(p.name for p in pack.rglob("*.usearch"))


def _without_time(report: dict[str, Any]) -> dict[str, Any]:
    assert report["elapsed_ms"] >= 0
    return {k: v for k, v in report.items() if k != "elapsed_ms"}


def test_build_index_over_http_binds_the_owner_and_builds_the_graphs(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    _fill(pack)
    assert _graphs(pack) == []
    keys = json.dumps({"alice": ALICE_KEY, "bob": BOB_KEY})
    with (
        running_server(tmp_path, PRME_API__USER_KEYS=keys, **HNSW) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        alice = http.post("/v1/index", json={}, headers=ALICE)
        assert alice.status_code == 200, alice.text
        built = _graphs(pack)
        bob = http.post("/v1/index", json={}, headers=BOB)
        # another owner's name under bob's key, an unknown field, no credential: refused
        foreign = http.post("/v1/index", json={"user_id": "alice"}, headers=BOB)
        unknown = http.post("/v1/index", json={"owner": "alice"}, headers=ALICE)
        anonymous = http.post("/v1/index", json={})
    report = _without_time(alice.json())
    assert report["user_id"] == "alice" and report["rows"] == 300
    assert report["vector_search"] == "hnsw" and report["hnsw_segments"] >= 1
    assert 0 < report["exact_rows"] < 300
    assert built  # saved before the response, not by a later retrieval
    assert _without_time(bob.json()) == {
        "user_id": "bob",
        "rows": 20,
        "vector_search": "exact",
        "hnsw_segments": 0,
        "exact_rows": 20,
    }
    assert foreign.status_code == 403
    assert unknown.status_code == 422 and "owner" in unknown.text
    assert anonymous.status_code == 401
    # the Python client reports the same, and finds nothing left to build
    with MemoryClient(pack, config=CONFIG) as memory:
        assert _without_time(memory.build_index(user_id="alice").model_dump()) == report
    assert _graphs(pack) == built


def test_build_index_over_mcp_reports_for_the_bound_owner(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    _fill(pack)

    async def body() -> list[dict[str, Any]]:
        async with mcp_session(
            pack, "--user-id", "bob", errlog=tmp_path / "err.log", env=HNSW
        ) as session:
            first = await call(session, "memory_build_index")
            again = await call(session, "memory_build_index")
            return [first, again]

    first, again = anyio.run(body)
    assert _without_time(first) == _without_time(again) == {
        "user_id": "bob",
        "rows": 20,
        "vector_search": "exact",
        "hnsw_segments": 0,
        "exact_rows": 20,
    }

    async def alice() -> dict[str, Any]:
        async with mcp_session(
            pack, "--user-id", "alice", errlog=tmp_path / "err.log", env=HNSW
        ) as session:
            report: dict[str, Any] = await call(session, "memory_build_index")
            return report

    report = _without_time(anyio.run(alice))
    assert (report["user_id"], report["rows"], report["vector_search"]) == ("alice", 300, "hnsw")
    assert _graphs(pack)
