"""Evaluation reports: attested with the pack secret, persisted append-only (read back by
checksum through :mod:`prme.services.records`)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import TypeVar

from pydantic import BaseModel

from prme.canonical import canonical_json, canonical_object
from prme.engine import Engine
from prme.errors import IntegrityError, InvalidInputError
from prme.models.holdout import FullRetrievalEvaluation
from prme.services.receipts import RECEIPT_OP
from prme.services.records import RecordKind, report_op_id
from prme.storage.timeutil import to_us

ReportT = TypeVar("ReportT", bound=BaseModel)


def unattested(report: BaseModel) -> dict[str, object]:
    """The canonical content an attestation signs: the report without its attestation."""
    return report.model_dump(mode="json", exclude={"attestation"})


def verify(engine: Engine, report: BaseModel) -> bool:
    """True when the report's attestation was made by this pack's secret over this exact content."""
    attestation = getattr(report, "attestation", None)
    if not isinstance(attestation, str):
        return False
    return engine.store.verify_attestation(unattested(report), attestation)


def attest_and_persist(
    engine: Engine, kind: RecordKind[ReportT], user_id: str, report_checksum: str, report: ReportT
) -> ReportT:
    """Attest ``report`` (HMAC-SHA256 of its canonical content under the pack secret) and append
    it once: an identical re-evaluation is a no-op, a different one under the same checksum an
    error. Returns the attested copy. The report is dumped once for both steps (reports bind
    whole snapshots, so they can be megabytes)."""
    members = {key: canonical_json(value) for key, value in unattested(report).items()}
    attestation = engine.store.attest(canonical_object(members))
    payload = canonical_object({**members, "attestation": canonical_json(attestation)})
    op_type = kind.op_type
    op_id = report_op_id(op_type, user_id, report_checksum)
    named = _named_receipts(report)
    # Receipt retention removes receipts under this lock: a gate-2 report is appended only
    # while every receipt it names is still stored (gate-1 receipts are held by judgments).
    with engine.store.serialized(op_type) if named else nullcontext():
        if named:
            stored = engine.store.op_checksums(RECEIPT_OP, user_id, named)
            missing = [request_id for request_id in named if request_id not in stored]
            if missing:
                raise InvalidInputError(
                    "trials",
                    f"receipt {missing[0]} (and {len(missing) - 1} more) was removed by "
                    "receipt retention while the evaluation ran; run the retrievals again",
                )
        inserted = engine.store.append_op(
            op_id=op_id,
            op_type=op_type,
            user_id=user_id,
            target_id=report_checksum,
            namespace=None,
            created_at_us=to_us(engine.clock()),
            payload=payload,
        )
    if not inserted:
        existing = engine.store.get_op(op_id)
        if existing is None or existing.payload != payload:
            raise IntegrityError(f"a different {op_type} report is stored under {report_checksum}")
    return report.model_copy(update={"attestation": attestation})


def _named_receipts(report: BaseModel) -> list[str]:
    """The request ids of the receipts a gate-2 report's trials pair (sorted, unique)."""
    if not isinstance(report, FullRetrievalEvaluation):
        return []
    named = {str(t.baseline_request_id) for t in report.trials}
    named.update(str(t.candidate_request_id) for t in report.trials)
    return sorted(named)

