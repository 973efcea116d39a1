"""The ``prme`` command line: run commands, then reopen the pack through the library."""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from conftest import make_config

from prme import MemoryClient, Scope
from prme.cli import main
from prme.demo.workflow import FROZEN_DIR, MARKER_FILE
from prme.demo.workload import generate_workload

ENV = {"PRME_EMBEDDING__PROVIDER": "hash", "PRME_SCORING__FUSION": "weighted"}
OWNER = ["--user-id", "alice"]


def invoke(args: Sequence[object], input: str | None = None) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], env=ENV, input=input)


def ok(args: Sequence[object], input: str | None = None) -> str:
    result = invoke(args, input)
    assert result.exit_code == 0, result.output
    return result.stdout


def ok_json(args: Sequence[object], input: str | None = None) -> Any:
    return json.loads(ok([*args, "--json"], input))


def fails(args: Sequence[object]) -> str:
    """The command exits 1 and prints exactly one line, on stderr."""
    result = invoke(args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    return result.stderr.strip()


def library(path: Path, **kwargs: Any) -> MemoryClient:
    return MemoryClient(path, config=make_config(), **kwargs)


@dataclass
class DemoRun:
    path: Path
    stdout: str


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``prme demo --embedder hash`` in a real subprocess, replacing an earlier demo pack."""
    path = tmp_path_factory.mktemp("cli") / "demo-pack"
    with library(path) as earlier:
        earlier.store("left over from an earlier run", user_id="alice")
    (path / MARKER_FILE).write_text("{}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    command = [sys.executable, "-m", "prme", "demo", "--path", str(path), "--embedder", "hash"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return DemoRun(path, done.stdout)


def test_demo_reaches_both_gates_and_walks_the_pointer(demo: DemoRun) -> None:
    lines = demo.stdout.splitlines()
    assert "using PRME_SCORING__FUSION=weighted for this pack" in lines[0]
    rows = {line[:11].strip(): line for line in lines[2:] if line[:11].strip()}
    assert "replaced earlier demo" in rows["pack"]
    assert "improved_on_observed_candidates" in rows["gate 1"]
    assert "improved_full_retrieval" in rows["gate 2"]
    assert "status applied" in rows["activate"]
    assert "status none" in rows["deactivate"]
    assert "status applied" in rows["rollback"]
    with library(demo.path) as memory:
        stored = memory.list(user_id="alice", limit=1000)
        assert len(stored) == len(generate_workload(0).memories)  # the earlier pack is gone
        (profile,) = memory.list_ranking_profiles(user_id="alice")
        history = memory.list_ranking_profile_history(user_id="alice", scopes=[Scope.PROJECT])
        assert [s.action for s in history] == ["rollback", "deactivate", "activate"]
        active = memory.get_active_ranking_profile(user_id="alice", scopes=[Scope.PROJECT])
        assert active is not None and active.profile_id == profile.profile_id
        response = memory.retrieve("Who leads the team?", user_id="alice", scope=Scope.PROJECT)
        assert response.metadata.ranking_profile_status == "applied"
        assert response.metadata.ranking_profile_id == profile.profile_id
    with library(demo.path / FROZEN_DIR, frozen=True) as frozen:
        holdout = frozen.get_full_retrieval_evaluation(
            profile.holdout.input_checksum, user_id="alice"
        )
        assert holdout == profile.holdout
    assert "<svg" in (demo.path / "learning.html").read_text("utf-8")


def test_demo_refuses_a_directory_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    message = fails(["demo", "--path", tmp_path, "--embedder", "hash"])
    assert "neither empty nor a pack made by prme demo" in message
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_store_one_memory_then_read_it_back(tmp_path: Path) -> None:
    text = "Aster keeps its production data in PostgreSQL 16."
    args = ["store", text, "--scope", "project", "--confidence", "0.9", "--path", tmp_path]
    args.append("--create")
    node_id = ok([*args, *OWNER]).strip()
    with library(tmp_path) as memory:
        node = memory.get(node_id, user_id="alice")
    assert node is not None
    assert (node.content, node.scope, node.confidence) == (text, Scope.PROJECT, 0.9)
    receipt = ok_json(["store", "second", "--path", tmp_path, *OWNER])
    assert set(receipt) == {"event_id", "node_id", "processing_status"}


def test_store_jsonl_in_batches(tmp_path: Path) -> None:
    lines = ['"plain text"', '{"content": "two", "scope": "agent"}', "", '{"content": "three"}']
    args = ["store", "--jsonl", "-", "--scope", "project", "--batch-size", "2", "--path", tmp_path]
    args.append("--create")
    ids = ok_json([*args, *OWNER], input="\n".join(lines) + "\n")
    with library(tmp_path) as memory:
        nodes = [memory.get(i, user_id="alice") for i in ids]
        assert len(memory.list(user_id="alice")) == 3
    assert [(n.content, n.scope) for n in nodes if n is not None] == [
        ("plain text", Scope.PROJECT),
        ("two", Scope.AGENT),
        ("three", Scope.PROJECT),
    ]


def test_retrieve_receipt_and_judge_print_what_the_library_returns(tmp_path: Path) -> None:
    with library(tmp_path) as memory:
        first, second = memory.store_many(
            ["Aster uses PostgreSQL.", "Aster used MySQL long ago."], user_id="alice"
        )
    pack = ["--path", tmp_path, *OWNER]
    response = ok_json(["retrieve", "Which database does Aster use?", "--limit", "5", *pack])
    request_id = response["metadata"]["request_id"]
    assert {r["node"]["id"] for r in response["results"]} == {first, second}
    table = ok(["retrieve", "Which database does Aster use?", *pack])
    assert "receipt saved: True" in table and first in table
    receipt = ok_json(["receipt", request_id, *pack])
    with library(tmp_path) as memory:
        saved = memory.get_retrieval_receipt(request_id, user_id="alice")
        assert saved is not None and receipt == saved.model_dump(mode="json")
    labels = ["--label", f"{first}=true", "--label", f"{second}=FALSE"]
    record = ok_json(["judge", "--request-id", request_id, *labels, *pack])
    with library(tmp_path) as memory:
        stored = memory.get_relevance(record["feedback_id"], user_id="alice")
    assert stored is not None
    assert stored.labels == {uuid.UUID(first): True, uuid.UUID(second): False}
    assert stored.method == "explicit_user"


def test_errors_print_one_line_and_exit_1(tmp_path: Path) -> None:
    library(tmp_path).close()  # an empty pack
    pack = ["--path", tmp_path, *OWNER]
    missing = str(uuid.uuid4())
    assert fails(["receipt", missing, *pack]) == f"error: Retrieval receipt not found: {missing}"
    assert "expected NODE=true or NODE=false" in fails(
        ["judge", "--request-id", missing, "--label", "x=maybe", *pack]
    )
    assert fails(["store", "x", "--confidence", "2", *pack]).startswith("error: confidence")
    assert "A saved retrieval receipt" in fails(
        ["judge", "--request-id", missing, "--label", f"{missing}=true", *pack]
    )
    assert fails(["profiles", "show", "not-a-uuid", *pack]).startswith("error: profile_id")
    assert "--to-base" in fails(["profiles", "rollback", *pack])
    assert "TEXT or --jsonl" in fails(["store", *pack])
    result = invoke(["retrieve", "q", "--path", tmp_path])  # usage errors stay click's (exit 2)
    assert result.exit_code == 2 and "--user-id" in result.output


def _holdout_queries(path: Path) -> str:
    """The demo workload's holdout queries as JSONL, with node ids read back from the pack."""
    keys: dict[str, str] = {}
    with library(path) as memory:
        after = None
        while page := memory.list(user_id="alice", limit=1000, after_id=after):
            keys.update({(n.metadata or {})["workload_key"]: str(n.id) for n in page})
            after = page[-1].id
    lines = [
        {"group_id": q.group, "query": q.text, "relevant_ids": [keys[k] for k in q.relevant_keys]}
        for q in generate_workload(0).holdout
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_learning_and_profile_commands_mirror_the_library(demo: DemoRun, tmp_path: Path) -> None:
    live = tmp_path / "pack"
    shutil.copytree(demo.path, live)
    frozen, pack = live / FROZEN_DIR, ["--path", live, *OWNER]
    (old,) = ok_json(["profiles", "list", *pack])
    proposal = ok_json(["learn", "evaluate", "--scope", "project", *pack])
    with library(live) as memory:
        again = memory.evaluate_learning(user_id="alice", scopes=[Scope.PROJECT])
    assert proposal == again.model_dump(mode="json")
    (tmp_path / "proposal.json").write_text(json.dumps(old["proposal"]))
    (tmp_path / "queries.jsonl").write_text(_holdout_queries(live))
    inputs = ["--proposal", tmp_path / "proposal.json", "--queries", tmp_path / "queries.jsonl"]
    frozen_pack = ["--scope", "project", "--frozen", "--path", frozen, *OWNER]
    holdout = ok_json(["learn", "holdout", *inputs, *frozen_pack])
    assert holdout["decision"] == "improved_full_retrieval"
    with library(frozen, frozen=True) as memory:
        assert memory.get_full_retrieval_evaluation(holdout["input_checksum"], user_id="alice")
    (tmp_path / "holdout.json").write_text(json.dumps(holdout))
    files = ["--proposal", tmp_path / "proposal.json", "--holdout", tmp_path / "holdout.json"]
    new = ok_json(["learn", "create", *files, *pack])["profile_id"]
    project = ["--scope", "project"]
    stale = fails(["profiles", "activate", new, *pack])  # the pointer names the demo's profile
    assert (
        f"differs from the evaluated baseline (expected None, actual {old['profile_id']})" in stale
    )
    assert ok_json(["profiles", "deactivate", *project, *pack])["action"] == "deactivate"
    assert ok_json(["profiles", "activate", new, *pack])["active_profile_id"] == new
    assert ok_json(["profiles", "active", *project, *pack])["profile_id"] == new
    assert ok_json(["profiles", "show", old["profile_id"], *pack])["active"] is False
    ok(["profiles", "rollback", old["profile_id"], *project, *pack])
    assert (
        ok_json(["profiles", "rollback", "--to-base", *project, *pack])["active_profile_id"] is None
    )
    assert ok_json(["profiles", "active", *project, *pack]) is None
    history = ok_json(["profiles", "history", *project, *pack])
    actions = ["rollback", "rollback", "activate", "deactivate", "rollback", "deactivate"]
    assert [s["action"] for s in history] == [*actions, "activate"]
    with library(live) as memory:
        states = memory.list_ranking_profile_history(user_id="alice", scopes=[Scope.PROJECT])
        digest = memory.pack_digest()
    assert history == [s.model_dump(mode="json") for s in states]
    assert (
        ok(["learn", "report", new, "--out", tmp_path / "r.html", *pack]).strip().endswith("r.html")
    )
    assert new in (tmp_path / "r.html").read_text("utf-8")
    assert ok(["pack", "digest", "--path", live]).strip() == digest
    assert ok_json(["pack", "digest", "--path", live]) == {"pack_digest": digest}


def test_every_pack_command_calls_public_client_methods() -> None:
    """Surfaces are thin: each command body calls MemoryClient methods and nothing private."""

    def leaves(group: click.Group) -> list[click.Command]:
        found: list[click.Command] = []
        for command in group.commands.values():
            found += leaves(command) if isinstance(command, click.Group) else [command]
        return found

    # prme.http.server, prme.mcp.server, prme.demo.workflow, prme.services.packs (schema upgrade)
    delegates = {"serve", "mcp", "demo", "upgrade"}
    public = {name for name in dir(MemoryClient) if not name.startswith("_")}
    for command in leaves(main):
        if command.name in delegates:
            continue
        assert command.callback is not None
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(command.callback)))
        called = {
            node.func.attr
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "memory"
        }
        assert called and called <= public, (command.name, called)
