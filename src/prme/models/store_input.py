"""One memory as a caller gives it: the fields every store surface takes, declared once.

:class:`StoreFields` declares the fields and their JSON types (the HTTP body derives from it,
so OpenAPI shows them). :class:`StoreInput` adds the engine's checks, run on every store,
batch item and update: each raises InvalidInputError naming the field with the message the
engine has always given. Fields left out stay None; ``services.memories.build_node`` applies
the store-time defaults (reference §A.1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from prme.canonical import canonical_json
from prme.errors import InvalidInputError
from prme.models.enums import EpistemicType, NodeType, Scope, SourceType, members_by_value
from prme.models.scope import normalize_scope
from prme.validation import invalid_input, require_aware, require_text

MAX_CONTENT_BYTES = 1_000_000
MAX_METADATA_DEPTH = 64
MAX_TTL_DAYS = 1_000_000
_MEMBERS: dict[type[Enum], Mapping[str, Enum]] = {
    kind: members_by_value(kind) for kind in (Scope, NodeType, EpistemicType, SourceType)
}


class StoreFields(BaseModel):
    """The fields of one memory, in the order the engine checks them (the first bad one is
    the one reported). None means "not given": the store-time default applies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    content: str
    scope: Scope | None = None
    node_type: NodeType | None = None
    role: str | None = None
    session_id: str | None = None
    epistemic_type: EpistemicType | None = None
    source_type: SourceType | None = None
    confidence: StrictFloat | None = None
    salience: StrictFloat | None = None
    metadata: dict[str, Any] | None = None
    event_time: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    ttl_days: StrictInt | None = None
    pinned: StrictBool | None = None


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of JSON-like data, stopping once past ``limit``."""
    stack = [(value, 1)]
    deepest = 0
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        if isinstance(item, Mapping):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, level + 1) for v in item)
    return deepest


def _member(cls: type[Enum], value: Any, field: str) -> Enum:
    found = _MEMBERS[cls].get(value) if isinstance(value, str) else None
    if found is not None:  # a member's value (or the member): the common case
        return found
    try:
        return cls(value)
    except ValueError:
        valid = ", ".join(m.value for m in cls)
        raise InvalidInputError(field, f"invalid value {value!r} (valid: {valid})", value) from None


def _unit(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(field, "must be a number in [0, 1]", value)
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInputError(field, "must be a finite number in [0, 1]", value)
    return number


class StoreInput(StoreFields):
    """:class:`StoreFields` with the engine's checks; build it with :meth:`parse`.

    A check fails with InvalidInputError (a ValueError, so pydantic keeps it in the error's
    context); :meth:`parse` raises the first one as it was raised.
    """

    NOW: ClassVar[str] = "now"  # the validation context key: the store's clock

    @classmethod
    def parse(cls, fields: Mapping[str, Any], now: datetime) -> StoreInput:
        """The validated fields of one memory stored at ``now`` (``valid_to`` must not be
        before ``valid_from``, which defaults to ``now``); raises InvalidInputError."""
        try:
            return cls.model_validate(dict(fields), context={cls.NOW: now})
        except ValidationError as exc:
            raised = (exc.errors()[0].get("ctx") or {}).get("error")
            if isinstance(raised, InvalidInputError):
                raise raised from None
            raise invalid_input(exc, "memory", nested=False) from None

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any) -> str:
        if not isinstance(value, str):
            raise InvalidInputError("content", "must be a string", value)
        if not value.strip():
            raise InvalidInputError("content", "must not be blank", value)
        require_text(value, "content")
        if len(value.encode("utf-8")) > MAX_CONTENT_BYTES:
            raise InvalidInputError("content", f"exceeds {MAX_CONTENT_BYTES} bytes")
        return value

    @field_validator("scope", mode="before")
    @classmethod
    def _scope(cls, value: Any) -> Scope:
        if isinstance(value, str) and value in _MEMBERS[Scope]:  # one name: the common case
            return Scope(value)
        scopes = normalize_scope(value, "scope")
        if scopes is None or len(scopes) != 1:
            raise InvalidInputError("scope", "a memory belongs to exactly one scope", value)
        return scopes[0]

    @field_validator("node_type", "epistemic_type", "source_type", mode="before")
    @classmethod
    def _enum(cls, value: Any, info: ValidationInfo) -> Any:
        name = str(info.field_name)
        if value is None and name != "node_type":
            return None
        kind = {"node_type": NodeType, "epistemic_type": EpistemicType}.get(name, SourceType)
        return _member(kind, value, name)

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise InvalidInputError("role", "must be a non-blank string", value)
        return require_text(value, "role")

    @field_validator("session_id", mode="before")
    @classmethod
    def _session(cls, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise InvalidInputError("session_id", "must be a string", value)
        return require_text(value, "session_id")

    @field_validator("confidence", "salience", mode="before")
    @classmethod
    def _unit_interval(cls, value: Any, info: ValidationInfo) -> float | None:
        return None if value is None else _unit(value, str(info.field_name))

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata(cls, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise InvalidInputError("metadata", "must be a JSON object", value)
        if _depth(value, MAX_METADATA_DEPTH) > MAX_METADATA_DEPTH:
            raise InvalidInputError("metadata", f"must nest at most {MAX_METADATA_DEPTH} levels")
        try:
            meta = dict(value)
            encoded = canonical_json(meta)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError("metadata", f"must be JSON-serializable ({exc})") from None
        require_text(encoded, "metadata")
        return meta

    @field_validator("event_time", "valid_from", mode="before")
    @classmethod
    def _aware(cls, value: Any, info: ValidationInfo) -> datetime | None:
        return require_aware(value, str(info.field_name))

    @field_validator("valid_to", mode="before")
    @classmethod
    def _valid_to(cls, value: Any, info: ValidationInfo) -> datetime | None:
        end = require_aware(value, "valid_to")
        start = info.data.get("valid_from") or (info.context or {}).get(cls.NOW)
        if end is not None and start is not None and end < start:
            raise InvalidInputError("valid_to", "must not be before valid_from", value)
        return end

    @field_validator("ttl_days", mode="before")
    @classmethod
    def _ttl(cls, value: Any) -> int | None:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TTL_DAYS
        ):
            raise InvalidInputError(
                "ttl_days", f"must be an integer from 0 to {MAX_TTL_DAYS}", value
            )
        return value

    @field_validator("pinned", mode="before")
    @classmethod
    def _pinned(cls, value: Any) -> bool:
        return bool(value)
