"""A real server: ``python -m prme.http.server`` in a subprocess, spoken to over loopback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from support import chromium
from support import http_api as shared
from support.http_api import holdout_trials, judge_learning_queries
from support.server import (
    ALICE,
    ALICE_KEY,
    BOB,
    BOB_KEY,
    Server,
    free_port,
    running_server,
    server_command,
    server_env,
)

from prme import InvalidInputError, MemoryClient, PRMEConfig, ScoringWeights
from prme.canonical import sha256_hex
from prme.config import APIConfig, EmbeddingConfig
from prme.demo.workload import Workload, generate_workload
from prme.http.server import check_bind, is_loopback, serve

BODY_LIMIT = 64 * 1024  # small enough that a refused body still fits the socket buffers


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    keys = json.dumps({"alice": ALICE_KEY, "bob": BOB_KEY})
    with running_server(
        tmp_path_factory.mktemp("server"),
        PRME_API__USER_KEYS=keys,
        PRME_API__MAX_BODY_BYTES=str(BODY_LIMIT),
    ) as running:
        yield running


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def test_store_retrieve_and_read_the_receipt_over_loopback(http: httpx.Client) -> None:
    health = http.get("/v1/health")
    assert health.json()["status"] == "ok"
    assert health.json()["fusion"] == "weighted"  # the server read PRME_* from its environment

    stored = http.post(
        "/v1/store",
        json={"content": "Aster keeps its records in PostgreSQL 16.", "scope": "project"},
        headers=ALICE,
    )
    assert stored.status_code == 200
    node_id = stored.json()["node_id"]
    found = http.post(
        "/v1/retrieve",
        json={"query": "Aster records PostgreSQL", "scope": "project"},
        headers=ALICE,
    )
    assert found.status_code == 200
    body = found.json()
    assert [r["node"]["id"] for r in body["results"]] == [node_id]
    assert body["metadata"]["receipt_persisted"] is True

    request_id = body["metadata"]["request_id"]
    receipt = http.get(f"/v1/retrievals/{request_id}", headers=ALICE)
    assert receipt.status_code == 200
    assert [c["node_id"] for c in receipt.json()["candidates"]] == [node_id]
    assert http.get(f"/v1/retrievals/{request_id}", headers=BOB).status_code == 404


def test_credentials_bind_the_owner_over_loopback(http: httpx.Client) -> None:
    missing = http.post("/v1/retrieve", json={"query": "Aster"})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = http.post(
        "/v1/retrieve", json={"query": "Aster"}, headers={"Authorization": "Bearer x"}
    )
    assert wrong.status_code == 401
    other = http.post("/v1/retrieve", json={"query": "Aster", "user_id": "bob"}, headers=ALICE)
    assert other.status_code == 403
    assert other.json() == {"detail": "User does not match authenticated identity"}
    bobs = http.post("/v1/retrieve", json={"query": "Aster records PostgreSQL"}, headers=BOB)
    assert bobs.json()["results"] == []


def test_concurrent_requests_are_served_from_the_threadpool(http: httpx.Client) -> None:
    http.post("/v1/store", json={"content": "Basalt runs on Fly.io."}, headers=ALICE)

    def one(index: int) -> tuple[int, str]:
        response = http.post(
            "/v1/retrieve", json={"query": f"Basalt hosting {index}"}, headers=ALICE
        )
        return response.status_code, response.json()["metadata"]["request_id"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(one, range(16)))
    assert {status for status, _ in outcomes} == {200}
    assert len({request_id for _, request_id in outcomes}) == 16


def test_an_oversized_body_is_413_over_loopback(http: httpx.Client) -> None:
    big = http.post("/v1/store", json={"content": "x" * BODY_LIMIT}, headers=ALICE)
    assert big.status_code == 413
    assert str(BODY_LIMIT) in big.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        yield b'{"content": "'
        for _ in range(BODY_LIMIT // 4096 + 1):
            yield b"x" * 4096
        yield b'"}'

    headers = {**ALICE, "content-type": "application/json"}
    streamed = http.post("/v1/store", content=chunks(), headers=headers)
    assert streamed.status_code == 413
    fits = http.post("/v1/store", json={"content": "x" * (BODY_LIMIT // 2)}, headers=ALICE)
    assert fits.status_code == 200


ASSET = re.compile(r"""(?:src|href|spec-url)="([^"]+)"|url: '([^']+)'""")


def test_the_docs_are_served_offline_by_the_server(http: httpx.Client) -> None:
    pages = {"/docs": {"javascript", "css", "png", "json"}, "/redoc": {"javascript", "png", "json"}}
    for page, kinds in pages.items():
        html = http.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assert "http://" not in html.text and "https://" not in html.text  # no CDN, no fonts
        urls = [a or b for a, b in ASSET.findall(html.text)]
        assert urls and all(url.startswith("/") and not url.startswith("//") for url in urls)
        served = set()
        for url in urls:
            asset = http.get(url)
            assert asset.status_code == 200, url
            assert len(asset.content) > 100, url
            served |= {k for k in kinds if k in asset.headers["content-type"]}
        assert served == kinds, (page, served)


@pytest.mark.skipif(
    not os.access(chromium.CHROMIUM, os.X_OK), reason="headless Chromium not installed"
)
def test_the_docs_render_in_a_browser_without_network(server: Server, tmp_path: Path) -> None:
    command = [chromium.CHROMIUM, *chromium.FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    command += ["--virtual-time-budget=20000", "--dump-dom", f"{server.url}/docs"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rendered = set(re.findall(r'class="opblock-summary-path" data-path="([^"]+)"', done.stdout))
    assert {"/v1/store", "/v1/retrieve", "/v1/learning/profiles/{profile_id}"} <= rendered
    assert len(rendered) >= 15


def test_openapi_over_loopback_describes_every_field_and_error(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    assert [w for w, prop in shared.openapi_properties(document) if not prop.get("description")] == []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            errors = {code for code in operation["responses"] if code >= "400"}
            assert errors == shared.expected_errors(method, path), (method, path)


def test_the_original_retrieve_shape_and_page_links_over_loopback(http: httpx.Client) -> None:
    for text in ("Dolomite ships on Tuesdays.", "Dolomite ships from Oslo."):
        http.post("/v1/store", json={"content": text, "scope": "project"}, headers=BOB)
    original = http.post(
        "/v1/retrieve",
        json={"query": "Dolomite shipping", "mode": "explicit", "filters": {"scope": "project"}},
        headers=BOB,
    )
    assert original.status_code == 200, original.text
    results = original.json()["results"]
    assert len(results) == 2 and {r["node"]["scope"] for r in results} == {"project"}
    request_id = original.json()["metadata"]["request_id"]
    for result in results:
        judged = http.post(
            "/v1/relevance",
            json={"request_id": request_id, "labels": {result["node"]["id"]: True}},
            headers=BOB,
        )
        assert judged.status_code == 200, judged.text
    first = http.get("/v1/relevance", params={"limit": 1}, headers=BOB)
    assert len(first.json()) == 1 and first.headers["link"].endswith('>; rel="next"')
    link = first.headers["link"]
    second = http.get(link[1 : link.index(">")], headers=BOB)
    assert second.status_code == 200 and len(second.json()) == 1
    assert second.json()[0]["feedback_id"] > first.json()[0]["feedback_id"]


def test_the_log_never_shows_a_key(server: Server, http: httpx.Client) -> None:
    http.get("/v1/relevance", headers=ALICE)
    http.get("/v1/relevance", headers={"Authorization": f"Bearer {ALICE_KEY}-wrong"})
    time.sleep(0.2)  # let the access log reach the file
    text = server.log.read_text()
    assert "GET /v1/relevance" in text
    assert ALICE_KEY not in text
    assert BOB_KEY not in text


def test_the_pack_written_over_http_opens_in_python(server: Server, http: httpx.Client) -> None:
    stored = http.post("/v1/store", json={"content": "Cobalt uses Rust."}, headers=BOB)
    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
    with MemoryClient(server.path, config=config) as memory:
        node = memory.get(stored.json()["node_id"], user_id="bob")
    assert node is not None
    assert node.content == "Cobalt uses Rust."


# ------------------------------------------------------------------------ loopback-only binding
@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_without_keys_only_loopback_is_allowed(tmp_path: Path) -> None:
    open_config = PRMEConfig(embedding=EmbeddingConfig(provider="hash"))
    with pytest.raises(InvalidInputError) as caught:
        serve(tmp_path / "pack", host="0.0.0.0", port=free_port(), config=open_config)
    assert caught.value.field == "host"
    assert "PRME_API__USER_KEYS" in str(caught.value)
    assert not (tmp_path / "pack").exists()  # refused before opening anything
    check_bind("127.0.0.1", open_config)
    keyed = open_config.model_copy(
        update={"api": APIConfig(user_keys={"alice": SecretStr(ALICE_KEY)})}
    )
    check_bind("0.0.0.0", keyed)


def test_the_command_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    result = subprocess.run(
        server_command(tmp_path / "pack", "0.0.0.0", free_port()),
        env=server_env(),
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert b"refusing to listen on '0.0.0.0' without user keys" in result.stderr


# ------------------------------------------------------- the seed workflow against a real server
@dataclass(frozen=True)
class SeedRun:
    """Alice's seed workflow, run over HTTP against a real server (bob shares the server)."""

    http: httpx.Client
    workload: Workload
    node_ids: dict[str, str]
    judged_request_id: str
    proposal: dict[str, Any]
    holdout: dict[str, Any]


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeedRun]:
    # the judging helpers shared with test_http send its alice key
    keys = json.dumps({"alice": shared.ALICE_KEY, "bob": shared.BOB_KEY})
    with (
        running_server(tmp_path_factory.mktemp("seed"), PRME_API__USER_KEYS=keys) as server,
        httpx.Client(base_url=server.url, headers=shared.ALICE, timeout=60.0) as http,
    ):
        assert http.get("/v1/health").json()["fusion"] == "weighted"
        workload = generate_workload(0, projects=30)
        node_ids = {}
        for memory, item in zip(workload.memories, workload.store_items(), strict=True):
            stored = http.post("/v1/store", json=item)
            assert stored.status_code == 200, stored.text
            node_ids[memory.key] = stored.json()["node_id"]
        judge_learning_queries(http, workload, node_ids)  # type: ignore[arg-type]
        judged = http.get("/v1/relevance", params={"limit": 1}).json()
        gate1 = http.post("/v1/learning/evaluate", json={"scopes": ["project"]})
        assert gate1.status_code == 200, gate1.text
        proposal = gate1.json()
        trials = holdout_trials(http, workload, node_ids, proposal["multipliers"])  # type: ignore[arg-type]
        body = {
            "scopes": ["project"],
            "proposal_input_checksum": proposal["input_checksum"],
            "memory_artifact_sha256": sha256_hex(b"workload seed 0, 30 projects"),
            "candidate_multipliers": proposal["multipliers"],
            "trials": trials,
        }
        gate2 = http.post("/v1/learning/evaluate-full-retrieval", json=body)
        assert gate2.status_code == 200, gate2.text
        yield SeedRun(http, workload, node_ids, judged[0]["request_id"], proposal, gate2.json())


def test_both_gates_pass_against_a_real_server(seed_run: SeedRun) -> None:
    proposal, holdout = seed_run.proposal, seed_run.holdout
    assert proposal["decision"] == "improved_on_observed_candidates"
    assert (proposal["user_id"], holdout["user_id"]) == ("alice", "alice")
    assert holdout["decision"] == "improved_full_retrieval"
    assert holdout["proposal_input_checksum"] == proposal["input_checksum"]
    assert holdout["coverage"]["query_groups"] == len(seed_run.workload.holdout)
    # the holdout's paired retrievals differ only by the candidate multipliers
    trial = holdout["trials"][0]
    http = seed_run.http
    baseline = http.get(f"/v1/retrievals/{trial['baseline_request_id']}").json()
    candidate = http.get(f"/v1/retrievals/{trial['candidate_request_id']}").json()
    assert baseline["ranking_multipliers"] is None
    assert candidate["ranking_multipliers"] == proposal["multipliers"]
    arm = {"ranking_multipliers", "ranking_profile"}  # the override and its provenance
    inputs = [
        {k: v for k, v in r["execution"]["inputs"].items() if k not in arm}
        for r in (baseline, candidate)
    ]
    assert inputs[0] == inputs[1]
    assert candidate["execution"]["inputs"]["ranking_profile"]["reason"] == "explicit_multipliers"


def test_seed_workflow_against_a_real_server(seed_run: SeedRun) -> None:
    http = seed_run.http
    body = {"proposal": seed_run.proposal, "holdout": seed_run.holdout}
    created = http.post("/v1/learning/profiles", json=body)
    assert created.status_code == 200, created.text
    profile = created.json()
    pid = profile["profile_id"]
    assert (profile["multipliers"], profile["scopes"]) == (
        seed_run.proposal["multipliers"],
        ["project"],
    )

    activated = http.post(f"/v1/learning/profiles/{pid}/activate", json={})
    assert activated.status_code == 200, activated.text
    assert (activated.json()["action"], activated.json()["active_profile_id"]) == ("activate", pid)
    query = {"query": seed_run.workload.holdout[0].text, "scope": "project"}
    applied = http.post("/v1/retrieve", json=query).json()["metadata"]
    assert (applied["ranking_profile_status"], applied["ranking_profile_id"]) == ("applied", pid)
    assert applied["ranking_multipliers"] == profile["multipliers"]
    active = http.get("/v1/learning/profiles/active", params={"scopes": "project"})
    assert active.json() == profile

    off = http.post("/v1/learning/profiles/deactivate", json={"scopes": ["project"]})
    assert (off.json()["action"], off.json()["active_profile_id"]) == ("deactivate", None)
    base = http.post("/v1/retrieve", json=query).json()["metadata"]
    assert (base["ranking_profile_status"], base["ranking_multipliers"]) == ("none", None)

    back = http.post(
        "/v1/learning/profiles/rollback", json={"scopes": ["project"], "profile_id": pid}
    )
    assert (back.json()["action"], back.json()["active_profile_id"]) == ("rollback", pid)
    history = http.get("/v1/learning/profiles/history", params={"scopes": "project"}).json()
    assert [h["action"] for h in history] == ["rollback", "deactivate", "activate"]
    assert [h["active_profile_id"] for h in history] == [pid, None, pid]
    status = http.get(f"/v1/learning/profiles/{pid}").json()
    assert (status["active"], status["latest_change"]) == (True, history[0])


def test_two_keys_cannot_see_each_others_objects(seed_run: SeedRun) -> None:
    alice = seed_run.http
    bob = {"Authorization": shared.BOB["Authorization"]}  # replaces alice's default header
    # bob stores, retrieves and judges his own memory
    mine = alice.post(
        "/v1/store", json={"content": "Bob's Quartz service runs on Nomad."}, headers=bob
    )
    bobs_node = mine.json()["node_id"]
    found = alice.post("/v1/retrieve", json={"query": "Quartz Nomad"}, headers=bob).json()
    assert [r["node"]["id"] for r in found["results"]] == [bobs_node]
    bobs_request = found["metadata"]["request_id"]
    judged = {"request_id": bobs_request, "labels": {bobs_node: True}}
    bobs_feedback = alice.post("/v1/relevance", json=judged, headers=bob).json()["feedback_id"]
    alices_feedback = alice.get("/v1/relevance", params={"limit": 1}).json()[0]["feedback_id"]
    profile = alice.post(
        "/v1/learning/profiles",
        json={"proposal": seed_run.proposal, "holdout": seed_run.holdout},
    ).json()
    pid = profile["profile_id"]

    # receipts and judgments: each sees only their own
    assert alice.get(f"/v1/retrievals/{seed_run.judged_request_id}", headers=bob).status_code == 404
    assert alice.get(f"/v1/retrievals/{bobs_request}").status_code == 404
    assert alice.get(f"/v1/relevance/{alices_feedback}", headers=bob).status_code == 404
    assert alice.get(f"/v1/relevance/{bobs_feedback}").status_code == 404
    assert [r["feedback_id"] for r in alice.get("/v1/relevance", headers=bob).json()] == [
        bobs_feedback
    ]
    assert bobs_feedback not in {
        r["feedback_id"] for r in alice.get("/v1/relevance?limit=1000").json()
    }
    alices_hits = alice.post("/v1/retrieve", json={"query": "Quartz Nomad"}).json()["results"]
    assert bobs_node not in {r["node"]["id"] for r in alices_hits}
    # reports: bob cannot evaluate alice's receipts nor turn her reports into his profile
    trials = seed_run.holdout["trials"]
    gate2 = {
        "scopes": ["project"],
        "proposal_input_checksum": seed_run.proposal["input_checksum"],
        "memory_artifact_sha256": seed_run.holdout["memory_artifact_sha256"],
        "candidate_multipliers": seed_run.proposal["multipliers"],
        "trials": trials,
    }
    foreign = alice.post("/v1/learning/evaluate-full-retrieval", json=gate2, headers=bob)
    assert foreign.status_code == 422
    assert "references a missing receipt" in foreign.json()["detail"]
    own = alice.post("/v1/learning/evaluate", json={"scopes": ["project"]}, headers=bob).json()
    assert (own["feedback_ids"], own["decision"]) == ([bobs_feedback], "insufficient_data")
    stolen = alice.post(
        "/v1/learning/profiles",
        json={"proposal": seed_run.proposal, "holdout": seed_run.holdout},
        headers=bob,
    )
    assert stolen.status_code == 422
    assert "must belong to its owner" in stolen.json()["detail"]
    # profiles, pointer and history
    assert alice.get(f"/v1/learning/profiles/{pid}", headers=bob).status_code == 404
    assert alice.get("/v1/learning/profiles", headers=bob).json() == []
    assert (
        alice.post(f"/v1/learning/profiles/{pid}/activate", json={}, headers=bob).status_code == 404
    )
    pointer = {"scopes": "project"}
    assert alice.get("/v1/learning/profiles/active", params=pointer, headers=bob).json() is None
    assert alice.get("/v1/learning/profiles/history", params=pointer, headers=bob).json() == []
    # naming the other owner with your own key is refused
    as_bob = alice.get("/v1/learning/profiles", params={"user_id": "bob"})
    assert as_bob.status_code == 403
