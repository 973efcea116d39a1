"""Gate 2: fresh paired full retrievals on a frozen pack, scored against complete relevance.

:func:`evaluate_full_retrieval` is pure: it reads only its arguments (receipts, trials and
declared settings) and returns a new report; no storage, clock, environment or global RNG.
Every rejection is an :class:`~prme.errors.InvalidInputError` naming the field that differs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ValidationError

from prme.canonical import checksum
from prme.errors import InvalidInputError
from prme.learning.groups import normalize_query
from prme.learning.metrics import ndcg_at_k, recall_at_k, reciprocal_rank_at_k
from prme.learning.stats import mean, percentile_bootstrap_interval, sign_flip_p_value
from prme.limits import MAX_TRIALS
from prme.models.holdout import (
    Aggregates,
    FullRetrievalDecision,
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalQueryResult,
    FullRetrievalTrial,
    aggregate,
    decide,
    holdout_refusal,
    input_checksum,
)
from prme.models.receipt import RetrievalReceipt
from prme.models.refusal import Refusal
from prme.models.request import ARM_INPUT_KEYS, PAIRED_RECEIPT_FIELDS
from prme.models.scope import ScopeInput, ScopeKey, normalize_scope_key, scope_set_key
from prme.models.scoring import RankingMultipliers
from prme.validation import invalid_input, require_owner

_SHA256 = re.compile(r"[0-9a-f]{64}")
NEUTRAL = RankingMultipliers()
SAME_SETTINGS = "Paired retrievals must use the same clock, filters, limits, scoring, and packing"
FROZEN_PACK = "a memory write happened during the holdout"
# Receipt fields that both arms must share exactly (request inputs, never outcomes), and the
# execution.inputs keys that legitimately differ between the arms: both derived from the one
# definition of the retrieval parameters.
PAIRED_FIELDS = PAIRED_RECEIPT_FIELDS
ARM_INPUTS = ARM_INPUT_KEYS | {"ranking_profile"}


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


def _arm_metrics(receipt: RetrievalReceipt, relevant: Sequence[UUID], k: int) -> list[float]:
    order = [c.node_id for c in receipt.candidates[:k]]
    return [
        recall_at_k(order, relevant, k),
        ndcg_at_k(order, relevant, k),
        reciprocal_rank_at_k(order, relevant, k),
    ]


def _check_pair(
    trial: FullRetrievalTrial,
    baseline: RetrievalReceipt,
    candidate: RetrievalReceipt,
    *,
    owner: str,
    key: tuple[Any, ...] | None,
    baseline_multipliers: RankingMultipliers,
    candidate_multipliers: RankingMultipliers,
) -> str:
    """The pair rules of reference §F.2 step 6.3; returns the shared normalized query."""
    where = f"(group {trial.group_id!r}, requests {baseline.request_id} and {candidate.request_id})"
    for receipt in (baseline, candidate):
        if receipt.user_id != owner:
            raise InvalidInputError(
                "user_id", f"Full retrieval receipts must belong to the requested owner {where}"
            )
    for receipt in (baseline, candidate):
        if scope_set_key(receipt.scopes) != key:
            raise InvalidInputError(
                "scopes", f"Full retrieval receipts must match the requested scopes {where}"
            )
    query = normalize_query(baseline.query)
    if normalize_query(candidate.query) != query:
        raise InvalidInputError(
            "query", f"Paired retrievals must use the same normalized query {where}"
        )
    for name in PAIRED_FIELDS:
        if getattr(baseline, name) != getattr(candidate, name):
            raise InvalidInputError(name, f"{SAME_SETTINGS}: {name} differs {where}")
    if baseline.execution.features != candidate.execution.features:
        raise InvalidInputError(
            "execution.features", f"Paired retrieval feature identities differ {where}"
        )
    b_inputs, c_inputs = baseline.execution.inputs, candidate.execution.inputs
    for name in sorted((set(b_inputs) | set(c_inputs)) - ARM_INPUTS):
        if name not in b_inputs or name not in c_inputs or b_inputs[name] != c_inputs[name]:
            raise InvalidInputError(
                f"execution.inputs.{name}", f"Paired retrieval execution parameters differ {where}"
            )
    if baseline.pack.pack_id != candidate.pack.pack_id:
        raise InvalidInputError(
            "pack.pack_id", f"paired receipts come from different packs: {FROZEN_PACK} {where}"
        )
    if baseline.schema_version != candidate.schema_version:
        raise InvalidInputError(
            "schema_version",
            "paired receipts count content writes differently (receipt schemas "
            f"{baseline.schema_version} and {candidate.schema_version}) {where}",
        )
    if baseline.pack.write_seq != candidate.pack.write_seq:
        raise InvalidInputError(
            "pack.write_seq",
            f"paired receipts saw different content write sequences: {FROZEN_PACK} {where}",
        )
    if (baseline.ranking_multipliers or NEUTRAL) != baseline_multipliers:
        raise InvalidInputError(
            "baseline_multipliers",
            f"Baseline receipt does not use the declared multipliers {where}",
        )
    if (candidate.ranking_multipliers or NEUTRAL) != candidate_multipliers:
        raise InvalidInputError(
            "candidate_multipliers",
            f"Candidate receipt does not use the declared multipliers {where}",
        )
    return query


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
    the decision follows :func:`prme.models.holdout.decide`.

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


Row = tuple[FullRetrievalTrial, str, list[float], list[float]]


def _receipts_by_id(receipts: Iterable[RetrievalReceipt]) -> dict[UUID, RetrievalReceipt]:
    by_id: dict[UUID, RetrievalReceipt] = {}
    for receipt in receipts:
        known = by_id.setdefault(receipt.request_id, receipt)
        if known is not receipt and known != receipt:
            raise InvalidInputError(
                "receipts", f"Conflicting full retrieval receipt identity {receipt.request_id}"
            )
    return by_id


def _check_group(
    trial: FullRetrievalTrial,
    query: str,
    group_of_query: dict[str, str],
    proposal_groups: frozenset[str] | None,
) -> None:
    """A repeated query keeps its group, and no holdout query or group is a proposal's."""
    group = group_of_query.setdefault(query, trial.group_id)
    if group != trial.group_id:
        raise InvalidInputError(
            "group_id",
            f"Repeated normalized queries cannot use different groups ({query!r} is in "
            f"{group!r} and {trial.group_id!r})",
        )
    if proposal_groups is not None:
        if query in proposal_groups:
            raise InvalidInputError(
                "query", f"holdout query overlaps the proposal's groups ({query!r})"
            )
        if trial.group_id in proposal_groups:
            raise InvalidInputError(
                "group_id",
                f"holdout query overlaps the proposal's groups (group {trial.group_id!r})",
            )


def _check_same_run(first: RetrievalReceipt, baseline: RetrievalReceipt) -> None:
    """Every trial ran under the first one's feature identity, base scoring, pack, receipt
    schema and content write sequence."""
    if baseline.execution.features != first.execution.features:
        raise InvalidInputError(
            "execution.features", "All holdout trials must use one feature identity"
        )
    if baseline.scoring != first.scoring:
        raise InvalidInputError(
            "scoring", "All holdout trials must use one base scoring configuration"
        )
    if baseline.pack.pack_id != first.pack.pack_id:
        raise InvalidInputError(
            "pack.pack_id", f"holdout receipts come from different packs: {FROZEN_PACK}"
        )
    if baseline.schema_version != first.schema_version:
        raise InvalidInputError(
            "schema_version",
            "All holdout receipts must count content writes alike (one receipt schema)",
        )
    if baseline.pack.write_seq != first.pack.write_seq:
        raise InvalidInputError(
            "pack.write_seq",
            f"holdout receipts saw different content write sequences: {FROZEN_PACK}",
        )


def _paired_trials(
    ordered: list[FullRetrievalTrial],
    by_id: dict[UUID, RetrievalReceipt],
    *,
    owner: str,
    key: ScopeKey,
    baseline_multipliers: RankingMultipliers,
    candidate_multipliers: RankingMultipliers,
    k: int,
    proposal_groups: frozenset[str] | None,
) -> tuple[dict[str, list[Row]], dict[str, str], RetrievalReceipt]:
    """Each trial's two receipts checked and measured, by group (in trial order); the
    receipts' checksums; the first trial's baseline receipt."""
    used: set[UUID] = set()
    group_of_query: dict[str, str] = {}
    first: RetrievalReceipt | None = None
    checksums: dict[str, str] = {}
    per_group: dict[str, list[Row]] = {}
    for trial in ordered:
        baseline = by_id.get(trial.baseline_request_id)
        candidate = by_id.get(trial.candidate_request_id)
        if baseline is None or candidate is None:
            raise InvalidInputError(
                "trials",
                f"Every full retrieval trial requires both saved receipts (group {trial.group_id!r})",
            )
        for rid in (trial.baseline_request_id, trial.candidate_request_id):
            if rid in used:
                raise InvalidInputError(
                    "trials",
                    f"A retrieval receipt cannot enter more than one full retrieval trial ({rid})",
                )
            used.add(rid)
        query = _check_pair(
            trial,
            baseline,
            candidate,
            owner=owner,
            key=key,
            baseline_multipliers=baseline_multipliers,
            candidate_multipliers=candidate_multipliers,
        )
        _check_group(trial, query, group_of_query, proposal_groups)
        if first is None:
            first = baseline
        else:
            _check_same_run(first, baseline)
        per_group.setdefault(trial.group_id, []).append(
            (
                trial,
                query,
                _arm_metrics(baseline, trial.relevant_node_ids, k),
                _arm_metrics(candidate, trial.relevant_node_ids, k),
            )
        )
        checksums[str(baseline.request_id)] = baseline.checksum
        checksums[str(candidate.request_id)] = candidate.checksum
    if first is None:  # unreachable: parse_trials requires at least one trial
        raise InvalidInputError("trials", f"trials must contain from 1 to {MAX_TRIALS} pairs")
    return per_group, checksums, first


def _query_results(per_group: dict[str, list[Row]]) -> list[FullRetrievalQueryResult]:
    """One result per group: its trials' recall, NDCG and MRR averaged per arm."""
    queries = []
    for group_id, rows in per_group.items():
        b = [mean([row[2][m] for row in rows]) for m in range(3)]
        c = [mean([row[3][m] for row in rows]) for m in range(3)]
        queries.append(
            FullRetrievalQueryResult(
                group_id=group_id,
                normalized_queries=tuple(sorted({row[1] for row in rows})),
                baseline_request_ids=tuple(row[0].baseline_request_id for row in rows),
                candidate_request_ids=tuple(row[0].candidate_request_id for row in rows),
                baseline_recall=b[0],
                candidate_recall=c[0],
                baseline_ndcg=b[1],
                candidate_ndcg=c[1],
                baseline_mrr=b[2],
                candidate_mrr=c[2],
            )
        )
    return queries


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
    decision = decide(
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
    and paired by :func:`_paired_trials`, summarised by :func:`_query_results` and decided by
    :func:`_decision`."""
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
    per_group, checksums, first = _paired_trials(
        ordered,
        _receipts_by_id(receipts),
        owner=owner,
        key=key,
        baseline_multipliers=baseline_m,
        candidate_multipliers=candidate_m,
        k=cfg.k,
        proposal_groups=proposal_groups,
    )
    queries = _query_results(per_group)
    agg = aggregate(queries)
    interval, p_value, decision, refused = _decision(cfg, queries, agg)
    features = first.execution.features
    receipt_checksums = dict(sorted(checksums.items()))
    missing = cfg.min_query_groups - len(queries)
    return FullRetrievalEvaluation(
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
