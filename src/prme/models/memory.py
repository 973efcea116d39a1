"""The memory node: what store() writes and what retrieval reads and scores."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import Field

from prme.models.base import FiniteFloat, Frozen, NonBlankStr, UnitFloat, UTCDateTime
from prme.models.enums import (
    DecayProfile,
    EpistemicType,
    LifecycleState,
    NodeType,
    Scope,
    SourceType,
)


class MemoryNode(Frozen):
    """One stored memory (reference §A.1: the fields scoring, filtering and receipts use)."""

    id: UUID
    user_id: NonBlankStr
    scope: Scope = Scope.PERSONAL
    node_type: NodeType = NodeType.NOTE
    content: str
    metadata: dict[str, Any] | None = None
    session_id: str | None = None
    role: str = "user"
    created_at: UTCDateTime
    updated_at: UTCDateTime
    event_time: UTCDateTime | None = None
    valid_from: UTCDateTime
    valid_to: UTCDateTime | None = None
    confidence: UnitFloat = 0.5
    salience: UnitFloat = 0.5
    confidence_base: UnitFloat = 0.5
    salience_base: UnitFloat = 0.5
    epistemic_type: EpistemicType = EpistemicType.ASSERTED
    source_type: SourceType = SourceType.USER_STATED
    lifecycle_state: LifecycleState = LifecycleState.TENTATIVE
    decay_profile: DecayProfile = DecayProfile.MEDIUM
    last_reinforced_at: UTCDateTime
    reinforcement_boost: FiniteFloat = Field(default=0.0, ge=0.0)
    pinned: bool = False
    evidence_refs: tuple[UUID, ...] = ()
    ttl_days: int | None = Field(default=None, ge=0)


_NODE_FIELDS = frozenset(MemoryNode.model_fields)


def trusted_node(values: dict[str, Any]) -> MemoryNode:
    """A :class:`MemoryNode` of ``values`` (every field, in field order) without validating
    them: for values checked before (a batch's validated input, a row validated when it was
    written). What ``MemoryNode.model_construct(**values)`` sets, without its per-field alias
    and default look-ups (bulk writes and reads are hot paths)."""
    node = MemoryNode.__new__(MemoryNode)
    object.__setattr__(node, "__dict__", values)
    object.__setattr__(node, "__pydantic_fields_set__", set(_NODE_FIELDS))
    object.__setattr__(node, "__pydantic_extra__", None)
    object.__setattr__(node, "__pydantic_private__", None)
    return node


class MemoryRecord(MemoryNode):
    """A stored memory as ``get()``/``list()`` read it back, at the engine's clock.

    ``expired``: its ``ttl_days`` ran out (its stated time, ``event_time`` else ``created_at``,
    plus ``ttl_days`` days is before the clock), so retrieval no longer returns it; it stays
    stored, and receipts that returned it still replay. ``expires_at``: that end (None without
    a TTL, or when it falls after 9999-12-31). ``supersedes`` / ``superseded_by``: the
    version this one replaced / the version that replaced it (``update()``); a superseded
    version keeps its content, has ``valid_to`` set to the update time and lifecycle
    ``superseded``, and only ``knowledge_at`` queries before that time still retrieve it.
    """

    expires_at: UTCDateTime | None = None
    expired: bool = False
    supersedes: UUID | None = None
    superseded_by: UUID | None = None


class StoreReceipt(Frozen):
    """What store_with_receipt returns."""

    event_id: UUID
    node_id: UUID
    processing_status: str = "processed"
    duplicate: bool = False  # store(dedupe=True) found this owner's same memory: node_id is it


def stated_time(node: MemoryNode) -> datetime:
    return node.event_time or node.created_at
