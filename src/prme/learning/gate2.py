"""Gate 2: fresh paired full retrievals on a frozen pack, scored against complete relevance.

:func:`evaluate_full_retrieval` is pure: it reads only its arguments (receipts, trials and
declared settings) and returns a new report; no storage, clock, environment or global RNG.
Every rejection is an :class:`~prme.errors.InvalidInputError` naming the field that differs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ValidationError

from prme.canonical import checksum
from prme.errors import InvalidInputError
from prme.learning import holdout_trials
from prme.learning.decisions import Aggregates, aggregate, decide_holdout, holdout_refusal
from prme.learning.stats import percentile_bootstrap_interval, sign_flip_p_value
from prme.learning.verify_reports import verify_full_retrieval_evaluation
from prme.limits import MAX_TRIALS
from prme.models.holdout import (
    FullRetrievalDecision,
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalQueryResult,
    FullRetrievalTrial,
    input_checksum,
)
from prme.models.receipt import RetrievalReceipt
from prme.models.refusal import Refusal
from prme.models.scope import ScopeInput, normalize_scope_key
from prme.models.scoring import RankingMultipliers
from prme.validation import invalid_input, require_owner

_SHA256 = re.compile(r"[0-9a-f]{64}")
NEUTRAL = RankingMultipliers()


def require_digest(value: object, field: str) -> str:
    """A SHA-256 hex digest: exactly 64 lowercase hex characters."""
    if not isinstance(value, str) or _SHA256.fullmatch(value) is None:
        raise InvalidInputError(
            field,
            "proposal_input_checksum, memory_artifact_sha256 and pack_digest must be SHA-256 "
            "hex digests (64 lowercase hex characters)",
            value,
        )
    return value


def parse_model(cls: type[Any], value: Any, field: str) -> Any:
    """``value`` as an instance of the pydantic model ``cls``, or an error naming the field."""
    if isinstance(value, cls):
        return value
    try:
        return cls.model_validate(value.model_dump() if isinstance(value, BaseModel) else value)
    except ValidationError as exc:
        raise invalid_input(exc, field) from None


def parse_trials(trials: Iterable[Any]) -> list[FullRetrievalTrial]:
    """Re-parse the trials and enforce the 1–10000 bound."""
    if isinstance(trials, str | bytes | Mapping) or not isinstance(trials, Iterable):
        raise InvalidInputError("trials", "must be a sequence of FullRetrievalTrial", trials)
    items = list(trials)
    if not 1 <= len(items) <= MAX_TRIALS:
        raise InvalidInputError(
            "trials", f"trials must contain from 1 to {MAX_TRIALS} pairs", len(items)
        )
    return [parse_model(FullRetrievalTrial, t, f"trials[{i}]") for i, t in enumerate(items)]


@dataclass(frozen=True)
class HoldoutRequest:
    """Gate 2's own inputs, validated once: the owner, both digests and the trials."""

    user_id: str
    proposal_input_checksum: str
    memory_artifact_sha256: str
    trials: tuple[FullRetrievalTrial, ...]

    def request_ids(self) -> list[UUID]:
        """Both arms' request ids of every trial, in trial order."""
        return [rid for t in self.trials for rid in (t.baseline_request_id, t.candidate_request_id)]


def parse_request(
    trials: Iterable[FullRetrievalTrial | Mapping[str, Any]],
    *,
    user_id: str,
    proposal_input_checksum: str,
    memory_artifact_sha256: str,
) -> HoldoutRequest:
    """Validate the owner, the proposal and fixture digests and the 1–10000 trials, in that
    order (InvalidInputError naming the field)."""
    return HoldoutRequest(
        user_id=require_owner(user_id),
        proposal_input_checksum=require_digest(proposal_input_checksum, "proposal_input_checksum"),
        memory_artifact_sha256=require_digest(memory_artifact_sha256, "memory_artifact_sha256"),
        trials=tuple(parse_trials(trials)),
    )


def evaluate_full_retrieval(
    receipts: Iterable[RetrievalReceipt],
    trials: Iterable[FullRetrievalTrial | Mapping[str, Any]],
    *,
    user_id: str,
    scopes: ScopeInput,
    proposal_input_checksum: str,
    memory_artifact_sha256: str,
    candidate_multipliers: RankingMultipliers | Mapping[str, Any],
    baseline_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
    config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
    pack_digest: str,
    proposal_groups: frozenset[str] | None = None,
) -> FullRetrievalEvaluation:
    """Compare fresh baseline and candidate retrievals of a fixed holdout (reference §F).

    For each arm and trial, with ``order`` the first ``k`` returned node ids: recall@k, binary-gain
    NDCG@k and MRR@k against the complete relevant set (:mod:`prme.learning.metrics`). Repeats in a
    group are macro-averaged and groups weigh equally. With at least ``min_query_groups`` groups a
    seeded 95 % percentile bootstrap of the per-group NDCG differences and a sign-flip test run;
    the decision follows :func:`prme.learning.decisions.decide_holdout`.

    Args:
        receipts: the saved receipts of both arms (others are ignored; duplicates must agree).
        trials: 1–10000 :class:`FullRetrievalTrial` (or their dicts); order does not matter.
        user_id: the owner every receipt must belong to.
        scopes: the exact scope set of every receipt, or None for unfiltered requests.
        proposal_input_checksum: the gate-1 report's ``input_checksum`` (SHA-256 hex).
        memory_artifact_sha256: the caller's digest of the frozen fixture (SHA-256 hex).
        candidate_multipliers: what every candidate receipt must have applied.
        baseline_multipliers: what every baseline receipt must have applied (None = neutral;
            a receipt without multipliers counts as neutral).
        config: gate settings; default :class:`FullRetrievalEvaluationConfig`.
        pack_digest: the pack's content digest, recorded beside ``memory_artifact_sha256``.
        proposal_groups: the proposal's group labels (normalized queries and explicit group
            names); a trial whose normalized query or group_id is one of them is rejected.

    Raises:
        InvalidInputError: any rule of reference §F.2, naming the field: a blank owner, a digest
            that is not SHA-256 hex, conflicting receipts, 0 or more than 10000 trials, a missing
            or reused receipt, a foreign owner, other scopes, another normalized query, different
            clock/filters/limits/scoring/packing, feature identity or execution inputs, receipts
            from another pack or content write sequence, undeclared multipliers, one query under
            two groups, mixed feature identities or base scoring, or overlap with the proposal.
    """
    request = parse_request(
        trials,
        user_id=user_id,
        proposal_input_checksum=proposal_input_checksum,
        memory_artifact_sha256=memory_artifact_sha256,
    )
    return evaluate_request(
        request,
        receipts,
        scopes=scopes,
        candidate_multipliers=candidate_multipliers,
        baseline_multipliers=baseline_multipliers,
        config=config,
        pack_digest=pack_digest,
        proposal_groups=proposal_groups,
    )


def _decision(
    cfg: FullRetrievalEvaluationConfig,
    queries: list[FullRetrievalQueryResult],
    agg: Aggregates,
) -> tuple[tuple[float, float] | None, float | None, FullRetrievalDecision, Refusal | None]:
    """The gain's interval and sign-flip p-value (with enough groups), the decision, and for
    a refused proposal the rules that refused it."""
    interval: tuple[float, float] | None = None
    p_value: float | None = None
    if len(queries) >= cfg.min_query_groups:
        diffs = [q.ndcg_diff for q in queries]
        interval = percentile_bootstrap_interval(
            diffs, samples=cfg.bootstrap_samples, seed=cfg.seed
        )
        p_value = sign_flip_p_value(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed)
    decision = decide_holdout(
        cfg,
        len(queries),
        ndcg_gain=agg.ndcg_gain,
        interval=interval,
        baseline_recall=agg.baseline_recall,
        candidate_recall=agg.candidate_recall,
        regression_fraction=agg.regression_fraction,
    )
    refused = None
    if decision == "no_improvement" and interval is not None:
        refused = holdout_refusal(
            cfg,
            ndcg_gain=agg.ndcg_gain,
            interval_low=interval[0],
            baseline_recall=agg.baseline_recall,
            candidate_recall=agg.candidate_recall,
            regression_fraction=agg.regression_fraction,
            queries=queries,
        )
    return interval, p_value, decision, refused


def evaluate_request(
    request: HoldoutRequest,
    receipts: Iterable[RetrievalReceipt],
    *,
    scopes: ScopeInput,
    candidate_multipliers: RankingMultipliers | Mapping[str, Any],
    baseline_multipliers: RankingMultipliers | Mapping[str, Any] | None = None,
    config: FullRetrievalEvaluationConfig | Mapping[str, Any] | None = None,
    pack_digest: str,
    proposal_groups: frozenset[str] | None = None,
) -> FullRetrievalEvaluation:
    """:func:`evaluate_full_retrieval` on inputs :func:`parse_request` validated (the service
    parses them before it loads the receipts, so they are validated once).

    Over 80 lines because the report's fields are listed once, here: the trials are checked
    and paired by :mod:`prme.learning.holdout_trials`, and decided by :func:`_decision`. The report
    is verified once (:func:`verify_full_retrieval_evaluation`): the gate builds it consistently,
    so this only turns a bug into an error instead of a stored report."""
    owner = request.user_id
    proposal = request.proposal_input_checksum
    artifact = request.memory_artifact_sha256
    digest = require_digest(pack_digest, "pack_digest")
    candidate_m: RankingMultipliers = parse_model(
        RankingMultipliers, candidate_multipliers, "candidate_multipliers"
    )
    baseline_m: RankingMultipliers = (
        NEUTRAL
        if baseline_multipliers is None
        else parse_model(RankingMultipliers, baseline_multipliers, "baseline_multipliers")
    )
    cfg: FullRetrievalEvaluationConfig = (
        FullRetrievalEvaluationConfig()
        if config is None
        else parse_model(FullRetrievalEvaluationConfig, config, "config")
    )
    key = normalize_scope_key(scopes, "scopes")

    ordered = sorted(request.trials, key=lambda t: t.sort_key)
    per_group, checksums, first = holdout_trials.paired_trials(
        ordered,
        holdout_trials.receipts_by_id(receipts),
        owner=owner,
        key=key,
        baseline_multipliers=baseline_m,
        candidate_multipliers=candidate_m,
        k=cfg.k,
        proposal_groups=proposal_groups,
    )
    queries = holdout_trials.query_results(per_group)
    agg = aggregate(queries)
    interval, p_value, decision, refused = _decision(cfg, queries, agg)
    features = first.execution.features
    receipt_checksums = dict(sorted(checksums.items()))
    missing = cfg.min_query_groups - len(queries)
    report = FullRetrievalEvaluation(
        missing_query_groups=missing if missing > 0 else None,
        user_id=owner,
        scopes=key,
        config=cfg,
        proposal_input_checksum=proposal,
        memory_artifact_sha256=artifact,
        pack_digest=digest,
        pack_id=first.pack.pack_id,
        write_seq=first.pack.write_seq,
        input_checksum=input_checksum(
            user_id=owner,
            scopes=key,
            proposal_input_checksum=proposal,
            memory_artifact_sha256=artifact,
            pack_digest=digest,
            pack_id=first.pack.pack_id,
            write_seq=first.pack.write_seq,
            baseline_multipliers=baseline_m,
            candidate_multipliers=candidate_m,
            base_scoring=first.scoring,
            feature_identity=features,
            config=cfg,
            trials=ordered,
            receipt_checksums=receipt_checksums,
        ),
        receipt_checksums=receipt_checksums,
        feature_identity=features,
        feature_identity_sha256=checksum(features),
        base_scoring=first.scoring,
        baseline_multipliers=baseline_m,
        candidate_multipliers=candidate_m,
        decision=decision,
        refusal=refused,
        baseline_recall=agg.baseline_recall,
        candidate_recall=agg.candidate_recall,
        recall_gain=agg.recall_gain,
        baseline_ndcg=agg.baseline_ndcg,
        candidate_ndcg=agg.candidate_ndcg,
        ndcg_gain=agg.ndcg_gain,
        ndcg_gain_interval=interval,
        baseline_mrr=agg.baseline_mrr,
        candidate_mrr=agg.candidate_mrr,
        mrr_gain=agg.mrr_gain,
        regression_fraction=agg.regression_fraction,
        win_tie_loss=agg.win_tie_loss,
        randomization_p_value=p_value,
        coverage={
            "trials": len(ordered),
            "query_groups": len(queries),
            "relevant_nodes": sum(len(t.relevant_node_ids) for t in ordered),
        },
        trials=tuple(ordered),
        queries=tuple(queries),
    )
    verify_full_retrieval_evaluation(report)
    return report
