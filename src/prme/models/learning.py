"""Gate 1 models: LearningConfig, QueryLearningResult and the LearningEvaluation report (§E).

The report is plain data: parsing checks each field; its internal invariants (reference §E.13),
including the decision rule and the input checksum, are verified explicitly by
:func:`prme.learning.verify_reports.verify_learning_evaluation` wherever a report is read or
received, so an edited report is refused. Verification cannot check that the numbers came from
real receipts; the pack's attestation covers that (DESIGN §6.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal
from uuid import UUID

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    model_serializer,
    model_validator,
)

from prme.canonical import checksum
from prme.models.base import FiniteFloat, Frozen, NonBlankStr, Sha256Hex
from prme.models.enums import Scope
from prme.models.refusal import Refusal
from prme.models.relevance import RelevanceSurface
from prme.models.scoring import RankingMultipliers

Algorithm = Literal["listwise_ndcg_multipliers_v1", "pairwise_weight_multipliers_v1"]
Optimizer = Literal["guarded_pattern_search_log_space_v1", "coordinate_descent_log_space_v1"]
# Each fitting algorithm and the optimizer that fits it (the report records both).
OPTIMIZERS: Final[dict[str, Optimizer]] = {
    "listwise_ndcg_multipliers_v1": "guarded_pattern_search_log_space_v1",
    "pairwise_weight_multipliers_v1": "coordinate_descent_log_space_v1",
}
DEFAULT_ALGORITHM: Final = "listwise_ndcg_multipliers_v1"
REFERENCE_ALGORITHM: Final = "pairwise_weight_multipliers_v1"
TOLERANCE = 1e-12
COVERAGE_KEYS = (
    "feedback_records",
    "requests_with_pairs",
    "training_queries",
    "validation_queries",
    "explicit_pairs",
)
EXCLUSION_KEYS = (
    "other_surface_records",
    "other_scope_records",
    "legacy_receipt_records",
    "rank_fusion_receipt_records",
    "conflicting_candidate_labels",
    "requests_without_explicit_pairs",
)
GAIN_FORMULA = (
    "validation_ndcg_gain = mean over validation groups of (candidate − baseline judged NDCG@k); "
    "a group's value is the mean over its requests; judged NDCG@k = DCG/IDCG over the judged "
    "candidates only, binary gains, DCG = Σ_{i<k, order[i] positive} 1/log2(i+2) with 0-based i, "
    "IDCG = Σ_{i<min(k, #positives)} 1/log2(i+2)"
)
LIMITATIONS = (
    "Replays only the candidates each saved receipt returned, with their recorded features; "
    "candidate generation, filtering, selection and packing are not re-run, so this is not a "
    "full-retrieval replay.",
    "Only explicit judgments count: unlabelled candidates are never negatives, and a candidate "
    "with both positive and negative labels is dropped and counted.",
    "Requests share a group only when their normalized queries are equal; paraphrases share a "
    "group only when the caller names it in query_groups.",
    "An offline gain on observed candidates does not authorize activation; a fresh "
    "full-retrieval holdout must pass as well.",
    "Multipliers are fitted on and applied to each receipt's pre-multiplier weights, never on top "
    "of the multipliers recorded at retrieval time; the baseline is base scoring (neutral "
    "multipliers) over those weights, which differs from the served ranking when a profile or "
    "request multipliers were active.",
    "The fit evaluates the loss with a vectorized float form of the weighted formula (without "
    "its final 10-decimal rounding); every reported ordering and metric uses the exact scalar "
    "replay.",
)
TRAINING_LOSS = {
    "listwise_ndcg_multipliers_v1": (
        "training loss = 1 − mean over training groups of judged NDCG@k + mean over training "
        "groups of max(0, base − candidate judged NDCG@k) + regularization·Σ(ln m)²; moves that "
        "regress more than the holdout's max_regression_fraction of training groups are not taken"
    ),
    "pairwise_weight_multipliers_v1": (
        "training loss = mean over training groups, their requests and explicit pairs of "
        "softplus(margin_scale·(s_negative − s_positive)) + regularization·Σ(ln m)²"
    ),
}

Decision = Literal["insufficient_data", "no_improvement", "improved_on_observed_candidates"]
Split = Literal["train", "validation"]


class LearningConfig(Frozen):
    """Gate-1 settings (reference §E.1); every float must be finite.

    Args:
        algorithm: the fit. ``listwise_ndcg_multipliers_v1`` (default) maximizes the training
            groups' judged NDCG@k with a guard against regressed groups and shrinks towards
            neutral; ``pairwise_weight_multipliers_v1`` is the reference pairwise logistic fit.
        seed: split, bootstrap and randomization seed.
        validation_fraction: share of query groups used for validation, 0 < x < 1.
        min_training_queries / min_validation_queries: groups needed (≥ 2) before fitting.
        regularization: weight of the Σ (ln m)² pull towards neutral, > 0.
        margin_scale: scale of the score margin in the logistic loss (pairwise fit only),
            0 < x ≤ 100.
        passes_per_step: coordinate passes per step size, 1–20.
        ndcg_k: judged NDCG cutoff, 1–1000.
        bootstrap_samples: resamples of the paired bootstrap (and sign-flip rounds), 100–10000.
        min_ndcg_gain: smallest validation NDCG gain that counts as improvement, 0–1.
        max_pairs_per_request: pairs one request may contribute before the call fails.
    """

    algorithm: Algorithm = DEFAULT_ALGORITHM
    seed: StrictInt = 42
    validation_fraction: FiniteFloat = Field(default=0.3, gt=0.0, lt=1.0)
    min_training_queries: StrictInt = Field(default=20, ge=2)
    min_validation_queries: StrictInt = Field(default=20, ge=2)
    regularization: FiniteFloat = Field(default=0.01, gt=0.0)
    margin_scale: FiniteFloat = Field(default=5.0, gt=0.0, le=100.0)
    passes_per_step: StrictInt = Field(default=4, ge=1, le=20)
    ndcg_k: StrictInt = Field(default=10, ge=1, le=1000)
    bootstrap_samples: StrictInt = Field(default=2000, ge=100, le=10000)
    min_ndcg_gain: FiniteFloat = Field(default=0.01, ge=0.0, le=1.0)
    max_pairs_per_request: StrictInt = Field(default=10000, ge=1, le=1_000_000)


class QueryLearningResult(Frozen):
    """One query group's metrics, each the mean over the group's requests."""

    group_id: Sha256Hex
    group_label: str
    normalized_queries: tuple[str, ...] = Field(min_length=1)
    split: Split
    request_ids: tuple[UUID, ...] = Field(min_length=1)
    baseline_pairwise_accuracy: FiniteFloat = Field(ge=0.0, le=1.0)
    candidate_pairwise_accuracy: FiniteFloat = Field(ge=0.0, le=1.0)
    baseline_judged_ndcg: FiniteFloat = Field(ge=0.0, le=1.0)
    candidate_judged_ndcg: FiniteFloat = Field(ge=0.0, le=1.0)

    @property
    def ndcg_diff(self) -> float:
        return self.candidate_judged_ndcg - self.baseline_judged_ndcg

    @property
    def pairwise_diff(self) -> float:
        return self.candidate_pairwise_accuracy - self.baseline_pairwise_accuracy


def learning_input_checksum(
    *,
    snapshot_checksum: str,
    user_id: str,
    scopes: Sequence[Scope] | None,
    surface: str,
    config: LearningConfig,
    query_groups: Mapping[UUID, str] | None,
) -> str:
    """SHA-256 of the canonical ``{algorithm, snapshot_checksum, user_id, scopes, surface, config,
    query_groups}``: everything that shaped the proposal. The algorithm is bound once, at the
    top level (``config`` is dumped without it), so reports of the reference fit keep the
    identity they had before the algorithm became a setting."""
    return checksum(
        {
            "algorithm": config.algorithm,
            "snapshot_checksum": snapshot_checksum,
            "user_id": user_id,
            "scopes": None if scopes is None else [Scope(s).value for s in scopes],
            "surface": surface,
            "config": config.model_dump(mode="json", exclude={"algorithm"}),
            "query_groups": None
            if query_groups is None
            else {str(k): v for k, v in query_groups.items()},
        }
    )


class LearningEvaluation(Frozen):
    """The gate-1 report: a proposal fitted on training groups and judged on validation groups.

    ``snapshot_checksum`` binds the receipts (by checksum), judgments and query groups used;
    ``input_checksum`` additionally binds owner, scopes, surface, config and algorithm, and is
    the proposal's identity for gate 2 and profile creation. ``attestation`` is the pack's
    HMAC over the rest of the report.
    """

    schema_version: Literal[1] = 1
    algorithm: Algorithm
    optimizer: Optimizer
    user_id: NonBlankStr
    scopes: tuple[Scope, ...] | None
    surface: RelevanceSurface
    config: LearningConfig
    query_groups: dict[UUID, NonBlankStr] | None
    snapshot_checksum: Sha256Hex
    input_checksum: Sha256Hex
    feedback_ids: tuple[UUID, ...]
    receipt_checksums: dict[UUID, Sha256Hex]
    multipliers: RankingMultipliers
    decision: Decision
    training_loss_before: FiniteFloat | None
    training_loss_after: FiniteFloat | None
    validation_ndcg_gain: FiniteFloat | None
    validation_pairwise_gain: FiniteFloat | None
    validation_gain_interval: tuple[FiniteFloat, FiniteFloat] | None
    win_tie_loss: dict[str, int] | None
    randomization_p_value: FiniteFloat | None = Field(ge=0.0, le=1.0)
    gain_formula: str = GAIN_FORMULA
    coverage: dict[str, int]
    exclusions: dict[str, int]
    queries: tuple[QueryLearningResult, ...]
    # insufficient_data only: how many more groups each split needs to reach its minimum.
    missing_groups: dict[str, int] | None = None
    # no_improvement only: the failed rules and the regressed validation groups (reports made
    # before refusals were recorded have none).
    refusal: Refusal | None = None
    limitations: tuple[str, ...] = LIMITATIONS
    attestation: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _algorithm_of_earlier_reports(cls, data: Any) -> Any:
        """A reference-fit report's config is stored without ``algorithm`` (see the serializer):
        it is the report's own ``algorithm``. Reports written before the algorithm was a setting
        are reference-fit reports."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        data.setdefault("algorithm", REFERENCE_ALGORITHM)
        data.setdefault("optimizer", OPTIMIZERS.get(data["algorithm"], ""))
        config = data.get("config")
        if isinstance(config, Mapping) and "algorithm" not in config:
            data["config"] = {**config, "algorithm": data["algorithm"]}
        return data

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Reference-fit reports dump exactly as before the algorithm was a setting (config
        without ``algorithm``, no ``refusal`` when none), so their bytes, checksums and
        attestations are unchanged; the top-level ``algorithm`` names the fit either way."""
        out: dict[str, Any] = handler(self)
        if self.algorithm == REFERENCE_ALGORITHM and isinstance(out.get("config"), dict):
            out["config"] = {k: v for k, v in out["config"].items() if k != "algorithm"}
        if out.get("refusal", 0) is None:
            del out["refusal"]
        return out
