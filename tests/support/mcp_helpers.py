"""What the MCP tests share: a stdio session, tool calls, the judged workload and the gate sequence."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig
from prme.demo.workload import Workload
from prme.engine import utc_now

MISMATCH = "User does not match authenticated identity"
# A stdio server starts with a minimal environment: pass PYTHONPATH on, so it imports the same
# prme as the tests (a checkout's src/ put first on the path), not another installed copy.
SOURCE_ENV = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
HOLDOUT_CLOCK = "2026-09-14T00:00:00Z"
SERVER_ENV = {"PRME_SCORING__FUSION": "weighted", "PRME_EMBEDDING__PROVIDER": "hash", **SOURCE_ENV}


@asynccontextmanager
async def mcp_session(
    pack: Path, *args: str, errlog: Path, env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """Start ``python -m prme.mcp --path pack --create *args`` (a missing pack is created) and
    open an initialized session on it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "prme.mcp", "--path", str(pack), "--create", *args],
        env={**SERVER_ENV, **(env or {})},
    )
    with errlog.open("a") as stderr:
        async with (
            stdio_client(params, errlog=stderr) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


# ------------------------------------------------------------------------- schemas


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """Call a tool that must succeed and decode its JSON result.

    The session has checked the structured content against the tool's output schema; the text
    block is the same value as JSON (structured content wraps a non-object in ``result``).
    """
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    assert not result.is_error, text
    value = json.loads(text)
    assert result.structured_content in (value, {"result": value}), result.structured_content
    return value


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail and return its error text."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def open_pack(path: Path) -> MemoryClient:
    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
    return MemoryClient(path, config=config, clock=utc_now)


def judge(memory: MemoryClient, workload: Workload, user_id: str) -> dict[str, str]:
    """Store the workload and judge every learning query's returned current vs stale facts."""
    ids = memory.store_many(workload.store_items(), user_id=user_id)
    key_of = {node_id: m.key for m, node_id in zip(workload.memories, ids, strict=True)}
    for query in workload.learning:
        response = memory.retrieve(query.text, user_id=user_id, scope=workload.scope, limit=10)
        prefix = query.relevant_keys[0].rsplit("/", 1)[0] + "/"
        labels = {
            str(r.node.id): key_of[str(r.node.id)] in query.relevant_keys
            for r in response.results
            if key_of[str(r.node.id)].startswith(prefix)
        }
        if len(set(labels.values())) == 2:  # both classes: an explicit pair
            memory.record_relevance(
                {"request_id": response.metadata.request_id, "labels": labels}, user_id=user_id
            )
    return {key: node_id for node_id, key in key_of.items()}


async def gates_and_profile(
    s: ClientSession,
    workload: Workload,
    node_of: dict[str, str],
    scopes: list[str],
    artifact: str,
    out: dict[str, Any],
) -> str:
    """Gate 1, the paired holdout and profile creation through tools; returns the profile id.

    The reports and the profile are kept in ``out`` under ``proposal``, ``holdout``, ``profile``.
    """
    proposal = out["proposal"] = await call(s, "memory_evaluate_learning", scopes=scopes)
    trials = []
    for holdout_query in workload.holdout:
        arms = [
            await call(
                s,
                "memory_retrieve",
                query=holdout_query.text,
                scope=scopes,
                reference_time=HOLDOUT_CLOCK,
                limit=20,
                include_cross_scope=False,
                **extra,
            )
            for extra in ({}, {"ranking_multipliers": proposal["multipliers"]})
        ]
        trials.append(
            {
                "group_id": holdout_query.group,
                "baseline_request_id": arms[0]["request_id"],
                "candidate_request_id": arms[1]["request_id"],
                "relevant_node_ids": [node_of[k] for k in holdout_query.relevant_keys],
            }
        )
    holdout = out["holdout"] = await call(
        s,
        "memory_evaluate_full_retrieval",
        trials=trials,
        scopes=scopes,
        proposal_input_checksum=proposal["input_checksum"],
        memory_artifact_sha256=artifact,  # the candidate multipliers: the proposal's
    )
    profile = out["profile"] = await call(
        s,
        "memory_create_ranking_profile",
        proposal_input_checksum=proposal["input_checksum"],
        holdout_input_checksum=holdout["input_checksum"],
    )
    return str(profile["profile_id"])
