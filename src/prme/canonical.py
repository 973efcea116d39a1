"""Canonical JSON and checksums: the one encoding every checksum and attestation uses.

Sorted keys, compact separators, UTF-8 (no ASCII escaping), NaN and infinities rejected,
floats in Python's shortest round-trip repr, datetimes as UTC ISO-8601 with ``Z``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

CANONICAL_ENCODING = "prme-canonical-json-v1"


class CanonicalText(str):
    """Text that already is canonical JSON: :func:`canonical_json` returns it unchanged."""


def to_jsonable(value: Any) -> Any:
    """A pydantic model becomes its JSON-mode dump; anything else is returned unchanged."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _nested_model(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def canonical_json(value: Any) -> str:
    """The canonical text of ``value`` (a pydantic model or JSON-compatible data, which may
    contain models)."""
    if isinstance(value, CanonicalText):
        return str(value)
    return _ENCODER.encode(to_jsonable(value))


# json.dumps with these options, built once (json.dumps builds an encoder on every call).
_ENCODER = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    allow_nan=False,
    default=_nested_model,
)


def canonical_object(members: Mapping[str, str]) -> CanonicalText:
    """The canonical text of an object from its members' canonical texts (``{key: text}``).

    Equal to ``canonical_json({key: value})``: keys sorted, compact separators. Lets callers
    that need two large objects differing in a few members encode the shared ones once.
    """
    body = ",".join(f"{canonical_json(key)}:{members[key]}" for key in sorted(members))
    return CanonicalText("{" + body + "}")


def canonical_bytes(value: Any) -> bytes:
    return canonical_json(value).encode("utf-8")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def checksum(value: Any) -> str:
    """SHA-256 hex of the canonical bytes of ``value``."""
    return sha256_hex(canonical_bytes(value))


def hmac_hex(secret: bytes, value: Any) -> str:
    """HMAC-SHA256 of the canonical bytes of ``value`` under ``secret``."""
    return hmac.new(secret, canonical_bytes(value), hashlib.sha256).hexdigest()
