"""store / store_many / get / list / delete, with the store-time defaults of reference §A.1."""

from __future__ import annotations

import json
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from pydantic import ValidationError

from prme.bulk import gc_paused
from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import InvalidInputError, NotFoundError
from prme.ids import new_ids
from prme.index.owner_index import NO_TTL
from prme.models.enums import (
    DecayProfile,
    EpistemicType,
    LifecycleState,
    NodeType,
    Scope,
    SourceType,
)
from prme.models.memory import MemoryNode, MemoryRecord, StoreReceipt, stated_time, trusted_node
from prme.models.scope import ScopeInput, normalize_scope
from prme.models.store_input import StoreFields, StoreInput
from prme.retrieval.features import ttl_expired
from prme.retrieval.query import extract_entities
from prme.storage.timeutil import to_us
from prme.validation import invalid_input, require_owner, require_uuid, to_utc

MAX_BATCH = 100_000

CONFIDENCE_MATRIX: dict[tuple[EpistemicType, SourceType], float] = {
    (EpistemicType.OBSERVED, SourceType.USER_STATED): 0.90,
    (EpistemicType.OBSERVED, SourceType.USER_DEMONSTRATED): 0.90,
    (EpistemicType.OBSERVED, SourceType.TOOL_OUTPUT): 0.85,
    (EpistemicType.ASSERTED, SourceType.USER_STATED): 0.80,
    (EpistemicType.ASSERTED, SourceType.SYSTEM_INFERRED): 0.60,
    (EpistemicType.INFERRED, SourceType.SYSTEM_INFERRED): 0.55,
    (EpistemicType.HYPOTHETICAL, SourceType.USER_STATED): 0.35,
    (EpistemicType.CONDITIONAL, SourceType.USER_STATED): 0.45,
    (EpistemicType.UNVERIFIED, SourceType.SYSTEM_INFERRED): 0.20,
}
DECAY_BY_EPISTEMIC: dict[EpistemicType, DecayProfile] = {
    EpistemicType.OBSERVED: DecayProfile.SLOW,
    EpistemicType.ASSERTED: DecayProfile.MEDIUM,
    EpistemicType.INFERRED: DecayProfile.FAST,
    EpistemicType.HYPOTHETICAL: DecayProfile.RAPID,
    EpistemicType.CONDITIONAL: DecayProfile.MEDIUM,
    EpistemicType.DEPRECATED: DecayProfile.PERMANENT,
    EpistemicType.UNVERIFIED: DecayProfile.RAPID,
}


def default_epistemic(role: str, node_type: NodeType) -> EpistemicType:
    if role in ("assistant", "system"):
        return EpistemicType.INFERRED
    if node_type is NodeType.SUMMARY:
        return EpistemicType.INFERRED
    if node_type in (NodeType.EVENT, NodeType.INSTRUCTION):
        return EpistemicType.OBSERVED
    return EpistemicType.ASSERTED


def default_source(role: str) -> SourceType:
    if role in ("assistant", "system"):
        return SourceType.SYSTEM_INFERRED
    if role == "tool":
        return SourceType.TOOL_OUTPUT
    return SourceType.USER_STATED


def build_node(
    content: str,
    *,
    user_id: str,
    now: datetime,
    event_id: uuid.UUID | None = None,
    **fields: Any,
) -> MemoryNode:
    """Validate one memory (:class:`StoreInput`, owner first) and apply the store-time
    defaults; raises InvalidInputError. ``fields`` are :data:`STORE_FIELDS` but ``user_id``."""
    owner = require_owner(user_id)
    given = StoreInput.parse({"content": content, **fields}, now)
    return _node(given, owner, now, _utc_or_none(now), event_id)


def _utc_or_none(now: datetime) -> datetime | None:
    """``now`` in UTC, or None when it is not an aware datetime (:func:`_node` then lets the
    node's own validation report it, as it always has)."""
    try:
        return to_utc(now)
    except InvalidInputError:
        return None


Defaults = tuple[NodeType, str, EpistemicType, SourceType, float, DecayProfile]
_DEFAULTS: dict[tuple[Any, ...], Defaults] = {}  # a batch repeats few combinations
_DEFAULTS_LIMIT = 4096  # roles are free text: the memo stays bounded


def _defaults(
    node_type: NodeType | None,
    role: str | None,
    epistemic: EpistemicType | None,
    source: SourceType | None,
) -> Defaults:
    """Node type, role, epistemic and source type, default confidence and decay profile of a
    memory given (or not) its node type, role, epistemic and source type (reference §A.1)."""
    key = (node_type, role, epistemic, source)
    found = _DEFAULTS.get(key)
    if found is not None:
        return found
    ntype = NodeType.NOTE if node_type is None else node_type
    role = "user" if role is None else role
    if epistemic is None:
        epistemic = default_epistemic(role, ntype)
    if source is None:
        source = default_source(role)
    conf = CONFIDENCE_MATRIX.get((epistemic, source), 0.5)
    if ntype is NodeType.INSTRUCTION:
        conf = max(conf, 0.7)
    decay = DecayProfile.SLOW if ntype is NodeType.INSTRUCTION else DECAY_BY_EPISTEMIC[epistemic]
    found = (ntype, role, epistemic, source, conf, decay)
    if len(_DEFAULTS) < _DEFAULTS_LIMIT:
        _DEFAULTS[key] = found
    return found


def _node(
    given: StoreInput,
    owner: str,
    now: datetime,
    now_utc: datetime | None,
    event_id: uuid.UUID | None,
    node_id: uuid.UUID | None = None,
) -> MemoryNode:
    """The node of validated fields with the store-time defaults (reference §A.1); a new
    random id unless ``node_id`` is given, and a new evidence event unless ``event_id`` is.

    Every field was checked by :class:`StoreInput` (owner by ``require_owner``, times
    converted to UTC), and each default is a valid value, so the node is constructed without
    validating it again; only a clock reading that is not an aware datetime (``now_utc``
    None) takes the validating path, which reports it as before."""
    g = given.__dict__  # the validated fields (attribute reads cost more on a hot path)
    ntype, role, epistemic, source, conf, decay = _defaults(
        g["node_type"], g["role"], g["epistemic_type"], g["source_type"]
    )
    if g["confidence"] is not None:
        conf = g["confidence"]
    sal = 0.5 if g["salience"] is None else g["salience"]
    values: dict[str, Any] = {
        "id": node_id or new_ids(owner, 1)[0],
        "user_id": owner,
        "scope": Scope.PERSONAL if g["scope"] is None else g["scope"],
        "node_type": ntype,
        "content": g["content"],
        "metadata": g["metadata"],
        "session_id": g["session_id"],
        "role": role,
        "created_at": now_utc,
        "updated_at": now_utc,
        "event_time": g["event_time"],
        "valid_from": g["valid_from"] or now_utc,
        "valid_to": g["valid_to"],
        "confidence": conf,
        "salience": sal,
        "confidence_base": conf,
        "salience_base": sal,
        "epistemic_type": epistemic,
        "source_type": source,
        "lifecycle_state": LifecycleState.TENTATIVE,
        "decay_profile": decay,
        "last_reinforced_at": now_utc,
        "reinforcement_boost": 0.0,
        "pinned": bool(g["pinned"]),
        "evidence_refs": (event_id or uuid.uuid4(),),
        "ttl_days": g["ttl_days"],
    }
    if now_utc is not None:
        return trusted_node(values)
    for name in ("created_at", "updated_at", "last_reinforced_at"):
        values[name] = now
    values["valid_from"] = given.valid_from or now
    try:
        return MemoryNode(**values)
    except ValidationError as exc:
        raise invalid_input(exc, "memory", nested=False) from None


def _features(
    engine: Engine, nodes: Sequence[MemoryNode]
) -> tuple[np.ndarray[Any, Any], list[list[str]]]:
    """Vectors and entity names of ``nodes`` (computed before any write lock is taken)."""
    engine.check_embedder()
    vectors = engine.embedder.embed([n.content for n in nodes])
    entities = [
        extract_entities(n.content, None if n.metadata is None else n.metadata.get("entities"))
        for n in nodes
    ]
    return vectors, entities


def store_nodes(engine: Engine, nodes: Sequence[MemoryNode]) -> None:
    """Embed and write a batch in one transaction (bumps the content write sequence once)."""
    if not nodes:
        return
    vectors, entities = _features(engine, nodes)
    # One write transaction: binding the pack's embedder (first write) and the batch itself.
    with engine.store.serialized("memories"):
        engine.store.bind_embedder(engine.embedder.identity.model_dump(mode="json"))
        engine.store.insert_memories(nodes, vectors, entities)


def normalize_content(text: str) -> str:
    """The form duplicate detection compares: NFKC, whitespace runs collapsed, case folded."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


STORE_FIELDS = frozenset(StoreFields.model_fields) - {"content"} | {"user_id"}
_ITEM_FIELDS = STORE_FIELDS - {"user_id"} | {"content"}  # a batch item's, its owner removed


def _known_fields(fields: Mapping[str, Any], prefix: str = "") -> None:
    for name in sorted(set(fields) - STORE_FIELDS):
        valid = ", ".join(sorted(STORE_FIELDS))
        raise InvalidInputError(f"{prefix}{name}", f"unknown memory field (valid: {valid})")


def store(engine: Engine, content: str, *, dedupe: bool = False, **fields: Any) -> StoreReceipt:
    """Store one memory. ``dedupe``: when the owner already has a current (not superseded)
    memory in the same scope whose :func:`normalize_content` equals this one's, write nothing
    and return that memory's id with ``duplicate=True`` (checked inside the write lock)."""
    if not isinstance(dedupe, bool):
        raise InvalidInputError("dedupe", "must be true or false", dedupe)
    _known_fields(fields)
    event_id = uuid.uuid4()
    node = build_node(content, now=engine.clock(), event_id=event_id, **fields)
    if not dedupe:
        store_nodes(engine, [node])
        return StoreReceipt(event_id=event_id, node_id=node.id)
    vectors, entities = _features(engine, [node])
    wanted = normalize_content(node.content)
    with engine.store.serialized("memories"):
        for existing_id, existing in engine.store.current_contents(node.user_id, node.scope):
            if normalize_content(existing) == wanted:
                return StoreReceipt(
                    event_id=node.evidence_refs[0], node_id=uuid.UUID(existing_id), duplicate=True
                )
        engine.store.bind_embedder(engine.embedder.identity.model_dump(mode="json"))
        engine.store.insert_memories([node], vectors, entities)
    return StoreReceipt(event_id=event_id, node_id=node.id)


def store_many(engine: Engine, items: Sequence[Mapping[str, Any]], *, user_id: str) -> list[str]:
    """Validate and store a batch in one transaction; the ids in item order. The cyclic GC
    is paused meanwhile: the batch's objects all live until it is written, and each
    automatic collection would rescan them (and everything else the process holds)."""
    with gc_paused():
        return _store_batch(engine, items, user_id)


def _store_batch(engine: Engine, items: Sequence[Mapping[str, Any]], user_id: str) -> list[str]:
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise InvalidInputError("items", "must be a list of memory objects", items)
    owner = require_owner(user_id)
    if len(items) > MAX_BATCH:
        raise InvalidInputError("items", f"at most {MAX_BATCH} memories per batch")
    now = engine.clock()
    now_utc = _utc_or_none(now)
    made = new_ids(owner, 2 * len(items))  # each memory's id and its evidence event's
    nodes: list[MemoryNode] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            item = {"content": item}
        if not isinstance(item, Mapping) or "content" not in item:
            raise InvalidInputError(f"items[{index}]", "must be a string or an object with content")
        fields = dict(item)
        if "user_id" in fields and fields.pop("user_id") != owner:
            raise InvalidInputError(f"items[{index}].user_id", "differs from the batch owner")
        if not fields.keys() <= _ITEM_FIELDS:
            _known_fields({k: v for k, v in fields.items() if k != "content"}, f"items[{index}].")
        try:
            given = StoreInput.parse(fields, now)
            ids = made[2 * index : 2 * index + 2]
            nodes.append(_node(given, owner, now, now_utc, ids[1], ids[0]))
        except InvalidInputError as exc:
            raise InvalidInputError(f"items[{index}].{exc.field}", str(exc), exc.value) from None
    store_nodes(engine, nodes)
    return [str(n.id) for n in nodes]


def _record(node: MemoryNode, clock_us: int, links: Mapping[str, uuid.UUID]) -> MemoryRecord:
    """``node`` with whether its TTL has run out by ``clock_us`` (the retrieval rule)."""
    stated = stated_time(node)
    ttl = NO_TTL if node.ttl_days is None else node.ttl_days
    expired = ttl_expired(np.array([to_us(stated)]), np.array([ttl]), clock_us)
    expires_at = None
    if node.ttl_days is not None:
        with suppress(OverflowError):  # after 9999-12-31: never within a datetime's range
            expires_at = stated + timedelta(days=node.ttl_days)
    return MemoryRecord(
        **dict(node), expires_at=expires_at, expired=bool(expired[0]), **links
    )


def get(engine: Engine, node_id: object, *, user_id: str) -> MemoryRecord | None:
    """The owner's memory (saying whether it has expired at the engine's clock), or None."""
    node = engine.store.get_memory(require_owner(user_id), str(require_uuid(node_id, "node_id")))
    return None if node is None else _record(node, to_us(engine.clock()), _links(engine, node))


def list_memories(
    engine: Engine,
    *,
    user_id: str,
    scope: ScopeInput = None,
    limit: int = 100,
    after_id: object = None,
) -> list[MemoryRecord]:
    """The owner's memories by id, expired ones included and marked ``expired``."""
    from prme.validation import require_page_limit

    after = None if after_id is None else str(require_uuid(after_id, "after_id"))
    nodes = engine.store.list_memories(
        require_owner(user_id), normalize_scope(scope), require_page_limit(limit), after
    )
    clock_us = to_us(engine.clock())
    return [_record(node, clock_us, _links(engine, node)) for node in nodes]


def delete(engine: Engine, node_id: object, *, user_id: str) -> bool:
    """Delete the owner's memory (a content write: the write sequence moves, so a frozen
    holdout notices). Receipts keep their traces and still replay; version links stay."""
    return engine.store.delete_memory(require_owner(user_id), str(require_uuid(node_id, "node_id")))


# ------------------------------------------------------------------------ versions (update)
VERSION_OP = "memory_version"  # target: the new version; payload names the one it replaced
SUPERSEDED_OP = "memory_superseded"  # target: the old version; payload names its successor
UPDATE_FIELDS = (STORE_FIELDS | {"content"}) - {"user_id", "valid_from"}
_CARRIED = (
    "scope",
    "node_type",
    "session_id",
    "role",
    "metadata",
    "epistemic_type",
    "source_type",
    "event_time",
    "pinned",
    "ttl_days",
)


def _links(engine: Engine, node: MemoryNode) -> dict[str, uuid.UUID]:
    """``supersedes``/``superseded_by`` of ``node`` from the version records of its owner."""
    links: dict[str, uuid.UUID] = {}
    for op_type, key in ((VERSION_OP, "supersedes"), (SUPERSEDED_OP, "superseded_by")):
        if key == "superseded_by" and node.lifecycle_state is not LifecycleState.SUPERSEDED:
            continue
        for op in engine.store.find_ops(op_type, node.user_id, str(node.id)):
            links[key] = uuid.UUID(json.loads(op.payload)[key])
    return links


def update(engine: Engine, node_id: object, *, user_id: str, **changes: Any) -> MemoryRecord:
    """Supersede the owner's memory with a new version and return the new version.

    The new version copies the old one's fields (confidence and salience as stored at first,
    ``valid_to`` only when still ahead), overridden by ``changes`` (a ``None`` takes the
    store-time default); it is valid from now. In the same transaction the old version gets
    ``valid_to`` = now and lifecycle ``superseded`` (it leaves retrieval, except for
    ``knowledge_at`` queries before now), and two version records link both ways. Receipts
    that returned the old version still replay.

    Raises:
        NotFoundError: no such memory of this owner.
        InvalidInputError: no change, an unknown or unchangeable field, a bad value, or the
            memory was already superseded (update its latest version).
    """
    owner = require_owner(user_id)
    old_id = str(require_uuid(node_id, "node_id"))
    for name in sorted(set(changes) - UPDATE_FIELDS):
        valid = ", ".join(sorted(UPDATE_FIELDS))
        raise InvalidInputError(name, f"cannot be updated (valid: {valid})")
    if not changes:
        raise InvalidInputError("changes", "give at least one field to change")
    old = engine.store.get_memory(owner, old_id)
    if old is None:
        raise NotFoundError("Memory", old_id)
    if old.lifecycle_state is LifecycleState.SUPERSEDED:
        latest = _links(engine, old).get("superseded_by")
        raise InvalidInputError(
            "node_id", f"memory {old_id} was superseded by {latest}; update that version"
        )
    now = engine.clock()
    fields: dict[str, Any] = {name: getattr(old, name) for name in _CARRIED}
    fields["confidence"] = old.confidence_base
    fields["salience"] = old.salience_base
    fields["content"] = old.content
    if old.valid_to is not None and old.valid_to > now:
        fields["valid_to"] = old.valid_to
    fields.update(changes)
    event_id = uuid.uuid4()
    node = build_node(
        fields.pop("content"), user_id=owner, now=now, event_id=event_id, **fields
    )
    vectors, entities = _features(engine, [node])
    at_us = to_us(now)
    with engine.store.serialized("memories"):
        if not engine.store.supersede_memory(owner, old_id, at_us):  # moved concurrently
            raise InvalidInputError("node_id", f"memory {old_id} was changed concurrently; retry")
        engine.store.insert_memories([node], vectors, entities)
        new_id = str(node.id)
        for op_type, target, payload in (
            (VERSION_OP, new_id, {"node_id": new_id, "supersedes": old_id}),
            (SUPERSEDED_OP, old_id, {"node_id": old_id, "superseded_by": new_id}),
        ):
            engine.store.append_op(
                op_id=f"{op_type}:{target}",
                op_type=op_type,
                user_id=owner,
                target_id=target,
                namespace=None,
                created_at_us=at_us,
                payload=canonical_json({**payload, "at": now.isoformat()}),
            )
    record = get(engine, node.id, user_id=owner)
    if record is None:  # deleted by another writer since this transaction committed
        raise NotFoundError("Memory", node.id)
    return record
