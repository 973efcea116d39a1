"""The registry of stored record kinds: one table, one load and verify for every kind.

Every record the engine keeps in the operations log besides memory content is one operation of
a registered kind (:data:`KINDS`, keyed by operation type). A kind states:

- ``op_type`` and ``model``: the operation type and the model its payload parses into;
- ``op_id``: the id rule, the operation id a record must be stored under (writers use the same
  functions: :func:`relevance_op_id`, :func:`profile_op_id`, :func:`state_op_id`, ...);
- ``owner``: whose record it is (every read is the owner's: another owner's record looks
  exactly like a missing one);
- ``parse``: the verify function, ``parse(op, user_id, target, full)``: the payload parses, is
  canonical and names this owner and target (raising ``IntegrityError``, or for reports the
  model's ``ValidationError`` or, when the report contradicts itself, the
  ``ReportVerificationError`` of :func:`prme.learning.verify_reports.verify_report`, which a
  profile's embedded reports pass too); ``full`` adds what only ``prme pack check`` pays for (a
  receipt's exact score and order replay, byte comparison of evidence);
- for ``prme pack check``: the ``check`` that reports its problems, the ``counter`` of its
  operations in the report, ``row_problem`` (what the row's own columns must satisfy before
  its payload is read) and ``mismatch`` (the problem when a parsed record breaks the owner or
  id rule).

The services read records with :func:`get` (by operation id) and :func:`find` (by owner and
target); :mod:`prme.services.integrity` iterates the table. An operation type that is neither
a record kind nor in :data:`LINK_OP_TYPES` (memory version links, verified by their log
checksum alone) is unknown to this prme, and ``pack check`` reports it.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from prme.canonical import canonical_json
from prme.engine import Engine
from prme.errors import IntegrityError
from prme.learning.verify_reports import ReportVerificationError, verify_report
from prme.models.evidence import JudgmentEvidence
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.profiles import RankingProfile, RankingProfileState
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceRecord
from prme.models.retention import ReceiptPruneRecord
from prme.models.scope import scope_namespace
from prme.services.memories import SUPERSEDED_OP, VERSION_OP
from prme.services.receipts import RECEIPT_OP, parse_receipt
from prme.storage.base import OpRecord
from prme.storage.timeutil import to_us

RELEVANCE_OP = "relevance_recorded"
EVIDENCE_OP = "relevance_evidence"
LEARNING_REPORT_OP = "learning_evaluation"
HOLDOUT_REPORT_OP = "full_retrieval_evaluation"
PROFILE_OP = "ranking_profile"
STATE_OP = "ranking_profile_state"
PRUNE_OP = "receipt_prune"
# Operations without a record model: memory version links (their log checksum is their check).
LINK_OP_TYPES = frozenset({VERSION_OP, SUPERSEDED_OP})

RecordCheck = Literal["receipt", "relevance", "evidence", "profile", "report", "state", "retention"]
RecordT = TypeVar("RecordT", bound=BaseModel)
ReportModel = TypeVar("ReportModel", LearningEvaluation, FullRetrievalEvaluation)


# ------------------------------------------------------------------------------- id rules
def receipt_op_id(request_id: uuid.UUID | str) -> str:
    """The operation id of a retrieval receipt."""
    return f"receipt:{request_id}"


def relevance_op_id(user_id: str, feedback_id: uuid.UUID) -> str:
    """The operation id of a judgment (reference §D.2 step 7, §M.7)."""
    name = json.dumps(["prme:relevance:v1", user_id, str(feedback_id)])
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def evidence_op_id(record_op_id: str) -> str:
    """The operation id of a judgment's evidence: derived from the judgment's own op id."""
    return f"{EVIDENCE_OP}:{record_op_id}"


def report_op_id(op_type: str, user_id: str, input_checksum: str) -> str:
    """The operation id of an evaluation report: its type, owner and input checksum."""
    return f"{op_type}:{user_id}:{input_checksum}"


def profile_op_id(user_id: str, profile_id: uuid.UUID) -> str:
    """The operation id of a profile (reference §G.1 step 5, §M.7)."""
    name = json.dumps(["prme:ranking-profile:v1", user_id, str(profile_id)])
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def state_op_id(user_id: str, change_id: uuid.UUID) -> str:
    """The operation id of a pointer transition (reference §H.1, §M.7)."""
    name = json.dumps(["prme:ranking-profile-state:v1", user_id, str(change_id)])
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def audit_op_id(prune_id: uuid.UUID, part: int) -> str:
    """The operation id of one part of a receipt prune's audit record."""
    return f"{PRUNE_OP}:{prune_id}:{part}"


# ----------------------------------------------------------------------- verify functions
def parse_stored_receipt(op: OpRecord, user_id: str, target: str, full: bool) -> RetrievalReceipt:
    """A stored receipt (:func:`prme.services.receipts.parse_receipt`; ``full`` replays it)."""
    return parse_receipt(op.payload, user_id, target, verify_canonical=full)


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


def parse_evidence(
    op: OpRecord, user_id: str, feedback_id: str, *, verify_canonical: bool = False
) -> JudgmentEvidence:
    """The stored evidence of the owner's judgment ``feedback_id``, checked against its
    operation (``verify_canonical`` also re-encodes it and compares bytes, as ``prme pack
    check`` does, which also checks the operation id)."""
    if (op.op_type, op.user_id, op.target_id) != (EVIDENCE_OP, user_id, feedback_id):
        raise IntegrityError(f"Relevance evidence identity mismatch ({op.op_id})")
    try:
        evidence = JudgmentEvidence.model_validate_json(op.payload)
    except ValidationError as exc:
        raise IntegrityError(
            f"Relevance evidence {op.op_id} is invalid ({exc.errors()[0]['msg']})"
        ) from None
    if evidence.user_id != user_id or str(evidence.feedback_id) != feedback_id:
        raise IntegrityError(f"Relevance evidence identity mismatch ({op.op_id})")
    if verify_canonical and canonical_json(evidence) != op.payload:
        raise IntegrityError(f"Relevance evidence {op.op_id} is not canonical")
    return evidence


def parse_profile(op: OpRecord, user_id: str, profile_id: uuid.UUID) -> RankingProfile:
    """A stored profile, verified: canonical bytes, owner, id (and op id), scope namespace."""
    try:
        profile = RankingProfile.model_validate_json(op.payload)
        verify_report(profile.proposal)
        verify_report(profile.holdout)
    except (ValidationError, ReportVerificationError) as exc:
        raise IntegrityError(
            f"Ranking profile record checksum mismatch: {profile_id} does not parse ({exc})"
        ) from None
    if canonical_json(profile) != op.payload:
        raise IntegrityError(f"Ranking profile record checksum mismatch: {profile_id}")
    if op.user_id != user_id or profile.user_id != user_id:
        raise IntegrityError(f"Ranking profile owner or canonical checksum mismatch: {profile_id}")
    if (
        profile.profile_id != profile_id
        or op.target_id != str(profile_id)
        or op.op_id != profile_op_id(user_id, profile_id)
    ):
        raise IntegrityError(f"Ranking profile identity mismatch: {profile_id}")
    if op.namespace != scope_namespace(profile.scopes):
        raise IntegrityError(f"Ranking profile scope mismatch: {profile_id}")
    return profile


@functools.lru_cache(maxsize=1024)
def parse_state(op: OpRecord, user_id: str) -> RankingProfileState:
    """A stored pointer transition, verified: canonical bytes, owner, change id (op id), target,
    time and scope namespace.

    Cached: the verified state is a pure function of the (immutable) log row and the owner, so
    retrieval re-parses a pointer only when its latest transition changes. Failures re-raise.
    """
    try:
        state = RankingProfileState.model_validate_json(op.payload)
    except ValidationError as exc:
        raise IntegrityError(
            f"Ranking profile state checksum mismatch: {op.op_id} ({exc})"
        ) from None
    if canonical_json(state) != op.payload:
        raise IntegrityError(f"Ranking profile state checksum mismatch: {op.op_id}")
    active = None if state.active_profile_id is None else str(state.active_profile_id)
    if (
        op.user_id != user_id
        or state.user_id != user_id
        or op.op_id != state_op_id(user_id, state.change_id)
        or op.target_id != active
        or op.created_at_us != to_us(state.changed_at)
    ):
        raise IntegrityError(f"Ranking profile state identity mismatch: {op.op_id}")
    if op.namespace != scope_namespace(state.scopes):
        raise IntegrityError(f"Ranking profile state scope mismatch: {op.op_id}")
    return state


def parse_prune(op: OpRecord, user_id: str) -> ReceiptPruneRecord:
    """A stored receipt-prune audit record, verified: canonical, owner, prune id and op id."""
    record = ReceiptPruneRecord.model_validate_json(op.payload)
    if canonical_json(record) != op.payload:
        raise IntegrityError("the audit record is not canonical")
    if (
        record.user_id != user_id
        or op.user_id != user_id
        or op.target_id != str(record.prune_id)
        or op.op_id != audit_op_id(record.prune_id, record.part)
    ):
        raise IntegrityError("the audit record's owner, prune id or operation id does not match")
    return record


def _report_parser(
    model: type[ReportModel], op_type: str
) -> Callable[[OpRecord, str, str, bool], ReportModel]:
    def parse(op: OpRecord, user_id: str, target: str, full: bool) -> ReportModel:
        report = model.model_validate_json(op.payload)
        verify_report(report)
        if canonical_json(report) != op.payload:
            raise IntegrityError(f"stored {op_type} report {target} is not canonical")
        return report

    return parse


# --------------------------------------------------------------------------------- table
def _no_row_problem(op: OpRecord) -> str | None:
    return None


def _receipt_row(op: OpRecord) -> str | None:
    if op.op_id != receipt_op_id(str(op.target_id)):
        return "operation id does not name the receipt's request id"
    return None


def _profile_row(op: OpRecord) -> str | None:
    try:
        profile_id = uuid.UUID(str(op.target_id))
    except ValueError:
        return f"target {op.target_id!r} is not a profile id"
    if op.op_id != profile_op_id(op.user_id, profile_id):
        return "operation id does not match owner and profile id"
    return None


def _report_row(op: OpRecord) -> str | None:
    if op.op_id != report_op_id(op.op_type, op.user_id, str(op.target_id)):
        return "operation id does not match owner and input checksum"
    return None


@dataclass(frozen=True)
class RecordKind(Generic[RecordT]):
    """One stored record kind (see the module doc for each column)."""

    op_type: str
    model: type[RecordT]
    op_id: Callable[[RecordT], str]
    owner: Callable[[RecordT], str]
    parse: Callable[[OpRecord, str, str, bool], RecordT]
    check: RecordCheck
    counter: str | None
    mismatch: str
    row_problem: Callable[[OpRecord], str | None] = _no_row_problem

    def verified(self, op: OpRecord, user_id: str, target: str | None = None) -> RecordT:
        """``op`` parsed and verified as the owner's record of this kind (``target`` defaults
        to the operation's own target)."""
        return self.parse(op, user_id, str(op.target_id) if target is None else target, False)


def _report_kind(model: type[ReportModel], op_type: str) -> RecordKind[ReportModel]:
    return RecordKind(
        op_type=op_type,
        model=model,
        op_id=lambda r: report_op_id(op_type, r.user_id, r.input_checksum),
        owner=lambda r: r.user_id,
        parse=_report_parser(model, op_type),
        check="report",
        counter="reports",
        mismatch="report owner or input_checksum does not match its record",
        row_problem=_report_row,
    )


RECEIPTS: RecordKind[RetrievalReceipt] = RecordKind(
    op_type=RECEIPT_OP,
    model=RetrievalReceipt,
    op_id=lambda r: receipt_op_id(r.request_id),
    owner=lambda r: r.user_id,
    parse=parse_stored_receipt,
    check="receipt",
    counter="receipts",
    mismatch="operation id does not name the receipt's request id",
    row_problem=_receipt_row,
)
JUDGMENTS: RecordKind[RelevanceRecord] = RecordKind(
    op_type=RELEVANCE_OP,
    model=RelevanceRecord,
    op_id=lambda r: relevance_op_id(r.user_id, r.feedback_id),
    owner=lambda r: r.user_id,
    parse=lambda op, user_id, target, full: parse_record(op, user_id),
    check="relevance",
    counter="relevance_records",
    mismatch="Relevance record owner or identity mismatch",
)
EVIDENCE: RecordKind[JudgmentEvidence] = RecordKind(
    op_type=EVIDENCE_OP,
    model=JudgmentEvidence,
    op_id=lambda e: evidence_op_id(relevance_op_id(e.user_id, e.feedback_id)),
    owner=lambda e: e.user_id,
    parse=lambda op, user_id, target, full: parse_evidence(
        op, user_id, target, verify_canonical=full
    ),
    check="evidence",
    counter="relevance_evidence",
    mismatch="Relevance evidence identity mismatch",
)
LEARNING_REPORTS = _report_kind(LearningEvaluation, LEARNING_REPORT_OP)
HOLDOUT_REPORTS = _report_kind(FullRetrievalEvaluation, HOLDOUT_REPORT_OP)
PROFILES: RecordKind[RankingProfile] = RecordKind(
    op_type=PROFILE_OP,
    model=RankingProfile,
    op_id=lambda p: profile_op_id(p.user_id, p.profile_id),
    owner=lambda p: p.user_id,
    parse=lambda op, user_id, target, full: parse_profile(op, user_id, uuid.UUID(target)),
    check="profile",
    counter="profiles",
    mismatch="operation id does not match owner and profile id",
    row_problem=_profile_row,
)
STATES: RecordKind[RankingProfileState] = RecordKind(
    op_type=STATE_OP,
    model=RankingProfileState,
    op_id=lambda s: state_op_id(s.user_id, s.change_id),
    owner=lambda s: s.user_id,
    parse=lambda op, user_id, target, full: parse_state(op, user_id),
    check="state",
    counter="pointer_states",
    mismatch="Ranking profile state identity mismatch",
)
PRUNES: RecordKind[ReceiptPruneRecord] = RecordKind(
    op_type=PRUNE_OP,
    model=ReceiptPruneRecord,
    op_id=lambda r: audit_op_id(r.prune_id, r.part),
    owner=lambda r: r.user_id,
    parse=lambda op, user_id, target, full: parse_prune(op, user_id),
    check="retention",
    counter=None,  # the report counts the receipts the records list (pruned_receipts)
    mismatch="the audit record's owner, prune id or operation id does not match",
)

KINDS: dict[str, RecordKind[Any]] = {
    kind.op_type: kind
    for kind in (
        RECEIPTS,
        JUDGMENTS,
        EVIDENCE,
        PROFILES,
        STATES,
        LEARNING_REPORTS,
        HOLDOUT_REPORTS,
        PRUNES,
    )
}


# ------------------------------------------------------------------------ generic reading
def get(
    engine: Engine, kind: RecordKind[RecordT], user_id: str, op_id: str, target: str | None = None
) -> RecordT | None:
    """The owner's verified record stored under ``op_id`` (about ``target``, when the caller
    names one), or None: another owner's id looks exactly like a missing one."""
    op = engine.store.get_op(op_id)
    return None if op is None else kind.verified(op, user_id, target)


def find(engine: Engine, kind: RecordKind[RecordT], user_id: str, target: str) -> RecordT | None:
    """The owner's first verified record of ``kind`` about ``target``, or None."""
    ops = engine.store.find_ops(kind.op_type, user_id, target)
    return None if not ops else kind.verified(ops[0], user_id, target)
