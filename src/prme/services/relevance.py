"""record_relevance / get_relevance / list_relevance: judgments bound to the owner's receipts.

Each judgment is one append-only operation keyed by
``uuid5(NAMESPACE_URL, json.dumps(["prme:relevance:v1", user_id, str(feedback_id)]))``, so the
same ``feedback_id`` is idempotent per owner and independent between owners (reference §D.2).
In the same transaction the engine appends the judgment's :class:`JudgmentEvidence` (the
labelled candidates' columns, cut from the verified receipt), which gate 1 reads instead of
re-parsing every whole receipt.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import ValidationError

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import IntegrityError, InvalidInputError, NotFoundError
from prme.learning.snapshot import Judgment
from prme.models.evidence import JudgmentEvidence
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import (
    RANK_FUSION_WARNING,
    RecordedRelevance,
    RelevanceRecord,
    RelevanceSubmission,
)
from prme.services import records
from prme.services.receipts import RECEIPT_OP, get_receipt
from prme.services.records import (
    EVIDENCE,
    EVIDENCE_OP,
    JUDGMENTS,
    RELEVANCE_OP,
    evidence_op_id,
    relevance_op_id,
)
from prme.storage.timeutil import to_us
from prme.validation import invalid_input, require_owner, require_page_limit, require_uuid

OWNED_RECEIPT_REQUIRED = "A saved retrieval receipt owned by this user is required"
LABELS_NOT_CANDIDATES = "Relevance labels must refer to saved response candidates"
CONTEXT_LABELS = "Context labels require included entries; positive labels require source content"
DIFFERENT_JUDGMENT = "feedback_id already identifies a different relevance judgment"
MISSING_RECEIPT = "Feedback references a missing retrieval receipt"


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
        raise invalid_input(exc, "submission", nested=False) from None
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
    evidence = JudgmentEvidence.from_receipt(
        receipt, parsed.feedback_id, parsed.labels, parsed.surface
    )

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
        # Receipt retention removes receipts under this lock: the receipt must still be there.
        if not engine.store.op_checksums(RECEIPT_OP, owner, [str(parsed.request_id)]):
            raise missing_receipt(parsed.request_id)
        inserted = append(op_id, RELEVANCE_OP, canonical_json(record))
        if inserted:
            append(evidence_op_id(op_id), EVIDENCE_OP, canonical_json(evidence))
    if inserted:
        return _warned(record, receipt)
    stored_op = engine.store.get_op(op_id)
    if stored_op is None:  # pragma: no cover - the insert was refused, so the row exists
        raise IntegrityError(f"relevance record {parsed.feedback_id} vanished")
    stored = JUDGMENTS.verified(stored_op, owner)
    if not stored.matches(parsed) or stored.receipt_checksum != record.receipt_checksum:
        raise InvalidInputError("feedback_id", DIFFERENT_JUDGMENT, str(parsed.feedback_id))
    return _warned(stored, receipt)


def _warned(record: RelevanceRecord, receipt: RetrievalReceipt) -> RelevanceRecord:
    """``record``, as a RecordedRelevance carrying ``warnings`` when its receipt calls for
    any (rank fusion: gate 1 excludes the judgment); unchanged otherwise."""
    if receipt.scoring.fusion != "rrf":
        return record
    return RecordedRelevance(**dict(record), warnings=(RANK_FUSION_WARNING,))


def get_relevance(engine: Engine, feedback_id: object, *, user_id: str) -> RelevanceRecord | None:
    """The owner's judgment, or None (another owner's feedback id looks missing)."""
    owner = require_owner(user_id)
    fid = require_uuid(feedback_id, "feedback_id")
    return records.get(engine, JUDGMENTS, owner, relevance_op_id(owner, fid))


def iter_relevance(
    engine: Engine, user_id: str, *, after_id: str | None = None, limit: int | None = None
) -> Iterator[RelevanceRecord]:
    """The owner's judgments ordered by ``str(feedback_id)``, verified one by one."""
    for op in engine.store.iter_ops(
        RELEVANCE_OP, user_id, after_target=after_id, limit=limit, order_by_target=True
    ):
        yield JUDGMENTS.verified(op, user_id)


def cut_evidence(engine: Engine, record: RelevanceRecord) -> JudgmentEvidence:
    """A judgment's evidence cut from its stored receipt (judgments recorded before evidence
    was stored, and ``prme pack check``)."""
    receipt = get_receipt(engine, record.request_id, user_id=record.user_id, verify_canonical=False)
    if receipt is None:
        raise IntegrityError(f"{MISSING_RECEIPT} ({record.request_id})")
    return JudgmentEvidence.from_receipt(receipt, record.feedback_id, record.labels, record.surface)


def read_judgments(engine: Engine, user_id: str, *, limit: int) -> list[Judgment]:
    """Up to ``limit`` of the owner's judgments with their evidence, by ``str(feedback_id)``.

    The judgments' stored checksums and the judged receipts' come from an index; the evidence
    from one range read (the store verifies each row's SHA-256). Judgment payloads and receipts
    are not parsed: the evidence, written with its judgment from the same submission, carries
    what gate 1 reads, every judged receipt must still be stored under the checksum its
    judgment binds, and ``prme pack check`` re-derives the evidence. A judgment without stored
    evidence (recorded by an earlier prme) is read, and its evidence cut from its receipt.
    """
    store = engine.store
    records = store.op_checksums(RELEVANCE_OP, user_id, limit=limit)  # {feedback id: checksum}
    stored = {
        op.target_id: op
        for op in store.iter_ops(EVIDENCE_OP, user_id, limit=limit, order_by_target=True)
    }
    judgments = []
    for feedback_id, record_checksum in records.items():
        evidence_op = stored.get(feedback_id)
        evidence = (
            _legacy_evidence(engine, user_id, feedback_id)
            if evidence_op is None
            else EVIDENCE.verified(evidence_op, user_id, feedback_id)
        )
        # record_checksum = SHA-256 of the record's canonical JSON, what reports bind
        judgments.append(Judgment(evidence, record_checksum))
    _check_receipts(engine, user_id, judgments)
    return judgments


def _legacy_evidence(engine: Engine, user_id: str, feedback_id: str) -> JudgmentEvidence:
    op = engine.store.get_op(relevance_op_id(user_id, uuid.UUID(feedback_id)))
    if op is None:
        raise IntegrityError(f"relevance record {feedback_id} vanished")
    return cut_evidence(engine, JUDGMENTS.verified(op, user_id))


def _check_receipts(engine: Engine, user_id: str, judgments: list[Judgment]) -> None:
    request_ids = [str(j.evidence.request_id) for j in judgments]
    stored = engine.store.op_checksums(RECEIPT_OP, user_id, sorted(set(request_ids)))
    for request_id, judgment in zip(request_ids, judgments, strict=True):
        digest = stored.get(request_id)
        if digest is None:
            raise IntegrityError(f"{MISSING_RECEIPT} ({request_id})")
        if digest != judgment.evidence.receipt_checksum:
            raise IntegrityError(f"Relevance receipt checksum mismatch (request {request_id})")


def list_relevance(
    engine: Engine, *, user_id: str, limit: int = 100, after_id: object = None
) -> list[RelevanceRecord]:
    """One page of the owner's judgments, ascending by ``str(feedback_id)`` after ``after_id``."""
    owner = require_owner(user_id)
    page = require_page_limit(limit)
    after = None if after_id is None else str(require_uuid(after_id, "after_id"))
    return list(iter_relevance(engine, owner, after_id=after, limit=page))
