"""Row encodings both SQL backends share: a memory node as the ``memories`` column values."""

from __future__ import annotations

import json
from typing import Any

from prme.canonical import canonical_json, sha256_hex
from prme.models.memory import MemoryNode
from prme.storage.timeutil import opt_to_us, to_us

# The ``memories`` columns after ``rowid``, in schema order: what :func:`node_values` returns.
VALUE_COLUMNS = (
    "id",
    "user_id",
    "scope",
    "node_type",
    "content",
    "content_sha256",
    "metadata",
    "condition_state",
    "session_id",
    "role",
    "created_at",
    "updated_at",
    "event_time",
    "valid_from",
    "valid_to",
    "confidence",
    "salience",
    "confidence_base",
    "salience_base",
    "epistemic_type",
    "source_type",
    "lifecycle_state",
    "decay_profile",
    "last_reinforced_at",
    "reinforcement_boost",
    "pinned",
    "evidence_refs",
    "ttl_days",
)


def node_values(node: MemoryNode) -> tuple[Any, ...]:
    """The ``memories`` columns after ``rowid``, in schema order (times as UTC microseconds)."""
    condition = None
    if node.metadata is not None and "condition_state" in node.metadata:
        condition = str(node.metadata["condition_state"])
    return (
        str(node.id),
        node.user_id,
        node.scope.value,
        node.node_type.value,
        node.content,
        sha256_hex(node.content),
        None if node.metadata is None else canonical_json(node.metadata),
        condition,
        node.session_id,
        node.role,
        to_us(node.created_at),
        to_us(node.updated_at),
        opt_to_us(node.event_time),
        to_us(node.valid_from),
        opt_to_us(node.valid_to),
        node.confidence,
        node.salience,
        node.confidence_base,
        node.salience_base,
        node.epistemic_type.value,
        node.source_type.value,
        node.lifecycle_state.value,
        node.decay_profile.value,
        to_us(node.last_reinforced_at),
        node.reinforcement_boost,
        bool(node.pinned),
        json.dumps([str(r) for r in node.evidence_refs]),
        node.ttl_days,
    )
