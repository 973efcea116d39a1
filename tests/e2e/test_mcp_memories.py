"""memory_list / memory_get / memory_update / memory_delete and judgment warnings, through a
real MCP client session on ``python -m prme.mcp`` (stdio, owner bound by ``--user-id``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
from support.mcp_helpers import MISMATCH, call, mcp_session, refused


def test_manage_memories_through_tools(tmp_path: Path) -> None:
    pack, errlog = tmp_path / "pack", tmp_path / "err.log"

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with mcp_session(pack, "--user-id", "alice", errlog=errlog) as s:
            ids = sorted(
                [
                    (await call(s, "memory_store", content=text, scope=scope))["node_id"]
                    for text, scope in (
                        ("Aster deploys on Fridays.", "personal"),
                        ("Aster uses PostgreSQL.", "project"),
                        ("Aster has two regions.", "personal"),
                    )
                ]
            )
            out["ids"] = ids
            out["page"] = await call(s, "memory_list", limit=2)
            out["rest"] = await call(s, "memory_list", limit=2, cursor=out["page"]["next_cursor"])
            out["project"] = await call(s, "memory_list", scope=["project"])
            target = out["project"]["items"][0]["id"]
            out["get"] = await call(s, "memory_get", node_id=target)
            out["new"] = await call(
                s, "memory_update", node_id=target, content="Aster uses SQLite."
            )
            out["old"] = await call(s, "memory_get", node_id=target)
            out["twice"] = await refused(s, "memory_update", node_id=target, content="x")
            other = next(i for i in ids if i != target)
            out["bad_conf"] = await refused(s, "memory_update", node_id=other, confidence=2.0)
            out["unknown_arg"] = await refused(s, "memory_update", node_id=other, colour="red")
            out["as_bob"] = await refused(s, "memory_get", node_id=target, user_id="bob")
            missing = str(uuid.uuid4())
            out["missing"] = (missing, await refused(s, "memory_get", node_id=missing))
            out["bad_id"] = await refused(s, "memory_delete", node_id="nope")
            out["deleted"] = await call(s, "memory_delete", node_id=out["new"]["id"])
            out["gone"] = await refused(s, "memory_get", node_id=out["new"]["id"])
            out["delete_again"] = await refused(s, "memory_delete", node_id=out["new"]["id"])
            out["tools"] = {t.name: t for t in (await s.list_tools()).tools}
        return out

    out = anyio.run(body)
    ids = out["ids"]
    assert [m["id"] for m in out["page"]["items"]] == ids[:2]
    assert out["page"]["next_cursor"] == ids[1]
    assert [m["id"] for m in out["rest"]["items"]] == ids[2:]
    assert out["rest"]["next_cursor"] is None
    assert [m["content"] for m in out["project"]["items"]] == ["Aster uses PostgreSQL."]
    assert out["get"]["content"] == "Aster uses PostgreSQL."
    new, old = out["new"], out["old"]
    assert new["supersedes"] == old["id"] and new["scope"] == "project"
    assert old["superseded_by"] == new["id"] and old["lifecycle_state"] == "superseded"
    assert "superseded by" in out["twice"]
    assert "confidence:" in out["bad_conf"]
    assert "colour" in out["unknown_arg"]
    assert MISMATCH in out["as_bob"]
    missing, text = out["missing"]
    assert text.endswith(f"Memory not found: {missing}")
    assert "node_id" in out["bad_id"]
    assert out["deleted"] == {"deleted": True, "node_id": new["id"]}
    assert out["gone"].endswith(f"Memory not found: {new['id']}")
    assert out["delete_again"].endswith(f"Memory not found: {new['id']}")
    tools = out["tools"]
    assert tools["memory_list"].annotations.read_only_hint is True
    assert tools["memory_delete"].annotations.destructive_hint is True
    for name in ("memory_list", "memory_get", "memory_update", "memory_delete"):
        properties = tools[name].input_schema["properties"]
        assert all(p.get("description") for p in properties.values()), name


def test_judging_an_rrf_retrieval_warns_through_the_tool(tmp_path: Path) -> None:
    pack, errlog = tmp_path / "pack", tmp_path / "err.log"
    rrf = {"PRME_SCORING__FUSION": "rrf"}

    async def body() -> dict[str, Any]:
        async with mcp_session(pack, "--user-id", "alice", errlog=errlog, env=rrf) as s:
            a = (await call(s, "memory_store", content="Zephyr runs on ARM."))["node_id"]
            b = (await call(s, "memory_store", content="Zephyr ran on x86."))["node_id"]
            response = await call(s, "memory_retrieve", query="What does Zephyr run on?")
            request_id = response["request_id"]
            labels = {a: True, b: False}
            return dict(
                await call(s, "memory_record_relevance", request_id=request_id, labels=labels)
            )

    record = anyio.run(body)
    assert len(record["warnings"]) == 1
    assert "rank_fusion_receipt_records" in record["warnings"][0]
