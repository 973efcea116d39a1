"""Receipt retention: remove old retrieval receipts that nothing refers to, with an audit record.

The operations log is append-only (triggers refuse UPDATE and DELETE). Pruning is its one
deliberate exception, and it only ever removes ``retrieval_receipt`` operations:

1. In one write transaction that also holds the locks judgments and gate-2 reports are appended
   under (so none can start referring to a receipt while it is removed), read every receipt
   saved before the cutoff.
2. Collect every id named anywhere in every other operation (judgments and their evidence,
   gate-1 and gate-2 reports, profiles with their embedded reports, pointer transitions, earlier
   audit records): a receipt whose request id appears there is kept. The scan reads ids, not
   models, so a reference is kept even if it sits somewhere no model here knows about.
3. Append one ``receipt_prune`` audit record per owner (in parts of at most 10,000 receipts)
   listing each removed receipt's request id, payload SHA-256 and save time, then delete exactly
   those receipts through the backend's guarded path (SQLite drops and re-creates its delete
   trigger inside the transaction; PostgreSQL's trigger admits receipt deletes only while the
   transaction sets ``prme.receipt_retention``).

Either all of it commits or none of it does. Every judgment still binds a stored receipt with its
checksum, every pointer chain and attestation is untouched, and ``prme pack check`` stays clean.
"""

from __future__ import annotations

import math
import re
import uuid
from collections import defaultdict
from datetime import datetime, timedelta

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import InvalidInputError
from prme.limits import MAX_RETENTION_DAYS
from prme.models.retention import (
    MAX_AUDITED_PER_RECORD,
    PrunedReceipt,
    ReceiptPruneRecord,
    ReceiptPruneSummary,
)
from prme.services.receipts import RECEIPT_OP
from prme.services.records import (
    HOLDOUT_REPORT_OP,
    PRUNE_OP,
    RELEVANCE_OP,
    audit_op_id,
)
from prme.storage.timeutil import from_us, to_us

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def require_retention(older_than: object) -> timedelta:
    """``older_than`` as a timedelta: a timedelta or a number of days, 0 to MAX_RETENTION_DAYS."""
    if isinstance(older_than, timedelta):
        days = older_than.total_seconds() / 86400
    elif isinstance(older_than, int | float) and not isinstance(older_than, bool):
        days = float(older_than)
    else:
        raise InvalidInputError("older_than", "must be a timedelta or a number of days", older_than)
    if not math.isfinite(days) or not 0 <= days <= MAX_RETENTION_DAYS:
        raise InvalidInputError(
            "older_than", f"must be from 0 to {MAX_RETENTION_DAYS} days", older_than
        )
    return older_than if isinstance(older_than, timedelta) else timedelta(days=days)


def prune_receipts(
    engine: Engine, *, older_than: timedelta | float, dry_run: bool = False
) -> ReceiptPruneSummary:
    """Remove receipts saved more than ``older_than`` ago that nothing refers to (all owners).

    Args:
        older_than: a timedelta, or a number of days (0 to 36525).
        dry_run: report what would be removed and write nothing.

    Returns a ReceiptPruneSummary (counts, the cutoff, the audit records written).

    Raises:
        InvalidInputError: ``older_than`` is not a duration from 0 to 36525 days.
        ReadOnlyPackError: the pack is read-only.
    """
    keep = require_retention(older_than)
    if not isinstance(dry_run, bool):
        raise InvalidInputError("dry_run", "must be a boolean", dry_run)
    store = engine.store
    prune_id = uuid.uuid4()
    # The locks every judgment and gate-2 report append takes: nothing can begin to refer to a
    # receipt between the scan below and its removal.
    with store.serialized(RELEVANCE_OP), store.serialized(HOLDOUT_REPORT_OP):
        now = engine.clock()
        cutoff = now - keep
        heads = store.op_heads(RECEIPT_OP, created_before_us=to_us(cutoff))
        referenced: set[str] = set()
        if heads:
            for payload in store.iter_payloads(exclude_op_types=(RECEIPT_OP,)):
                referenced.update(_UUID.findall(payload))
        doomed = [h for h in heads if h.target_id not in referenced]
        by_owner: dict[str, list[PrunedReceipt]] = defaultdict(list)
        for head in doomed:
            by_owner[head.user_id].append(
                PrunedReceipt(
                    request_id=uuid.UUID(str(head.target_id)),
                    checksum=head.checksum,
                    saved_at=from_us(head.created_at_us),
                )
            )
        audit_ids: list[str] = []
        if not dry_run and doomed:
            audit_ids = _append_audit(engine, prune_id, by_owner, now, cutoff, keep)
            store.delete_ops(RECEIPT_OP, [h.op_id for h in doomed])
    return ReceiptPruneSummary(
        prune_id=prune_id,
        dry_run=dry_run,
        pruned_at=now,
        cutoff=cutoff,
        older_than_days=keep.total_seconds() / 86400,
        examined=len(heads),
        removed=len(doomed),
        kept_referenced=len(heads) - len(doomed),
        owners=len(by_owner),
        audit_op_ids=tuple(audit_ids),
    )


def _append_audit(
    engine: Engine,
    prune_id: uuid.UUID,
    by_owner: dict[str, list[PrunedReceipt]],
    now: datetime,
    cutoff: datetime,
    keep: timedelta,
) -> list[str]:
    """Append the prune's audit records (per owner, in parts of at most
    ``MAX_AUDITED_PER_RECORD`` receipts, numbered from 1 across owners); their op ids."""
    audit_ids: list[str] = []
    part = 0
    for owner in sorted(by_owner):
        removed = by_owner[owner]
        for start in range(0, len(removed), MAX_AUDITED_PER_RECORD):
            part += 1
            record = ReceiptPruneRecord(
                prune_id=prune_id,
                user_id=owner,
                part=part,
                pruned_at=now,
                cutoff=cutoff,
                older_than_days=keep.total_seconds() / 86400,
                receipts=tuple(removed[start : start + MAX_AUDITED_PER_RECORD]),
            )
            op_id = audit_op_id(prune_id, part)
            engine.store.append_op(
                op_id=op_id,
                op_type=PRUNE_OP,
                user_id=owner,
                target_id=str(prune_id),
                namespace=None,
                created_at_us=to_us(now),
                payload=canonical_json(record),
            )
            audit_ids.append(op_id)
    return audit_ids
