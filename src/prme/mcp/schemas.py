"""The published MCP tool schemas and results: compact, described, structured.

An agent pays for every character of a tool listing, so the schemas the SDK derives from the
handlers' signatures are trimmed (no generated titles; an optional parameter reads as its type),
described from :mod:`prme.glossary`, and lose ``user_id`` when the server binds the owner. Each
tool publishes an output schema and returns structured content beside the same JSON as text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, get_args, get_origin

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, TypeAdapter

from prme.canonical import canonical_json
from prme.glossary import describe


def _plain(value: Any) -> Any:
    """The JSON value of a model, a list of models, a dict or None."""
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


# An output schema longer than this (a whole evaluation report) is published as a plain JSON
# object with its title and summary: the result still carries the full structured content.
OUTPUT_SCHEMA_CHARS = 1500
OWNER_PARAMETER = "user_id"


def _compact(schema: Any, optional: bool = False) -> Any:
    """A schema without pydantic's generated titles; with ``optional``, a property whose default
    is null reads as its non-null type (omitting it is how a caller says null)."""
    if isinstance(schema, list):
        return [_compact(item, optional) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: _compact(sub, optional) for name, sub in value.items()}
        else:
            out[key] = _compact(value, optional)
    variants = out.get("anyOf")
    if optional and "default" in out and out["default"] is None and isinstance(variants, list):
        kept = [v for v in variants if v != {"type": "null"}]
        if len(kept) == 1 and len(kept) < len(variants):
            del out["anyOf"], out["default"]
            out = {**kept[0], **out}
    return out


def input_schema(name: str, schema: dict[str, Any], bound: bool) -> dict[str, Any]:
    """The published input schema: described, compact, and without ``user_id`` when the
    server binds the owner (a bound server still refuses a ``user_id`` naming someone else)."""
    schema = _compact(schema, optional=True)
    properties: dict[str, Any] = schema["properties"]
    required: list[str] = schema.setdefault("required", [])
    if OWNER_PARAMETER in properties:
        if bound:
            del properties[OWNER_PARAMETER]
        else:
            properties[OWNER_PARAMETER] = {
                "type": "string",
                "description": "The owner this call acts for (the server binds nobody).",
            }
            required.append(OWNER_PARAMETER)
    if not required:
        del schema["required"]
    describe(schema, name, nested=False)  # a nested model's fields are its own business
    return schema


# Input checks that say nothing about the shape of a result.
_CHECKS = frozenset(
    {"pattern", "minLength", "maxLength", "minProperties", "maxProperties", "propertyNames"}
    | {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems"}
)


def _shape(schema: Any) -> Any:
    """``schema`` without the validation keywords of :data:`_CHECKS` (nor a closed object's
    ``additionalProperties: false``)."""
    if isinstance(schema, list):
        return [_shape(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: ({n: _shape(v) for n, v in value.items()} if key in ("properties", "$defs") else _shape(value))
        for key, value in schema.items()
        if key not in _CHECKS and not (key == "additionalProperties" and value is False)
    }


def output_schema(kind: Any) -> tuple[dict[str, Any], bool]:
    """The output schema of a tool returning ``kind`` and whether results are wrapped in
    ``{"result": ...}`` (MCP structured content is always an object)."""
    schema = _shape(_compact(TypeAdapter(kind).json_schema(mode="serialization")))
    models = [t for t in (kind, *get_args(kind)) if isinstance(t, type)]
    model = next((t for t in models if issubclass(t, BaseModel)), None)
    # A model serialized by its own serializer has no properties to show: publish it titled too.
    opaque = model is not None and schema.get("type") == "object" and "properties" not in schema
    if opaque or len(canonical_json(schema)) > OUTPUT_SCHEMA_CHARS:
        title = model.__name__ if model is not None else "result"
        doc = (model.__doc__ or "").strip().split("\n")[0] if model is not None else ""
        loose: dict[str, Any] = {"type": "object", "title": title, "description": doc}
        if get_origin(kind) is list:
            loose = {"type": "array", "items": loose}
        elif model is None or get_origin(kind) is not None:  # an optional report: or null
            loose = {"anyOf": [loose, {"type": "null"}]}
        schema = loose
    if schema.get("type") == "object":
        return schema, False
    defs = schema.pop("$defs", None)  # references resolve from the root
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    return ({"$defs": defs, **wrapped} if defs else wrapped), True


def structured(fn: Callable[..., Any], wrap: bool) -> Callable[..., CallToolResult]:
    """``fn`` returning a CallToolResult: the JSON text and the structured content."""

    @functools.wraps(fn)
    def call(**arguments: Any) -> CallToolResult:
        value = _plain(fn(**arguments))
        return CallToolResult(
            content=[TextContent(type="text", text=canonical_json(value))],
            structured_content={"result": value} if wrap else value,
        )

    return call


