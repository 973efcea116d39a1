"""Gate 2 as a pure function over synthetic receipts: every rejection rule, metrics, decision."""

from __future__ import annotations

import json
import math
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from prme.canonical import canonical_json, checksum
from prme.errors import InvalidInputError
from prme.learning.gate2 import evaluate_full_retrieval
from prme.learning.stats import percentile_bootstrap_interval, sign_flip_p_value
from prme.learning.verify_reports import ReportVerificationError, verify_report
from prme.models.enums import NodeType, RetrievalMode, Scope
from prme.models.holdout import (
    FullRetrievalEvaluation,
    FullRetrievalEvaluationConfig,
    FullRetrievalTrial,
)
from prme.models.receipt import (
    PackIdentity,
    PackingConfig,
    ReceiptCandidate,
    RetrievalExecution,
    RetrievalReceipt,
)
from prme.models.scoring import RankingMultipliers, ScoringWeights, adjusted_weights
from prme.models.trace import ScoreTrace
from prme.retrieval.scoring import weighted_score

CLOCK = datetime(2026, 9, 14, tzinfo=UTC)
FEATURES = {"feature_schema": 1, "embedder": {"provider": "hash", "dimension": 64}}
CANDIDATE_M = RankingMultipliers(confidence=4.0, semantic=0.25)
PROPOSAL = "a" * 64
ARTIFACT = "b" * 64
DIGEST = "c" * 64
INPUTS = {"max_per_source": None, "include_cross_scope": False, "vector_k": 500}


def node(i: int) -> uuid.UUID:
    return uuid.UUID(int=i)


def receipt(
    ranked: list[uuid.UUID],
    *,
    query: str = "What telescope do I use?",
    multipliers: RankingMultipliers | None = None,
    inputs: dict[str, Any] | None = None,
    features: dict[str, Any] | None = None,
    outcomes: dict[str, Any] | None = None,
    pack: PackIdentity | None = None,
    **fields: Any,
) -> RetrievalReceipt:
    """A valid receipt returning ``ranked`` in that order (descending semantic similarity)."""
    scoring: ScoringWeights = fields.pop("scoring", ScoringWeights())
    weights: ScoringWeights = fields.pop("weights", scoring)
    applied = adjusted_weights(weights, multipliers)
    candidates = []
    for position, node_id in enumerate(ranked):
        trace = ScoreTrace(semantic_similarity=0.9 - 0.01 * position, composite_score=0.0)
        score = weighted_score(trace, applied)
        candidates.append(
            ReceiptCandidate(
                node_id=node_id,
                scope=Scope.PROJECT,
                node_type=NodeType.FACT,
                content_sha256="0" * 64,
                paths=("VECTOR",),
                score=score,
                trace=trace.model_copy(update={"composite_score": score}),
                token_cost=5,
                in_context=True,
                has_content=True,
            )
        )
    arm_inputs = {
        **INPUTS,
        "ranking_multipliers": None if multipliers is None else multipliers.model_dump(),
        "ranking_profile": {
            "status": "none" if multipliers is None else "request_override",
            "profile_id": None,
            "reason": None if multipliers is None else "explicit_multipliers",
        },
    }
    values: dict[str, Any] = {
        "request_id": uuid.uuid4(),
        "user_id": "alice",
        "query": query,
        "reference_time": CLOCK,
        "scopes": (Scope.PROJECT,),
        "retrieval_mode": RetrievalMode.DEFAULT,
        "min_score": None,
        "result_limit": 20,
        "time_from": None,
        "time_to": None,
        "scoring": scoring,
        "weights": weights,
        "ranking_multipliers": multipliers,
        "packing": PackingConfig(),
        "context_sha256": "1" * 64,
        "pack": pack or PackIdentity(pack_id="pack-1", write_seq=7),
        "execution": RetrievalExecution(
            inputs={**arm_inputs, **(inputs or {})},
            outcomes=outcomes or {"tokens_used": 10},
            features=features or FEATURES,
        ),
        "candidates": tuple(candidates),
    }
    values.update(fields)
    return RetrievalReceipt(**values)


def pair(
    group: str,
    baseline_ranked: list[uuid.UUID],
    candidate_ranked: list[uuid.UUID],
    relevant: list[uuid.UUID],
    *,
    baseline: dict[str, Any] | None = None,
    candidate: dict[str, Any] | None = None,
) -> tuple[list[RetrievalReceipt], FullRetrievalTrial]:
    b = receipt(baseline_ranked, **(baseline or {}))
    c = receipt(candidate_ranked, multipliers=CANDIDATE_M, **(candidate or {}))
    trial = FullRetrievalTrial(
        group_id=group,
        baseline_request_id=b.request_id,
        candidate_request_id=c.request_id,
        relevant_node_ids=tuple(relevant),
    )
    return [b, c], trial


def evaluate(
    receipts: list[RetrievalReceipt], trials: list[Any], **overrides: Any
) -> FullRetrievalEvaluation:
    kwargs: dict[str, Any] = {
        "user_id": "alice",
        "scopes": [Scope.PROJECT],
        "proposal_input_checksum": PROPOSAL,
        "memory_artifact_sha256": ARTIFACT,
        "candidate_multipliers": CANDIDATE_M,
        "pack_digest": DIGEST,
    }
    kwargs.update(overrides)
    return evaluate_full_retrieval(receipts, trials, **kwargs)


def winning_holdout(groups: int = 40) -> tuple[list[RetrievalReceipt], list[FullRetrievalTrial]]:
    """Upstream's fixture: the baseline returns an irrelevant node, the candidate the relevant one."""
    receipts: list[RetrievalReceipt] = []
    trials: list[FullRetrievalTrial] = []
    for g in range(groups):
        relevant, other = node(2 * g + 1), node(2 * g + 2)
        rs, trial = pair(
            f"group-{g:03d}",
            [other],
            [relevant],
            [relevant],
            baseline={"query": f"query {g}", "result_limit": 1},
            candidate={"query": f"query {g}", "result_limit": 1},
        )
        receipts += rs
        trials.append(trial)
    return receipts, trials


def rejected(match: str, field: str, receipts: Any, trials: Any, **overrides: Any) -> None:
    with pytest.raises(InvalidInputError, match=match) as info:
        evaluate(receipts, trials, **overrides)
    assert info.value.field == field


# ---------------------------------------------------------------- trial model


def test_trial_accepts_uuid_strings_and_lists() -> None:
    trial = FullRetrievalTrial(
        group_id="telescope-model",
        baseline_request_id=str(node(1)),
        candidate_request_id=node(2),
        relevant_node_ids=[str(node(3)), node(4)],
    )
    assert trial.baseline_request_id == node(1)
    assert trial.relevant_node_ids == (node(3), node(4))


@pytest.mark.parametrize("group_id", ["", "   ", "\t\n"])
def test_trial_group_id_cannot_be_blank(group_id: str) -> None:
    with pytest.raises(ValidationError, match="group_id cannot be blank"):
        FullRetrievalTrial(
            group_id=group_id,
            baseline_request_id=node(1),
            candidate_request_id=node(2),
            relevant_node_ids=(node(3),),
        )


def test_trial_group_id_is_bounded() -> None:
    FullRetrievalTrial(
        group_id="g" * 512,
        baseline_request_id=node(1),
        candidate_request_id=node(2),
        relevant_node_ids=(node(3),),
    )
    with pytest.raises(ValidationError, match="at most 512"):
        FullRetrievalTrial(
            group_id="g" * 513,
            baseline_request_id=node(1),
            candidate_request_id=node(2),
            relevant_node_ids=(node(3),),
        )


def test_trial_needs_two_different_requests() -> None:
    with pytest.raises(ValidationError, match="two different requests"):
        FullRetrievalTrial(
            group_id="g",
            baseline_request_id=node(1),
            candidate_request_id=str(node(1)),
            relevant_node_ids=(node(3),),
        )


def test_trial_relevant_node_ids_unique_and_bounded() -> None:
    with pytest.raises(ValidationError, match="relevant_node_ids must be unique"):
        FullRetrievalTrial(
            group_id="g",
            baseline_request_id=node(1),
            candidate_request_id=node(2),
            relevant_node_ids=(node(3), str(node(3))),
        )
    for relevant in ((), tuple(node(10 + i) for i in range(10_001))):
        with pytest.raises(ValidationError, match="relevant_node_ids"):
            FullRetrievalTrial(
                group_id="g",
                baseline_request_id=node(1),
                candidate_request_id=node(2),
                relevant_node_ids=relevant,
            )


def test_trial_forbids_extra_fields_and_is_frozen() -> None:
    with pytest.raises(ValidationError, match="extra"):
        FullRetrievalTrial.model_validate(
            {
                "group_id": "g",
                "baseline_request_id": str(node(1)),
                "candidate_request_id": str(node(2)),
                "relevant_node_ids": [str(node(3))],
                "note": "x",
            }
        )
    trial = FullRetrievalTrial(
        group_id="g",
        baseline_request_id=node(1),
        candidate_request_id=node(2),
        relevant_node_ids=(node(3),),
    )
    with pytest.raises(ValidationError):
        trial.group_id = "h"  # type: ignore[misc]


def test_config_defaults_and_bounds() -> None:
    config = FullRetrievalEvaluationConfig()
    assert (config.seed, config.k, config.min_query_groups, config.bootstrap_samples) == (
        42,
        10,
        20,
        2000,
    )
    assert (config.min_ndcg_gain, config.max_regression_fraction) == (0.01, 0.1)
    for bad in ({"k": 0}, {"min_query_groups": 1}, {"bootstrap_samples": 99}, {"min_ndcg_gain": 2}):
        with pytest.raises(ValidationError):
            FullRetrievalEvaluationConfig(**bad)


# ------------------------------------------------------------ rejection rules


def test_rule_owner_must_be_non_blank() -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)])
    rejected("non-blank", "user_id", receipts, [trial], user_id=" ")


@pytest.mark.parametrize("field", ["proposal_input_checksum", "memory_artifact_sha256"])
@pytest.mark.parametrize("value", ["abc", "A" * 64, "g" * 64, 7])
def test_rule_digests_must_be_sha256(field: str, value: object) -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)])
    rejected("SHA-256", field, receipts, [trial], **{field: value})


def test_rule_conflicting_receipts_under_one_id() -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)])
    other = receipts[0].model_copy(update={"query": "What telescope do I use?!"})
    rejected("Conflicting full retrieval receipt identity", "receipts", [*receipts, other], [trial])
    # an identical duplicate is fine
    evaluate([*receipts, receipts[0]], [trial])


def test_rule_trial_count_bounds() -> None:
    receipts, _ = pair("g", [node(1)], [node(1)], [node(1)])
    rejected("trials must contain from 1 to 10000 pairs", "trials", receipts, [])
    many = [
        FullRetrievalTrial(
            group_id="g",
            baseline_request_id=node(2 * i + 1),
            candidate_request_id=node(2 * i + 2),
            relevant_node_ids=(node(1),),
        )
        for i in range(10_001)
    ]
    rejected("trials must contain from 1 to 10000 pairs", "trials", receipts, many)


def test_rule_both_receipts_must_exist() -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)])
    rejected("requires both saved receipts", "trials", receipts[:1], [trial])
    rejected("requires both saved receipts", "trials", receipts[1:], [trial])


def test_rule_receipt_cannot_enter_two_trials() -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)])
    extra = receipt([node(1)], multipliers=CANDIDATE_M)
    reused = FullRetrievalTrial(
        group_id="g",
        baseline_request_id=trial.baseline_request_id,
        candidate_request_id=extra.request_id,
        relevant_node_ids=(node(1),),
    )
    rejected("cannot enter more than one", "trials", [*receipts, extra], [trial, reused])


def test_rule_receipts_belong_to_the_owner() -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)], candidate={"user_id": "bob"})
    rejected("must belong to the requested owner", "user_id", receipts, [trial])


def test_rule_exact_scope_set() -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)])
    rejected("must match the requested scopes", "scopes", receipts, [trial], scopes=None)
    rejected(
        "must match the requested scopes",
        "scopes",
        receipts,
        [trial],
        scopes=[Scope.PROJECT, Scope.PERSONAL],
    )
    both = {"scopes": (Scope.PERSONAL, Scope.PROJECT)}
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)], baseline=both, candidate=both)
    # the scope *set* matters, not the caller's order or duplicates
    evaluate(receipts, [trial], scopes=["project", "personal", "project"])


def test_rule_same_normalized_query() -> None:
    receipts, trial = pair(
        "g", [node(1)], [node(1)], [node(1)], candidate={"query": "  what  TELESCOPE do i use? "}
    )
    report = evaluate(receipts, [trial])
    assert report.queries[0].normalized_queries == ("what telescope do i use?",)
    receipts, trial = pair(
        "g", [node(1)], [node(1)], [node(1)], candidate={"query": "Which telescope do I use?"}
    )
    rejected("same normalized query", "query", receipts, [trial])


PAIRED_CHANGES: list[tuple[str, Any]] = [
    ("reference_time", CLOCK + timedelta(seconds=1)),
    ("scoring", ScoringWeights(w_semantic=0.3, w_lexical=0.15)),
    ("weights", ScoringWeights(w_semantic=0.3, w_lexical=0.15)),
    ("packing", PackingConfig(token_budget=100)),
    ("min_score", 0.1),
    ("result_limit", 10),
    ("retrieval_mode", RetrievalMode.EXPLICIT),
    ("time_from", CLOCK - timedelta(days=1)),
    ("time_to", CLOCK + timedelta(days=1)),
]


@pytest.mark.parametrize(("field", "value"), PAIRED_CHANGES, ids=[c[0] for c in PAIRED_CHANGES])
def test_rule_same_clock_filters_limits_scoring_and_packing(field: str, value: Any) -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)], candidate={field: value})
    rejected("same clock, filters, limits, scoring, and packing", field, receipts, [trial])


def test_rule_same_feature_identity_in_a_pair() -> None:
    changed = {**FEATURES, "vector_search": "ann"}
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)], candidate={"features": changed})
    rejected("feature identities differ", "execution.features", receipts, [trial])


def test_rule_same_execution_inputs_except_the_arm_multipliers() -> None:
    receipts, trial = pair(
        "g", [node(1)], [node(1)], [node(1)], candidate={"inputs": {"max_per_source": 2}}
    )
    rejected("execution parameters differ", "execution.inputs.max_per_source", receipts, [trial])
    receipts, trial = pair(
        "g", [node(1)], [node(1)], [node(1)], candidate={"inputs": {"knowledge_at": None}}
    )
    rejected("execution parameters differ", "execution.inputs.knowledge_at", receipts, [trial])
    # ranking_multipliers and ranking_profile differ between the arms by design, and observed
    # outcomes are never compared
    receipts, trial = pair(
        "g", [node(1)], [node(1)], [node(1)], candidate={"outcomes": {"tokens_used": 99}}
    )
    assert (
        receipts[0].execution.inputs["ranking_profile"]
        != (receipts[1].execution.inputs["ranking_profile"])
    )
    evaluate(receipts, [trial])


@pytest.mark.parametrize(
    ("field", "pack"),
    [
        ("pack.pack_id", PackIdentity(pack_id="pack-2", write_seq=7)),
        ("pack.write_seq", PackIdentity(pack_id="pack-1", write_seq=8)),
    ],
)
def test_rule_frozen_pack_within_a_pair(field: str, pack: PackIdentity) -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)], candidate={"pack": pack})
    rejected("a memory write happened during the holdout", field, receipts, [trial])


@pytest.mark.parametrize(
    ("field", "pack"),
    [
        ("pack.pack_id", PackIdentity(pack_id="pack-2", write_seq=7)),
        ("pack.write_seq", PackIdentity(pack_id="pack-1", write_seq=8)),
    ],
)
def test_rule_frozen_pack_across_the_holdout(field: str, pack: PackIdentity) -> None:
    first, t1 = pair("a", [node(1)], [node(1)], [node(1)])
    later = {"pack": pack, "query": "q2"}
    second, t2 = pair("b", [node(1)], [node(1)], [node(1)], baseline=later, candidate=later)
    rejected("a memory write happened during the holdout", field, first + second, [t1, t2])


def test_rule_baseline_uses_the_declared_multipliers() -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)])
    # a receipt without multipliers counts as neutral, and so does an explicit neutral one
    evaluate(receipts, [trial], baseline_multipliers=RankingMultipliers())
    rejected(
        "Baseline receipt does not use the declared multipliers",
        "baseline_multipliers",
        receipts,
        [trial],
        baseline_multipliers=RankingMultipliers(lexical=2),
    )


def test_rule_candidate_uses_the_declared_multipliers() -> None:
    receipts, trial = pair("g", [node(1)], [node(1)], [node(1)])
    rejected(
        "Candidate receipt does not use the declared multipliers",
        "candidate_multipliers",
        receipts,
        [trial],
        candidate_multipliers=RankingMultipliers(confidence=4.0),
    )
    rejected(
        "Candidate receipt does not use the declared multipliers",
        "candidate_multipliers",
        receipts,
        [trial],
        candidate_multipliers={"confidence": 4.0, "semantic": 0.25, "lexical": 1.5},
    )


def test_rule_one_normalized_query_per_group() -> None:
    first, t1 = pair("telescope", [node(1)], [node(1)], [node(1)])
    second, t2 = pair("telescope-2", [node(1)], [node(1)], [node(1)])
    rejected("different groups", "group_id", first + second, [t1, t2])
    # one group may hold paraphrases
    para = {"query": "Which telescope is mine?"}
    third, t3 = pair("telescope", [node(1)], [node(1)], [node(1)], baseline=para, candidate=para)
    report = evaluate(first + third, [t1, t3])
    assert report.queries[0].normalized_queries == (
        "what telescope do i use?",
        "which telescope is mine?",
    )


def test_rule_one_feature_identity_across_the_holdout() -> None:
    first, t1 = pair("a", [node(1)], [node(1)], [node(1)])
    other = {"features": {**FEATURES, "feature_schema": 2}, "query": "q2"}
    second, t2 = pair("b", [node(1)], [node(1)], [node(1)], baseline=other, candidate=other)
    rejected("one feature identity", "execution.features", first + second, [t1, t2])


def test_rule_one_base_scoring_across_the_holdout() -> None:
    first, t1 = pair("a", [node(1)], [node(1)], [node(1)])
    other = {"scoring": ScoringWeights(w_semantic=0.3, w_lexical=0.15), "query": "q2"}
    second, t2 = pair("b", [node(1)], [node(1)], [node(1)], baseline=other, candidate=other)
    rejected("one base scoring", "scoring", first + second, [t1, t2])


def test_rule_disjoint_from_the_proposal_groups() -> None:
    receipts, trial = pair("telescope-model", [node(1)], [node(1)], [node(1)])
    rejected(
        "holdout query overlaps the proposal's groups",
        "query",
        receipts,
        [trial],
        proposal_groups=frozenset({"what telescope do i use?"}),
    )
    rejected(
        "holdout query overlaps the proposal's groups",
        "group_id",
        receipts,
        [trial],
        proposal_groups=frozenset({"telescope-model"}),
    )
    report = evaluate(receipts, [trial], proposal_groups=frozenset({"which database?"}))
    assert report.decision == "insufficient_data"


# ---------------------------------------------------------------- metrics


def test_metrics_against_the_complete_relevant_set() -> None:
    a, b, c, missing = node(1), node(2), node(3), node(4)
    # baseline returns [b, a, c]; candidate [a, c, b]; `missing` is relevant but never returned
    receipts, trial = pair("g", [b, a, c], [a, c, b], [a, c, missing])
    report = evaluate(receipts, [trial])
    idcg = 1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    q = report.queries[0]
    assert q.baseline_recall == 2 / 3 and q.candidate_recall == 2 / 3
    assert q.baseline_ndcg == (1 / math.log2(3) + 1 / math.log2(4)) / idcg
    assert q.candidate_ndcg == (1 / math.log2(2) + 1 / math.log2(3)) / idcg
    assert (q.baseline_mrr, q.candidate_mrr) == (1 / 2, 1.0)
    assert report.ndcg_gain == q.candidate_ndcg - q.baseline_ndcg
    assert report.coverage == {"trials": 1, "query_groups": 1, "relevant_nodes": 3}
    assert "1/log2(i+2)" in report.gain_formula


def test_metrics_cut_at_k() -> None:
    relevant = node(99)
    ranked = [node(i) for i in range(1, 12)]
    receipts, trial = pair("g", [*ranked[:10], relevant], [relevant, *ranked[:10]], [relevant])
    report = evaluate(receipts, [trial], config=FullRetrievalEvaluationConfig(k=10))
    q = report.queries[0]
    assert (q.baseline_recall, q.baseline_ndcg, q.baseline_mrr) == (0.0, 0.0, 0.0)
    assert (q.candidate_recall, q.candidate_ndcg, q.candidate_mrr) == (1.0, 1.0, 1.0)


def test_repeats_are_macro_averaged_and_groups_weigh_equally() -> None:
    r = node(1)
    # group "a": two repeats, candidate wins once (1 vs 1/log2(3)) and ties once
    a1, ta1 = pair("a", [node(2), r], [r, node(2)], [r])
    rep = {"query": "what telescope do I use"}
    a2, ta2 = pair("a", [r], [r], [r], baseline=rep, candidate=rep)
    # group "b": one trial, both arms miss
    other = {"query": "another question"}
    b1, tb1 = pair("b", [node(2)], [node(2)], [r], baseline=other, candidate=other)
    report = evaluate(a1 + a2 + b1, [tb1, ta2, ta1])
    qa, qb = report.queries
    assert qa.baseline_ndcg == (1 / math.log2(3) + 1.0) / 2
    assert qa.candidate_ndcg == (1.0 + 1.0) / 2
    assert qb.baseline_ndcg == qb.candidate_ndcg == 0.0
    assert report.baseline_ndcg == math.fsum([qa.baseline_ndcg, 0.0]) / 2
    assert report.candidate_ndcg == 1.0 / 2
    assert report.baseline_mrr == (0.5 + 1.0) / 2 / 2
    assert report.coverage == {"trials": 3, "query_groups": 2, "relevant_nodes": 3}
    assert [len(q.baseline_request_ids) for q in report.queries] == [2, 1]
    assert report.win_tie_loss == {"wins": 1, "ties": 1, "losses": 0}


# ---------------------------------------------------------------- decisions


def test_single_pair_is_insufficient_data() -> None:
    receipts, trial = pair("telescope-model", [node(2)], [node(1)], [node(1)])
    report = evaluate(receipts, [trial])
    assert report.decision == "insufficient_data"
    assert report.ndcg_gain_interval is None and report.randomization_p_value is None
    assert report.candidate_ndcg == 1.0 and report.baseline_ndcg == 0.0
    assert report.win_tie_loss == {"wins": 1, "ties": 0, "losses": 0}
    assert report.missing_query_groups == 20 - 1  # the default minimum is 20 groups


def test_candidate_that_finds_the_relevant_node_improves() -> None:
    receipts, trials = winning_holdout(40)
    report = evaluate(receipts, trials)
    assert report.decision == "improved_full_retrieval"
    assert (report.baseline_recall, report.candidate_recall) == (0.0, 1.0)
    assert (report.baseline_ndcg, report.candidate_ndcg, report.ndcg_gain) == (0.0, 1.0, 1.0)
    assert (report.baseline_mrr, report.candidate_mrr) == (0.0, 1.0)
    assert report.ndcg_gain_interval == (1.0, 1.0)
    assert report.regression_fraction == 0.0
    assert report.win_tie_loss == {"wins": 40, "ties": 0, "losses": 0}
    assert report.randomization_p_value == sign_flip_p_value([1.0] * 40, samples=2000, seed=42)
    assert report.randomization_p_value < 0.001
    assert report.feature_identity == FEATURES
    assert report.feature_identity_sha256 == checksum(FEATURES)
    assert report.base_scoring == ScoringWeights()
    assert (report.pack_id, report.write_seq, report.pack_digest) == ("pack-1", 7, DIGEST)
    assert report.memory_artifact_sha256 == ARTIFACT
    assert report.attestation is None
    assert report.scopes == (Scope.PROJECT,)
    assert set(report.receipt_checksums) == {str(r.request_id) for r in receipts}
    assert report.receipt_checksums[str(receipts[0].request_id)] == receipts[0].checksum


def test_equal_arms_are_no_improvement() -> None:
    receipts: list[RetrievalReceipt] = []
    trials = []
    for g in range(25):
        rel = {"query": f"query {g}"}
        rs, trial = pair(f"g{g:02d}", [node(1)], [node(1)], [node(1)], baseline=rel, candidate=rel)
        receipts += rs
        trials.append(trial)
    report = evaluate(receipts, trials)
    assert report.decision == "no_improvement"
    assert report.ndcg_gain == 0.0 and report.ndcg_gain_interval == (0.0, 0.0)
    assert report.randomization_p_value == 1.0
    assert report.win_tie_loss == {"wins": 0, "ties": 25, "losses": 0}


def test_too_many_regressions_is_no_improvement() -> None:
    # 17 groups gain 1.0, 3 lose 1 − 1/log2(3): mean gain is large but 3/20 > 10 % regress
    receipts: list[RetrievalReceipt] = []
    trials = []
    r, x = node(1), node(2)
    for g in range(20):
        q = {"query": f"query {g}"}
        better = g >= 3
        rs, trial = pair(
            f"g{g:02d}",
            [x] if better else [r, x],
            [r] if better else [x, r],
            [r],
            baseline=q,
            candidate=q,
        )
        receipts += rs
        trials.append(trial)
    report = evaluate(receipts, trials)
    assert report.regression_fraction == 3 / 20
    assert report.ndcg_gain_interval is not None and report.ndcg_gain_interval[0] > 0
    assert report.decision == "no_improvement"
    # The report says why: only the regression cap failed, and which groups fell how far.
    assert report.refusal is not None
    assert [(r.rule, r.observed, r.required) for r in report.refusal.rules] == [
        ("regression_fraction", 3 / 20, "<= 0.1")
    ]
    dropped = 1 / math.log2(3)  # the relevant node falls from rank 1 to rank 2
    assert [
        (g.group_label, g.baseline_ndcg, g.candidate_ndcg) for g in report.refusal.regressed_groups
    ] == [
        ("g00", 1.0, dropped),
        ("g01", 1.0, dropped),
        ("g02", 1.0, dropped),
    ]
    data = json.loads(canonical_json(report))
    data["refusal"]["regressed_groups"] = data["refusal"]["regressed_groups"][:2]
    with pytest.raises(ReportVerificationError, match="refusal does not match"):
        verify_report(FullRetrievalEvaluation.model_validate(data))
    lenient = FullRetrievalEvaluationConfig(max_regression_fraction=0.15)
    passed = evaluate(receipts, trials, config=lenient)
    assert passed.decision == "improved_full_retrieval"
    assert passed.refusal is None and "refusal" not in passed.model_dump(mode="json")


def _recall_loss_holdout() -> tuple[list[RetrievalReceipt], list[FullRetrievalTrial]]:
    """20 groups where the candidate drops a relevant node: ``no_improvement`` with a refusal."""
    receipts: list[RetrievalReceipt] = []
    trials = []
    r1, r2, x, y, z = node(1), node(2), node(3), node(4), node(5)
    for g in range(20):
        q = {"query": f"query {g}"}
        rs, trial = pair(f"g{g:02d}", [x, y, z, r1, r2], [r1, x], [r1, r2], baseline=q, candidate=q)
        receipts += rs
        trials.append(trial)
    return receipts, trials


def test_recall_loss_is_no_improvement() -> None:
    # the candidate ranks the first relevant node on top but drops the second from the list
    report = evaluate(*_recall_loss_holdout())
    idcg = 1 + 1 / math.log2(3)
    assert report.baseline_ndcg == (1 / math.log2(5) + 1 / math.log2(6)) / idcg
    assert report.candidate_ndcg == 1 / idcg
    assert report.ndcg_gain > 0.01 and report.regression_fraction == 0.0
    assert (report.baseline_recall, report.candidate_recall) == (1.0, 0.5)
    assert report.decision == "no_improvement"
    assert report.refusal is not None
    assert [(r.rule, r.observed) for r in report.refusal.rules] == [("recall_gain", -0.5)]
    assert report.refusal.regressed_groups == ()


def test_interval_is_the_shared_percentile_bootstrap() -> None:
    receipts, trials = winning_holdout(30)
    # make ten groups ties so the interval is not degenerate
    for t in trials[:10]:
        for r in list(receipts):
            if r.request_id == t.candidate_request_id:
                i = receipts.index(r)
                receipts[i] = receipt(
                    [node(10_000 + i)],
                    multipliers=CANDIDATE_M,
                    request_id=r.request_id,
                    query=r.query,
                    result_limit=1,
                )
    report = evaluate(receipts, trials, config={"bootstrap_samples": 500, "seed": 7})
    diffs = [q.ndcg_diff for q in report.queries]
    assert sorted(diffs) == [0.0] * 10 + [1.0] * 20
    assert report.ndcg_gain_interval == percentile_bootstrap_interval(diffs, samples=500, seed=7)
    assert report.randomization_p_value == sign_flip_p_value(diffs, samples=500, seed=7)


# ------------------------------------------------------ determinism and tampering


def test_shuffled_inputs_give_byte_identical_reports() -> None:
    receipts, trials = winning_holdout(25)
    first = evaluate(receipts, trials)
    rng = random.Random(3)
    shuffled_receipts, shuffled_trials = list(receipts), list(trials)
    rng.shuffle(shuffled_receipts)
    rng.shuffle(shuffled_trials)
    second = evaluate(shuffled_receipts, [t.model_dump() for t in shuffled_trials])
    assert canonical_json(first) == canonical_json(second)
    keys = [(t.group_id, str(t.baseline_request_id)) for t in first.trials]
    assert keys == sorted(keys)


def test_report_round_trips_through_json() -> None:
    receipts, trials = winning_holdout(20)
    report = evaluate(receipts, trials)
    again = FullRetrievalEvaluation.model_validate_json(canonical_json(report))
    assert canonical_json(again) == canonical_json(report)


TAMPERS: list[tuple[str, Any, str]] = [
    ("ndcg_gain", 0.5, "aggregate metrics"),
    ("candidate_recall", 0.5, "aggregate metrics"),
    ("regression_fraction", 0.5, "aggregate metrics"),
    ("win_tie_loss", {"wins": 39, "ties": 1, "losses": 0}, "aggregate metrics"),
    ("decision", "no_improvement", "decision does not match"),
    ("ndcg_gain_interval", None, "lacks required validation evidence"),
    ("memory_artifact_sha256", "d" * 64, "input checksum"),
    ("pack_digest", "d" * 64, "input checksum"),
    ("write_seq", 8, "input checksum"),
    ("input_checksum", "e" * 64, "input checksum"),
    ("feature_identity", {"feature_schema": 9}, "feature identity checksum mismatch"),
    ("coverage", {"trials": 41, "query_groups": 40, "relevant_nodes": 40}, "coverage"),
    ("limitations", ["trust me"], "limitations"),
    (
        "refusal",
        {"rules": [{"rule": "ndcg_gain", "observed": 0.0, "required": ">= 0.5"}]}
        | {"regressed_groups": []},
        "refusal is only for no_improvement",
    ),
]


@pytest.mark.parametrize(("field", "value", "match"), TAMPERS, ids=[t[0] for t in TAMPERS])
def test_tampered_reports_fail_verification(field: str, value: Any, match: str) -> None:
    receipts, trials = winning_holdout(40)
    data = json.loads(canonical_json(evaluate(receipts, trials)))
    data[field] = value
    with pytest.raises(ReportVerificationError, match=match):
        verify_report(FullRetrievalEvaluation.model_validate(data))


def test_tampered_query_metrics_fail_verification() -> None:
    receipts, trials = winning_holdout(40)
    data = json.loads(canonical_json(evaluate(receipts, trials)))
    data["queries"][0]["baseline_ndcg"] = 1.0
    with pytest.raises(ReportVerificationError, match="aggregate metrics"):
        verify_report(FullRetrievalEvaluation.model_validate(data))
    data = json.loads(canonical_json(evaluate(receipts, trials)))
    data["receipt_checksums"].popitem()
    with pytest.raises(ReportVerificationError, match="request ids"):
        verify_report(FullRetrievalEvaluation.model_validate(data))
    data = json.loads(canonical_json(evaluate(receipts, trials)))
    data["trials"].reverse()
    with pytest.raises(ReportVerificationError, match="sorted"):
        verify_report(FullRetrievalEvaluation.model_validate(data))


def test_insufficient_report_cannot_carry_an_interval() -> None:
    receipts, trial = pair("g", [node(2)], [node(1)], [node(1)])
    data = json.loads(canonical_json(evaluate(receipts, [trial])))
    data["ndcg_gain_interval"] = [0.5, 1.0]
    with pytest.raises(ReportVerificationError, match="Insufficient full retrieval evaluation"):
        verify_report(FullRetrievalEvaluation.model_validate(data))


def test_verification_accepts_every_report_gate2_produces() -> None:
    receipts, trial = pair("g", [node(2)], [node(1)], [node(1)])
    made = {
        "insufficient_data": evaluate(receipts, [trial]),
        "no_improvement": evaluate(*_recall_loss_holdout()),
        "improved_full_retrieval": evaluate(*winning_holdout(25)),
    }
    for decision, report in made.items():
        assert report.decision == decision
        assert (report.refusal is not None) == (decision == "no_improvement")
        verify_report(report)
        again = FullRetrievalEvaluation.model_validate_json(canonical_json(report))
        assert canonical_json(again) == canonical_json(report)
        verify_report(again)


def test_an_edited_refusal_fails_verification_but_parses() -> None:
    refused = evaluate(*_recall_loss_holdout())
    assert refused.refusal is not None
    data = json.loads(canonical_json(refused))
    data["refusal"]["rules"][0]["observed"] = -0.25
    edited = FullRetrievalEvaluation.model_validate(data)  # the model is data
    with pytest.raises(ReportVerificationError, match="refusal does not match its evidence"):
        verify_report(edited)
    data = json.loads(canonical_json(refused))
    data["decision"] = "improved_full_retrieval"
    with pytest.raises(ReportVerificationError, match="decision does not match its evidence"):
        verify_report(FullRetrievalEvaluation.model_validate(data))
