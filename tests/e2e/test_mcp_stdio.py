"""The MCP server over stdio: a real ``python -m prme.mcp`` subprocess driven by the SDK client."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.mcp_helpers import (
    MISMATCH,
    SERVER_ENV,
    call,
    gates_and_profile,
    judge,
    mcp_session,
    open_pack,
    refused,
)

from prme import RetrievalReceipt
from prme.demo.workload import Workload, generate_workload
from prme.mcp.server import CORE_TOOLS
from prme.services.receipts import RECEIPT_OP
from prme.storage.sqlite import DB_FILE

TOOLS = {
    "memory_store",
    "memory_retrieve",
    "memory_build_index",
    "memory_get_retrieval_receipt",
    "memory_record_relevance",
    "memory_get_relevance",
    "memory_list_relevance",
    "memory_evaluate_learning",
    "memory_evaluate_full_retrieval",
    "memory_create_ranking_profile",
    "memory_get_ranking_profile",
    "memory_list_ranking_profiles",
    "memory_get_active_ranking_profile",
    "memory_list_ranking_profile_history",
    "memory_activate_ranking_profile",
    "memory_deactivate_ranking_profile",
    "memory_rollback_ranking_profile",
    "memory_list",
    "memory_get",
    "memory_update",
    "memory_delete",
}
OWNER_REQUIRED = "user_id is required without a bound identity"


def listed(pack: Path, *args: str, errlog: Path) -> dict[str, Any]:
    """The tools a ``python -m prme.mcp --path pack *args`` server lists, by name."""

    async def body() -> dict[str, Any]:
        async with mcp_session(pack, *args, errlog=errlog) as session:
            return {t.name: t for t in (await session.list_tools()).tools}

    return anyio.run(body)


def schema_chars(tool: Any) -> int:
    """What one tool costs in the context window: its listing entry as compact JSON (name,
    description, input and output schema, annotations); tokens are estimated as chars / 4."""
    entry = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return len(json.dumps(entry, separators=(",", ":")))


def test_tools_are_listed_with_typed_input_schemas(tmp_path: Path) -> None:
    tools = listed(tmp_path / "pack", "--user-id", "alice", errlog=tmp_path / "err.log")
    assert set(tools) == TOOLS
    for tool in tools.values():
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False  # unknown arguments are refused
        assert "user_id" not in schema["properties"]  # the server binds the owner
        # every parameter is described in one line, and nothing repeats the field name
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
            assert "\n" not in prop["description"] and "title" not in prop, (tool.name, name)
        # one sentence: what it does and what it changes
        assert tool.description and tool.description.endswith(".")
        assert ". " not in tool.description
        # a structured result: an object schema (a list or an optional is wrapped in result)
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"

    def props(name: str) -> dict[str, Any]:
        properties: dict[str, Any] = tools[name].input_schema["properties"]
        return properties

    def required(name: str) -> list[str]:
        return list(tools[name].input_schema.get("required", []))

    assert required("memory_store") == ["content"]
    assert props("memory_store")["content"]["type"] == "string"
    assert props("memory_store")["confidence"]["type"] == "number"  # omitted means null
    assert required("memory_retrieve") == ["query"]
    assert props("memory_retrieve")["limit"]["type"] == "integer"
    assert props("memory_retrieve")["reference_time"]["format"] == "date-time"
    assert props("memory_retrieve")["details"] == {
        "default": False,
        "type": "boolean",
        "description": "Also return the full response (traces, bundle, metadata).",
    }
    assert required("memory_get_retrieval_receipt") == ["request_id"]
    assert props("memory_get_retrieval_receipt")["request_id"]["format"] == "uuid"
    assert required("memory_record_relevance") == ["request_id", "labels"]
    assert props("memory_record_relevance")["labels"]["additionalProperties"] == {"type": "boolean"}
    assert props("memory_record_relevance")["surface"]["enum"] == ["results", "context"]
    assert required("memory_evaluate_full_retrieval") == [
        "trials",
        "proposal_input_checksum",
        "memory_artifact_sha256",
    ]
    assert props("memory_evaluate_full_retrieval")["trials"]["type"] == "array"
    # the learning tools take checksums: the server loads the reports it persisted
    assert required("memory_create_ranking_profile") == []
    assert props("memory_create_ranking_profile")["proposal_input_checksum"]["pattern"]
    assert props("memory_create_ranking_profile")["proposal"]["type"] == "object"
    assert required("memory_activate_ranking_profile") == ["profile_id"]
    assert required("memory_rollback_ranking_profile") == []
    assert props("memory_list_relevance")["limit"] == {
        "default": 100,
        "description": "Page size, 1 to 1000.",
        "type": "integer",
    }
    retrieved = tools["memory_retrieve"].output_schema
    assert retrieved is not None
    assert retrieved["required"] == ["request_id", "receipt_persisted", "results"]
    assert retrieved["$defs"]["RetrievedMemory"]["required"] == ["id", "text", "score", "in_context"]
    listing = tools["memory_list_relevance"].output_schema
    assert listing is not None and listing["properties"]["result"]["type"] == "array"
    # a whole report is a titled object (an array of them, or one or null), not its schema
    profiles = tools["memory_list_ranking_profiles"].output_schema
    assert profiles is not None and profiles["properties"]["result"]["type"] == "array"
    assert profiles["properties"]["result"]["items"]["title"] == "RankingProfile"
    receipt = tools["memory_get_retrieval_receipt"].output_schema
    assert receipt is not None
    assert receipt["properties"]["result"]["anyOf"][1] == {"type": "null"}
    report = tools["memory_evaluate_learning"].output_schema
    assert report is not None and (report["type"], report["title"]) == ("object", "LearningEvaluation")
    read_only = {n for n, t in tools.items() if t.annotations and t.annotations.read_only_hint}
    assert read_only == {
        "memory_get_retrieval_receipt",
        "memory_get_relevance",
        "memory_list_relevance",
        "memory_get_ranking_profile",
        "memory_list_ranking_profiles",
        "memory_get_active_ranking_profile",
        "memory_list_ranking_profile_history",
        "memory_list",
        "memory_get",
    }


def test_a_multi_owner_server_asks_every_tool_for_its_owner(tmp_path: Path) -> None:
    tools = listed(tmp_path / "pack", "--multi-owner", errlog=tmp_path / "err.log")
    assert set(tools) == TOOLS
    for tool in tools.values():
        schema = tool.input_schema
        assert schema["properties"]["user_id"]["type"] == "string"
        assert "user_id" in schema["required"], tool.name


CORE_BUDGET_TOKENS = 3000
CHARS_PER_TOKEN = 4  # no tokenizer of an LLM is available offline: estimated as chars / 4


def test_the_core_tool_set_fits_its_budget_and_all_adds_learning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    errlog = tmp_path / "err.log"
    core = listed(tmp_path / "pack", "--user-id", "alice", "--tools", "core", errlog=errlog)
    every = listed(tmp_path / "pack", "--user-id", "alice", "--tools", "all", errlog=errlog)
    default = listed(tmp_path / "pack", "--user-id", "alice", errlog=errlog)
    # core: store, retrieve, judge (and the memory tools where this build has them)
    assert {"memory_store", "memory_retrieve", "memory_record_relevance"} <= set(core)
    assert set(core) <= CORE_TOOLS
    assert set(core) == CORE_TOOLS & set(every)
    assert set(every) == set(default) == TOOLS
    sizes = {name: schema_chars(tool) for name, tool in every.items()}
    core_chars = sum(sizes[name] for name in core)
    all_chars = sum(sizes.values())
    with capsys.disabled():
        print(f"\nMCP tool schema sizes (chars, ~tokens = chars/{CHARS_PER_TOKEN}):")
        for name, chars in sizes.items():
            print(f"  {name:42s} {chars:6d} {chars // CHARS_PER_TOKEN:5d}{' core' * (name in core)}")
        print(f"  core {core_chars} ({core_chars // 4} tokens); all {all_chars} ({all_chars // 4})")
    assert core_chars <= CORE_BUDGET_TOKENS * CHARS_PER_TOKEN
    assert all_chars <= 30_000  # 42,892 before, when each gate-1 and gate-2 report was a schema
    assert max(sizes.values()) <= 6_000, sizes


# ------------------------------------------------------------ memory round trip
def test_store_retrieve_receipt_and_relevance(tmp_path: Path) -> None:
    pack = tmp_path / "pack"

    async def body() -> dict[str, Any]:
        async with mcp_session(pack, "--user-id", "alice", errlog=tmp_path / "err.log") as s:
            stored = [
                await call(s, "memory_store", content=text, scope="project", confidence=conf)
                for text, conf in (
                    ("Aster uses PostgreSQL 16 as its database.", 0.95),
                    ("Aster used MySQL 8 as its database before the migration.", 0.2),
                    ("The Basalt team meets on Tuesdays.", 0.8),
                )
            ]
            response = await call(
                s, "memory_retrieve", query="Which database does Aster use?", scope=["project"]
            )
            request_id = response["request_id"]
            receipt = await call(s, "memory_get_retrieval_receipt", request_id=request_id)
            first, second = (r["id"] for r in response["results"][:2])
            labels = {first: True, second: False}
            feedback_id = str(uuid.uuid4())
            record = await call(
                s,
                "memory_record_relevance",
                request_id=request_id,
                labels=labels,
                feedback_id=feedback_id,
            )
            retry = await call(
                s,
                "memory_record_relevance",
                request_id=request_id,
                labels=labels,
                feedback_id=feedback_id,
            )
            return {
                "stored": stored,
                "response": response,
                "receipt": receipt,
                "record": record,
                "retry": retry,
                "got": await call(s, "memory_get_relevance", feedback_id=feedback_id),
                "listed": await call(s, "memory_list_relevance"),
                "missing": await call(
                    s, "memory_get_retrieval_receipt", request_id=str(uuid.uuid4())
                ),
            }

    out = anyio.run(body)
    assert [set(s) for s in out["stored"]] == [{"event_id", "node_id", "processing_status", "duplicate"}] * 3
    response, receipt, record = out["response"], out["receipt"], out["record"]
    assert response["receipt_persisted"] is True
    assert response["details"] is None  # compact unless asked for: about 200 bytes a hit
    assert len(json.dumps(response)) <= 100 + 200 * len(response["results"])
    assert {r["id"] for r in response["results"]} <= {s["node_id"] for s in out["stored"]}
    # the receipt is the full, replayable record of that retrieval
    parsed = RetrievalReceipt.model_validate(receipt)
    assert str(parsed.request_id) == response["request_id"]
    assert parsed.user_id == "alice"
    assert [str(c.node_id) for c in parsed.candidates] == [r["id"] for r in response["results"]]
    assert [c.score for c in parsed.candidates] == [r["score"] for r in response["results"]]
    assert [c.in_context for c in parsed.candidates] == [
        r["in_context"] for r in response["results"]
    ]
    assert {r["text"] for r in response["results"]} <= {
        "Aster uses PostgreSQL 16 as its database.",
        "Aster used MySQL 8 as its database before the migration.",
        "The Basalt team meets on Tuesdays.",
    }
    assert record["receipt_checksum"] == parsed.checksum
    assert record["user_id"] == "alice"
    assert out["retry"] == record  # an identical retry returns the original record
    assert out["got"] == record
    assert out["listed"] == [record]
    assert out["missing"] is None
    # everything landed in the pack on disk
    with open_pack(pack) as memory:
        assert memory.get_retrieval_receipt(parsed.request_id, user_id="alice") == parsed
        assert len(memory.list(user_id="alice")) == 3
        assert [r.model_dump(mode="json") for r in memory.list_relevance(user_id="alice")] == [
            record
        ]


# ---------------------------------------------------------------- owner binding
def test_owner_is_bound_by_configuration(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    errlog = tmp_path / "err.log"

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with mcp_session(pack, "--user-id", "alice", errlog=errlog) as s:
            out["store_as_bob"] = await refused(s, "memory_store", content="x", user_id="bob")
            out["list_as_bob"] = await refused(s, "memory_list_relevance", user_id="bob")
            out["explicit_alice"] = await call(
                s, "memory_store", content="Alice likes tea.", user_id="alice"
            )
            response = await call(s, "memory_retrieve", query="What does Alice like?")
            out["alice_request"] = response["request_id"]
        async with mcp_session(pack, errlog=errlog, env={"PRME_MCP__USER_ID": "bob"}) as s:
            out["env_bound_as_alice"] = await refused(
                s, "memory_retrieve", query="tea", user_id="alice"
            )
            out["bob_store"] = await call(s, "memory_store", content="Bob likes coffee.")
        async with mcp_session(pack, "--multi-owner", errlog=errlog) as s:  # nobody bound
            out["unbound"] = await refused(s, "memory_retrieve", query="tea")
            out["unbound_named"] = await call(s, "memory_retrieve", query="tea", user_id="bob")
            out["foreign_receipt"] = await call(
                s, "memory_get_retrieval_receipt", request_id=out["alice_request"], user_id="bob"
            )
            out["foreign_relevance"] = await refused(
                s,
                "memory_record_relevance",
                request_id=out["alice_request"],
                labels={out["explicit_alice"]["node_id"]: True},
                user_id="bob",
            )
        return out

    out = anyio.run(body)
    assert MISMATCH in out["store_as_bob"]
    assert MISMATCH in out["list_as_bob"]
    assert MISMATCH in out["env_bound_as_alice"]
    assert OWNER_REQUIRED in out["unbound"]
    assert "user_id" in out["unbound"]
    assert out["unbound_named"]["receipt_persisted"] is True
    assert out["foreign_receipt"] is None  # another owner's receipt looks missing
    assert "receipt" in out["foreign_relevance"]
    with open_pack(pack) as memory:
        assert [m.content for m in memory.list(user_id="alice")] == ["Alice likes tea."]
        assert [m.content for m in memory.list(user_id="bob")] == ["Bob likes coffee."]
        assert memory.list_relevance(user_id="bob") == []


def test_a_server_that_would_bind_nobody_refuses_to_start(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    env.update(SERVER_ENV)
    for command in (
        [sys.executable, "-m", "prme.mcp", "--path", str(tmp_path / "a")],
        [sys.executable, "-m", "prme", "mcp", "--path", str(tmp_path / "b")],
        [sys.executable, "-m", "prme.mcp", "--path", str(tmp_path / "c"), "--transport", "http"],
    ):
        # stdin stays open: a server that started would wait for messages, not exit
        run = subprocess.run(command, env=env, input=b"", capture_output=True, timeout=60)
        assert run.returncode == 2, (command, run.stderr.decode())
        assert "no owner is bound" in run.stderr.decode() and "--multi-owner" in run.stderr.decode()
    assert not any((tmp_path / name).exists() for name in "abc")  # no pack was even opened

    async def body() -> list[str]:  # the environment binds, or explicitly opts out
        out = []
        async with mcp_session(
            tmp_path / "d", errlog=tmp_path / "err.log", env={"PRME_MCP__USER_ID": "alice"}
        ) as s:
            out.append((await call(s, "memory_store", content="Alice likes tea."))["node_id"])
        async with mcp_session(
            tmp_path / "d", errlog=tmp_path / "err.log", env={"PRME_MCP__MULTI_OWNER": "true"}
        ) as s:
            assert OWNER_REQUIRED in await refused(s, "memory_retrieve", query="tea")
            found = await call(s, "memory_retrieve", query="tea", user_id="alice")
            out.append(found["results"][0]["id"])
        return out

    stored, found = anyio.run(body)
    assert stored == found


# ---------------------------------------------------------------- invalid input
def test_invalid_input_is_a_tool_error_and_writes_nothing(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    errlog = tmp_path / "err.log"
    with open_pack(pack) as memory:
        node_id = memory.store("Aster uses PostgreSQL.", user_id="alice")
        request_id = memory.retrieve("Aster database", user_id="alice").metadata.request_id
    corrupt_id = str(uuid.uuid4())
    with sqlite3.connect(pack / DB_FILE) as db:  # a receipt whose stored checksum is wrong
        db.execute(
            "INSERT INTO oplog(op_id, op_type, user_id, target_id, namespace, created_at,"
            " payload, checksum) VALUES (?,?,?,?,?,?,?,?)",
            (f"receipt:{corrupt_id}", RECEIPT_OP, "alice", corrupt_id, None, 0, "{}", "0" * 64),
        )

    async def body() -> dict[str, str]:
        async with mcp_session(pack, "--user-id", "alice", errlog=errlog) as s:
            retrieve = "memory_retrieve"
            return {
                "naive": await refused(
                    s, retrieve, query="Aster", reference_time="2026-09-14T00:00:00"
                ),
                "empty_scope": await refused(s, retrieve, query="Aster", scope=[]),
                "bad_scope": await refused(s, retrieve, query="Aster", scope=["galaxy"]),
                "limit_type": await refused(s, retrieve, query="Aster", limit="ten"),
                "limit_bool": await refused(s, retrieve, query="Aster", limit=True),
                "multiplier": await refused(
                    s, retrieve, query="Aster", ranking_multipliers={"lexical": 9}
                ),
                "blank_query": await refused(s, retrieve, query="  "),
                "confidence": await refused(s, "memory_store", content="x", confidence=1.5),
                "unknown_arg": await refused(s, "memory_store", content="x", scop="project"),
                "naive_event": await refused(
                    s, "memory_store", content="x", event_time="2026-01-01T10:00:00"
                ),
                "label_value": await refused(
                    s,
                    "memory_record_relevance",
                    request_id=str(request_id),
                    labels={node_id: "yes"},
                ),
                "label_node": await refused(
                    s,
                    "memory_record_relevance",
                    request_id=str(request_id),
                    labels={str(uuid.uuid4()): True},
                ),
                "bad_uuid": await refused(s, "memory_get_relevance", feedback_id="not-a-uuid"),
                "page": await refused(s, "memory_list_relevance", limit=0),
                "learning_scopes": await refused(s, "memory_evaluate_learning", scopes=[]),
                "corrupt": await refused(s, "memory_get_retrieval_receipt", request_id=corrupt_id),
                "no_proposal": await refused(
                    s,
                    "memory_evaluate_full_retrieval",
                    trials=[
                        {
                            "group_id": "g",
                            "baseline_request_id": str(request_id),
                            "candidate_request_id": str(uuid.uuid4()),
                            "relevant_node_ids": [node_id],
                        }
                    ],
                    proposal_input_checksum="0" * 64,
                    memory_artifact_sha256="0" * 64,
                ),
                "both_ways": await refused(
                    s,
                    "memory_create_ranking_profile",
                    proposal_input_checksum="0" * 64,
                    proposal={"decision": "improved_on_observed_candidates"},
                    holdout_input_checksum="1" * 64,
                ),
                "unknown_reports": await refused(
                    s,
                    "memory_create_ranking_profile",
                    proposal_input_checksum="0" * 64,
                    holdout_input_checksum="1" * 64,
                ),
            }

    out = anyio.run(body)
    assert "reference_time must include a timezone" in out["naive"]
    assert "scope must not be empty; use None for an unfiltered request" in out["empty_scope"]
    assert "scope" in out["bad_scope"]
    assert "limit" in out["limit_type"]
    assert "limit" in out["limit_bool"]
    assert "ranking_multipliers.lexical" in out["multiplier"]
    assert "query" in out["blank_query"]
    assert "confidence" in out["confidence"]
    assert "scop" in out["unknown_arg"]
    assert "event_time must include a timezone" in out["naive_event"]
    assert "labels" in out["label_value"]
    assert "Relevance labels must refer to saved response candidates" in out["label_node"]
    assert "feedback_id" in out["bad_uuid"]
    assert "limit" in out["page"]
    assert "scope must not be empty" in out["learning_scopes"]
    # an internal failure is reported without its details; the server log keeps them
    assert out["corrupt"] == "Error executing tool memory_get_retrieval_receipt"
    assert "IntegrityError" in (tmp_path / "err.log").read_text()
    assert f"candidate_multipliers: required: the proposal {'0' * 64} is not in this pack" in (
        out["no_proposal"]
    )
    assert "give exactly one of proposal_input_checksum and proposal" in out["both_ways"]
    assert f"Proposal report not found: {'0' * 64}" in out["unknown_reports"]
    with open_pack(pack) as memory:  # nothing was written by any refused call
        assert [m.content for m in memory.list(user_id="alice")] == ["Aster uses PostgreSQL."]
        assert len(memory.engine.store.find_ops(RECEIPT_OP, "bob")) == 0
        assert memory.list_relevance(user_id="alice") == []
    with sqlite3.connect(pack / DB_FILE) as db:
        (receipts,) = db.execute(
            "SELECT count(*) FROM oplog WHERE op_type = ?", (RECEIPT_OP,)
        ).fetchone()
    assert receipts == 2  # the in-process retrieval and the corrupt row; no refused retrieval


# ------------------------------------------------------------- the seed workflow
@pytest.fixture(scope="module")
def seed_pack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, Workload, dict[str, str]]]:
    """A pack with a generated workload where confidence predicts relevance, judged by alice."""
    pack = tmp_path_factory.mktemp("seed") / "pack"
    workload = generate_workload(seed=3, projects=40)
    with open_pack(pack) as memory:
        node_of = judge(memory, workload, "alice")
    yield pack, workload, node_of


def test_seed_workflow_through_mcp(
    seed_pack: tuple[Path, Workload, dict[str, str]], tmp_path: Path
) -> None:
    pack, workload, node_of = seed_pack
    scopes = [workload.scope.value]
    artifact = hashlib.sha256(f"workload-seed-{workload.seed}".encode()).hexdigest()

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with mcp_session(pack, "--user-id", "alice", errlog=tmp_path / "err.log") as s:
            pid = await gates_and_profile(s, workload, node_of, scopes, artifact, out)
            out["status_before"] = await call(s, "memory_get_ranking_profile", profile_id=pid)
            out["activated"] = await call(s, "memory_activate_ranking_profile", profile_id=pid)
            query = workload.holdout[0].text
            out["applied"] = await call(
                s, "memory_retrieve", query=query, scope=scopes, details=True
            )
            out["unfiltered"] = await call(s, "memory_retrieve", query=query, details=True)
            out["override"] = await call(
                s,
                "memory_retrieve",
                query=query,
                scope=scopes,
                ranking_multipliers={"semantic": 2},
                details=True,
            )
            out["active"] = await call(s, "memory_get_active_ranking_profile", scopes=scopes)
            out["active_unfiltered"] = await call(s, "memory_get_active_ranking_profile")
            out["status_active"] = await call(s, "memory_get_ranking_profile", profile_id=pid)
            out["deactivated"] = await call(s, "memory_deactivate_ranking_profile", scopes=scopes)
            out["base"] = await call(s, "memory_retrieve", query=query, scope=scopes, details=True)
            out["deactivated_again"] = await call(
                s, "memory_deactivate_ranking_profile", scopes=scopes
            )
            out["rolled_back"] = await call(
                s, "memory_rollback_ranking_profile", profile_id=pid, scopes=scopes
            )
            out["noop_rollback"] = await refused(
                s, "memory_rollback_ranking_profile", profile_id=pid, scopes=scopes
            )
            out["history"] = await call(s, "memory_list_ranking_profile_history", scopes=scopes)
            out["profiles"] = await call(s, "memory_list_ranking_profiles")
            out["missing_profile"] = await call(
                s, "memory_get_ranking_profile", profile_id=str(uuid.uuid4())
            )
        return out

    out = anyio.run(body)
    proposal, holdout, profile = out["proposal"], out["holdout"], out["profile"]
    assert proposal["decision"] == "improved_on_observed_candidates"
    assert proposal["coverage"]["feedback_records"] >= 40
    assert proposal["multipliers"]["confidence"] > 1.0  # confidence predicts relevance
    assert holdout["decision"] == "improved_full_retrieval"
    assert holdout["proposal_input_checksum"] == proposal["input_checksum"]
    assert holdout["memory_artifact_sha256"] == artifact
    assert profile["multipliers"] == proposal["multipliers"]
    assert profile["scopes"] == scopes
    pid = profile["profile_id"]
    assert out["status_before"] == {"profile": profile, "active": False, "latest_change": None}
    activated = out["activated"]
    assert (activated["action"], activated["active_profile_id"]) == ("activate", pid)
    assert activated["previous_profile_id"] is None
    meta = out["applied"]["details"]["metadata"]
    assert (meta["ranking_profile_status"], meta["ranking_profile_id"]) == ("applied", pid)
    assert meta["ranking_multipliers"] == proposal["multipliers"]
    assert out["unfiltered"]["details"]["metadata"]["ranking_profile_status"] == "none"
    override = out["override"]["details"]["metadata"]
    assert (override["ranking_profile_status"], override["ranking_profile_id"]) == (
        "request_override",
        pid,
    )
    assert out["active"] == profile
    assert out["active_unfiltered"] is None
    assert out["status_active"] == {"profile": profile, "active": True, "latest_change": activated}
    deactivated = out["deactivated"]
    assert (deactivated["action"], deactivated["active_profile_id"]) == ("deactivate", None)
    assert out["base"]["details"]["metadata"]["ranking_profile_status"] == "none"
    assert out["deactivated_again"] is None  # nothing active: nothing written
    rolled_back = out["rolled_back"]
    assert (rolled_back["action"], rolled_back["active_profile_id"]) == ("rollback", pid)
    assert "rollback cannot be a no-op" in out["noop_rollback"]
    assert [s["action"] for s in out["history"]] == ["rollback", "deactivate", "activate"]
    assert out["history"][0] == rolled_back
    assert out["profiles"] == [profile]
    assert out["missing_profile"] is None
    # the pointer survives the server: a fresh client sees the same active profile
    with open_pack(pack) as memory:
        active = memory.get_active_ranking_profile(user_id="alice", scopes=scopes)
        assert active is not None and str(active.profile_id) == pid
