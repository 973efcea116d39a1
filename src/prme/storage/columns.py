"""The ``memories`` columns, declared once: what both SQL backends store, read, hash and move.

- :data:`VALUE_COLUMNS`: the stored columns after ``rowid``, in schema order (each backend's
  schema declares them in this order; a test compares). :func:`node_rows` encodes nodes as
  them, the digest's row hash covers them, export and import move them
  (:data:`MEMORY_COLUMNS` adds the ``rowid``);
- :data:`NODE_COLUMNS`: the columns a :class:`MemoryNode` is read from (:func:`row_to_node`):
  every value column but the two derived ones (``content_sha256``, ``condition_state``);
- :data:`INDEX_COLUMNS`: the columns an owner-index row is built from (:func:`index_row`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from prme.canonical import canonical_json, sha256_hex
from prme.index.owner_index import (
    CONDITIONS,
    DECAYS,
    EPISTEMIC,
    LIFECYCLES,
    NO_TIME,
    NO_TTL,
    NODE_TYPES,
    SCOPES,
    SOURCES,
    code,
)
from prme.models.enums import (
    DecayProfile,
    EpistemicType,
    LifecycleState,
    NodeType,
    Scope,
    SourceType,
)
from prme.models.memory import MemoryNode
from prme.storage.timeutil import from_us, opt_from_us, to_us

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
MEMORY_COLUMNS = ("rowid", *VALUE_COLUMNS)  # a whole stored row
PINNED = VALUE_COLUMNS.index("pinned")  # SQLite stores the boolean as INTEGER 0/1
DERIVED_COLUMNS = ("content_sha256", "condition_state")  # computed from the node on insert
NODE_COLUMNS = tuple(c for c in VALUE_COLUMNS if c not in DERIVED_COLUMNS)
INDEX_COLUMNS = (
    "id",
    "scope",
    "node_type",
    "epistemic_type",
    "source_type",
    "lifecycle_state",
    "decay_profile",
    "condition_state",
    "created_at",
    "updated_at",
    "event_time",
    "valid_from",
    "valid_to",
    "last_reinforced_at",
    "confidence",
    "salience",
    "confidence_base",
    "salience_base",
    "reinforcement_boost",
    "pinned",
    "content_sha256",
    "evidence_refs",
    "ttl_days",
)


def select_list(columns: Sequence[str], alias: str = "") -> str:
    """``columns`` as a SELECT list, each qualified by ``alias`` when given."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{c}" for c in columns)


def insert_memories_sql(mark: str) -> str:
    """The INSERT of whole stored rows (:data:`MEMORY_COLUMNS`); ``mark`` is ``?`` or ``%s``."""
    marks = ",".join([mark] * len(MEMORY_COLUMNS))
    return f"INSERT INTO memories({select_list(MEMORY_COLUMNS)}) VALUES ({marks})"


def node_rows(nodes: Iterable[MemoryNode]) -> list[tuple[Any, ...]]:
    """The ``memories`` column values after ``rowid`` of each node (``VALUE_COLUMNS``; times as
    UTC microseconds). A batch's memories mostly share their times (the batch's clock
    reading), so each distinct time is converted once, and an empty evidence list encoded
    once. Enum members give their ``_value_`` (what ``.value`` returns, without the
    descriptor's cost)."""
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
                node.scope._value_,
                node.node_type._value_,
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
                node.epistemic_type._value_,
                node.source_type._value_,
                node.lifecycle_state._value_,
                node.decay_profile._value_,
                us(node.last_reinforced_at),
                node.reinforcement_boost,
                bool(node.pinned),
                # json.dumps of the id strings (no character in them needs escaping)
                '["' + '", "'.join([str(r) for r in refs]) + '"]' if refs else empty,
                node.ttl_days,
            )
        )
    return out


def index_row(r: tuple[Any, ...], doc_len: int) -> dict[str, Any]:
    """An owner-index row from ``rowid`` + :data:`INDEX_COLUMNS` and the lexical token count."""
    return {
        "rowid": r[0],
        "id": r[1],
        "scope": code(SCOPES, r[2]),
        "node_type": code(NODE_TYPES, r[3]),
        "epistemic": code(EPISTEMIC, r[4]),
        "source": code(SOURCES, r[5]),
        "lifecycle": code(LIFECYCLES, r[6]),
        "decay": code(DECAYS, r[7]),
        "condition": code(CONDITIONS, r[8]),
        "created_at": r[9],
        "updated_at": r[10],
        "event_time": NO_TIME if r[11] is None else r[11],
        "valid_from": r[12],
        "valid_to": NO_TIME if r[13] is None else r[13],
        "last_reinforced_at": r[14],
        "confidence": r[15],
        "salience": r[16],
        "confidence_base": r[17],
        "salience_base": r[18],
        "reinforcement_boost": r[19],
        "pinned": bool(r[20]),
        "content_sha256": r[21],
        "evidence_refs": r[22],
        "ttl_days": NO_TTL if r[23] is None else r[23],
        "doc_len": doc_len,
    }


def row_to_node(row: Sequence[Any]) -> MemoryNode:
    (
        id_,
        user_id,
        scope,
        node_type,
        content,
        metadata,
        session_id,
        role,
        created_at,
        updated_at,
        event_time,
        valid_from,
        valid_to,
        confidence,
        salience,
        confidence_base,
        salience_base,
        epistemic_type,
        source_type,
        lifecycle_state,
        decay_profile,
        last_reinforced_at,
        reinforcement_boost,
        pinned,
        evidence_refs,
        ttl_days,
    ) = tuple(row)
    # Rows were validated when written; construct without re-validating (a hot path).
    return MemoryNode.model_construct(
        id=uuid.UUID(id_),
        user_id=user_id,
        scope=Scope(scope),
        node_type=NodeType(node_type),
        content=content,
        metadata=None if metadata is None else json.loads(metadata),
        session_id=session_id,
        role=role,
        created_at=from_us(created_at),
        updated_at=from_us(updated_at),
        event_time=opt_from_us(event_time),
        valid_from=from_us(valid_from),
        valid_to=opt_from_us(valid_to),
        confidence=confidence,
        salience=salience,
        confidence_base=confidence_base,
        salience_base=salience_base,
        epistemic_type=EpistemicType(epistemic_type),
        source_type=SourceType(source_type),
        lifecycle_state=LifecycleState(lifecycle_state),
        decay_profile=DecayProfile(decay_profile),
        last_reinforced_at=from_us(last_reinforced_at),
        reinforcement_boost=reinforcement_boost,
        pinned=bool(pinned),
        evidence_refs=tuple(uuid.UUID(r) for r in json.loads(evidence_refs)),
        ttl_days=ttl_days,
    )
