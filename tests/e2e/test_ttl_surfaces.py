"""``ttl_days`` over a real HTTP server and a real MCP session: expired memories leave retrieval."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters, stdio_client
from support.mcp_helpers import SOURCE_ENV, call
from support.server import running_server

LATER = (datetime.now(UTC) + timedelta(days=3653)).isoformat()  # ten years on
SERVER_ENV = {"PRME_SCORING__FUSION": "weighted", "PRME_EMBEDDING__PROVIDER": "hash", **SOURCE_ENV}


def test_expired_memories_leave_retrieval_over_http(tmp_path: Path) -> None:
    with running_server(tmp_path) as server, httpx.Client(base_url=server.url) as http:
        ids = {}
        for name, ttl in (("kept", None), ("instant", 0), ("month", 30)):
            body: dict[str, Any] = {"content": f"Aster database note ({name})", "user_id": "a"}
            if ttl is not None:
                body["ttl_days"] = ttl
            ids[name] = http.post("/v1/store", json=body).json()["node_id"]
        now = http.post("/v1/retrieve", json={"query": "Aster database", "user_id": "a"})
        assert {r["node"]["id"] for r in now.json()["results"]} == {ids["kept"], ids["month"]}
        body = {"query": "Aster database", "user_id": "a", "reference_time": LATER}
        later = http.post("/v1/retrieve", json=body)
        assert [r["node"]["id"] for r in later.json()["results"]] == [ids["kept"]]


def test_expired_memories_leave_retrieval_over_mcp(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "prme.mcp", "--create", "--path", str(tmp_path / "pack"), "--user-id", "a"],
        env=SERVER_ENV,
    )

    async def body() -> tuple[str, list[str], list[str]]:
        with (tmp_path / "err.log").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                kept = await call(s, "memory_store", content="Aster database note (kept)")
                await call(s, "memory_store", content="Aster database note (week)", ttl_days=7)
                now = await call(s, "memory_retrieve", query="Aster database")
                later = await call(
                    s, "memory_retrieve", query="Aster database", reference_time=LATER
                )
                return (
                    kept["node_id"],
                    [r["id"] for r in now["results"]],
                    [r["id"] for r in later["results"]],
                )

    kept, now, later = anyio.run(body)
    assert len(now) == 2 and kept in now
    assert later == [kept]
