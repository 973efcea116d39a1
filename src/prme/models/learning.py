"""Gate 1 models: LearningConfig, QueryLearningResult and the LearningEvaluation report (§E).

The report re-checks its own internal invariants on every parse (reference §E.13), including the
decision rule and the input checksum, so an edited report fails to load. It cannot check that
the numbers came from real receipts; the pack's attestation covers that (DESIGN §6.1).
"""

from __future__ import annotations

import math
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
from prme.learning.stats import mean, win_tie_loss
from prme.models.base import FiniteFloat, Frozen, NonBlankStr, Sha256Hex
from prme.models.enums import Scope
from prme.models.refusal import Refusal, refusal
from prme.models.relevance import RelevanceSurface
from prme.models.scope import scope_set_key
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


def checks(
    ndcg_gain: float, interval_low: float, pairwise_gain: float, min_ndcg_gain: float
) -> tuple[tuple[str, float, str, bool], ...]:
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


def decide(
    ndcg_gain: float, interval_low: float, pairwise_gain: float, min_ndcg_gain: float
) -> Decision:
    """§E.11: improved iff gain ≥ min_ndcg_gain, interval low > 0 and pairwise gain ≥ −1e-12."""
    if all(passed for *_, passed in checks(ndcg_gain, interval_low, pairwise_gain, min_ndcg_gain)):
        return "improved_on_observed_candidates"
    return "no_improvement"


def learning_refusal(
    ndcg_gain: float,
    interval_low: float,
    pairwise_gain: float,
    min_ndcg_gain: float,
    queries: Sequence[QueryLearningResult],
) -> Refusal:
    """Why gate 1 refused: the failed rules and the regressed validation groups."""
    return refusal(
        checks(ndcg_gain, interval_low, pairwise_gain, min_ndcg_gain),
        (
            (q.group_label, q.baseline_judged_ndcg, q.candidate_judged_ndcg)
            for q in queries
            if q.split == "validation"
        ),
    )


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


def missing_groups(coverage: dict[str, int], config: LearningConfig) -> dict[str, int]:
    """Groups still needed per split: ``max(0, minimum − observed)`` for training and validation."""
    return {
        "training_queries": max(0, config.min_training_queries - coverage["training_queries"]),
        "validation_queries": max(
            0, config.min_validation_queries - coverage["validation_queries"]
        ),
    }


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

    @model_validator(mode="after")
    def _consistent(self) -> LearningEvaluation:
        if self.algorithm != self.config.algorithm:
            raise ValueError("report algorithm differs from config.algorithm")
        if self.optimizer != OPTIMIZERS[self.algorithm]:
            raise ValueError(
                f"algorithm {self.algorithm} is fitted by {OPTIMIZERS[self.algorithm]}"
            )
        if self.scopes is not None and scope_set_key(self.scopes) != self.scopes:
            raise ValueError("report scopes must be a non-empty, sorted, unique scope set")
        order = [f.int for f in self.feedback_ids]  # .int order is canonical-text order
        if order != sorted(set(order)):
            raise ValueError("feedback_ids must be unique and sorted")
        if set(self.coverage) != set(COVERAGE_KEYS):
            raise ValueError(f"coverage must have exactly the keys {list(COVERAGE_KEYS)}")
        if set(self.exclusions) != set(EXCLUSION_KEYS):
            raise ValueError(f"exclusions must have exactly the keys {list(EXCLUSION_KEYS)}")
        if any(v < 0 for v in (*self.coverage.values(), *self.exclusions.values())):
            raise ValueError("coverage and exclusion counts must be nonnegative")
        if self.coverage["feedback_records"] != len(self.feedback_ids):
            raise ValueError("aggregate metrics: feedback_records differs from feedback_ids")
        if self.query_groups is not None and not set(self.query_groups) <= set(
            self.receipt_checksums
        ):
            raise ValueError("Query groups refer to unknown receipts")
        expected = learning_input_checksum(
            snapshot_checksum=self.snapshot_checksum,
            user_id=self.user_id,
            scopes=self.scopes,
            surface=self.surface,
            config=self.config,
            query_groups=self.query_groups,
        )
        if expected != self.input_checksum:
            raise ValueError("Learning evaluation input checksum does not match its inputs")
        if self.decision == "insufficient_data":
            self._check_insufficient()
        else:
            self._check_fitted()
        return self

    def _check_insufficient(self) -> None:
        statistics = (
            self.training_loss_before,
            self.training_loss_after,
            self.validation_ndcg_gain,
            self.validation_pairwise_gain,
            self.validation_gain_interval,
            self.win_tie_loss,
            self.randomization_p_value,
        )
        if (
            not self.multipliers.is_neutral
            or self.queries
            or self.refusal is not None
            or any(s is not None for s in statistics)
        ):
            raise ValueError(
                "Insufficient learning evaluation is inconsistent: it must carry neutral "
                "multipliers, no queries and no statistics"
            )
        cfg = self.coverage
        if (
            cfg["training_queries"] >= self.config.min_training_queries
            and cfg["validation_queries"] >= self.config.min_validation_queries
        ):
            raise ValueError("Insufficient learning evaluation is inconsistent with its coverage")
        if self.missing_groups != missing_groups(cfg, self.config):
            raise ValueError("Insufficient learning evaluation misstates its missing groups")

    def _check_fitted(self) -> None:
        if self.missing_groups is not None:
            raise ValueError("missing_groups is reported only for insufficient_data")
        cfg = self.config
        if not self.queries:
            raise ValueError("Learning evaluation lacks required validation evidence")
        ids = [q.group_id for q in self.queries]
        if ids != sorted(set(ids)):
            raise ValueError("aggregate metrics: query groups must be unique and sorted by id")
        requests = [r for q in self.queries for r in q.request_ids]
        if len(set(requests)) != len(requests) or not set(requests) <= set(self.receipt_checksums):
            raise ValueError("aggregate metrics: request ids must be unique saved receipts")
        for query in self.queries:
            order = [r.int for r in query.request_ids]  # .int order is canonical-text order
            if order != sorted(order):
                raise ValueError("aggregate metrics: request ids must be sorted")
        train = [q for q in self.queries if q.split == "train"]
        validation = [q for q in self.queries if q.split == "validation"]
        cov = self.coverage
        if (
            cov["training_queries"] != len(train)
            or cov["validation_queries"] != len(validation)
            or cov["requests_with_pairs"] != len(requests)
        ):
            raise ValueError("aggregate metrics: coverage does not match the queries")
        if len(train) < cfg.min_training_queries or len(validation) < cfg.min_validation_queries:
            raise ValueError("Learning evaluation lacks required validation evidence")
        before, after = self.training_loss_before, self.training_loss_after
        gain, pairwise, interval = (
            self.validation_ndcg_gain,
            self.validation_pairwise_gain,
            self.validation_gain_interval,
        )
        if (
            before is None
            or after is None
            or gain is None
            or pairwise is None
            or interval is None
            or self.win_tie_loss is None
            or self.randomization_p_value is None
        ):
            raise ValueError("Learning evaluation lacks required validation evidence")
        if before < 0.0 or after < 0.0 or after > before + TOLERANCE:
            raise ValueError(
                "aggregate metrics: training losses must be nonnegative, nonincreasing"
            )
        diffs = [q.ndcg_diff for q in validation]
        if not math.isclose(gain, mean(diffs), rel_tol=0.0, abs_tol=TOLERANCE) or not (
            math.isclose(
                pairwise,
                mean([q.pairwise_diff for q in validation]),
                rel_tol=0.0,
                abs_tol=TOLERANCE,
            )
        ):
            raise ValueError("aggregate metrics do not match the validation queries")
        if not (-1.0 <= interval[0] <= interval[1] <= 1.0):
            raise ValueError("aggregate metrics: the gain interval must be ordered within [-1, 1]")
        if self.win_tie_loss != win_tie_loss(diffs):
            raise ValueError(
                "aggregate metrics: win_tie_loss does not match the validation queries"
            )
        if self.decision != decide(gain, interval[0], pairwise, cfg.min_ndcg_gain):
            raise ValueError("Learning evaluation decision does not match its metrics")
        if self.refusal is not None and (
            self.decision != "no_improvement"
            or self.refusal
            != learning_refusal(gain, interval[0], pairwise, cfg.min_ndcg_gain, self.queries)
        ):
            raise ValueError("Learning evaluation refusal does not match its metrics")
