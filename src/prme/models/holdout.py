"""Gate-2 models: paired full-retrieval trials, the gate's configuration, and its report.

The report re-checks itself on every parse (reference §F.6): sort orders, request-id
consistency, coverage, every aggregate, the decision rule and the ``input_checksum``. A serialized
report that was edited fails to parse; a consistently fabricated one is caught only by its
attestation (``prme.services.reports.verify``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, Literal
from uuid import UUID

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from prme.canonical import checksum
from prme.learning.groups import normalize_query
from prme.learning.stats import TIE_TOLERANCE, mean, win_tie_loss
from prme.limits import MAX_RELEVANT, MAX_TRIALS
from prme.models.base import FiniteFloat, Frozen, NonBlankStr, Sha256Hex, UnitFloat
from prme.models.enums import Scope
from prme.models.refusal import Refusal, refusal
from prme.models.scope import scope_set_key
from prme.models.scoring import RankingMultipliers, ScoringWeights
from prme.validation import require_text

ALGORITHM: Final = "paired_full_retrieval_v1"
MAX_GROUP_ID_CHARS = 512
COVERAGE_KEYS = frozenset({"trials", "query_groups", "relevant_nodes"})
WIN_TIE_LOSS_KEYS = frozenset({"wins", "ties", "losses"})

FullRetrievalDecision = Literal["insufficient_data", "no_improvement", "improved_full_retrieval"]

GAIN_FORMULA = (
    "binary gain; per arm and trial, order = the first k returned node ids; "
    "recall@k = |relevant ∩ order| / |relevant|; "
    "NDCG@k = Σ_{i<k, order[i] relevant} 1/log2(i+2) / Σ_{i<min(k,|relevant|)} 1/log2(i+2); "
    "MRR@k = 1/(i+1) for the first relevant position i<k, else 0; "
    "repeats within a group_id are macro-averaged, groups weigh equally; "
    "gain = candidate − baseline of the group means; ties within 1e-12"
)
LIMITATIONS: tuple[str, ...] = (
    "Relevance is supplied by the evaluator: the metrics are only as complete as each trial's "
    "relevant_node_ids.",
    "Every receipt carries one pack_id and content write sequence, so a write during the holdout "
    "is rejected; pack_digest describes the pack content at evaluation time and "
    "memory_artifact_sha256 is the caller's own claim about the frozen fixture.",
    "A positive holdout establishes improvement of full retrieval on these queries only; it says "
    "nothing about answer quality, truth, or transfer to another model, index, or task "
    "distribution.",
)


class FullRetrievalEvaluationConfig(Frozen):
    """Gate-2 settings (reference §F.1); the randomization test reuses ``bootstrap_samples``."""

    seed: int = 42
    k: int = Field(default=10, ge=1, le=1000)
    min_query_groups: int = Field(default=20, ge=2, le=100_000)
    bootstrap_samples: int = Field(default=2000, ge=100, le=10_000)
    min_ndcg_gain: UnitFloat = 0.01
    max_regression_fraction: UnitFloat = 0.1


class FullRetrievalTrial(Frozen):
    """One paired run of a query: a baseline and a candidate retrieval and the complete relevant set.

    ``relevant_node_ids`` must list every relevant memory for the query, including relevant
    memories that neither arm returned. Repeats and known paraphrases share one ``group_id``.
    """

    group_id: str
    baseline_request_id: UUID
    candidate_request_id: UUID
    relevant_node_ids: tuple[UUID, ...] = Field(min_length=1, max_length=MAX_RELEVANT)

    @field_validator("group_id")
    @classmethod
    def _group_id(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("group_id cannot be blank")
        if len(value) > MAX_GROUP_ID_CHARS:
            raise ValueError(f"group_id must be at most {MAX_GROUP_ID_CHARS} characters")
        return require_text(value, "group_id", identifier=True)

    @field_validator("relevant_node_ids")
    @classmethod
    def _unique(cls, value: tuple[UUID, ...]) -> tuple[UUID, ...]:
        if len(set(value)) != len(value):
            raise ValueError("relevant_node_ids must be unique")
        return value

    @model_validator(mode="after")
    def _two_requests(self) -> FullRetrievalTrial:
        if self.baseline_request_id == self.candidate_request_id:
            raise ValueError("A full retrieval trial must compare two different requests")
        return self

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.group_id, str(self.baseline_request_id))


class FullRetrievalQueryResult(Frozen):
    """One query group: its requests (in trial order) and its macro-averaged metrics per arm."""

    group_id: str
    normalized_queries: tuple[str, ...] = Field(min_length=1)
    baseline_request_ids: tuple[UUID, ...] = Field(min_length=1)
    candidate_request_ids: tuple[UUID, ...] = Field(min_length=1)
    baseline_recall: UnitFloat
    candidate_recall: UnitFloat
    baseline_ndcg: UnitFloat
    candidate_ndcg: UnitFloat
    baseline_mrr: UnitFloat
    candidate_mrr: UnitFloat

    @property
    def ndcg_diff(self) -> float:
        return self.candidate_ndcg - self.baseline_ndcg


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


def decide(
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
        for *_, passed in checks(
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


def checks(
    config: FullRetrievalEvaluationConfig,
    *,
    ndcg_gain: float,
    interval_low: float,
    baseline_recall: float,
    candidate_recall: float,
    regression_fraction: float,
) -> tuple[tuple[str, float, str, bool], ...]:
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
        checks(
            config,
            ndcg_gain=ndcg_gain,
            interval_low=interval_low,
            baseline_recall=baseline_recall,
            candidate_recall=candidate_recall,
            regression_fraction=regression_fraction,
        ),
        ((q.group_id, q.baseline_ndcg, q.candidate_ndcg) for q in queries),
    )


def input_checksum(
    *,
    user_id: str,
    scopes: tuple[Scope, ...] | None,
    proposal_input_checksum: str,
    memory_artifact_sha256: str,
    pack_digest: str,
    pack_id: str,
    write_seq: int,
    baseline_multipliers: RankingMultipliers,
    candidate_multipliers: RankingMultipliers,
    base_scoring: ScoringWeights,
    feature_identity: dict[str, Any],
    config: FullRetrievalEvaluationConfig,
    trials: Sequence[FullRetrievalTrial],
    receipt_checksums: dict[str, str],
) -> str:
    """SHA-256 of the canonical JSON of every input that shaped the report.

    ``trials`` must already be in report order (by group_id, then baseline request id).
    """
    return checksum(
        {
            "algorithm": ALGORITHM,
            "schema_version": 1,
            "surface": "results",
            "user_id": user_id,
            "scopes": None if scopes is None else [s.value for s in scopes],
            "proposal_input_checksum": proposal_input_checksum,
            "memory_artifact_sha256": memory_artifact_sha256,
            "pack_digest": pack_digest,
            "pack": {"pack_id": pack_id, "write_seq": write_seq},
            "baseline_multipliers": baseline_multipliers.model_dump(mode="json"),
            "candidate_multipliers": candidate_multipliers.model_dump(mode="json"),
            "base_scoring": base_scoring.model_dump(mode="json"),
            "feature_identity": feature_identity,
            "config": config.model_dump(mode="json"),
            "trials": [t.model_dump(mode="json") for t in trials],
            "receipt_checksums": dict(sorted(receipt_checksums.items())),
        }
    )


class FullRetrievalEvaluation(Frozen):
    """The gate-2 report: fresh paired retrievals on a frozen pack, scored on complete relevance."""

    schema_version: Literal[1] = 1
    algorithm: Literal["paired_full_retrieval_v1"] = ALGORITHM
    user_id: NonBlankStr
    scopes: tuple[Scope, ...] | None
    surface: Literal["results"] = "results"
    config: FullRetrievalEvaluationConfig
    proposal_input_checksum: Sha256Hex
    memory_artifact_sha256: Sha256Hex
    pack_digest: Sha256Hex
    pack_id: NonBlankStr
    # The receipts' content write sequence: the owner's for receipt schema 2, the pack's for 1.
    write_seq: int = Field(ge=0)
    input_checksum: Sha256Hex
    receipt_checksums: dict[str, Sha256Hex]
    feature_identity: dict[str, Any]
    feature_identity_sha256: Sha256Hex
    base_scoring: ScoringWeights
    baseline_multipliers: RankingMultipliers
    candidate_multipliers: RankingMultipliers
    decision: FullRetrievalDecision
    baseline_recall: UnitFloat
    candidate_recall: UnitFloat
    recall_gain: FiniteFloat = Field(ge=-1.0, le=1.0)
    baseline_ndcg: UnitFloat
    candidate_ndcg: UnitFloat
    ndcg_gain: FiniteFloat = Field(ge=-1.0, le=1.0)
    ndcg_gain_interval: tuple[FiniteFloat, FiniteFloat] | None
    baseline_mrr: UnitFloat
    candidate_mrr: UnitFloat
    mrr_gain: FiniteFloat = Field(ge=-1.0, le=1.0)
    regression_fraction: UnitFloat
    win_tie_loss: dict[str, int]
    randomization_p_value: UnitFloat | None
    gain_formula: str = GAIN_FORMULA
    coverage: dict[str, int]
    trials: tuple[FullRetrievalTrial, ...] = Field(min_length=1, max_length=MAX_TRIALS)
    queries: tuple[FullRetrievalQueryResult, ...] = Field(min_length=1)
    # insufficient_data only: how many more query groups the holdout needs.
    missing_query_groups: int | None = None
    # no_improvement only: the failed rules and the regressed groups (reports made before
    # refusals were recorded have none; then the field is absent from the dump).
    refusal: Refusal | None = None
    limitations: tuple[str, ...] = LIMITATIONS
    attestation: str | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("refusal", 0) is None:
            del out["refusal"]
        return out

    @model_validator(mode="after")
    def _consistent(self) -> FullRetrievalEvaluation:
        self._check_structure()
        self._check_metrics()
        self._check_refusal()
        if self.input_checksum != self._recomputed_input_checksum():
            raise ValueError("Full retrieval evaluation input checksum does not match its inputs")
        return self

    def _recomputed_input_checksum(self) -> str:
        return input_checksum(
            user_id=self.user_id,
            scopes=self.scopes,
            proposal_input_checksum=self.proposal_input_checksum,
            memory_artifact_sha256=self.memory_artifact_sha256,
            pack_digest=self.pack_digest,
            pack_id=self.pack_id,
            write_seq=self.write_seq,
            baseline_multipliers=self.baseline_multipliers,
            candidate_multipliers=self.candidate_multipliers,
            base_scoring=self.base_scoring,
            feature_identity=self.feature_identity,
            config=self.config,
            trials=self.trials,
            receipt_checksums=self.receipt_checksums,
        )

    def _check_structure(self) -> None:
        if self.scopes is not None and self.scopes != scope_set_key(self.scopes):
            raise ValueError("Full retrieval evaluation scopes must be a normalized scope set")
        if self.limitations != LIMITATIONS or self.gain_formula != GAIN_FORMULA:
            raise ValueError("Full retrieval evaluation limitations or gain formula were altered")
        if checksum(self.feature_identity) != self.feature_identity_sha256:
            raise ValueError("Full retrieval evaluation feature identity checksum mismatch")
        keys = [t.sort_key for t in self.trials]
        if keys != sorted(keys):
            raise ValueError("Full retrieval trials must be sorted by group_id and request id")
        groups = [q.group_id for q in self.queries]
        if groups != sorted(set(groups)):
            raise ValueError("Full retrieval queries must be unique and sorted by group_id")
        by_group: dict[str, tuple[list[UUID], list[UUID]]] = {}
        for trial in self.trials:
            base, cand = by_group.setdefault(trial.group_id, ([], []))
            base.append(trial.baseline_request_id)
            cand.append(trial.candidate_request_id)
        request_ids = [str(r) for b, c in by_group.values() for r in (*b, *c)]
        if (
            list(by_group) != groups
            or any(
                (list(q.baseline_request_ids), list(q.candidate_request_ids))
                != by_group[q.group_id]
                for q in self.queries
            )
            or len(set(request_ids)) != len(request_ids)
            or set(request_ids) != set(self.receipt_checksums)
        ):
            raise ValueError("Full retrieval evaluation request ids do not match its trials")
        for q in self.queries:
            if list(q.normalized_queries) != sorted(set(q.normalized_queries)) or any(
                normalize_query(text) != text or not text for text in q.normalized_queries
            ):
                raise ValueError("Full retrieval normalized_queries must be normalized and sorted")
        expected = {
            "trials": len(self.trials),
            "query_groups": len(self.queries),
            "relevant_nodes": sum(len(t.relevant_node_ids) for t in self.trials),
        }
        if self.coverage != expected:
            raise ValueError("Full retrieval evaluation coverage does not match its trials")

    def _check_metrics(self) -> None:
        agg = aggregate(self.queries)
        for name in (
            "baseline_recall",
            "candidate_recall",
            "recall_gain",
            "baseline_ndcg",
            "candidate_ndcg",
            "ndcg_gain",
            "baseline_mrr",
            "candidate_mrr",
            "mrr_gain",
            "regression_fraction",
        ):
            if not math.isclose(
                getattr(self, name), getattr(agg, name), rel_tol=0.0, abs_tol=TIE_TOLERANCE
            ):
                raise ValueError(
                    f"Full retrieval evaluation aggregate metrics do not match its queries ({name})"
                )
        if self.win_tie_loss != agg.win_tie_loss:
            raise ValueError(
                "Full retrieval evaluation aggregate metrics do not match its queries "
                "(win_tie_loss)"
            )
        insufficient = len(self.queries) < self.config.min_query_groups
        missing = self.config.min_query_groups - len(self.queries) if insufficient else None
        if self.missing_query_groups != missing:
            raise ValueError("Full retrieval evaluation misstates its missing query groups")
        if insufficient:
            if self.ndcg_gain_interval is not None or self.randomization_p_value is not None:
                raise ValueError("Insufficient full retrieval evaluation is inconsistent")
        elif self.ndcg_gain_interval is None or self.randomization_p_value is None:
            raise ValueError("Full retrieval evaluation lacks required validation evidence")
        elif not (-1.0 <= self.ndcg_gain_interval[0] <= self.ndcg_gain_interval[1] <= 1.0):
            raise ValueError("Full retrieval evaluation interval must be ordered within [-1, 1]")
        rule = decide(
            self.config,
            len(self.queries),
            ndcg_gain=self.ndcg_gain,
            interval=self.ndcg_gain_interval,
            baseline_recall=self.baseline_recall,
            candidate_recall=self.candidate_recall,
            regression_fraction=self.regression_fraction,
        )
        if self.decision != rule:
            raise ValueError("Full retrieval evaluation decision does not match its evidence")

    def _check_refusal(self) -> None:
        if self.refusal is None:
            return
        if self.decision != "no_improvement" or self.ndcg_gain_interval is None:
            raise ValueError("Full retrieval evaluation refusal is only for no_improvement")
        expected = holdout_refusal(
            self.config,
            ndcg_gain=self.ndcg_gain,
            interval_low=self.ndcg_gain_interval[0],
            baseline_recall=self.baseline_recall,
            candidate_recall=self.candidate_recall,
            regression_fraction=self.regression_fraction,
            queries=self.queries,
        )
        if self.refusal != expected:
            raise ValueError("Full retrieval evaluation refusal does not match its evidence")
