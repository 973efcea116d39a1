"""Scope normalization: request scopes (order and duplicates kept) and scope-set keys."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from prme.errors import InvalidInputError
from prme.models.enums import Scope

ScopeInput = Scope | str | Sequence[Scope | str] | None
ScopeKey = tuple[Scope, ...] | None


def _one_scope(value: object, field: str) -> Scope:
    if not isinstance(value, str):
        raise InvalidInputError(field, "scope contains an invalid scope name", value)
    try:
        return Scope(value)
    except ValueError:
        valid = ", ".join(s.value for s in Scope)
        raise InvalidInputError(
            field, f"scope contains an invalid scope name {value!r} (valid: {valid})", value
        ) from None


def normalize_scope(scope: ScopeInput, field: str = "scope") -> list[Scope] | None:
    """None means unfiltered; a name or a non-empty sequence of names becomes a list of Scope."""
    if scope is None:
        return None
    if isinstance(scope, str):
        return [_one_scope(scope, field)]
    if isinstance(scope, bytes | bytearray) or not isinstance(scope, Sequence | set | frozenset):
        raise InvalidInputError(
            field, "scope must be a scope name, a list of names, or None", scope
        )
    items = list(scope)
    if not items:
        raise InvalidInputError(
            field, "scope must not be empty; use None for an unfiltered request", scope
        )
    return [_one_scope(item, field) for item in items]


def scope_set_key(scopes: Sequence[Scope | str] | None) -> ScopeKey:
    """The learning/profile key: unique scopes sorted by value, or None for unfiltered."""
    if scopes is None:
        return None
    return tuple(sorted({Scope(s) for s in scopes}, key=lambda s: s.value))


def normalize_scope_key(scopes: ScopeInput, field: str = "scopes") -> ScopeKey:
    return scope_set_key(normalize_scope(scopes, field))


def scope_namespace(key: ScopeKey) -> str:
    """Storage namespace of a pointer: ``ranking:`` + SHA-256 of the compact JSON of the key."""
    payload = None if key is None else [s.value for s in key]
    text = json.dumps(payload, separators=(",", ":"))
    return "ranking:" + hashlib.sha256(text.encode()).hexdigest()
