"""One definition of the retrieval parameters: every surface and the receipt list the same ones."""

from __future__ import annotations

import inspect
from typing import Any, get_type_hints

from prme import MemoryClient, RetrievalReceipt
from prme.http.schemas import RetrievalFilters, RetrieveRequest
from prme.learning import holdout_trials
from prme.mcp.server import MemoryTools
from prme.models.enums import RetrievalMode
from prme.models.request import (
    CONFIGURED_INPUTS,
    HTTP_FILTERS,
    MCP_NAMES,
    PAIRED_RECEIPT_FIELDS,
    PARAMETERS,
    SURFACE_PARAMETERS,
    WIRE_TYPES,
    RetrievalRequest,
    pairing,
    receipt_paths,
    surface_default,
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
    assert holdout_trials.PAIRED_FIELDS == PAIRED_RECEIPT_FIELDS
    assert set(PAIRED_RECEIPT_FIELDS) == {
        "reference_time", "scoring", "weights", "packing", "min_score", "result_limit",
        "retrieval_mode", "time_from", "time_to",
    }  # fmt: skip
    assert {"ranking_multipliers", "ranking_profile"} == holdout_trials.ARM_INPUTS
    assert {p for p in PARAMETERS if pairing(p) == "checked"} == {"query", "user_id", "scope"}


def test_client_keywords_have_the_parameters_types() -> None:
    # MemoryClient.retrieve keeps explicit typed keywords (editors need them): the same types
    hints = get_type_hints(MemoryClient.retrieve)
    for name, field in RetrievalRequest.model_fields.items():
        assert hints[name] == field.annotation, name


def test_surfaces_are_generated_with_the_declared_json_types() -> None:
    assert set(WIRE_TYPES) == set(SURFACE_PARAMETERS)
    http = RetrieveRequest.model_fields
    for name in SURFACE_PARAMETERS:
        assert http[name].rebuild_annotation() == WIRE_TYPES[name], name
        assert http[name].is_required() == (name == "query"), name
        if name != "query":
            assert http[name].default == surface_default(name), name
    assert http["mode"].annotation == RetrievalMode | None  # the original shape's spelling
    filters = RetrievalFilters.model_fields
    assert list(filters) == list(HTTP_FILTERS)
    assert all(filters[n].rebuild_annotation() == WIRE_TYPES[n] for n in HTTP_FILTERS)
    mcp = inspect.signature(MemoryTools.memory_retrieve).parameters
    for name in SURFACE_PARAMETERS:
        argument = mcp[MCP_NAMES.get(name, name)]
        if name != "user_id":  # described as "the owner" and bound by the server
            assert argument.annotation == WIRE_TYPES[name], name
        expected = inspect.Parameter.empty if name == "query" else surface_default(name)
        assert argument.default == expected, name


def test_http_original_shape_maps_onto_the_parameters() -> None:
    body = RetrieveRequest.model_validate(
        {"query": "x", "mode": "explicit", "filters": {"scope": "project", "time_to": None}}
    )
    assert body.fields() == {
        "query": "x", "retrieval_mode": RetrievalMode.EXPLICIT, "scope": "project", "time_to": None,
    }  # fmt: skip
    assert set(body.fields()) <= set(SURFACE_PARAMETERS)
