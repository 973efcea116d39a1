"""The in-process HTTP app's shared pieces: per-user keys, request helpers, the OpenAPI walk and
the seed workflow over HTTP (judge the learning queries, paired holdout retrievals)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient
from pydantic import SecretStr

from prme import PRMEConfig, ScoringWeights
from prme.config import APIConfig, EmbeddingConfig
from prme.demo.workload import Workload

ALICE_KEY = "alice-secret-key-0123456789"
BOB_KEY = "bob-secret-key-9876543210"
ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
BOB = {"Authorization": f"Bearer {BOB_KEY}"}
KEYS = APIConfig(user_keys={"alice": SecretStr(ALICE_KEY), "bob": SecretStr(BOB_KEY)})

FACTS = (
    "Aster keeps its production records in PostgreSQL 16.",
    "Aster is hosted on Kubernetes on GKE.",
    "The Aster team writes new services in Rust.",
)


def store(api: TestClient, content: str, headers: dict[str, str] = ALICE, **fields: Any) -> str:
    response = api.post("/v1/store", json={"content": content, **fields}, headers=headers)
    assert response.status_code == 200, response.text
    return str(response.json()["node_id"])


def retrieve(api: TestClient, query: str, headers: dict[str, str] = ALICE, **fields: Any) -> Any:
    response = api.post("/v1/retrieve", json={"query": query, **fields}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def seed_facts(api: TestClient) -> list[str]:
    return [store(api, fact, scope="project") for fact in FACTS]


def openapi_properties(node: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """Every (location, schema) of a property anywhere in an OpenAPI document."""
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            yield f"{where}.{name}", prop
        for key, value in node.items():
            yield from openapi_properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from openapi_properties(value, f"{where}[{index}]")


def expected_errors(method: str, path: str) -> set[str]:
    if path == "/v1/health":
        return {"503"}
    codes = {"401", "403", "422", "503"}
    if method != "get":
        codes |= {"413"} | (set() if path == "/v1/retrieve" else {"409"})
    if "{" in path or (method, path) in {
        ("post", "/v1/relevance"),
        ("post", "/v1/learning/profiles/rollback"),
        ("post", "/v1/learning/profiles"),  # a report checksum naming no report of the owner
    }:
        codes.add("404")
    return codes


CLOCK = "2026-09-14T00:00:00Z"



def weighted_config(**overrides: Any) -> PRMEConfig:
    return PRMEConfig(
        scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"), **overrides
    )


def judge_learning_queries(api: TestClient, workload: Workload, node_ids: dict[str, str]) -> None:
    """Retrieve each learning query and label what a person would: the current fact relevant,
    returned stale facts about the same thing not relevant; everything else stays unlabelled."""
    key_of = {node: key for key, node in node_ids.items()}
    for query in workload.learning:
        body = retrieve(api, query.text, scope="project", reference_time=CLOCK, limit=10)
        relevant = {node_ids[key] for key in query.relevant_keys}
        topic = query.relevant_keys[0].rsplit("/", 1)[0]
        labels: dict[str, bool] = {}
        for result in body["results"]:
            node = result["node"]["id"]
            if node in relevant or key_of[node].startswith(topic):
                labels[node] = node in relevant
        if labels:
            submission = {"request_id": body["metadata"]["request_id"], "labels": labels}
            assert api.post("/v1/relevance", json=submission, headers=ALICE).status_code == 200


def holdout_trials(
    api: TestClient, workload: Workload, node_ids: dict[str, str], multipliers: dict[str, float]
) -> list[dict[str, Any]]:
    """Paired fresh retrievals of every holdout query: identical except for the multipliers."""
    trials = []
    for query in workload.holdout:
        arm: dict[str, Any] = {
            "scope": "project",
            "reference_time": CLOCK,
            "limit": 20,
            "include_cross_scope": False,
        }
        baseline = retrieve(api, query.text, **arm)
        candidate = retrieve(api, query.text, **arm, ranking_multipliers=multipliers)
        trials.append(
            {
                "group_id": query.group,
                "baseline_request_id": baseline["metadata"]["request_id"],
                "candidate_request_id": candidate["metadata"]["request_id"],
                "relevant_node_ids": [node_ids[key] for key in query.relevant_keys],
            }
        )
    return trials


