"""Why a gate refused a proposal: the rules that failed and the groups that got worse.

A refused report (decision ``no_improvement``) carries a :class:`Refusal` derived from its own
numbers, so a user can act on it: which threshold was missed, by how much, and which query
groups ranked worse under the candidate multipliers than under the baseline. Both report models
re-derive it on parse; an edited refusal fails to load.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field

from prme.learning.stats import TIE_TOLERANCE
from prme.models.base import FiniteFloat, Frozen, NonBlankStr, UnitFloat


class FailedRule(Frozen):
    """One decision rule the evidence did not meet: ``observed`` against ``required``."""

    rule: NonBlankStr  # the report field the rule reads
    observed: FiniteFloat
    required: NonBlankStr  # the comparison and threshold, e.g. ">= 0.01"


class RegressedGroup(Frozen):
    """A query group whose NDCG dropped (beyond 1e-12) from baseline to candidate."""

    group_label: str
    baseline_ndcg: UnitFloat
    candidate_ndcg: UnitFloat


class Refusal(Frozen):
    """The failed rules (in the order the gate checks them) and the regressed groups (largest
    drop first, then by label)."""

    rules: tuple[FailedRule, ...] = Field(min_length=1)
    regressed_groups: tuple[RegressedGroup, ...]


def regressed_groups(groups: Iterable[tuple[str, float, float]]) -> tuple[RegressedGroup, ...]:
    """``(label, baseline NDCG, candidate NDCG)`` of every group → the regressed ones, sorted."""
    worse = [(c - b, label, b, c) for label, b, c in groups if c - b < -TIE_TOLERANCE]
    return tuple(
        RegressedGroup(group_label=label, baseline_ndcg=b, candidate_ndcg=c)
        for _, label, b, c in sorted(worse)
    )


def refusal(
    checks: Iterable[tuple[str, float, str, bool]], groups: Iterable[tuple[str, float, float]]
) -> Refusal:
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
