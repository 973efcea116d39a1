"""The ``memories`` columns, declared once: what both SQL backends store, read, hash and move.

- :data:`VALUE_COLUMNS`: the stored columns after ``rowid``, in schema order (each backend's
  schema declares them in this order; a test compares). :func:`node_columns` encodes nodes
  as them, the digest's row hash covers them, export and import move them
  (:data:`MEMORY_COLUMNS` adds the ``rowid``);
- :data:`NODE_COLUMNS`: the columns a :class:`MemoryNode` is read from (:func:`row_to_node`):
  every value column but the two derived ones (``content_sha256``, ``condition_state``);
- :data:`INDEX_COLUMNS`: the columns an owner-index row is built from (:func:`index_row`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any

from prme.canonical import canonical_json
from prme.errors import IntegrityError
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
    members_by_value,
)
from prme.models.memory import MemoryNode, trusted_node
from prme.storage.timeutil import from_us, opt_from_us, to_us

# The ``memories`` columns after ``rowid``, in schema order: what :func:`node_columns` returns.
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
USER_ID = VALUE_COLUMNS.index("user_id")  # the owner column
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


_VALUE = attrgetter("_value_")  # an enum member's value (what ``.value`` returns, cheaper)


def _evidence_refs(refs: Sequence[uuid.UUID]) -> str:
    """``json.dumps`` of the id strings (no character in them needs escaping)."""
    if len(refs) == 1:
        return f'["{refs[0]}"]'
    return '["' + '", "'.join([str(r) for r in refs]) + '"]' if refs else "[]"


def node_columns(nodes: Sequence[MemoryNode]) -> list[list[Any]]:
    """The values of each ``memories`` column after ``rowid`` (``VALUE_COLUMNS`` order) of
    ``nodes``, column by column. A hot path (store_many): each column is one pass over the
    nodes' ``__dict__`` in C where it can be; a batch's memories mostly share their times (the
    batch's clock reading), so each distinct time is converted once."""
    fields = [node.__dict__ for node in nodes]

    def column(name: str) -> list[Any]:
        return list(map(itemgetter(name), fields))

    def micros(name: str) -> list[int | None]:
        times = column(name)
        found = {t: None if t is None else to_us(t) for t in set(times)}
        return list(map(found.__getitem__, times))

    contents, metadata, sha256 = column("content"), column("metadata"), hashlib.sha256
    return [
        list(map(str, column("id"))),
        column("user_id"),
        list(map(_VALUE, column("scope"))),
        list(map(_VALUE, column("node_type"))),
        contents,
        [sha256(content.encode("utf-8")).hexdigest() for content in contents],
        [None if meta is None else canonical_json(meta) for meta in metadata],
        [
            str(meta["condition_state"]) if meta is not None and "condition_state" in meta else None
            for meta in metadata
        ],
        column("session_id"),
        column("role"),
        micros("created_at"),
        micros("updated_at"),
        micros("event_time"),
        micros("valid_from"),
        micros("valid_to"),
        column("confidence"),
        column("salience"),
        column("confidence_base"),
        column("salience_base"),
        list(map(_VALUE, column("epistemic_type"))),
        list(map(_VALUE, column("source_type"))),
        list(map(_VALUE, column("lifecycle_state"))),
        list(map(_VALUE, column("decay_profile"))),
        micros("last_reinforced_at"),
        column("reinforcement_boost"),
        list(map(bool, column("pinned"))),
        list(map(_evidence_refs, column("evidence_refs"))),
        column("ttl_days"),
    ]


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


# Six enums per row read (the row was validated when written), by dictionary look-up.
_SCOPE, _NODE_TYPE = members_by_value(Scope), members_by_value(NodeType)
_EPISTEMIC, _SOURCE = members_by_value(EpistemicType), members_by_value(SourceType)
_LIFECYCLE, _DECAY = members_by_value(LifecycleState), members_by_value(DecayProfile)


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
    # Rows were validated when written; construct without re-validating (a hot path). A row
    # changed outside prme can still hold a value no field accepts: refused, typed.
    try:
        return trusted_node(
            {
                "id": uuid.UUID(id_),
                "user_id": user_id,
                "scope": _SCOPE[scope],
                "node_type": _NODE_TYPE[node_type],
                "content": content,
                "metadata": None if metadata is None else json.loads(metadata),
                "session_id": session_id,
                "role": role,
                "created_at": from_us(created_at),
                "updated_at": from_us(updated_at),
                "event_time": opt_from_us(event_time),
                "valid_from": from_us(valid_from),
                "valid_to": opt_from_us(valid_to),
                "confidence": confidence,
                "salience": salience,
                "confidence_base": confidence_base,
                "salience_base": salience_base,
                "epistemic_type": _EPISTEMIC[epistemic_type],
                "source_type": _SOURCE[source_type],
                "lifecycle_state": _LIFECYCLE[lifecycle_state],
                "decay_profile": _DECAY[decay_profile],
                "last_reinforced_at": from_us(last_reinforced_at),
                "reinforcement_boost": reinforcement_boost,
                "pinned": bool(pinned),
                "evidence_refs": tuple(uuid.UUID(r) for r in json.loads(evidence_refs)),
                "ttl_days": ttl_days,
            }
        )
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        raise IntegrityError(f"stored memory {id_!r} holds an invalid value: {exc!r}") from None
