"""The one definition of the retrieval parameters.

``RetrievalRequest`` lists every parameter of a retrieval, its type and default, and where the
receipt records it; ``RetrievalRequest.unchecked`` carries a call's values to the engine, which
validates them once (``prme.retrieval.validate``). The HTTP body and the MCP tool's arguments are
generated from its fields (``surface_model``, ``WIRE_TYPES``; how the surfaces differ is
declared once, below the class). ``MemoryClient.retrieve``'s keywords, the HTTP body
(``prme.http.schemas.RetrieveRequest``), the MCP tool ``memory_retrieve``, the receipt's
recorded inputs and gate 2's paired-field check are all checked against it
(``tests/test_retrieval_request.py``); gate 2's paired receipt fields are derived from it.

Each field's ``receipt`` is where its (normalized) value lives in a ``RetrievalReceipt``:
a top-level field, ``packing.<name>`` or ``execution.inputs.<name>``. ``pairing`` says how
gate 2 treats it: ``same`` (both arms must record equal values), ``arm`` (differs by design
between baseline and candidate), or ``checked`` (compared by gate 2 in its own way: the owner,
the scope set and the normalized query).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, create_model

from prme.models.base import Frozen
from prme.models.enums import NodeType, RetrievalMode, Scope, SourceType
from prme.models.scope import ScopeInput
from prme.models.scoring import RankingMultipliers, ScoringWeights

Pairing = Literal["same", "arm", "checked"]


def _where(*receipt: str, pairing: Pairing = "same", surface: str = "all") -> Any:
    """Field metadata: the receipt paths recording it, gate 2's pairing, and the surfaces that
    accept it (``all``, or ``python``: base scoring is the server's configuration over HTTP
    and MCP)."""
    return {"receipt": receipt, "pairing": pairing, "surface": surface}


class RetrievalRequest(Frozen):
    """Every parameter of one retrieval (``MemoryClient.retrieve``), in signature order."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    query: str = Field(json_schema_extra=_where("query", pairing="checked"))
    user_id: str = Field(json_schema_extra=_where("user_id", pairing="checked"))
    scope: ScopeInput = Field(default=None, json_schema_extra=_where("scopes", pairing="checked"))
    time_from: datetime | None = Field(default=None, json_schema_extra=_where("time_from"))
    time_to: datetime | None = Field(default=None, json_schema_extra=_where("time_to"))
    reference_time: datetime | None = Field(
        default=None, json_schema_extra=_where("reference_time")
    )
    knowledge_at: datetime | None = Field(
        default=None, json_schema_extra=_where("execution.inputs.knowledge_at")
    )
    event_time_from: datetime | None = Field(
        default=None, json_schema_extra=_where("execution.inputs.event_time_from")
    )
    event_time_to: datetime | None = Field(
        default=None, json_schema_extra=_where("execution.inputs.event_time_to")
    )
    token_budget: int | None = Field(default=None, json_schema_extra=_where("packing.token_budget"))
    min_score: float | None = Field(default=None, json_schema_extra=_where("min_score"))
    limit: int | None = Field(default=None, json_schema_extra=_where("result_limit"))
    max_per_source: int | None = Field(
        default=None, json_schema_extra=_where("execution.inputs.max_per_source")
    )
    max_per_evidence: int | None = Field(
        default=None, json_schema_extra=_where("execution.inputs.max_per_evidence")
    )
    exclude_node_types: Collection[NodeType | str] | None = Field(
        default=None, json_schema_extra=_where("execution.inputs.exclude_node_types")
    )
    source_types: Collection[SourceType | str] | None = Field(
        default=None, json_schema_extra=_where("execution.inputs.source_types")
    )
    weights: ScoringWeights | Mapping[str, Any] | None = Field(
        default=None, json_schema_extra=_where("scoring", "weights", surface="python")
    )
    ranking_multipliers: RankingMultipliers | Mapping[str, Any] | None = Field(
        default=None,
        json_schema_extra=_where(
            "ranking_multipliers", "execution.inputs.ranking_multipliers", pairing="arm"
        ),
    )
    retrieval_mode: RetrievalMode | str = Field(
        default=RetrievalMode.DEFAULT, json_schema_extra=_where("retrieval_mode")
    )
    include_cross_scope: bool = Field(
        default=True, json_schema_extra=_where("execution.inputs.include_cross_scope")
    )

    @classmethod
    def unchecked(cls, values: Mapping[str, Any]) -> RetrievalRequest:
        """The parameters exactly as given, not validated here: the engine validates them once
        (``prme.retrieval.validate``), each bad value an ``InvalidInputError`` naming its field.
        Raises TypeError for a name that is not a parameter."""
        unknown = sorted(set(values) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"unknown retrieval parameter(s): {', '.join(unknown)}")
        return cls.model_construct(**values)


def _extra(name: str) -> dict[str, Any]:
    extra = RetrievalRequest.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)
    return extra


PARAMETERS: tuple[str, ...] = tuple(RetrievalRequest.model_fields)
# execution.inputs keys that come from the engine's configuration or the profile resolution,
# not from a request parameter (recorded so that replays and gate 2 see them).
CONFIGURED_INPUTS: frozenset[str] = frozenset(
    {
        "ranking_profile",
        "epistemic_weights",
        "unverified_confidence_threshold",
        "vector_k",
        "lexical_k",
        "graph_max_candidates",
        "graph_max_hops",
        "pinned_limit",
    }
)
# Parameters every surface accepts (HTTP body, MCP tool); the rest are Python-only.
SURFACE_PARAMETERS: tuple[str, ...] = tuple(p for p in PARAMETERS if _extra(p)["surface"] == "all")

# ---- The surfaces (HTTP body, MCP tool arguments), generated from the fields above. Their
# differences from RetrievalRequest are declared here and nowhere else:
# - python-only parameters (``surface="python"``: ``weights``) are not offered;
# - each parameter's JSON type, strict (no coercion across types: ``"10"`` is not a limit);
#   the engine still validates the values;
# - MCP's argument names where they differ (a kept, published tool shape);
# - HTTP also accepts the original system's shape: ``mode`` for ``retrieval_mode`` and the
#   filter fields inside a ``filters`` object (a field given both ways is a 422).
WIRE_TYPES: dict[str, Any] = {
    "query": str,
    "user_id": str | None,  # bound by the credential where one binds the owner
    "scope": Scope | list[Scope] | None,
    "time_from": datetime | None,
    "time_to": datetime | None,
    "reference_time": datetime | None,
    "knowledge_at": datetime | None,
    "event_time_from": datetime | None,
    "event_time_to": datetime | None,
    "token_budget": StrictInt | None,
    "min_score": StrictFloat | None,
    "limit": StrictInt | None,
    "max_per_source": StrictInt | None,
    "max_per_evidence": StrictInt | None,
    "exclude_node_types": list[NodeType] | None,
    "source_types": list[SourceType] | None,
    "ranking_multipliers": RankingMultipliers | None,
    "retrieval_mode": RetrievalMode,
    "include_cross_scope": StrictBool,
}
# The original system's spelling of a parameter: the MCP tool publishes it, and HTTP accepts it
# beside the flat name (HTTP_ALIASES: spelling → parameter).
MCP_NAMES: dict[str, str] = {"retrieval_mode": "mode"}
HTTP_ALIASES: dict[str, str] = {spelled: name for name, spelled in MCP_NAMES.items()}
HTTP_FILTERS: tuple[str, ...] = (
    "scope",
    "time_from",
    "time_to",
    "knowledge_at",
    "event_time_from",
    "event_time_to",
    "include_cross_scope",
    "exclude_node_types",
    "source_types",
)


def surface_default(name: str) -> Any:
    """A parameter's default on the surfaces (``user_id`` is optional there: bound or given)."""
    field = RetrievalRequest.model_fields[name]
    return None if field.is_required() and name == "user_id" else field.get_default()


def surface_fields(names: tuple[str, ...]) -> dict[str, Any]:
    """``create_model`` field definitions of ``names``: (JSON type, default; ``...`` for the
    required query)."""
    return {
        name: (WIRE_TYPES[name], ... if name == "query" else surface_default(name))
        for name in names
    }


def surface_model(
    name: str, base: type[BaseModel], names: tuple[str, ...], doc: str | None = None
) -> Any:
    """A pydantic model over ``base`` with the parameters ``names`` as surface fields."""
    return create_model(name, __base__=base, __doc__=doc, **surface_fields(names))


def receipt_paths(name: str) -> tuple[str, ...]:
    """Where the receipt records parameter ``name``."""
    paths: tuple[str, ...] = _extra(name)["receipt"]
    return paths


@cache  # every receipt asks for every parameter's; the fields' metadata never changes
def input_keys(name: str) -> tuple[str, ...]:
    """The ``execution.inputs`` keys recording parameter ``name`` (none, or one)."""
    prefix = "execution.inputs."
    return tuple(p.removeprefix(prefix) for p in receipt_paths(name) if p.startswith(prefix))


def pairing(name: str) -> Pairing:
    value: Pairing = _extra(name)["pairing"]
    return value


def _paired_top_level() -> tuple[str, ...]:
    fields: list[str] = []
    for name in PARAMETERS:
        if pairing(name) != "same":
            continue
        for path in receipt_paths(name):
            top = path.split(".")[0]
            if top != "execution" and top not in fields:
                fields.append(top)
    return tuple(fields)


# Top-level receipt fields both arms of a gate-2 pair must share exactly (the execution inputs
# are compared key by key; the ``arm`` parameters there are ARM_INPUTS).
PAIRED_RECEIPT_FIELDS: tuple[str, ...] = _paired_top_level()
ARM_INPUT_KEYS: frozenset[str] = frozenset(
    key for name in PARAMETERS if pairing(name) == "arm" for key in input_keys(name)
)
