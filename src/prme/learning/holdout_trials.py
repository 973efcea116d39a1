"""Gate 2's paired trials: each trial's two receipts checked against each other and against
the holdout (one owner, scope set, feature identity, base scoring, frozen pack), measured at
k, and summarised per query group."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from prme.errors import InvalidInputError
from prme.learning.groups import normalize_query
from prme.learning.metrics import ndcg_at_k, recall_at_k, reciprocal_rank_at_k
from prme.learning.stats import mean
from prme.limits import MAX_TRIALS
from prme.models.holdout import FullRetrievalQueryResult, FullRetrievalTrial
from prme.models.receipt import RetrievalReceipt
from prme.models.request import ARM_INPUT_KEYS, PAIRED_RECEIPT_FIELDS
from prme.models.scope import ScopeKey, scope_set_key
from prme.models.scoring import RankingMultipliers

NEUTRAL = RankingMultipliers()
SAME_SETTINGS = "Paired retrievals must use the same clock, filters, limits, scoring, and packing"
FROZEN_PACK = "a memory write happened during the holdout"
# Receipt fields that both arms must share exactly (request inputs, never outcomes), and the
# execution.inputs keys that legitimately differ between the arms: both derived from the one
# definition of the retrieval parameters.
PAIRED_FIELDS = PAIRED_RECEIPT_FIELDS
ARM_INPUTS = ARM_INPUT_KEYS | {"ranking_profile"}


def arm_metrics(receipt: RetrievalReceipt, relevant: Sequence[UUID], k: int) -> list[float]:
    order = [c.node_id for c in receipt.candidates[:k]]
    return [
        recall_at_k(order, relevant, k),
        ndcg_at_k(order, relevant, k),
        reciprocal_rank_at_k(order, relevant, k),
    ]


def check_pair(
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


Row = tuple[FullRetrievalTrial, str, list[float], list[float]]


def receipts_by_id(receipts: Iterable[RetrievalReceipt]) -> dict[UUID, RetrievalReceipt]:
    by_id: dict[UUID, RetrievalReceipt] = {}
    for receipt in receipts:
        known = by_id.setdefault(receipt.request_id, receipt)
        if known is not receipt and known != receipt:
            raise InvalidInputError(
                "receipts", f"Conflicting full retrieval receipt identity {receipt.request_id}"
            )
    return by_id


def check_group(
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


def check_same_run(first: RetrievalReceipt, baseline: RetrievalReceipt) -> None:
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


def paired_trials(
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
        query = check_pair(
            trial,
            baseline,
            candidate,
            owner=owner,
            key=key,
            baseline_multipliers=baseline_multipliers,
            candidate_multipliers=candidate_multipliers,
        )
        check_group(trial, query, group_of_query, proposal_groups)
        if first is None:
            first = baseline
        else:
            check_same_run(first, baseline)
        per_group.setdefault(trial.group_id, []).append(
            (
                trial,
                query,
                arm_metrics(baseline, trial.relevant_node_ids, k),
                arm_metrics(candidate, trial.relevant_node_ids, k),
            )
        )
        checksums[str(baseline.request_id)] = baseline.checksum
        checksums[str(candidate.request_id)] = candidate.checksum
    if first is None:  # unreachable: parse_trials requires at least one trial
        raise InvalidInputError("trials", f"trials must contain from 1 to {MAX_TRIALS} pairs")
    return per_group, checksums, first


def query_results(per_group: dict[str, list[Row]]) -> list[FullRetrievalQueryResult]:
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


