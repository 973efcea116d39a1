"""record_relevance / get_relevance / list_relevance: judgments bound to the owner's receipts.

Each judgment is one append-only operation keyed by
``uuid5(NAMESPACE_URL, json.dumps(["prme:relevance:v1", user_id, str(feedback_id)]))``, so the
same ``feedback_id`` is idempotent per owner and independent between owners (reference §D.2).
In the same transaction the engine appends the judgment's :class:`JudgmentEvidence` (the
labelled candidates' columns, cut from the verified receipt), which gate 1 reads instead of
re-parsing every whole receipt.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import IntegrityError, InvalidInputError, NotFoundError
from prme.learning.gate1 import Judgment
from prme.models.base import NonBlankStr, Sha256Hex
from prme.models.evidence import CanonicalUUID, JudgmentEvidence
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import (
    MAX_LABELS,
    RelevanceRecord,
    RelevanceSubmission,
    RelevanceSurface,
)
from prme.services.receipts import RECEIPT_OP, get_receipt
from prme.storage.base import OpRecord
from prme.storage.timeutil import to_us
from prme.validation import require_owner, require_page_limit, require_uuid

RELEVANCE_OP = "relevance_recorded"
EVIDENCE_OP = "relevance_evidence"
OWNED_RECEIPT_REQUIRED = "A saved retrieval receipt owned by this user is required"
LABELS_NOT_CANDIDATES = "Relevance labels must refer to saved response candidates"
CONTEXT_LABELS = "Context labels require included entries; positive labels require source content"
DIFFERENT_JUDGMENT = "feedback_id already identifies a different relevance judgment"
MISSING_RECEIPT = "Feedback references a missing retrieval receipt"


def relevance_op_id(user_id: str, feedback_id: uuid.UUID) -> str:
    """The operation id of a judgment (reference §D.2 step 7, §M.7)."""
    name = json.dumps(["prme:relevance:v1", user_id, str(feedback_id)])
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def evidence_op_id(record_op_id: str) -> str:
    """The operation id of a judgment's evidence: derived from the judgment's own op id."""
    return f"{EVIDENCE_OP}:{record_op_id}"


def missing_receipt(request_id: object) -> NotFoundError:
    error = NotFoundError("retrieval receipt", request_id)
    error.args = (f"{error.args[0]}. {OWNED_RECEIPT_REQUIRED}",)
    return error


def _parse_submission(submission: RelevanceSubmission | Mapping[str, Any]) -> RelevanceSubmission:
    # Re-parse from JSON: detaches caller-held dicts and accepts a plain mapping (HTTP, MCP).
    try:
        if isinstance(submission, RelevanceSubmission):
            return RelevanceSubmission.model_validate_json(submission.model_dump_json())
        if isinstance(submission, Mapping):
            return RelevanceSubmission.model_validate(dict(submission))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InvalidInputError(loc or "submission", err["msg"]) from None
    raise InvalidInputError(
        "submission", "must be a RelevanceSubmission or a mapping of its fields", submission
    )


def check_labels(receipt: RetrievalReceipt, labels: Mapping[uuid.UUID, bool], surface: str) -> None:
    """Labels name returned candidates; context labels name included entries (§D.2 steps 4–5)."""
    candidates = {c.node_id: c for c in receipt.candidates}
    for node_id, relevant in labels.items():
        candidate = candidates.get(node_id)
        if candidate is None:
            raise InvalidInputError("labels", f"{LABELS_NOT_CANDIDATES} ({node_id})", str(node_id))
        if surface == "context" and (
            not candidate.in_context or (relevant and not candidate.has_content)
        ):
            raise InvalidInputError("labels", f"{CONTEXT_LABELS} ({node_id})", str(node_id))


def parse_record(op: OpRecord, user_id: str) -> RelevanceRecord:
    """A stored judgment, verified: canonical bytes, owner and feedback id."""
    if op.op_type != RELEVANCE_OP or op.user_id != user_id:
        raise IntegrityError("Relevance record owner or identity mismatch")
    try:
        record = RelevanceRecord.model_validate_json(op.payload)
    except ValidationError as exc:
        raise IntegrityError(
            f"Relevance record checksum mismatch ({exc.errors()[0]['msg']})"
        ) from None
    if canonical_json(record) != op.payload:
        raise IntegrityError("Relevance record checksum mismatch")
    if (
        record.user_id != user_id
        or str(record.feedback_id) != op.target_id
        or relevance_op_id(user_id, record.feedback_id) != op.op_id
    ):
        raise IntegrityError("Relevance record owner or identity mismatch")
    return record


def record_relevance(
    engine: Engine, submission: RelevanceSubmission | Mapping[str, Any], *, user_id: str
) -> RelevanceRecord:
    """Admit a judgment once; an identical retry returns the original record (see module doc)."""
    owner = require_owner(user_id)
    parsed = _parse_submission(submission)
    receipt = get_receipt(engine, parsed.request_id, user_id=owner)
    if receipt is None:
        raise missing_receipt(parsed.request_id)
    check_labels(receipt, parsed.labels, parsed.surface)
    record = RelevanceRecord(
        **parsed.model_dump(),
        user_id=owner,
        recorded_at=engine.clock(),
        receipt_checksum=receipt.checksum,
    )
    op_id = relevance_op_id(owner, parsed.feedback_id)
    evidence = JudgmentEvidence.from_receipt(receipt, parsed.feedback_id, parsed.labels)

    def append(op_id: str, op_type: str, payload: str) -> bool:
        return engine.store.append_op(
            op_id=op_id,
            op_type=op_type,
            user_id=owner,
            target_id=str(parsed.feedback_id),
            namespace=None,
            created_at_us=to_us(record.recorded_at),
            payload=payload,
        )

    with engine.store.serialized(RELEVANCE_OP):  # the judgment and its evidence, atomically
        inserted = append(op_id, RELEVANCE_OP, canonical_json(record))
        if inserted:
            append(evidence_op_id(op_id), EVIDENCE_OP, canonical_json(evidence))
    if inserted:
        return record
    stored_op = engine.store.get_op(op_id)
    if stored_op is None:  # pragma: no cover - the insert was refused, so the row exists
        raise IntegrityError(f"relevance record {parsed.feedback_id} vanished")
    stored = parse_record(stored_op, owner)
    if not stored.matches(parsed) or stored.receipt_checksum != record.receipt_checksum:
        raise InvalidInputError("feedback_id", DIFFERENT_JUDGMENT, str(parsed.feedback_id))
    return stored


def get_relevance(engine: Engine, feedback_id: object, *, user_id: str) -> RelevanceRecord | None:
    """The owner's judgment, or None (another owner's feedback id looks missing)."""
    owner = require_owner(user_id)
    fid = require_uuid(feedback_id, "feedback_id")
    op = engine.store.get_op(relevance_op_id(owner, fid))
    if op is None:
        return None
    return parse_record(op, owner)


def iter_relevance(
    engine: Engine, user_id: str, *, after_id: str | None = None, limit: int | None = None
) -> Iterator[RelevanceRecord]:
    """The owner's judgments ordered by ``str(feedback_id)``, verified one by one."""
    for op in engine.store.iter_ops(
        RELEVANCE_OP, user_id, after_target=after_id, limit=limit, order_by_target=True
    ):
        yield parse_record(op, user_id)


def parse_evidence(
    op: OpRecord, record_op: OpRecord, *, verify_canonical: bool = False
) -> JudgmentEvidence:
    """The stored evidence of the judgment in ``record_op``, checked against its operation
    (``verify_canonical`` also re-encodes it and compares bytes, as ``prme pack check`` does)."""
    if (
        op.op_type != EVIDENCE_OP
        or op.op_id != evidence_op_id(record_op.op_id)
        or (op.user_id, op.target_id) != (record_op.user_id, record_op.target_id)
    ):
        raise IntegrityError(f"Relevance evidence identity mismatch ({op.op_id})")
    try:
        evidence = JudgmentEvidence.model_validate_json(op.payload)
    except ValidationError as exc:
        raise IntegrityError(
            f"Relevance evidence {op.op_id} is invalid ({exc.errors()[0]['msg']})"
        ) from None
    if verify_canonical and canonical_json(evidence) != op.payload:
        raise IntegrityError(f"Relevance evidence {op.op_id} is not canonical")
    return evidence


class _JudgedColumns(BaseModel):
    """What gate 1 reads of a stored judgment: the bulk reader's schema. It skips the fields
    gate 1 never reads and keeps node ids as text; ``get_relevance``, ``list_relevance`` and
    ``prme pack check`` validate whole records."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_version: Literal[1]
    feedback_id: uuid.UUID
    request_id: uuid.UUID
    user_id: NonBlankStr
    surface: RelevanceSurface
    receipt_checksum: Sha256Hex
    labels: dict[CanonicalUUID, StrictBool] = Field(min_length=1, max_length=MAX_LABELS)


def _judged_columns(op: OpRecord, user_id: str) -> _JudgedColumns:
    try:
        columns = _JudgedColumns.model_validate_json(op.payload)
    except ValidationError as exc:
        raise IntegrityError(
            f"Relevance record checksum mismatch ({exc.errors()[0]['msg']})"
        ) from None
    if columns.user_id != user_id or str(columns.feedback_id) != op.target_id:
        raise IntegrityError("Relevance record owner or identity mismatch")
    return columns


def _evidence_from_receipt(engine: Engine, judged: _JudgedColumns) -> JudgmentEvidence:
    """Evidence cut from the judged receipt (judgments recorded before evidence was stored)."""
    receipt = get_receipt(engine, judged.request_id, user_id=judged.user_id, verify_canonical=False)
    if receipt is None:
        raise IntegrityError(f"{MISSING_RECEIPT} ({judged.request_id})")
    return JudgmentEvidence.from_receipt(receipt, judged.feedback_id, judged.labels)


def read_judgments(engine: Engine, user_id: str, *, limit: int) -> list[Judgment]:
    """Up to ``limit`` of the owner's judgments with their evidence, by ``str(feedback_id)``.

    Two range reads of the operations log (whose SHA-256 per row the store verifies) and one
    lookup of the judged receipts' stored checksums: every judged receipt must still be stored
    under the checksum its judgment names (receipts themselves are not parsed; ``prme pack
    check`` replays them). A judgment without stored evidence (recorded by an earlier prme)
    gets it cut from its receipt, which is read and parsed for that alone.
    """
    store = engine.store
    records = store.iter_ops(RELEVANCE_OP, user_id, limit=limit, order_by_target=True)
    stored = {
        op.target_id: op
        for op in store.iter_ops(EVIDENCE_OP, user_id, limit=limit, order_by_target=True)
    }
    judgments = []
    for op in records:
        judged = _judged_columns(op, user_id)
        evidence_op = stored.get(op.target_id)
        evidence = (
            _evidence_from_receipt(engine, judged)
            if evidence_op is None
            else parse_evidence(evidence_op, op)
        )
        judgments.append(
            Judgment(
                judged.feedback_id,
                judged.request_id,
                judged.user_id,
                judged.surface,
                judged.receipt_checksum,
                judged.labels,
                op.checksum,  # = SHA-256 of the record's canonical JSON (verified on read)
                evidence,
            )
        )
    _check_receipts(engine, user_id, judgments)
    return judgments


def _check_receipts(engine: Engine, user_id: str, judgments: list[Judgment]) -> None:
    request_ids = [str(j.request_id) for j in judgments]
    stored = engine.store.op_checksums(RECEIPT_OP, user_id, sorted(set(request_ids)))
    for request_id, judgment in zip(request_ids, judgments, strict=True):
        digest = stored.get(request_id)
        if digest is None:
            raise IntegrityError(f"{MISSING_RECEIPT} ({request_id})")
        if digest != judgment.receipt_checksum:
            raise IntegrityError(f"Relevance receipt checksum mismatch (request {request_id})")


def list_relevance(
    engine: Engine, *, user_id: str, limit: int = 100, after_id: object = None
) -> list[RelevanceRecord]:
    """One page of the owner's judgments, ascending by ``str(feedback_id)`` after ``after_id``."""
    owner = require_owner(user_id)
    page = require_page_limit(limit)
    after = None if after_id is None else str(require_uuid(after_id, "after_id"))
    return list(iter_relevance(engine, owner, after_id=after, limit=page))
