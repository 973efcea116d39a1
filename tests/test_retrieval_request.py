"""One definition of the retrieval parameters: every surface and the receipt list the same ones."""

from __future__ import annotations

import inspect
from typing import Any

from prme import MemoryClient, RetrievalReceipt
from prme.http.schemas import RetrieveRequest
from prme.learning import gate2
from prme.mcp.server import MemoryTools
from prme.retrieval.request import (
    CONFIGURED_INPUTS,
    MCP_NAMES,
    PAIRED_RECEIPT_FIELDS,
    PARAMETERS,
    SURFACE_PARAMETERS,
    RetrievalRequest,
    pairing,
    receipt_paths,
)


def keywords(function: Any) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def test_client_keywords_are_the_parameters() -> None:
    assert keywords(MemoryClient.retrieve) == list(PARAMETERS)


# What a surface adds beside the retrieval parameters: how it is asked, not what is retrieved.
HTTP_ONLY = {"filters", "mode"}  # the original system's request shape, accepted beside the flat one
MCP_ONLY = {"details"}  # the full response instead of the compact result


def test_http_body_is_the_surface_parameters() -> None:
    # user_id comes with every body (bound to the credential)
    assert set(RetrieveRequest.model_fields) - HTTP_ONLY == set(SURFACE_PARAMETERS)


def test_mcp_tool_arguments_are_the_surface_parameters() -> None:
    expected = {MCP_NAMES.get(p, p) for p in SURFACE_PARAMETERS}
    assert set(keywords(MemoryTools.memory_retrieve)) - MCP_ONLY == expected


def test_defaults_match_the_client() -> None:
    signature = inspect.signature(MemoryClient.retrieve).parameters
    for name, field in RetrievalRequest.model_fields.items():
        if field.is_required():
            assert signature[name].default is inspect.Parameter.empty or name == "user_id"
        else:
            assert signature[name].default == field.default, name


def test_receipt_records_every_parameter(client: MemoryClient) -> None:
    client.store("Aster runs PostgreSQL", user_id="alice")
    response = client.retrieve("Aster", user_id="alice")
    receipt = client.get_retrieval_receipt(response.metadata.request_id, user_id="alice")
    assert isinstance(receipt, RetrievalReceipt)
    recorded_inputs = set(receipt.execution.inputs)
    from_parameters: set[str] = set()
    for name in PARAMETERS:
        for path in receipt_paths(name):
            top, _, rest = path.partition(".")
            assert top in RetrievalReceipt.model_fields, path
            if top == "execution":
                key = rest.removeprefix("inputs.")
                assert key in recorded_inputs, path
                from_parameters.add(key)
            elif rest:
                assert rest in type(getattr(receipt, top)).model_fields, path
    # every recorded input is a parameter or a named piece of configuration
    assert recorded_inputs == from_parameters | CONFIGURED_INPUTS


def test_gate2_pairs_exactly_the_parameters() -> None:
    assert gate2.PAIRED_FIELDS == PAIRED_RECEIPT_FIELDS
    assert set(PAIRED_RECEIPT_FIELDS) == {
        "reference_time", "scoring", "weights", "packing", "min_score", "result_limit",
        "retrieval_mode", "time_from", "time_to",
    }  # fmt: skip
    assert {"ranking_multipliers", "ranking_profile"} == gate2.ARM_INPUTS
    assert {p for p in PARAMETERS if pairing(p) == "checked"} == {"query", "user_id", "scope"}
