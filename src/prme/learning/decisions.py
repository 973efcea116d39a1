"""The gates' decisions: each gate's rules, the decision they give, the refusal a refused report
carries, and gate 2's aggregates over its query groups.

The gates compute their reports with these functions, and :mod:`prme.learning.verify_reports`
recomputes them from a report's own numbers to verify it; the report models are plain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prme.learning.stats import TIE_TOLERANCE, mean, win_tie_loss
from prme.models.base import Frozen
from prme.models.holdout import (
    FullRetrievalDecision,
    FullRetrievalEvaluationConfig,
    FullRetrievalQueryResult,
)
from prme.models.learning import TOLERANCE, Decision, LearningConfig, QueryLearningResult
from prme.models.refusal import FailedRule, Refusal, RegressedGroup

Check = tuple[str, float, str, bool]


# ------------------------------------------------------------------------------- refusals
def regressed_groups(groups: Iterable[tuple[str, float, float]]) -> tuple[RegressedGroup, ...]:
    """``(label, baseline NDCG, candidate NDCG)`` of every group → the regressed ones (a drop
    beyond 1e-12), largest drop first, then by label."""
    worse = [(c - b, label, b, c) for label, b, c in groups if c - b < -TIE_TOLERANCE]
    return tuple(
        RegressedGroup(group_label=label, baseline_ndcg=b, candidate_ndcg=c)
        for _, label, b, c in sorted(worse)
    )


def refusal(checks: Iterable[Check], groups: Iterable[tuple[str, float, float]]) -> Refusal:
    """``(rule, observed, required, passed)`` per rule and the groups' NDCG pairs → the refusal.

    Raises:
        ValueError: every rule passed (nothing was refused).
    """
    failed = tuple(
        FailedRule(rule=rule, observed=observed, required=required)
        for rule, observed, required, passed in checks
        if not passed
    )
    if not failed:
        raise ValueError("a refusal needs at least one failed rule")
    return Refusal(rules=failed, regressed_groups=regressed_groups(groups))


# ------------------------------------------------------------------------------- gate 1
def proposal_checks(
    ndcg_gain: float, interval_low: float, pairwise_gain: float, min_ndcg_gain: float
) -> tuple[Check, ...]:
    """§E.11's rules as ``(report field, observed, required, passed)``, in this order."""
    return (
        ("validation_ndcg_gain", ndcg_gain, f">= {min_ndcg_gain!r}", ndcg_gain >= min_ndcg_gain),
        ("validation_gain_interval.low", interval_low, "> 0", interval_low > 0.0),
        (
            "validation_pairwise_gain",
            pairwise_gain,
            f">= -{TOLERANCE!r}",
            pairwise_gain >= -TOLERANCE,
        ),
    )


def decide_proposal(
    ndcg_gain: float, interval_low: float, pairwise_gain: float, min_ndcg_gain: float
) -> Decision:
    """§E.11: improved iff gain ≥ min_ndcg_gain, interval low > 0 and pairwise gain ≥ −1e-12."""
    checks = proposal_checks(ndcg_gain, interval_low, pairwise_gain, min_ndcg_gain)
    if all(passed for *_, passed in checks):
        return "improved_on_observed_candidates"
    return "no_improvement"


def proposal_refusal(
    ndcg_gain: float,
    interval_low: float,
    pairwise_gain: float,
    min_ndcg_gain: float,
    queries: Sequence[QueryLearningResult],
) -> Refusal:
    """Why gate 1 refused: the failed rules and the regressed validation groups."""
    return refusal(
        proposal_checks(ndcg_gain, interval_low, pairwise_gain, min_ndcg_gain),
        (
            (q.group_label, q.baseline_judged_ndcg, q.candidate_judged_ndcg)
            for q in queries
            if q.split == "validation"
        ),
    )


def missing_groups(coverage: dict[str, int], config: LearningConfig) -> dict[str, int]:
    """Groups still needed per split: ``max(0, minimum − observed)`` for training and validation."""
    return {
        "training_queries": max(0, config.min_training_queries - coverage["training_queries"]),
        "validation_queries": max(
            0, config.min_validation_queries - coverage["validation_queries"]
        ),
    }


# ------------------------------------------------------------------------------- gate 2
class Aggregates(Frozen):
    """The headline numbers derived from the per-group results (groups weigh equally)."""

    baseline_recall: float
    candidate_recall: float
    recall_gain: float
    baseline_ndcg: float
    candidate_ndcg: float
    ndcg_gain: float
    baseline_mrr: float
    candidate_mrr: float
    mrr_gain: float
    regression_fraction: float
    win_tie_loss: dict[str, int]


def aggregate(queries: Sequence[FullRetrievalQueryResult]) -> Aggregates:
    """Means over groups, gains = candidate − baseline, regressions = NDCG drops beyond 1e-12."""
    if not queries:
        raise ValueError("a full retrieval evaluation needs at least one query group")
    means = {
        name: mean([getattr(q, name) for q in queries])
        for name in (
            "baseline_recall",
            "candidate_recall",
            "baseline_ndcg",
            "candidate_ndcg",
            "baseline_mrr",
            "candidate_mrr",
        )
    }
    diffs = [q.ndcg_diff for q in queries]
    regressions = sum(1 for d in diffs if d < -TIE_TOLERANCE)
    return Aggregates(
        **means,
        recall_gain=means["candidate_recall"] - means["baseline_recall"],
        ndcg_gain=means["candidate_ndcg"] - means["baseline_ndcg"],
        mrr_gain=means["candidate_mrr"] - means["baseline_mrr"],
        regression_fraction=regressions / len(queries),
        win_tie_loss=win_tie_loss(diffs),
    )


def holdout_checks(
    config: FullRetrievalEvaluationConfig,
    *,
    ndcg_gain: float,
    interval_low: float,
    baseline_recall: float,
    candidate_recall: float,
    regression_fraction: float,
) -> tuple[Check, ...]:
    """§F.4's rules past the group minimum as ``(report field, observed, required, passed)``."""
    recall_gain = candidate_recall - baseline_recall
    return (
        (
            "ndcg_gain",
            ndcg_gain,
            f">= {config.min_ndcg_gain!r}",
            ndcg_gain >= config.min_ndcg_gain,
        ),
        ("ndcg_gain_interval.low", interval_low, "> 0", interval_low > 0),
        (
            "recall_gain",
            recall_gain,
            f">= -{TIE_TOLERANCE!r}",
            candidate_recall >= baseline_recall - TIE_TOLERANCE,
        ),
        (
            "regression_fraction",
            regression_fraction,
            f"<= {config.max_regression_fraction!r}",
            regression_fraction <= config.max_regression_fraction,
        ),
    )


def decide_holdout(
    config: FullRetrievalEvaluationConfig,
    query_groups: int,
    *,
    ndcg_gain: float,
    interval: tuple[float, float] | None,
    baseline_recall: float,
    candidate_recall: float,
    regression_fraction: float,
) -> FullRetrievalDecision:
    """The gate-2 rule (reference §F.4).

    ``insufficient_data`` below ``min_query_groups``; ``improved_full_retrieval`` iff
    ``ndcg_gain ≥ min_ndcg_gain``, the bootstrap lower endpoint is > 0,
    ``candidate_recall ≥ baseline_recall − 1e-12`` and
    ``regression_fraction ≤ max_regression_fraction``; ``no_improvement`` otherwise.
    """
    if query_groups < config.min_query_groups:
        return "insufficient_data"
    if interval is not None and all(
        passed
        for *_, passed in holdout_checks(
            config,
            ndcg_gain=ndcg_gain,
            interval_low=interval[0],
            baseline_recall=baseline_recall,
            candidate_recall=candidate_recall,
            regression_fraction=regression_fraction,
        )
    ):
        return "improved_full_retrieval"
    return "no_improvement"


def holdout_refusal(
    config: FullRetrievalEvaluationConfig,
    *,
    ndcg_gain: float,
    interval_low: float,
    baseline_recall: float,
    candidate_recall: float,
    regression_fraction: float,
    queries: Sequence[FullRetrievalQueryResult],
) -> Refusal:
    """Why gate 2 refused: the failed rules and the regressed holdout groups (by group id)."""
    return refusal(
        holdout_checks(
            config,
            ndcg_gain=ndcg_gain,
            interval_low=interval_low,
            baseline_recall=baseline_recall,
            candidate_recall=candidate_recall,
            regression_fraction=regression_fraction,
        ),
        ((q.group_id, q.baseline_ndcg, q.candidate_ndcg) for q in queries),
    )
