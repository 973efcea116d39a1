"""Why a gate refused a proposal: the rules that failed and the groups that got worse.

A refused report (decision ``no_improvement``) carries a :class:`Refusal` derived from its own
numbers, so a user can act on it: which threshold was missed, by how much, and which query
groups ranked worse under the candidate multipliers than under the baseline. The gates build it
with :mod:`prme.learning.decisions`, and verifying a report
(:mod:`prme.learning.verify_reports`) re-derives it, so an edited refusal is refused.
"""

from __future__ import annotations

from pydantic import Field

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
