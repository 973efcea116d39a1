"""schemathesis drives every operation of ``/openapi.json`` against the real app over a real pack.

The pack holds a few of alice's memories, a judged retrieval and per-user keys; every generated
request carries alice's key. A bounded number of examples per operation (valid and invalid
inputs) keeps this fast. Every response must be below 500 and match the documented schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis import BaseSchema, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
)
from support.http_api import ALICE, FACTS, KEYS, seed_facts, weighted_config

from prme import MemoryClient
from prme.http import create_app, learning_routes
from prme.http import memory_routes as management_routes
from prme.http import routes as memory_routes

EXAMPLES = 15
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]
OPERATIONS = sorted(
    (method, route.path)
    for route in [
        *memory_routes.router.routes,
        *learning_routes.router.routes,
        *management_routes.router.routes,
    ]
    if isinstance(route, APIRoute)
    for method in route.methods
)

# every operation with valid inputs, and with invalid ones where it takes any input at all
CASES = [
    (method, path, mode)
    for method, path in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if path != "/v1/health" or mode is GenerationMode.POSITIVE
]


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseSchema]:
    """The schema served by the app over a pack with memories and a judgment of alice's."""
    path: Path = tmp_path_factory.mktemp("schemathesis") / "pack"
    with MemoryClient(path, config=weighted_config()) as memory:
        app = create_app(memory, KEYS)
        with TestClient(app) as api:
            nodes = seed_facts(api)
            found = api.post("/v1/retrieve", json={"query": FACTS[0]}, headers=ALICE).json()
            labels = {nodes[0]: True, nodes[1]: False}
            judged = {"request_id": found["metadata"]["request_id"], "labels": labels}
            assert api.post("/v1/relevance", json=judged, headers=ALICE).status_code == 200
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


def test_the_schema_lists_every_route(api_schema: BaseSchema) -> None:
    served = sorted(
        (operation.ok().method.upper(), operation.ok().path)
        for operation in api_schema.get_all_operations()
    )
    assert served == OPERATIONS


@pytest.mark.parametrize(("method", "path", "mode"), CASES)
def test_generated_requests_get_no_5xx_and_match_the_schema(
    api_schema: BaseSchema, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def call(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=ALICE, checks=CHECKS)

    call()
