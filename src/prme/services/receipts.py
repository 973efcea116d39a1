"""Persisting and reading retrieval receipts through the owner."""

from __future__ import annotations

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import IntegrityError
from prme.models.receipt import RetrievalReceipt
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


def parse_receipt(payload: str, user_id: str, request_id: str) -> RetrievalReceipt:
    receipt = RetrievalReceipt.model_validate_json(payload)
    if receipt.user_id != user_id or str(receipt.request_id) != request_id:
        raise IntegrityError("Retrieval receipt identity or checksum mismatch")
    if canonical_json(receipt) != payload:
        raise IntegrityError("Retrieval receipt identity or checksum mismatch")
    return receipt


def get_receipt(engine: Engine, request_id: object, *, user_id: str) -> RetrievalReceipt | None:
    """The owner's receipt, or None when missing or owned by someone else."""
    owner = require_owner(user_id)
    rid = str(require_uuid(request_id, "request_id"))
    ops = engine.store.find_ops(RECEIPT_OP, owner, rid)
    if not ops:
        return None
    if len(ops) > 1:
        raise IntegrityError(f"Ambiguous retrieval receipt {rid}")
    return parse_receipt(ops[0].payload, owner, rid)
