"""Gate-1 inputs as an identity-checked snapshot: judgments with their evidence, and the
receipts they may name (checked by checksum, not re-parsed)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from prme.canonical import canonical_json, sha256_hex
from prme.errors import InvalidInputError
from prme.models.base import uuid_text_order
from prme.models.evidence import JudgmentEvidence
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceRecord


# --------------------------------------------------------------------------- the snapshot
@dataclass(frozen=True, slots=True)
class Judgment:
    """One relevance judgment as gate 1 reads it: its evidence (identity, surface, labels,
    receipt binding and the labelled candidates' columns) and the SHA-256 of the record's
    canonical JSON, which the snapshot checksum binds."""

    evidence: JudgmentEvidence
    record_checksum: str


@dataclass(frozen=True)
class Snapshot:
    """Identity-checked gate-1 inputs: distinct judgments and the receipts they may name."""

    judgments: tuple[Judgment, ...]  # ascending str(feedback_id)
    receipts: dict[UUID, tuple[str, str]]  # request id → (receipt checksum, query)


def _distinct_receipts(
    receipts: Iterable[RetrievalReceipt], owner: str
) -> tuple[dict[UUID, RetrievalReceipt], dict[UUID, str]]:
    by_id: dict[UUID, RetrievalReceipt] = {}
    sums: dict[UUID, str] = {}
    for receipt in receipts:
        if not isinstance(receipt, RetrievalReceipt):
            raise InvalidInputError(
                "receipts", "must contain RetrievalReceipt models", type(receipt).__name__
            )
        if receipt.user_id != owner:
            raise InvalidInputError(
                "receipts", "Learning inputs must belong to the requested owner"
            )
        rid = receipt.request_id
        digest = receipt.checksum
        if rid in sums:
            if sums[rid] != digest:
                raise InvalidInputError(
                    "receipts", f"Conflicting receipt identity for request {rid}", str(rid)
                )
            continue
        by_id[rid] = receipt
        sums[rid] = digest
    return by_id, sums


def _check_record_owner(record: object, owner: str) -> RelevanceRecord:
    if not isinstance(record, RelevanceRecord):
        raise InvalidInputError(
            "records", "must contain RelevanceRecord models", type(record).__name__
        )
    if record.user_id != owner:
        raise InvalidInputError("records", "Learning inputs must belong to the requested owner")
    return record


def _record_conflict(fid: UUID) -> InvalidInputError:
    return InvalidInputError("records", f"Conflicting feedback identity for {fid}", str(fid))


def _distinct_records(
    records: Iterable[RelevanceRecord], owner: str
) -> tuple[list[RelevanceRecord], dict[UUID, str]]:
    by_id: dict[UUID, RelevanceRecord] = {}
    sums: dict[UUID, str] = {}
    for item in records:
        record = _check_record_owner(item, owner)
        fid = record.feedback_id
        digest = sha256_hex(canonical_json(record))
        if fid in sums:
            if sums[fid] != digest:
                raise _record_conflict(fid)
            continue
        by_id[fid] = record
        sums[fid] = digest
    ordered = sorted(by_id.values(), key=lambda r: r.feedback_id.int)
    return ordered, sums


def _receipt_for(
    record: RelevanceRecord, receipt: RetrievalReceipt | None, receipt_sum: str | None
) -> RetrievalReceipt:
    if receipt is None:
        fid = str(record.feedback_id)
        raise InvalidInputError(
            "records", f"Every relevance record requires its saved receipt ({fid})", fid
        )
    if record.receipt_checksum != receipt_sum:
        fid = str(record.feedback_id)
        raise InvalidInputError("records", f"Relevance receipt checksum mismatch ({fid})", fid)
    returned = {c.node_id for c in receipt.candidates}
    if not returned.issuperset(record.labels):
        unobserved = min(str(n) for n in record.labels if n not in returned)
        raise InvalidInputError(
            "records",
            f"Relevance label refers to an unobserved candidate ({unobserved})",
            str(record.feedback_id),
        )
    return receipt


def snapshot_from_receipts(
    receipts: Iterable[RetrievalReceipt], records: Iterable[RelevanceRecord], owner: str
) -> Snapshot:
    """Whole receipts and records → a snapshot (each record's evidence cut from its receipt)."""
    by_request, receipt_sums = _distinct_receipts(receipts, owner)
    ordered, record_sums = _distinct_records(records, owner)
    judgments = []
    for record in ordered:
        rid = record.request_id
        receipt = _receipt_for(record, by_request.get(rid), receipt_sums.get(rid))
        evidence = JudgmentEvidence.from_receipt(
            receipt, record.feedback_id, record.labels, record.surface
        )
        judgments.append(Judgment(evidence, record_sums[record.feedback_id]))
    known = {rid: (receipt_sums[rid], r.query) for rid, r in by_request.items()}
    return Snapshot(tuple(judgments), known)


def snapshot_from_judgments(judgments: Iterable[Judgment], owner: str) -> Snapshot:
    """Judgments with their stored evidence → a snapshot (the receipts are the judged ones)."""
    by_id: dict[UUID, Judgment] = {}
    known: dict[UUID, tuple[str, str]] = {}
    for judgment in judgments:
        if not isinstance(judgment, Judgment):
            raise InvalidInputError(
                "judgments", "must contain Judgment values", type(judgment).__name__
            )
        evidence = judgment.evidence
        if evidence.user_id != owner:
            raise InvalidInputError("records", "Learning inputs must belong to the requested owner")
        fid, rid = evidence.feedback_id, evidence.request_id
        seen = by_id.get(fid)
        if seen is not None:
            if seen.record_checksum != judgment.record_checksum:
                raise _record_conflict(fid)
            continue
        identity = (evidence.receipt_checksum, evidence.query)
        if known.setdefault(rid, identity) != identity:
            raise InvalidInputError(
                "receipts", f"Conflicting receipt identity for request {rid}", str(rid)
            )
        by_id[fid] = judgment
    ordered = tuple(by_id[fid] for fid in sorted(by_id, key=uuid_text_order))
    return Snapshot(ordered, known)
