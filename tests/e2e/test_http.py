"""The HTTP API end to end: the real FastAPI app over a real pack, through TestClient."""

from __future__ import annotations

import ast
import inspect
import json
import logging
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import copy_pack, open_pack
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel, SecretStr
from support.http_api import (
    ALICE,
    ALICE_KEY,
    BOB,
    BOB_KEY,
    FACTS,
    KEYS,
    expected_errors,
    holdout_trials,
    judge_learning_queries,
    openapi_properties,
    retrieve,
    seed_facts,
    store,
    weighted_config,
)

from prme import InvalidInputError, MemoryClient, PRMEConfig, ScoringWeights
from prme.canonical import sha256_hex
from prme.config import APIConfig, EmbeddingConfig
from prme.demo.workload import Workload, generate_workload
from prme.http import create_app, learning_routes
from prme.http import routes as memory_routes
from prme.http.auth import KeyRing
from prme.http.render import render


@pytest.fixture
def memory(client: MemoryClient) -> MemoryClient:
    return client


@pytest.fixture
def api(memory: MemoryClient) -> Iterator[TestClient]:
    """The app with per-user keys for alice and bob."""
    with TestClient(create_app(memory, KEYS)) as http:
        yield http


@pytest.fixture
def open_api(memory: MemoryClient) -> Iterator[TestClient]:
    """The app without keys: every request names its owner."""
    with TestClient(create_app(memory, APIConfig())) as http:
        yield http


def detail_fields(response: Any) -> list[str]:
    """The field names a 422 points at (pydantic's structured detail or our message)."""
    detail = response.json()["detail"]
    if isinstance(detail, str):
        return [detail.split(":", 1)[0]]
    return [str(err["loc"][-1]) for err in detail]


# ---------------------------------------------------------------------------------- service
def test_health_needs_no_key_and_reports_the_scoring(api: TestClient) -> None:
    response = api.get("/v1/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["fusion"] == "weighted"


def test_health_is_503_once_the_pack_is_closed(memory: MemoryClient, api: TestClient) -> None:
    memory.close()
    response = api.get("/v1/health")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}


def test_openapi_and_docs_list_every_route(api: TestClient) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    assert set(paths) == {
        "/v1/health",
        "/v1/store",
        "/v1/retrieve",
        "/v1/index",
        "/v1/retrievals/{request_id}",
        "/v1/relevance",
        "/v1/relevance/{feedback_id}",
        "/v1/learning/evaluate",
        "/v1/learning/evaluate-full-retrieval",
        "/v1/learning/profiles",
        "/v1/learning/profiles/active",
        "/v1/learning/profiles/history",
        "/v1/learning/profiles/{profile_id}",
        "/v1/learning/profiles/{profile_id}/activate",
        "/v1/learning/profiles/deactivate",
        "/v1/learning/profiles/rollback",
        "/v1/memories",
        "/v1/memories/{node_id}",
    }
    assert set(paths["/v1/relevance"]) == {"get", "post"}
    assert api.get("/docs").status_code == 200


def test_every_openapi_property_and_parameter_is_described(api: TestClient) -> None:
    document = api.get("/openapi.json").json()
    properties = list(openapi_properties(document))
    assert len(properties) > 350  # request and response models, each field
    undescribed = [where for where, prop in properties if not prop.get("description")]
    assert undescribed == []
    one_line = [where for where, prop in properties if "\n" in prop["description"]]
    assert one_line == []
    parameters = [
        (path, p["name"])
        for path, operations in document["paths"].items()
        for operation in operations.values()
        for p in operation.get("parameters", [])
        if not p.get("description")
    ]
    assert parameters == []
    # one concept, one description: the owner reads the same in every model that has one
    owners = {p["description"] for w, p in properties if w.endswith(".user_id")}
    assert len(owners) == 1


ERROR_BODY = {"$ref": "#/components/schemas/ErrorBody"}


def test_every_route_declares_its_error_responses_with_their_body(
    api: TestClient, small_api: TestClient
) -> None:
    document = api.get("/openapi.json").json()
    declared: dict[tuple[str, str], set[str]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            errors = {code for code in responses if code >= "400"}
            assert errors == expected_errors(method, path), (method, path)
            for code in errors:
                assert responses[code]["description"], (method, path, code)
                schema = responses[code]["content"]["application/json"]["schema"]
                if path != "/v1/health":
                    assert schema == ERROR_BODY, (method, path, code)
            assert responses.get("503", {}).get("headers", {}).get("Retry-After")
            declared[(method, path)] = errors
    # the errors the app really gives are among those it declares
    missing_id = str(uuid.uuid4())
    observed = {
        ("post", "/v1/retrieve", api.post("/v1/retrieve", json={"query": "x"}).status_code),
        (
            "post",
            "/v1/retrieve",
            api.post("/v1/retrieve", json={"query": "x", "user_id": "bob"}, headers=ALICE).status_code,
        ),
        ("post", "/v1/retrieve", api.post("/v1/retrieve", json={}, headers=ALICE).status_code),
        (
            "get",
            "/v1/retrievals/{request_id}",
            api.get(f"/v1/retrievals/{missing_id}", headers=ALICE).status_code,
        ),
        (
            "post",
            "/v1/learning/profiles/{profile_id}/activate",
            api.post(
                f"/v1/learning/profiles/{missing_id}/activate", json={}, headers=ALICE
            ).status_code,
        ),
        (
            "post",
            "/v1/store",
            small_api.post("/v1/store", json={"content": "x" * 4096}).status_code,
        ),
    }
    assert {status for *_, status in observed} == {401, 403, 404, 413, 422}
    for method, path, status in observed:
        assert str(status) in declared[(method, path)], (method, path, status)


def _client_calls(endpoint: Callable[..., Any]) -> list[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(endpoint)))
    return [
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "client"
    ]


def test_every_route_calls_exactly_one_public_client_method() -> None:
    declared = [*memory_routes.router.routes, *learning_routes.router.routes]
    routes = [r for r in declared if isinstance(r, APIRoute)]
    assert len(routes) == 18
    for route in routes:
        calls = _client_calls(route.endpoint)
        lines = len(inspect.getsource(route.endpoint).splitlines())
        assert lines <= 25, route.path
        if route.path == "/v1/health":
            assert calls == [], "health only probes that the pack is open"
            continue
        assert len(calls) == 1, (route.path, calls)
        assert not calls[0].startswith("_")
        assert callable(getattr(MemoryClient, calls[0])), calls[0]


# ------------------------------------------------------------------------------- owner binding
def test_store_binds_the_owner_from_the_key(memory: MemoryClient, api: TestClient) -> None:
    response = api.post(
        "/v1/store",
        json={"content": FACTS[0], "scope": "project", "confidence": 0.9},
        headers=ALICE,
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"event_id", "node_id", "processing_status"}
    node = memory.get(body["node_id"], user_id="alice")
    assert node is not None
    assert (node.content, node.scope, node.confidence) == (FACTS[0], "project", 0.9)
    assert memory.get(body["node_id"], user_id="bob") is None
    # naming yourself is fine
    assert store(api, FACTS[1], user_id="alice")


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": f"Basic {ALICE_KEY}"},
        {"Authorization": f"Bearer {ALICE_KEY}x"},
        {"Authorization": "Bearer "},
    ],
)
def test_missing_or_wrong_key_is_401(api: TestClient, headers: dict[str, str]) -> None:
    response = api.post("/v1/store", json={"content": "x"}, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == {"detail": "Invalid or missing API key"}


def test_every_protected_route_refuses_a_missing_key(api: TestClient) -> None:
    some = "00000000-0000-4000-8000-000000000000"
    calls = [
        ("POST", "/v1/store"),
        ("POST", "/v1/retrieve"),
        ("POST", "/v1/index"),
        ("GET", f"/v1/retrievals/{some}"),
        ("POST", "/v1/relevance"),
        ("GET", "/v1/relevance"),
        ("GET", f"/v1/relevance/{some}"),
        ("POST", "/v1/learning/evaluate"),
        ("POST", "/v1/learning/evaluate-full-retrieval"),
        ("POST", "/v1/learning/profiles"),
        ("GET", "/v1/learning/profiles"),
        ("GET", "/v1/learning/profiles/active"),
        ("GET", "/v1/learning/profiles/history"),
        ("GET", f"/v1/learning/profiles/{some}"),
        ("POST", f"/v1/learning/profiles/{some}/activate"),
        ("POST", "/v1/learning/profiles/deactivate"),
        ("POST", "/v1/learning/profiles/rollback"),
    ]
    for method, path in calls:
        response = api.request(method, path, json={})
        assert response.status_code == 401, (method, path)
        assert response.headers["www-authenticate"] == "Bearer"


def test_naming_another_user_is_403_in_body_and_query(api: TestClient) -> None:
    refused = [
        api.post("/v1/store", json={"content": "x", "user_id": "bob"}, headers=ALICE),
        api.post("/v1/retrieve", json={"query": "x", "user_id": "bob"}, headers=ALICE),
        api.get(f"/v1/retrievals/{uuid.uuid4()}", params={"user_id": "bob"}, headers=ALICE),
        api.get("/v1/relevance", params={"user_id": "bob"}, headers=ALICE),
        api.get("/v1/learning/profiles", params={"user_id": "bob"}, headers=ALICE),
        api.post("/v1/learning/profiles/deactivate", json={"user_id": "bob"}, headers=ALICE),
    ]
    for response in refused:
        assert response.status_code == 403, response.request.url
        assert response.json() == {"detail": "User does not match authenticated identity"}


def test_without_keys_every_request_names_its_owner(
    memory: MemoryClient, open_api: TestClient
) -> None:
    response = open_api.post("/v1/store", json={"content": FACTS[0]})
    assert response.status_code == 422
    assert "user_id is required without a bound identity" in response.json()["detail"]
    assert detail_fields(response) == ["user_id"]
    assert open_api.get("/v1/relevance").status_code == 422

    node_id = store(open_api, FACTS[0], headers={}, user_id="carol", scope="project")
    assert memory.get(node_id, user_id="carol") is not None
    found = retrieve(open_api, "Which database does Aster use?", headers={}, user_id="carol")
    assert [r["node"]["id"] for r in found["results"]] == [node_id]
    assert retrieve(open_api, "Aster database", headers={}, user_id="dave")["results"] == []


def test_keys_never_appear_in_logs_errors_or_reprs(
    api: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    texts = [
        api.post("/v1/store", json={"content": "x"}, headers={"Authorization": "Bearer nope"}).text,
        api.post("/v1/store", json={"content": "x", "user_id": "bob"}, headers=ALICE).text,
        api.post("/v1/store", json={"content": " "}, headers=ALICE).text,
        repr(KEYS),
        repr(KeyRing(KEYS.user_keys)),
    ]
    seen = "\n".join([*texts, caplog.text])
    assert ALICE_KEY not in seen
    assert BOB_KEY not in seen


@pytest.mark.parametrize(
    "keys",
    [
        {"alice": "same-key", "bob": "same-key"},
        {"alice": "  "},
        {" ": "a-key"},
    ],
)
def test_empty_or_shared_keys_are_refused(memory: MemoryClient, keys: dict[str, str]) -> None:
    config = APIConfig(user_keys={user: SecretStr(key) for user, key in keys.items()})
    with pytest.raises(InvalidInputError) as caught:
        create_app(memory, config)
    assert caught.value.field == "api.user_keys"
    assert "same-key" not in str(caught.value)


def test_keys_are_read_from_the_client_configuration(
    make_client: Callable[..., MemoryClient], tmp_path: Any
) -> None:
    config = PRMEConfig(
        scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"), api=KEYS
    )
    memory = make_client(tmp_path / "keyed", config=config)
    with TestClient(create_app(memory)) as http:
        assert http.post("/v1/store", json={"content": "x"}).status_code == 401
        assert http.post("/v1/store", json={"content": "x"}, headers=BOB).status_code == 200


# ------------------------------------------------------------------------------------- store
def test_store_rejects_extra_fields_and_bad_values_naming_the_field(api: TestClient) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"content": "x", "weights": {}}, "weights"),
        ({"content": "x", "confidence": 1.5}, "confidence"),
        ({"content": "x", "confidence": "high"}, "confidence"),
        ({"content": "x", "scope": "galaxy"}, "scope"),
        ({"content": "x", "ttl_days": -1}, "ttl_days"),
        ({"content": "x", "event_time": "2026-01-01T00:00:00"}, "event_time"),
        ({"content": "   "}, "content"),
        ({}, "content"),
    ]
    for body, field in cases:
        response = api.post("/v1/store", json=body, headers=ALICE)
        assert response.status_code == 422, body
        assert field in detail_fields(response), (body, response.json())


def test_malformed_json_is_422(api: TestClient) -> None:
    response = api.post(
        "/v1/store", content=b"{not json", headers={**ALICE, "content-type": "application/json"}
    )
    assert response.status_code == 422


# ---------------------------------------------------------------------------------- retrieve
def test_retrieve_renders_the_engine_response_and_saves_its_receipt(
    memory: MemoryClient, api: TestClient
) -> None:
    ids = seed_facts(api)
    body = retrieve(
        api,
        "Aster production records database",
        scope=["project", "personal"],
        reference_time="2026-09-14T00:00:00Z",
        limit=2,
    )
    assert body["metadata"]["receipt_persisted"] is True
    assert body["metadata"]["fusion"] == "weighted"
    assert body["metadata"]["reference_time"] == "2026-09-14T00:00:00Z"
    assert len(body["results"]) == 2
    assert body["results"][0]["node"]["id"] == ids[0]
    assert set(body) == {"results", "bundle", "metadata", "cross_scope_hints"}

    request_id = body["metadata"]["request_id"]
    receipt = api.get(f"/v1/retrievals/{request_id}", headers=ALICE)
    assert receipt.status_code == 200
    saved = memory.get_retrieval_receipt(request_id, user_id="alice")
    assert saved is not None
    assert receipt.json() == saved.model_dump(mode="json")
    assert [c["score"] for c in receipt.json()["candidates"]] == [
        r["score_trace"]["composite_score"] for r in body["results"]
    ]


def test_models_render_as_their_json_dump_values(memory: MemoryClient, api: TestClient) -> None:
    """Pydantic writes the responses' JSON: the values are ``model_dump(mode="json")``'s,
    floats in exponent form (written ``1e-05`` by Python, ``0.00001`` by pydantic) included."""
    seed_facts(api)
    request_id = retrieve(api, "Aster database")["metadata"]["request_id"]
    saved = memory.get_retrieval_receipt(request_id, user_id="alice")
    assert saved is not None
    tiny = saved.model_copy(update={"min_score": 1e-05})
    for value in (tiny, [tiny, saved]):
        response = render(value)
        assert response.media_type == "application/json"
        dumped = (
            value.model_dump(mode="json")
            if isinstance(value, BaseModel)
            else [item.model_dump(mode="json") for item in value]
        )
        assert json.loads(response.body) == dumped
    assert json.loads(render(tiny).body)["min_score"] == 1e-05


def test_retrieve_accepts_the_original_filters_and_mode(api: TestClient) -> None:
    seed_facts(api)
    store(api, "Aster once ran on MySQL.", scope="personal")
    query = "Aster database"
    flat = retrieve(
        api, query, scope=["project"], retrieval_mode="explicit", include_cross_scope=False
    )
    original = retrieve(
        api,
        query,
        mode="explicit",
        filters={"scope": ["project"], "include_cross_scope": False},
    )
    assert [r["node"]["id"] for r in original["results"]] == [
        r["node"]["id"] for r in flat["results"]
    ]
    assert {r["node"]["scope"] for r in original["results"]} == {"project"}
    receipt = api.get(
        f"/v1/retrievals/{original['metadata']['request_id']}", headers=ALICE
    ).json()
    assert (receipt["scopes"], receipt["retrieval_mode"]) == (["project"], "explicit")
    # one field given both ways, or an unknown filter, is a 422 naming it
    twice = api.post(
        "/v1/retrieve",
        json={"query": query, "scope": "project", "filters": {"scope": "personal"}},
        headers=ALICE,
    )
    assert twice.status_code == 422 and "scope" in twice.text
    both_modes = api.post(
        "/v1/retrieve",
        json={"query": query, "mode": "explicit", "retrieval_mode": "default"},
        headers=ALICE,
    )
    assert both_modes.status_code == 422 and "retrieval_mode" in both_modes.text
    unknown = api.post(
        "/v1/retrieve", json={"query": query, "filters": {"scop": "project"}}, headers=ALICE
    )
    assert unknown.status_code == 422 and detail_fields(unknown) == ["scop"]
    naive = api.post(
        "/v1/retrieve",
        json={"query": query, "filters": {"time_from": "2026-01-01T00:00:00"}},
        headers=ALICE,
    )
    assert naive.status_code == 422 and "time_from" in naive.text


def test_retrieve_passes_partial_multipliers(api: TestClient) -> None:
    seed_facts(api)
    body = retrieve(api, "Aster database", ranking_multipliers={"lexical": 2})
    applied = body["metadata"]["ranking_multipliers"]
    assert applied["lexical"] == 2.0
    assert applied["semantic"] == 1.0
    assert body["metadata"]["ranking_profile_status"] == "request_override"


def test_retrieve_rejects_bad_input_naming_the_field(api: TestClient) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"query": "x", "weights": {"w_semantic": 1}}, "weights"),
        ({"query": "x", "limit": -1}, "limit"),
        ({"query": "x", "limit": True}, "limit"),
        ({"query": "x", "min_score": -0.5}, "min_score"),
        ({"query": "x", "scope": []}, "scope"),
        ({"query": "x", "reference_time": "2026-09-14T00:00:00"}, "reference_time"),
        ({"query": "x", "ranking_multipliers": {"lexical": 10}}, "lexical"),
        ({"query": "x", "ranking_multipliers": {"colour": 2}}, "colour"),
        ({"query": "  "}, "query"),
    ]
    for body, field in cases:
        response = api.post("/v1/retrieve", json=body, headers=ALICE)
        assert response.status_code == 422, body
        assert field in detail_fields(response), (body, response.json())


def test_rank_fusion_refuses_non_neutral_multipliers_with_422(
    make_client: Callable[..., MemoryClient], tmp_path: Any
) -> None:
    memory = make_client(tmp_path / "rrf", fusion="rrf")
    with TestClient(create_app(memory, KEYS)) as http:
        store(http, FACTS[0])
        refused = http.post(
            "/v1/retrieve",
            json={"query": "Aster database", "ranking_multipliers": {"semantic": 2}},
            headers=ALICE,
        )
        assert refused.status_code == 422
        assert refused.json()["detail"].startswith("ranking_multipliers: ")
        assert "do not apply to fusion='rrf'" in refused.json()["detail"]
        neutral = retrieve(http, "Aster database", ranking_multipliers={})
        assert neutral["metadata"]["fusion"] == "rrf"


# ---------------------------------------------------------------------------------- receipts
def test_receipts_are_owner_bound(api: TestClient) -> None:
    seed_facts(api)
    request_id = retrieve(api, "Aster hosting")["metadata"]["request_id"]
    foreign = api.get(f"/v1/retrievals/{request_id}", headers=BOB)
    assert foreign.status_code == 404
    assert foreign.json()["detail"].startswith("Retrieval receipt not found")
    missing = api.get(f"/v1/retrievals/{uuid.uuid4()}", headers=ALICE)
    assert missing.status_code == 404
    mismatch = api.get(f"/v1/retrievals/{request_id}?user_id=bob", headers=ALICE)
    assert mismatch.status_code == 403
    malformed = api.get("/v1/retrievals/not-a-uuid", headers=ALICE)
    assert malformed.status_code == 422
    assert detail_fields(malformed) == ["request_id"]


# ------------------------------------------------------------------------------- body limit
@pytest.fixture
def small_api(memory: MemoryClient) -> Iterator[TestClient]:
    config = APIConfig(user_keys=KEYS.user_keys, max_body_bytes=2048)
    with TestClient(create_app(memory, config)) as http:
        yield http


def test_body_over_the_limit_is_413_by_content_length(small_api: TestClient) -> None:
    response = small_api.post("/v1/store", json={"content": "x" * 3000}, headers=ALICE)
    assert response.status_code == 413
    assert "2048" in response.json()["detail"]
    assert small_api.post("/v1/store", json={"content": "x" * 1500}, headers=ALICE).is_success


def test_body_over_the_limit_is_413_when_streamed_without_length(small_api: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"content": "'
        for _ in range(5):
            yield b"x" * 512
        yield b'"}'

    headers = {**ALICE, "content-type": "application/json"}
    response = small_api.post("/v1/store", content=chunks(), headers=headers)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413

    def small() -> Iterator[bytes]:
        yield b'{"content": "'
        yield b"x" * 512
        yield b'"}'

    assert small_api.post("/v1/store", content=small(), headers=headers).status_code == 200


def test_an_invalid_content_length_is_refused(small_api: TestClient) -> None:
    headers = {**ALICE, "content-type": "application/json", "content-length": "-5"}
    response = small_api.post("/v1/store", content=b"{}", headers=headers)
    assert response.request.headers["content-length"] == "-5"
    assert response.status_code == 413


# ------------------------------------------------------------------------------------ errors
def test_unexpected_errors_are_500_without_internals(
    memory: MemoryClient, caplog: pytest.LogCaptureFixture
) -> None:
    with TestClient(create_app(memory, KEYS), raise_server_exceptions=False) as http:
        memory.close()  # every engine call now raises RuntimeError("MemoryClient is closed")
        response = http.post("/v1/retrieve", json={"query": "Aster"}, headers=ALICE)
    assert response.status_code == 500
    assert response.json() == {"detail": "Internal server error"}
    assert "RuntimeError" in caplog.text


# --------------------------------------------------------------------------------- relevance
def judged_retrieval(api: TestClient) -> tuple[str, list[str]]:
    """A retrieval of alice's with its returned node ids."""
    seed_facts(api)
    body = retrieve(api, "Aster production records database", scope="project")
    return body["metadata"]["request_id"], [r["node"]["id"] for r in body["results"]]


def test_relevance_is_recorded_once_and_read_back(memory: MemoryClient, api: TestClient) -> None:
    request_id, returned = judged_retrieval(api)
    feedback_id = str(uuid.uuid4())
    submission = {
        "feedback_id": feedback_id,
        "request_id": request_id,
        "labels": {returned[0]: True, returned[1]: False},
    }
    first = api.post("/v1/relevance", json=submission, headers=ALICE)
    assert first.status_code == 200
    record = first.json()
    assert record["user_id"] == "alice"
    assert record["labels"] == {returned[0]: True, returned[1]: False}
    assert (record["surface"], record["method"]) == ("results", "explicit_user")
    saved = memory.get_relevance(feedback_id, user_id="alice")
    assert saved is not None
    assert record == saved.model_dump(mode="json")

    retry = api.post("/v1/relevance", json=submission, headers=ALICE)
    assert retry.status_code == 200
    assert retry.json() == record  # the original, with its original recorded_at

    assert api.get(f"/v1/relevance/{feedback_id}", headers=ALICE).json() == record
    assert api.get("/v1/relevance", headers=ALICE).json() == [record]


def test_relevance_feedback_id_is_optional(api: TestClient) -> None:
    request_id, returned = judged_retrieval(api)
    body = {"request_id": request_id, "labels": {returned[0]: True}, "user_id": "alice"}
    first = api.post("/v1/relevance", json=body, headers=ALICE).json()
    second = api.post("/v1/relevance", json=body, headers=ALICE).json()
    assert first["feedback_id"] != second["feedback_id"]


def test_relevance_pages_by_feedback_id(api: TestClient) -> None:
    request_id, returned = judged_retrieval(api)
    ids = sorted(str(uuid.uuid4()) for _ in range(3))
    for feedback_id in ids:
        body = {"feedback_id": feedback_id, "request_id": request_id, "labels": {returned[0]: True}}
        assert api.post("/v1/relevance", json=body, headers=ALICE).status_code == 200
    page = api.get("/v1/relevance", params={"limit": 2}, headers=ALICE)
    assert [r["feedback_id"] for r in page.json()] == ids[:2]  # the body stays a bare list
    rest = api.get("/v1/relevance", params={"after_id": ids[1]}, headers=ALICE).json()
    assert [r["feedback_id"] for r in rest] == ids[2:]
    # a full page links the next one; the last page links nothing
    link = page.headers["link"]
    assert link == f'</v1/relevance?limit=2&after_id={ids[1]}>; rel="next"'
    following = api.get(link[1 : link.index(">")], headers=ALICE)
    assert [r["feedback_id"] for r in following.json()] == ids[2:]
    assert "link" not in following.headers
    assert "link" not in api.get("/v1/relevance", headers=ALICE).headers
    for limit in (0, 1001):
        refused = api.get("/v1/relevance", params={"limit": limit}, headers=ALICE)
        assert refused.status_code == 422
        assert detail_fields(refused) == ["limit"]


def test_relevance_is_owner_bound(api: TestClient) -> None:
    request_id, returned = judged_retrieval(api)
    body = {"request_id": request_id, "labels": {returned[0]: True}}
    # bob cannot judge alice's retrieval: her receipt does not exist for him
    foreign = api.post("/v1/relevance", json=body, headers=BOB)
    assert foreign.status_code == 404
    assert "A saved retrieval receipt owned by this user is required" in foreign.json()["detail"]
    missing = api.post(
        "/v1/relevance", json={**body, "request_id": str(uuid.uuid4())}, headers=ALICE
    )
    assert missing.status_code == 404

    record = api.post("/v1/relevance", json=body, headers=ALICE).json()
    assert api.get(f"/v1/relevance/{record['feedback_id']}", headers=BOB).status_code == 404
    assert api.get("/v1/relevance", headers=BOB).json() == []
    mismatch = api.post("/v1/relevance", json={**body, "user_id": "bob"}, headers=ALICE)
    assert mismatch.status_code == 403
    assert api.get(f"/v1/relevance/{uuid.uuid4()}", headers=ALICE).status_code == 404


def test_relevance_rejects_bad_labels_naming_the_field(api: TestClient) -> None:
    request_id, returned = judged_retrieval(api)
    outsider = str(uuid.uuid4())
    cases: list[tuple[dict[str, Any], str]] = [
        ({"labels": {}}, "labels"),
        ({"labels": {returned[0]: 1}}, returned[0]),
        ({"labels": {returned[0]: "true"}}, returned[0]),
        ({"labels": {"not-a-uuid": True}}, "[key]"),
        ({"labels": {returned[0]: True}, "surface": "everything"}, "surface"),
        ({"labels": {returned[0]: True}, "weight": 2}, "weight"),
        ({"labels": {outsider: True}}, "labels"),
    ]
    for extra, field in cases:
        response = api.post(
            "/v1/relevance", json={"request_id": request_id, **extra}, headers=ALICE
        )
        assert response.status_code == 422, extra
        assert field in detail_fields(response), (extra, response.json())
    unknown = api.post(
        "/v1/relevance",
        json={"request_id": request_id, "labels": {outsider: True}},
        headers=ALICE,
    )
    assert "Relevance labels must refer to saved response candidates" in unknown.json()["detail"]
    assert api.get("/v1/relevance", headers=ALICE).json() == []  # nothing was written


def test_reusing_a_feedback_id_for_other_labels_is_422(api: TestClient) -> None:
    request_id, returned = judged_retrieval(api)
    feedback_id = str(uuid.uuid4())
    body = {"feedback_id": feedback_id, "request_id": request_id, "labels": {returned[0]: True}}
    original = api.post("/v1/relevance", json=body, headers=ALICE).json()
    changed = {**body, "labels": {returned[0]: False}}
    response = api.post("/v1/relevance", json=changed, headers=ALICE)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("feedback_id: ")
    assert "feedback_id already identifies a different relevance judgment" in response.text
    assert api.get(f"/v1/relevance/{feedback_id}", headers=ALICE).json() == original


# ------------------------------------------------------------------------ learning (no evidence)
def test_evaluate_learning_renders_the_persisted_report(
    memory: MemoryClient, api: TestClient
) -> None:
    request_id, returned = judged_retrieval(api)
    labels = {returned[0]: True, returned[1]: False}
    api.post("/v1/relevance", json={"request_id": request_id, "labels": labels}, headers=ALICE)
    response = api.post("/v1/learning/evaluate", json={"scopes": ["project"]}, headers=ALICE)
    assert response.status_code == 200
    report = response.json()
    assert report["decision"] == "insufficient_data"
    assert report["user_id"] == "alice"
    assert report["scopes"] == ["project"]
    saved = memory.get_learning_evaluation(report["input_checksum"], user_id="alice")
    assert saved is not None
    assert report == saved.model_dump(mode="json")
    # bob's evaluation sees none of alice's judgments
    other = api.post("/v1/learning/evaluate", json={"scopes": ["project"]}, headers=BOB).json()
    assert other["coverage"]["feedback_records"] == 0


def test_evaluate_learning_rejects_bad_input_naming_the_field(api: TestClient) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"max_records": 0}, "max_records"),
        ({"max_records": "10"}, "max_records"),
        ({"scopes": []}, "scopes"),
        ({"scopes": ["galaxy"]}, "0"),
        ({"surface": "everything"}, "surface"),
        ({"config": {"min_training_queries": 1}}, "min_training_queries"),
        ({"config": {"learning_rate": 1}}, "learning_rate"),
        ({"query_groups": {"not-a-uuid": "g"}}, "[key]"),
        ({"weights": {}}, "weights"),
    ]
    for body, field in cases:
        response = api.post("/v1/learning/evaluate", json=body, headers=ALICE)
        assert response.status_code == 422, body
        assert field in detail_fields(response), (body, response.json())


def test_profile_reads_when_nothing_exists(api: TestClient) -> None:
    assert api.get("/v1/learning/profiles", headers=ALICE).json() == []
    # /active and /history are routes of their own, not profile ids
    active = api.get("/v1/learning/profiles/active?scopes=project", headers=ALICE)
    assert active.status_code == 200
    assert active.json() is None
    history = api.get("/v1/learning/profiles/history", headers=ALICE)
    assert (history.status_code, history.json()) == (200, [])
    missing = api.get(f"/v1/learning/profiles/{uuid.uuid4()}", headers=ALICE)
    assert missing.status_code == 404
    assert missing.json()["detail"].startswith("Ranking profile not found")
    nothing = api.post("/v1/learning/profiles/deactivate", json={}, headers=ALICE)
    assert (nothing.status_code, nothing.json()) == (200, None)


def test_profile_changes_reject_bad_input(api: TestClient) -> None:
    unknown = api.post(f"/v1/learning/profiles/{uuid.uuid4()}/activate", json={}, headers=ALICE)
    assert unknown.status_code == 404
    no_body = api.post(f"/v1/learning/profiles/{uuid.uuid4()}/activate", headers=ALICE)
    assert no_body.status_code == 422
    noop = api.post("/v1/learning/profiles/rollback", json={"scopes": ["project"]}, headers=ALICE)
    assert noop.status_code == 422
    assert "rollback cannot be a no-op" in noop.json()["detail"]
    bad_scope = api.get("/v1/learning/profiles/history?scopes=galaxy", headers=ALICE)
    assert bad_scope.status_code == 422
    assert detail_fields(bad_scope) == ["0"]
    assert api.get("/v1/learning/profiles/history?limit=0", headers=ALICE).status_code == 422
    extra = api.post("/v1/learning/profiles/deactivate", json={"profile": 1}, headers=ALICE)
    assert (extra.status_code, detail_fields(extra)) == (422, ["profile"])
    empty = api.post("/v1/learning/profiles/deactivate", json={"scopes": []}, headers=ALICE)
    assert (empty.status_code, detail_fields(empty)) == (422, ["scopes"])


# ------------------------------------------------------------------- the seed workflow over HTTP
class StepClock:
    """A deterministic clock: one millisecond per call from 2026-09-01."""

    def __init__(self) -> None:
        self.now = datetime(2026, 9, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@dataclass(frozen=True)
class Evidence:
    """A closed pack holding alice's judgments and both passing reports (made over HTTP)."""

    path: Path
    workload: Workload
    node_ids: dict[str, str]
    proposal: dict[str, Any]
    holdout: dict[str, Any]


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Evidence:
    path = tmp_path_factory.mktemp("seed") / "pack"
    workload = generate_workload(0, projects=30)
    # On the session's backend: a profile evaluated on one backend is inapplicable on the other
    # (the lexical channel is part of the feature identity).
    with open_pack(path, config=weighted_config(), clock=StepClock()) as memory:
        stored = memory.store_many(workload.store_items(), user_id="alice")  # setup, not under test
        node_ids = {m.key: node for m, node in zip(workload.memories, stored, strict=True)}
        with TestClient(create_app(memory, KEYS)) as api:
            judge_learning_queries(api, workload, node_ids)
            gate1 = api.post("/v1/learning/evaluate", json={"scopes": ["project"]}, headers=ALICE)
            proposal = gate1.json()
            body = {
                "scopes": ["project"],
                "proposal_input_checksum": proposal["input_checksum"],
                "memory_artifact_sha256": sha256_hex(b"workload seed 0, 30 projects"),
                "candidate_multipliers": proposal["multipliers"],
                "trials": holdout_trials(api, workload, node_ids, proposal["multipliers"]),
            }
            gate2 = api.post("/v1/learning/evaluate-full-retrieval", json=body, headers=ALICE)
    return Evidence(path, workload, node_ids, proposal, gate2.json())


@pytest.fixture
def pack(
    evidence: Evidence, tmp_path: Path, make_client: Callable[..., MemoryClient]
) -> MemoryClient:
    """A private copy of the evidence pack (a copy shares the pack secret)."""
    return make_client(copy_pack(evidence.path, tmp_path / "copy"))


@pytest.fixture
def pack_api(pack: MemoryClient) -> Iterator[TestClient]:
    with TestClient(create_app(pack, KEYS)) as http:
        yield http


def create_profile(api: TestClient, evidence: Evidence, **fields: Any) -> dict[str, Any]:
    body = {"proposal": evidence.proposal, "holdout": evidence.holdout, **fields}
    response = api.post("/v1/learning/profiles", json=body, headers=ALICE)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_both_gates_pass_over_http(evidence: Evidence) -> None:
    proposal, holdout = evidence.proposal, evidence.holdout
    assert proposal["decision"] == "improved_on_observed_candidates"
    assert proposal["coverage"]["validation_queries"] >= 20
    assert proposal["coverage"]["training_queries"] >= 20
    # confidence predicts relevance in this workload, so the fit leans on it
    assert proposal["multipliers"]["confidence"] == max(proposal["multipliers"].values())
    assert holdout["decision"] == "improved_full_retrieval"
    assert holdout["proposal_input_checksum"] == proposal["input_checksum"]
    assert holdout["coverage"]["query_groups"] == len(evidence.workload.holdout)
    assert holdout["ndcg_gain"] == holdout["candidate_ndcg"] - holdout["baseline_ndcg"]


def test_seed_workflow_over_http(
    pack: MemoryClient, pack_api: TestClient, evidence: Evidence
) -> None:
    api = pack_api
    profile = create_profile(api, evidence)
    assert profile["multipliers"] == evidence.proposal["multipliers"]
    assert profile["scopes"] == ["project"]
    saved = pack.get_ranking_profile(profile["profile_id"], user_id="alice")
    assert saved is not None
    assert profile == saved.model_dump(mode="json")
    again = create_profile(api, evidence, profile_id=profile["profile_id"])
    assert again == profile  # idempotent: the saved profile, with its first created_at

    pid = profile["profile_id"]
    change = api.post(f"/v1/learning/profiles/{pid}/activate", json={}, headers=ALICE)
    assert change.status_code == 200, change.text
    state = change.json()
    assert (state["action"], state["previous_profile_id"], state["active_profile_id"]) == (
        "activate",
        None,
        pid,
    )

    query = evidence.workload.holdout[0].text
    applied = retrieve(api, query, scope="project")["metadata"]
    assert (applied["ranking_profile_status"], applied["ranking_profile_id"]) == ("applied", pid)
    assert applied["ranking_multipliers"] == profile["multipliers"]
    override = retrieve(api, query, scope="project", ranking_multipliers={})["metadata"]
    assert (override["ranking_profile_status"], override["ranking_profile_id"]) == (
        "request_override",
        pid,
    )
    unfiltered = retrieve(api, query)["metadata"]
    assert (unfiltered["ranking_profile_status"], unfiltered["ranking_profile_id"]) == (
        "none",
        None,
    )

    active = api.get("/v1/learning/profiles/active", params={"scopes": "project"}, headers=ALICE)
    assert active.json() == profile
    assert api.get("/v1/learning/profiles/active", headers=ALICE).json() is None
    status = api.get(f"/v1/learning/profiles/{pid}", headers=ALICE).json()
    assert status == {"profile": profile, "active": True, "latest_change": state}
    assert api.get("/v1/learning/profiles", headers=ALICE).json() == [profile]

    off = api.post("/v1/learning/profiles/deactivate", json={"scopes": ["project"]}, headers=ALICE)
    assert (off.json()["action"], off.json()["active_profile_id"]) == ("deactivate", None)
    assert retrieve(api, query, scope="project")["metadata"]["ranking_profile_status"] == "none"
    again_off = api.post(
        "/v1/learning/profiles/deactivate", json={"scopes": ["project"]}, headers=ALICE
    )
    assert (again_off.status_code, again_off.json()) == (200, None)

    back = api.post(
        "/v1/learning/profiles/rollback",
        json={"scopes": ["project"], "profile_id": pid},
        headers=ALICE,
    )
    assert (back.json()["action"], back.json()["active_profile_id"]) == ("rollback", pid)
    history = api.get("/v1/learning/profiles/history?scopes=project", headers=ALICE).json()
    assert [h["action"] for h in history] == ["rollback", "deactivate", "activate"]
    pages, url = [], "/v1/learning/profiles/history?scopes=project&limit=2"
    while url:  # the Link header walks the same history, page by page
        response = api.get(url, headers=ALICE)
        pages.append(response.json())
        link = response.headers.get("link", "")
        url = link[1 : link.index(">")] if link else ""
    assert [len(p) for p in pages] == [2, 1]
    assert [h for p in pages for h in p] == history
    listed = api.get("/v1/learning/profiles?limit=1", headers=ALICE)
    assert listed.headers["link"] == f'</v1/learning/profiles?limit=1&after_id={pid}>; rel="next"'
    assert history == [
        s.model_dump(mode="json")
        for s in pack.list_ranking_profile_history(user_id="alice", scopes=["project"])
    ]
    base = api.post("/v1/learning/profiles/rollback", json={"scopes": ["project"]}, headers=ALICE)
    assert (base.json()["action"], base.json()["active_profile_id"]) == ("rollback", None)


def test_a_profile_is_created_from_report_checksums_over_http(
    pack: MemoryClient, pack_api: TestClient, evidence: Evidence
) -> None:
    api = pack_api
    by_checksum = {
        "proposal_input_checksum": evidence.proposal["input_checksum"],
        "holdout_input_checksum": evidence.holdout["input_checksum"],
    }
    made = api.post("/v1/learning/profiles", json=by_checksum, headers=ALICE)
    assert made.status_code == 200, made.text
    profile = made.json()
    assert (profile["proposal"], profile["holdout"]) == (evidence.proposal, evidence.holdout)
    assert profile["multipliers"] == evidence.proposal["multipliers"]
    pid = profile["profile_id"]
    shown = api.get(f"/v1/learning/profiles/{pid}", headers=ALICE)
    assert shown.json()["profile"] == profile
    # A retry returns the stored profile byte for byte, however its reports are named.
    mixed = {"proposal_input_checksum": evidence.proposal["input_checksum"]}
    mixed |= {"holdout": evidence.holdout, "profile_id": pid}
    for body in ({**by_checksum, "profile_id": pid}, mixed):
        again = api.post("/v1/learning/profiles", json=body, headers=ALICE)
        assert (again.status_code, again.content) == (200, made.content)
    # The whole-report body still works, beside it.
    whole = create_profile(api, evidence)
    assert {k: v for k, v in whole.items() if k not in {"profile_id", "created_at"}} == {
        k: v for k, v in profile.items() if k not in {"profile_id", "created_at"}
    }


def test_profile_checksums_that_name_no_report_of_the_owner_are_404_and_write_nothing(
    pack: MemoryClient, pack_api: TestClient, evidence: Evidence
) -> None:
    api = pack_api
    proposal, holdout = evidence.proposal["input_checksum"], evidence.holdout["input_checksum"]
    unknown = "ab" * 32
    def named(proposal_checksum: str, holdout_checksum: str) -> dict[str, str]:
        return {
            "proposal_input_checksum": proposal_checksum,
            "holdout_input_checksum": holdout_checksum,
        }

    whole_proposal = {"proposal": evidence.proposal, "holdout_input_checksum": holdout}
    cases = [
        (ALICE, named(unknown, holdout), "proposal", unknown),
        (ALICE, named(proposal, unknown), "holdout", unknown),
        # another owner's reports are indistinguishable from unknown ones
        (BOB, named(proposal, holdout), "proposal", proposal),
        (BOB, whole_proposal, "holdout", holdout),
    ]
    for headers, body, name, checksum in cases:
        response = api.post("/v1/learning/profiles", json=body, headers=headers)
        assert response.status_code == 404, (body, response.text)
        assert response.json() == {
            "detail": f"{name}_input_checksum: {name.capitalize()} report not found: {checksum}"
        }
    both = {"proposal": evidence.proposal, "proposal_input_checksum": proposal}
    for body, field in (
        ({**both, "holdout_input_checksum": holdout}, "proposal_input_checksum"),
        ({"proposal_input_checksum": proposal}, "holdout_input_checksum"),
        ({}, "proposal_input_checksum"),
    ):
        response = api.post("/v1/learning/profiles", json=body, headers=ALICE)
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith(f"{field}: give exactly one of"), response.text
    malformed = api.post(
        "/v1/learning/profiles",
        json={"proposal_input_checksum": "nope", "holdout_input_checksum": holdout},
        headers=ALICE,
    )
    assert malformed.status_code == 422
    assert detail_fields(malformed) == ["proposal_input_checksum"]
    not_object = api.post(
        "/v1/learning/profiles",
        json={"proposal": [1, 2], "holdout_input_checksum": holdout},
        headers=ALICE,
    )
    assert not_object.status_code == 422, not_object.text
    assert not_object.json()["detail"].startswith("proposal:")
    assert pack.list_ranking_profiles(user_id="alice") == []
    assert pack.list_ranking_profiles(user_id="bob") == []


def test_creating_a_profile_over_http_parses_each_report_once(
    pack: MemoryClient, evidence: Evidence
) -> None:
    """Counted by the reports' verification functions, which run once per report read or
    received (each after its one parse)."""
    from prme.learning import verify_reports

    verifiers = {
        "proposal": verify_reports.verify_learning_evaluation,
        "holdout": verify_reports.verify_full_retrieval_evaluation,
    }
    codes = {v.__code__: name for name, v in verifiers.items()}
    parsed: list[str] = []

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            parsed.append(codes[frame.f_code])

    by_checksum = {
        "proposal_input_checksum": evidence.proposal["input_checksum"],
        "holdout_input_checksum": evidence.holdout["input_checksum"],
    }
    whole = {"proposal": evidence.proposal, "holdout": evidence.holdout}
    for body in (whole, by_checksum):
        parsed.clear()
        threading.setprofile(count)  # the app's worker threads start inside the TestClient
        try:
            with TestClient(create_app(pack, KEYS)) as api:
                response = api.post("/v1/learning/profiles", json=body, headers=ALICE)
        finally:
            threading.setprofile(None)  # type: ignore[arg-type]
        assert response.status_code == 200, response.text
        assert sorted(parsed) == ["holdout", "proposal"], (sorted(body), parsed)


def test_profiles_are_owner_bound(pack_api: TestClient, evidence: Evidence) -> None:
    api = pack_api
    pid = create_profile(api, evidence)["profile_id"]
    assert api.get(f"/v1/learning/profiles/{pid}", headers=BOB).status_code == 404
    assert api.get("/v1/learning/profiles", headers=BOB).json() == []
    assert api.get("/v1/learning/profiles/active?scopes=project", headers=BOB).json() is None
    foreign = api.post(f"/v1/learning/profiles/{pid}/activate", json={}, headers=BOB)
    assert foreign.status_code == 404
    foreign_rollback = api.post(
        "/v1/learning/profiles/rollback",
        json={"scopes": ["project"], "profile_id": pid},
        headers=BOB,
    )
    assert foreign_rollback.status_code == 404
    body = {"proposal": evidence.proposal, "holdout": evidence.holdout}
    stolen = api.post("/v1/learning/profiles", json=body, headers=BOB)
    assert stolen.status_code == 422
    assert "must belong to its owner" in stolen.json()["detail"]
    mismatch = api.post("/v1/learning/profiles", json={**body, "user_id": "bob"}, headers=ALICE)
    assert mismatch.status_code == 403
    activate_as_bob = api.post(
        f"/v1/learning/profiles/{pid}/activate", json={"user_id": "bob"}, headers=ALICE
    )
    assert activate_as_bob.status_code == 403
    assert api.get(f"/v1/learning/profiles/{pid}", headers=ALICE).json()["active"] is False


def test_a_stale_pointer_is_409(pack_api: TestClient, evidence: Evidence) -> None:
    api = pack_api
    first = create_profile(api, evidence)["profile_id"]
    second = create_profile(api, evidence, profile_id=str(uuid.uuid4()))["profile_id"]
    change_id = str(uuid.uuid4())
    state = api.post(
        f"/v1/learning/profiles/{first}/activate", json={"change_id": change_id}, headers=ALICE
    ).json()
    # the second profile was evaluated against base scoring, but the pointer now names the first
    stale = api.post(f"/v1/learning/profiles/{second}/activate", json={}, headers=ALICE)
    assert stale.status_code == 409
    assert "evaluated baseline" in stale.json()["detail"]
    # a lost acknowledgement retried with the same change_id returns the stored transition
    retry = api.post(
        f"/v1/learning/profiles/{first}/activate", json={"change_id": change_id}, headers=ALICE
    )
    assert (retry.status_code, retry.json()) == (200, state)
    reused = api.post(
        f"/v1/learning/profiles/{second}/activate", json={"change_id": change_id}, headers=ALICE
    )
    assert reused.status_code == 422
    assert "change_id already identifies a different" in reused.json()["detail"]
    never_active = api.post(
        "/v1/learning/profiles/rollback",
        json={"scopes": ["project"], "profile_id": second},
        headers=ALICE,
    )
    assert never_active.status_code == 422
    assert "unavailable for these scopes" in never_active.json()["detail"]
    history = api.get("/v1/learning/profiles/history?scopes=project", headers=ALICE).json()
    assert history == [state]  # nothing else was written


def test_an_inapplicable_profile_is_422(
    pack: MemoryClient, evidence: Evidence, make_client: Callable[..., MemoryClient]
) -> None:
    with TestClient(create_app(pack, KEYS)) as api:
        pid = create_profile(api, evidence)["profile_id"]
    pack.close()
    rrf = make_client(pack.path, fusion="rrf")
    with TestClient(create_app(rrf, KEYS)) as api:
        refused = api.post(f"/v1/learning/profiles/{pid}/activate", json={}, headers=ALICE)
        assert refused.status_code == 422
        assert "Ranking profile is inapplicable: rank_fusion_scoring" in refused.json()["detail"]
        assert api.get(f"/v1/learning/profiles/{pid}", headers=ALICE).json()["active"] is False


def test_tampered_or_unsupported_evidence_is_422(pack_api: TestClient, evidence: Evidence) -> None:
    api = pack_api
    forged = {**evidence.proposal, "attestation": "0" * 64}
    body = {"proposal": forged, "holdout": evidence.holdout}
    refused = api.post("/v1/learning/profiles", json=body, headers=ALICE)
    assert refused.status_code == 422
    assert refused.json()["detail"].split(":", 1)[0].startswith("proposal")
    edited = {**evidence.holdout, "ndcg_gain": 0.5}
    body = {"proposal": evidence.proposal, "holdout": edited}
    refused = api.post("/v1/learning/profiles", json=body, headers=ALICE)
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        "holdout: Value error, Full retrieval evaluation aggregate metrics do not match its "
        "queries (ndcg_gain)"
    )
    decided = {**evidence.proposal, "decision": "no_improvement"}
    refused = api.post(
        "/v1/learning/profiles",
        json={"proposal": decided, "holdout": evidence.holdout},
        headers=ALICE,
    )
    assert refused.status_code == 422
    assert refused.json()["detail"] == (
        "proposal: Value error, Learning evaluation decision does not match its metrics"
    )
    extra = {"proposal": evidence.proposal, "holdout": evidence.holdout, "activate": True}
    assert detail_fields(api.post("/v1/learning/profiles", json=extra, headers=ALICE)) == [
        "activate"
    ]
    assert api.get("/v1/learning/profiles", headers=ALICE).json() == []


def test_evaluate_full_retrieval_rejects_bad_input(
    pack_api: TestClient, evidence: Evidence
) -> None:
    api = pack_api
    valid = {
        "scopes": ["project"],
        "proposal_input_checksum": evidence.proposal["input_checksum"],
        "memory_artifact_sha256": "ab" * 32,
        "candidate_multipliers": evidence.proposal["multipliers"],
        "trials": evidence.holdout["trials"][:3],
    }
    ok = api.post("/v1/learning/evaluate-full-retrieval", json=valid, headers=ALICE)
    assert ok.status_code == 200
    assert ok.json()["decision"] == "insufficient_data"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"proposal_input_checksum": "not-hex"}, "proposal_input_checksum"),
        ({"memory_artifact_sha256": "AB" * 32}, "memory_artifact_sha256"),
        ({"trials": []}, "trials"),
        ({"candidate_multipliers": {"semantic": 9}}, "semantic"),
        ({"trials": [{**valid["trials"][0], "note": "x"}]}, "note"),
        ({"scopes": ["personal"]}, "scopes"),
    ]
    for change, field in cases:
        response = api.post(
            "/v1/learning/evaluate-full-retrieval", json={**valid, **change}, headers=ALICE
        )
        assert response.status_code == 422, change
        assert any(field in f for f in detail_fields(response)), (change, response.json())
    # bob cannot evaluate alice's receipts
    foreign = api.post("/v1/learning/evaluate-full-retrieval", json=valid, headers=BOB)
    assert foreign.status_code == 422  # the trials name receipts bob does not have
    assert "references a missing receipt" in foreign.json()["detail"]
