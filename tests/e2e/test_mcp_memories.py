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


# The same changes sent over MCP and as HTTP PATCH bodies: an omitted field is kept, an explicit
# null clears it (the store default), a value replaces it.
STORED = {
    "content": "Aster moved to PostgreSQL.",
    "scope": "project",
    "metadata": {"source": "standup"},
    "event_time": "2026-03-02T09:00:00Z",
    "valid_to": "2099-01-01T00:00:00Z",
    "confidence": 0.9,
}
CHANGES: list[dict[str, Any]] = [
    {"content": "Aster moved to PostgreSQL 16."},  # nothing else sent: everything kept
    {"event_time": None},  # cleared; metadata and valid_to kept
    {"metadata": None, "valid_to": None, "confidence": 0.5},
]
COMPARED = ("content", "scope", "metadata", "event_time", "valid_to", "confidence", "pinned")


def _versions_over_http(tmp_path: Path) -> list[dict[str, Any]]:
    from fastapi.testclient import TestClient
    from support.mcp_helpers import open_pack

    from prme.http import create_app

    with open_pack(tmp_path / "http-pack") as memory, TestClient(create_app(memory)) as http:
        stored = http.post("/v1/store", json={**STORED, "user_id": "alice"})
        assert stored.status_code == 200, stored.text
        node_id = stored.json()["node_id"]
        versions = [http.get(f"/v1/memories/{node_id}", params={"user_id": "alice"}).json()]
        for change in CHANGES:
            patched = http.patch(f"/v1/memories/{node_id}", json={**change, "user_id": "alice"})
            assert patched.status_code == 200, patched.text
            versions.append(patched.json())
            node_id = patched.json()["id"]
    return versions


def test_memory_update_keeps_omitted_fields_and_clears_explicit_nulls_as_http_patch(
    tmp_path: Path,
) -> None:
    pack, errlog = tmp_path / "pack", tmp_path / "err.log"

    async def body() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with mcp_session(pack, "--user-id", "alice", errlog=errlog) as s:
            node_id = (await call(s, "memory_store", **STORED))["node_id"]
            versions = [await call(s, "memory_get", node_id=node_id)]
            for change in CHANGES:
                versions.append(await call(s, "memory_update", node_id=node_id, **change))
                node_id = versions[-1]["id"]
            tools = {t.name: t for t in (await s.list_tools()).tools}
            return versions, tools["memory_update"].input_schema

    versions, schema = anyio.run(body)
    first, kept, no_event, cleared = versions
    assert {k: first[k] for k in ("metadata", "event_time", "confidence")} == {
        "metadata": {"source": "standup"},
        "event_time": "2026-03-02T09:00:00Z",
        "confidence": 0.9,
    }
    assert kept["content"] == "Aster moved to PostgreSQL 16."
    assert {k: kept[k] for k in COMPARED if k != "content"} == {
        k: first[k] for k in COMPARED if k != "content"
    }
    assert no_event["event_time"] is None
    assert (no_event["metadata"], no_event["valid_to"]) == (first["metadata"], first["valid_to"])
    assert cleared["valid_to"] is None and cleared["metadata"] != first["metadata"]
    assert cleared["confidence"] == 0.5 and cleared["event_time"] is None
    # exactly what HTTP PATCH does with the same bodies
    over_http = _versions_over_http(tmp_path)
    assert [{k: v[k] for k in COMPARED} for v in versions] == [
        {k: v[k] for k in COMPARED} for v in over_http
    ]
    # the schema says which parameters a null clears
    properties = schema["properties"]
    for name in ("metadata", "event_time", "valid_to"):
        assert (
            "null" in properties[name]["type"] and "null clears" in properties[name]["description"]
        )
