"""Gate-2 models: paired full-retrieval trials, the gate's configuration, and its report.

The report is plain data: parsing checks each field. Its consistency (reference §F.6: sort
orders, request-id consistency, coverage, every aggregate, the decision rule and the
``input_checksum``) is verified explicitly by
:func:`prme.learning.verify_reports.verify_full_retrieval_evaluation` wherever a report is read
or received, so an edited report is refused; a consistently fabricated one is caught only by its
attestation (``prme.services.reports.verify``).
"""

from __future__ import annotations

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
from prme.limits import MAX_RELEVANT, MAX_TRIALS
from prme.models.base import FiniteFloat, Frozen, NonBlankStr, Sha256Hex, UnitFloat
from prme.models.enums import Scope
from prme.models.refusal import Refusal
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
