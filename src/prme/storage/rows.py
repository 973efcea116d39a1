"""Row encodings both SQL backends share: memory nodes as the ``memories`` column values."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from prme.canonical import canonical_json, sha256_hex
from prme.models.memory import MemoryNode
from prme.storage.timeutil import to_us

# The ``memories`` columns after ``rowid``, in schema order: what :func:`node_rows` returns.
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


def node_rows(nodes: Iterable[MemoryNode]) -> list[tuple[Any, ...]]:
    """The ``memories`` column values after ``rowid`` of each node (``VALUE_COLUMNS``; times as
    UTC microseconds). A batch's memories mostly share their times (the batch's clock
    reading), so each distinct time is converted once, and an empty evidence list encoded
    once."""
    micros: dict[datetime, int] = {}

    def us(value: datetime) -> int:
        found = micros.get(value)
        if found is None:
            found = micros[value] = to_us(value)
        return found

    empty = json.dumps([])
    encode_metadata = canonical_json
    out = []
    for node in nodes:
        metadata = node.metadata
        condition = None
        if metadata is not None and "condition_state" in metadata:
            condition = str(metadata["condition_state"])
        refs = node.evidence_refs
        out.append(
            (
                str(node.id),
                node.user_id,
                node.scope.value,
                node.node_type.value,
                node.content,
                sha256_hex(node.content),
                None if metadata is None else encode_metadata(metadata),
                condition,
                node.session_id,
                node.role,
                us(node.created_at),
                us(node.updated_at),
                None if node.event_time is None else us(node.event_time),
                us(node.valid_from),
                None if node.valid_to is None else us(node.valid_to),
                node.confidence,
                node.salience,
                node.confidence_base,
                node.salience_base,
                node.epistemic_type.value,
                node.source_type.value,
                node.lifecycle_state.value,
                node.decay_profile.value,
                us(node.last_reinforced_at),
                node.reinforcement_boost,
                bool(node.pinned),
                # json.dumps of the id strings (no character in them needs escaping)
                '["' + '", "'.join([str(r) for r in refs]) + '"]' if refs else empty,
                node.ttl_days,
            )
        )
    return out
