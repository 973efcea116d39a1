"""Persisting and reading retrieval receipts through the owner."""

from __future__ import annotations

from pydantic import ValidationError

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import IntegrityError
from prme.models.receipt import RetrievalReceipt
from prme.retrieval.replay import ReceiptReplayError, verify_receipt
from prme.storage.timeutil import to_us
from prme.validation import require_owner, require_uuid

RECEIPT_OP = "retrieval_receipt"


def persist_receipt(engine: Engine, receipt: RetrievalReceipt) -> None:
    engine.store.append_op(
        op_id=f"receipt:{receipt.request_id}",
        op_type=RECEIPT_OP,
        user_id=receipt.user_id,
        target_id=str(receipt.request_id),
        namespace=None,
        created_at_us=to_us(engine.clock()),
        payload=canonical_json(receipt),
    )


def parse_receipt(
    payload: str, user_id: str, request_id: str, *, verify_canonical: bool = False
) -> RetrievalReceipt:
    """Parse a stored receipt and check owner and id.

    The operations log already verified SHA-256(payload); ``verify_canonical`` also verifies
    the receipt (its scores and order replay exactly: ``verify_receipt``) and re-encodes it to
    compare bytes (the integrity check does; the hot path need not, and the bulk readers
    replay the snapshot themselves).
    """
    try:
        receipt = RetrievalReceipt.from_canonical_json(payload)
        if verify_canonical:
            verify_receipt(receipt)
    except (ValidationError, ReceiptReplayError) as exc:
        raise IntegrityError(f"stored retrieval receipt {request_id} is invalid: {exc}") from None
    if receipt.user_id != user_id or str(receipt.request_id) != request_id:
        raise IntegrityError("Retrieval receipt identity or checksum mismatch")
    if verify_canonical and canonical_json(receipt) != payload:
        raise IntegrityError("Retrieval receipt identity or checksum mismatch")
    return receipt


def get_receipt(
    engine: Engine, request_id: object, *, user_id: str, verify_canonical: bool = True
) -> RetrievalReceipt | None:
    """The owner's receipt, or None when missing or owned by someone else.

    Bulk readers whose evidence already binds each receipt's checksum (relevance records,
    holdout reports) may skip the byte-for-byte re-encoding with ``verify_canonical=False``.
    """
    owner = require_owner(user_id)
    rid = str(require_uuid(request_id, "request_id"))
    ops = engine.store.find_ops(RECEIPT_OP, owner, rid)
    if not ops:
        return None
    if len(ops) > 1:
        raise IntegrityError(f"Ambiguous retrieval receipt {rid}")
    return parse_receipt(ops[0].payload, owner, rid, verify_canonical=verify_canonical)
