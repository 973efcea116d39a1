"""Gate 2 in the engine: load paired receipts, run the pure gate, attest and persist the report.

Also :func:`run_holdout` (``MemoryClient.run_full_retrieval_holdout``), which runs both arms of every holdout query itself with
identical parameters and then evaluates them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from prme.bulk import gc_paused
from prme.engine import Engine
from prme.errors import IntegrityError, InvalidInputError
from prme.learning import gate2, holdout_trials
from prme.limits import MAX_TRIALS
from prme.models.holdout import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
)
from prme.models.receipt import RetrievalReceipt
from prme.models.request import RetrievalRequest
from prme.models.scope import ScopeInput
from prme.models.scoring import RankingMultipliers
from prme.services import records, reports, retrieval
from prme.services.receipts import get_receipt
from prme.services.records import HOLDOUT_REPORTS, LEARNING_REPORTS
from prme.validation import require_aware, require_owner

# retrieve() arguments that run_full_retrieval_holdout sets itself.
_ARM_ARGUMENTS = frozenset({"query", "user_id", "scope", "reference_time", "limit"})
_PER_ARM = frozenset({"ranking_multipliers"})


class Proposal(Protocol):
    """What a holdout needs from a gate-1 report (a ``LearningEvaluation``)."""

    @property
    def multipliers(self) -> RankingMultipliers: ...

    @property
    def input_checksum(self) -> str: ...


def proposal_groups(
    engine: Engine, user_id: str, proposal_input_checksum: str
) -> frozenset[str] | None:
    """The group names of the owner's stored gate-1 report with this checksum, or None.

    Every proposal group (train and validation) contributes its label (the normalized query or
    the explicit group name) and the normalized queries it holds, so a query that sat in an
    explicitly named proposal group is caught too. None means the proposal report is not in
    this pack; disjointness is then checked at profile creation.
    """
    report = records.find(engine, LEARNING_REPORTS, user_id, proposal_input_checksum)
    if report is None:
        return None
    return frozenset(
        name for q in report.queries for name in (q.group_label, *q.normalized_queries)
    )


def evaluate(
    engine: Engine,
    trials: Iterable[FullRetrievalTrial | Mapping[str, Any]],
    *,
    user_id: str,
    scopes: ScopeInput,
    proposal_input_checksum: str,
    memory_artifact_sha256: str,
    candidate_multipliers: RankingMultipliers | Mapping[str, Any],
    baseline_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
    config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
) -> FullRetrievalEvaluation:
    """Load both receipts of every trial, run gate 2, then attest and persist the report.

    Raises:
        InvalidInputError: every rule of :func:`prme.learning.gate2.evaluate_full_retrieval`;
            also a request id used twice ("request_ids must be unique"), a receipt that is
            missing or owned by someone else ("references a missing receipt"), and a content
            write to the owner's memories since the holdout retrievals (field
            ``pack.write_seq``; receipts of schema 1 recorded the pack-wide sequence, so for
            them any content write counts). Other owners' writes never block: they cannot
            change this owner's retrievals.
        IntegrityError: a stored receipt or report failed its checksum.
    """
    request = gate2.parse_request(
        trials,
        user_id=user_id,
        proposal_input_checksum=proposal_input_checksum,
        memory_artifact_sha256=memory_artifact_sha256,
    )
    owner = request.user_id
    ids = request.request_ids()
    if len(set(ids)) != len(ids):
        raise InvalidInputError(
            "trials",
            "request_ids must be unique: a retrieval receipt cannot enter more than one full "
            "retrieval trial",
        )
    loaded: list[RetrievalReceipt] = []
    with gc_paused():
        for rid in ids:
            receipt = get_receipt(engine, rid, user_id=owner, verify_canonical=False)
            if receipt is None:
                raise InvalidInputError(
                    "trials", f"A full retrieval trial references a missing receipt {rid}", str(rid)
                )
            loaded.append(receipt)
    store = engine.store
    with store.read_snapshot() as current:
        digest = store.pack_digest()
        owner_seq = store.owner_write_seq(owner)
    report = gate2.evaluate_request(
        request,
        loaded,
        scopes=scopes,
        candidate_multipliers=candidate_multipliers,
        baseline_multipliers=baseline_multipliers,
        config=config,
        pack_digest=digest,
        proposal_groups=proposal_groups(engine, owner, proposal_input_checksum),
    )
    # The receipts' sequence is the owner's (schema 2) or the pack's (schema 1); gate 2 made
    # sure they all count alike. An unchanged owner sequence means the owner's memories, all
    # that the owner's retrievals read, are what the receipts saw.
    now = owner_seq if loaded[0].schema_version >= 2 else current.write_seq
    if (report.pack_id, report.write_seq) != (current.pack_id, now):
        raise InvalidInputError(
            "pack.write_seq",
            f"{holdout_trials.FROZEN_PACK}: the receipts saw content write sequence {report.write_seq} "
            f"but it is now at {now}, so pack_digest would not describe them",
        )
    attested = reports.attest_and_persist(engine, HOLDOUT_REPORTS, owner, report.input_checksum, report)
    return attested


def get_evaluation(
    engine: Engine, input_checksum: str, *, user_id: str
) -> FullRetrievalEvaluation | None:
    """The owner's stored gate-2 report with this ``input_checksum``, or None.

    Raises:
        InvalidInputError: ``input_checksum`` is not SHA-256 hex or the owner is blank.
        IntegrityError: the stored report is not canonical or its attestation does not verify.
    """
    owner = require_owner(user_id)
    gate2.require_digest(input_checksum, "input_checksum")
    report = records.find(engine, HOLDOUT_REPORTS, owner, input_checksum)
    if report is not None and not reports.verify(engine, report):
        raise IntegrityError(f"stored {HOLDOUT_REPORTS.op_type} report {input_checksum} fails its attestation")
    return report


def _holdout_query(item: Any, index: int) -> tuple[str, str, Sequence[Any]]:
    if isinstance(item, tuple | list):
        if len(item) != 3:
            raise InvalidInputError(
                f"queries[{index}]", "must be (group_id, query, relevant_ids)", item
            )
        group_id, query, relevant = item
    else:
        group_id = getattr(item, "group_id", None)
        query = getattr(item, "query", None)
        relevant = getattr(item, "relevant_node_ids", getattr(item, "relevant_ids", None))
    if not isinstance(query, str):
        raise InvalidInputError(f"queries[{index}].query", "must be a string", query)
    if isinstance(relevant, str) or not isinstance(relevant, Iterable):
        raise InvalidInputError(
            f"queries[{index}].relevant_ids", "must be a sequence of node ids", relevant
        )
    return group_id, query, tuple(relevant)


def run_holdout(
    engine: Engine,
    queries: Iterable[Any],
    *,
    user_id: str,
    scopes: ScopeInput,
    proposal: Proposal,
    reference_time: datetime,
    limit: int = 20,
    baseline_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
    memory_artifact_sha256: str | None = None,
    config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
    **retrieve_kwargs: Any,
) -> FullRetrievalEvaluation:
    """Run both arms of every ``(group_id, query, relevant_ids)`` and evaluate them (gate 2).

    The baseline arm uses ``baseline_multipliers`` when given, otherwise no explicit
    multipliers (so an active profile applies to it, as chained profiles need); the candidate
    arm uses ``proposal.multipliers``. Everything else is identical between the arms:
    ``reference_time``, ``scopes``, ``limit`` and ``retrieve_kwargs`` (``include_cross_scope``
    defaults to False). ``memory_artifact_sha256`` defaults to the pack digest.

    Raises:
        InvalidInputError: a malformed query item, a ``retrieve_kwargs`` key that this function
            sets itself, any retrieval error, or any gate-2 rule.
    """
    owner = require_owner(user_id)
    clock = require_aware(reference_time, "reference_time")
    if clock is None:
        raise InvalidInputError("reference_time", "a holdout needs one fixed reference_time")
    clashes = sorted(set(retrieve_kwargs) & (_ARM_ARGUMENTS | _PER_ARM))
    if clashes:
        raise InvalidInputError(
            clashes[0], "is set by run_full_retrieval_holdout itself; pass it as its own argument"
        )
    retrieve_kwargs.setdefault("include_cross_scope", False)
    items = [_holdout_query(item, i) for i, item in enumerate(queries)]
    if not 1 <= len(items) <= MAX_TRIALS:
        raise InvalidInputError(
            "queries", f"trials must contain from 1 to {MAX_TRIALS} pairs", len(items)
        )
    explicit_baseline = (
        None
        if baseline_multipliers is None
        else gate2.parse_model(RankingMultipliers, baseline_multipliers, "baseline_multipliers")
    )
    arm_arguments = {
        **retrieve_kwargs,
        "user_id": owner,
        "scope": scopes,
        "reference_time": clock,
        "limit": limit,
    }
    trials = [
        _run_trial(engine, index, item, arm_arguments, (explicit_baseline, proposal.multipliers))
        for index, item in enumerate(items)
    ]
    return evaluate(
        engine,
        trials,
        user_id=owner,
        scopes=scopes,
        proposal_input_checksum=proposal.input_checksum,
        memory_artifact_sha256=(
            engine.store.pack_digest() if memory_artifact_sha256 is None else memory_artifact_sha256
        ),
        candidate_multipliers=proposal.multipliers,
        baseline_multipliers=(
            explicit_baseline
            if explicit_baseline is not None
            else _recorded_baseline(engine, owner, trials)
        ),
        config=config,
    )


def _run_trial(
    engine: Engine,
    index: int,
    item: tuple[str, str, Sequence[Any]],
    arguments: Mapping[str, Any],
    arms: tuple[RankingMultipliers | None, RankingMultipliers],
) -> FullRetrievalTrial:
    """Retrieve one holdout query in both arms (baseline, candidate) with identical
    ``arguments``; the trial pairs their receipts."""
    group_id, query, relevant = item
    request_ids = []
    for multipliers in arms:
        request = RetrievalRequest.unchecked(
            {**arguments, "query": query, "ranking_multipliers": multipliers}
        )
        response = retrieval.retrieve(engine, request)
        if not response.metadata.receipt_persisted:
            raise IntegrityError(f"holdout query {index} lost its retrieval receipt")
        request_ids.append(response.metadata.request_id)
    trial: FullRetrievalTrial = gate2.parse_model(
        FullRetrievalTrial,
        {
            "group_id": group_id,
            "baseline_request_id": request_ids[0],
            "candidate_request_id": request_ids[1],
            "relevant_node_ids": relevant,
        },
        f"queries[{index}]",
    )
    return trial


def _recorded_baseline(
    engine: Engine, owner: str, trials: Sequence[FullRetrievalTrial]
) -> RankingMultipliers | None:
    """The multipliers the first baseline arm actually applied (an active profile's, or None)."""
    receipt = get_receipt(engine, trials[0].baseline_request_id, user_id=owner)
    return None if receipt is None else receipt.ranking_multipliers
