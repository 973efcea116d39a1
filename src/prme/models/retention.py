"""Receipt retention: the audit record of a prune and the summary it returns."""

from __future__ import annotations

from uuid import UUID

from pydantic import Field

from prme.models.base import Frozen, NonBlankStr, Sha256Hex, UTCDateTime

# Receipts one audit record lists (a prune writes as many records as it needs).
MAX_AUDITED_PER_RECORD = 10_000


class PrunedReceipt(Frozen):
    """One removed receipt: its request id, the stored SHA-256 of its payload, when it was saved."""

    request_id: UUID
    checksum: Sha256Hex
    saved_at: UTCDateTime


class ReceiptPruneRecord(Frozen):
    """The operations-log entry a prune appends for each owner (and each part of a long list):
    which receipts it removed, under which rule, when. ``part`` counts from 1 within the prune."""

    prune_id: UUID
    user_id: NonBlankStr
    part: int = Field(ge=1)
    pruned_at: UTCDateTime
    cutoff: UTCDateTime
    older_than_days: float = Field(ge=0.0, allow_inf_nan=False)
    receipts: tuple[PrunedReceipt, ...] = Field(min_length=1, max_length=MAX_AUDITED_PER_RECORD)


class ReceiptPruneSummary(Frozen):
    """What :func:`prme.services.retention.prune_receipts` found and did.

    ``removed``: receipts deleted (or, on a dry run, that would be); ``kept_referenced``: receipts
    older than the cutoff kept because a judgment, evidence, report or profile names them;
    ``audit_op_ids``: the operations-log entries that record the removal (none on a dry run).
    """

    prune_id: UUID
    dry_run: bool
    pruned_at: UTCDateTime
    cutoff: UTCDateTime
    older_than_days: float
    examined: int
    removed: int
    kept_referenced: int
    owners: int
    audit_op_ids: tuple[str, ...]
