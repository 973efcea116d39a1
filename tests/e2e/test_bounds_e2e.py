"""Bounded request sizes and paged listings on the served surfaces: a real HTTP server on
loopback, a real MCP stdio session and the CLI, over a pack with a profile and 1,003 pointer
transitions (more than one page of history)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from click.testing import CliRunner
from conftest import make_config
from support.golden import OWNER, SCOPES, golden
from support.mcp_helpers import call, mcp_session, refused
from support.server import ALICE, ALICE_KEY, BOB_KEY, running_server

from prme import MemoryClient
from prme.cli import main
from prme.limits import MAX_RESULT_LIMIT, MAX_TOKEN_BUDGET
from prme.storage.sqlite import DB_FILE

TRANSITIONS = 1003
HUGE = 10**30
BAD_SIZES = [
    ("limit", HUGE),
    ("limit", MAX_RESULT_LIMIT + 1),
    ("token_budget", HUGE),
    ("token_budget", MAX_TOKEN_BUDGET + 1),
    ("max_per_source", HUGE),
    ("max_per_evidence", HUGE),
]


def oplog_rows(pack: Path) -> int:
    with sqlite3.connect(f"{(pack / DB_FILE).as_uri()}?mode=ro", uri=True) as db:
        count = int(db.execute("SELECT count(*) FROM oplog").fetchone()[0])
    db.close()
    return count


@pytest.fixture(scope="module")
def flipped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A copy of the golden pack with two profiles and TRANSITIONS pointer transitions."""
    gold = golden(tmp_path_factory)
    root = tmp_path_factory.mktemp("bounds")
    pack = root / "pack"
    shutil.copytree(gold.memories, pack)
    with MemoryClient(pack, config=make_config()) as memory:
        profiles = [
            memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
            for _ in range(2)
        ]
        changes = []
        for i in range(TRANSITIONS):
            if i % 2 == 0:
                state = memory.activate_ranking_profile(profiles[0].profile_id, user_id=OWNER)
            else:
                state = memory.deactivate_ranking_profile(user_id=OWNER, scopes=SCOPES)
            assert state is not None
            changes.append(str(state.change_id))
    return {
        "root": root,
        "pack": pack,
        "profiles": [str(p.profile_id) for p in profiles],
        "changes": changes[::-1],  # newest first
    }


# ------------------------------------------------------------------------------- HTTP
@pytest.fixture(scope="module")
def server(flipped: dict[str, Any]) -> Iterator[Any]:
    keys = json.dumps({OWNER: ALICE_KEY, "bob": BOB_KEY})
    with running_server(flipped["root"], PRME_API__USER_KEYS=keys) as running:
        yield running


@pytest.fixture
def http(server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60.0) as client:
        yield client


@pytest.mark.parametrize(("field", "value"), BAD_SIZES)
def test_http_refuses_unbounded_sizes_with_422_naming_the_field(
    http: httpx.Client, server: Any, field: str, value: int
) -> None:
    before = oplog_rows(server.path)
    response = http.post(
        "/v1/retrieve", json={"query": "Aster database", field: value}, headers=ALICE
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(f"{field}: {field} must be")
    assert oplog_rows(server.path) == before  # no receipt was written


def test_http_pages_pointer_history_past_1000_and_profiles(
    http: httpx.Client, flipped: dict[str, Any]
) -> None:
    url = "/v1/learning/profiles/history"
    first = http.get(url, params={"scopes": "project", "limit": 1000}, headers=ALICE)
    assert first.status_code == 200, first.text
    page = [s["change_id"] for s in first.json()]
    rest = http.get(
        url,
        params={"scopes": "project", "limit": 1000, "after_change_id": page[-1]},
        headers=ALICE,
    )
    assert rest.status_code == 200, rest.text
    assert page + [s["change_id"] for s in rest.json()] == flipped["changes"]
    unknown = http.get(
        url,
        params={"scopes": "project", "after_change_id": "00000000-0000-4000-8000-000000000000"},
        headers=ALICE,
    )
    assert unknown.status_code == 404
    assert http.get(url, params={"limit": HUGE}, headers=ALICE).status_code == 422
    profiles = http.get("/v1/learning/profiles", params={"limit": 1}, headers=ALICE).json()
    older = http.get(
        "/v1/learning/profiles",
        params={"limit": 1, "after_id": profiles[0]["profile_id"]},
        headers=ALICE,
    ).json()
    assert [p["profile_id"] for p in profiles + older] == flipped["profiles"][::-1]


# -------------------------------------------------------------------------------- MCP
def test_mcp_refuses_unbounded_sizes_and_pages_history(
    flipped: dict[str, Any], tmp_path: Path
) -> None:
    pack = flipped["pack"]

    async def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with mcp_session(pack, "--user-id", OWNER, errlog=tmp_path / "err.log") as s:
            for field, value in BAD_SIZES:
                out[f"{field}={value}"] = await refused(
                    s, "memory_retrieve", query="Aster database", **{field: value}
                )
            history = "memory_list_ranking_profile_history"
            first = await call(s, history, scopes=["project"], limit=1000)
            rest = await call(
                s, history, scopes=["project"], limit=1000, after_change_id=first[-1]["change_id"]
            )
            out["history"] = [x["change_id"] for x in first + rest]
        return out

    before = oplog_rows(pack)
    out = anyio.run(body)
    for field, value in BAD_SIZES:
        assert f"{field}: {field} must be" in out[f"{field}={value}"]
    assert out["history"] == flipped["changes"]
    assert oplog_rows(pack) == before


# -------------------------------------------------------------------------------- CLI
def test_cli_pages_history_with_after_change_id(flipped: dict[str, Any]) -> None:
    runner = CliRunner()
    env = {"PRME_EMBEDDING__PROVIDER": "hash", "PRME_SCORING__FUSION": "weighted"}
    base = ["profiles", "history", "--path", str(flipped["pack"]), "--user-id", OWNER]
    base += ["--scope", "project", "--json", "--limit", "1000"]
    first = runner.invoke(main, base, env=env)
    assert first.exit_code == 0, first.output
    page = [s["change_id"] for s in json.loads(first.output)]
    rest = runner.invoke(main, [*base, "--after-change-id", page[-1]], env=env)
    assert rest.exit_code == 0, rest.output
    assert page + [s["change_id"] for s in json.loads(rest.output)] == flipped["changes"]
    table = runner.invoke(main, [*base[:-3], "--limit", "2"], env=env)
    assert flipped["changes"][0] in table.output  # the table shows the cursor to pass on
    huge = runner.invoke(
        main,
        [
            "retrieve",
            "Aster",
            "--path",
            str(flipped["pack"]),
            "--user-id",
            OWNER,
            "--limit",
            "1001",
        ],
        env=env,
    )
    assert huge.exit_code == 1 and huge.output.startswith("error: limit: limit must be")
