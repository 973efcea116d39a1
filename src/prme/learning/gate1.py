"""Gate 1: fit bounded weight multipliers from explicit judgments on observed candidates (§E).

Everything here is pure: no storage, clock, environment or global RNG, and the same inputs in
any order give the same report. Two entry points share one core:

- :func:`evaluate_learning` takes whole receipts and relevance records (tests, notebooks);
- :func:`evaluate_judgments` takes each record with its :class:`JudgmentEvidence` — the columns
  of the labelled candidates the engine cut from the verified receipt when it admitted the
  judgment — so the engine never re-parses thousands of whole receipts.

Both reduce to a :class:`Snapshot` and produce byte-identical reports for the same judgments.
Rescoring uses each receipt's **pre-multiplier** weights: ``adjusted_weights(weights, m)``. The
baseline is neutral multipliers over those weights (base scoring); multipliers recorded at
retrieval time are only used to check that the judged scores replay (DESIGN §6.4).

The modules of gate 1, by concern: :mod:`~prme.learning.snapshot` (identity-checked inputs),
:mod:`~prme.learning.observations` (labels, exclusions, groups),
:mod:`~prme.learning.table` (the columnar feature table, exact replay, positions, metrics),
:mod:`~prme.learning.fitting` (the algorithms by name: :mod:`~prme.learning.fit_listwise`,
the default, and :mod:`~prme.learning.fit_pairwise`, the reference), and this module
(evaluation and the report).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple
from uuid import UUID

from pydantic import TypeAdapter

from prme.bulk import gc_paused
from prme.canonical import checksum
from prme.learning.decisions import decide_proposal, missing_groups, proposal_refusal
from prme.learning.fitting import fit_multipliers
from prme.learning.observations import (
    GateRequest,
    Observations,
    ObservedGroup,
    gate_request,
    observe_request,
)
from prme.learning.snapshot import (
    Judgment,
    Snapshot,
    snapshot_from_judgments,
    snapshot_from_receipts,
)
from prme.learning.stats import (
    mean,
    percentile_bootstrap_interval,
    sign_flip_p_value,
    win_tie_loss,
)
from prme.learning.table import JudgedTable
from prme.learning.verify_reports import verify_learning_evaluation
from prme.models.learning import (
    OPTIMIZERS,
    Decision,
    LearningConfig,
    LearningEvaluation,
    QueryLearningResult,
    learning_input_checksum,
)
from prme.models.receipt import RetrievalReceipt
from prme.models.relevance import RelevanceRecord
from prme.models.scope import ScopeInput
from prme.models.scoring import RankingMultipliers

_TEXT_KEYS = TypeAdapter(dict[UUID, str])


# ---------------------------------------------------------------------------------- metrics
def _group_results(
    groups: list[ObservedGroup],
    baseline: tuple[list[float], list[float]],
    candidate: tuple[list[float], list[float]],
) -> tuple[QueryLearningResult, ...]:
    """One result per group: its requests' mean metrics, baseline vs candidate."""
    results = []
    start = 0
    for group in groups:
        end = start + len(group.requests)
        results.append(
            QueryLearningResult(
                group_id=group.group_id,
                group_label=group.label,
                normalized_queries=tuple(sorted(group.queries)),
                split="validation" if group.validation else "train",
                request_ids=tuple(r.request_id for r in group.requests),
                baseline_pairwise_accuracy=mean(baseline[0][start:end]),
                candidate_pairwise_accuracy=mean(candidate[0][start:end]),
                baseline_judged_ndcg=mean(baseline[1][start:end]),
                candidate_judged_ndcg=mean(candidate[1][start:end]),
            )
        )
        start = end
    return tuple(results)


def evaluate_learning(
    receipts: Iterable[RetrievalReceipt],
    records: Iterable[RelevanceRecord],
    *,
    user_id: str,
    scopes: ScopeInput = None,
    surface: str = "results",
    config: LearningConfig | Mapping[str, Any] | None = None,
    query_groups: Mapping[Any, str] | None = None,
) -> LearningEvaluation:
    """Fit ranking multipliers on training query groups and judge them on validation groups.

    Args:
        receipts: the owner's saved receipts (at least those the records reference).
        records: the owner's relevance records; identical duplicates collapse.
        user_id: the owner every receipt and record must belong to.
        scopes: the exact scope set to learn for (normalized; None = unfiltered receipts only).
        surface: ``"results"`` or ``"context"``; records of the other surface are excluded.
        config: a LearningConfig (or its fields); defaults per reference §E.1.
        query_groups: ``{request_id: group name}`` merging paraphrases into named groups.

    Returns:
        An unattested LearningEvaluation (decision ``insufficient_data``, ``no_improvement``
        or ``improved_on_observed_candidates``).

    Raises:
        InvalidInputError: any §E.3 validation failure, a replay mismatch, or too many pairs;
            the field names the offending argument.
    """
    asked = gate_request(user_id, scopes, surface, config)
    with gc_paused():
        snapshot = snapshot_from_receipts(receipts, records, asked.user_id)
        return _evaluate(snapshot, asked, query_groups)


def evaluate_judgments(
    judgments: Iterable[Judgment],
    *,
    user_id: str,
    scopes: ScopeInput = None,
    surface: str = "results",
    config: LearningConfig | Mapping[str, Any] | None = None,
    query_groups: Mapping[Any, str] | None = None,
) -> LearningEvaluation:
    """:func:`evaluate_learning` over records with their stored evidence (the engine's path).

    The snapshot's receipts are exactly the judged ones; the report equals
    ``evaluate_learning(judged receipts, records, ...)`` byte for byte.
    """
    asked = gate_request(user_id, scopes, surface, config)
    with gc_paused():
        snapshot = snapshot_from_judgments(judgments, asked.user_id)
        return _evaluate(snapshot, asked, query_groups)


def _report_identity(obs: Observations, coverage: dict[str, int]) -> dict[str, Any]:
    """The fields every gate-1 report has, whatever it decides: what was asked, over which
    judgments and receipts (the snapshot checksum), and the input checksum that binds them."""
    cfg = obs.config
    explicit = obs.query_groups
    snapshot_checksum = checksum(
        {
            "receipts": _TEXT_KEYS.dump_python(obs.receipt_checksums, mode="json"),
            "records": _TEXT_KEYS.dump_python(obs.record_checksums, mode="json"),
            "query_groups": None if explicit is None else {str(k): v for k, v in explicit.items()},
        }
    )
    return {
        "algorithm": cfg.algorithm,
        "optimizer": OPTIMIZERS[cfg.algorithm],
        "user_id": obs.user_id,
        "scopes": obs.scopes,
        "surface": obs.surface,
        "config": cfg,
        "query_groups": explicit,
        "snapshot_checksum": snapshot_checksum,
        "input_checksum": learning_input_checksum(
            snapshot_checksum=snapshot_checksum,
            user_id=obs.user_id,
            scopes=obs.scopes,
            surface=obs.surface,
            config=cfg,
            query_groups=explicit,
        ),
        "feedback_ids": obs.feedback_ids,
        "receipt_checksums": obs.receipt_checksums,
        "coverage": coverage,
        "exclusions": obs.exclusions,
    }


def _evaluate(
    snapshot: Snapshot, asked: GateRequest, query_groups: Mapping[Any, str] | None
) -> LearningEvaluation:
    """The report, verified once (:func:`verify_learning_evaluation`): the gate builds it
    consistently, so this only turns a bug into an error instead of a stored report."""
    report = _report(snapshot, asked, query_groups)
    verify_learning_evaluation(report)
    return report


def _report(
    snapshot: Snapshot, asked: GateRequest, query_groups: Mapping[Any, str] | None
) -> LearningEvaluation:
    obs = observe_request(snapshot, asked, query_groups)
    cfg = obs.config
    train = obs.training
    requests = obs.requests
    table = JudgedTable(requests)
    baseline_scores = table.exact_scores(RankingMultipliers())
    table.check_replays(baseline_scores)
    coverage = {
        "feedback_records": len(obs.feedback_ids),
        "requests_with_pairs": len(requests),
        "training_queries": len(train),
        "validation_queries": len(obs.groups) - len(train),
        "explicit_pairs": sum(len(r.positive_ids) * len(r.negative_ids) for r in requests),
    }
    common = _report_identity(obs, coverage)
    if (
        coverage["training_queries"] < cfg.min_training_queries
        or coverage["validation_queries"] < cfg.min_validation_queries
    ):
        return LearningEvaluation(
            **common,
            multipliers=RankingMultipliers(),
            decision="insufficient_data",
            training_loss_before=None,
            training_loss_after=None,
            validation_ndcg_gain=None,
            validation_pairwise_gain=None,
            validation_gain_interval=None,
            win_tie_loss=None,
            randomization_p_value=None,
            queries=(),
            missing_groups=missing_groups(coverage, cfg),
        )

    # ---- fit on training groups only, then rank every request with the exact replay
    fitted, before, after = fit_multipliers(obs, table)
    baseline = table.metrics(table.positions(baseline_scores), cfg.ndcg_k)
    judged = judge_multipliers(obs, table, baseline, fitted)
    gain, pairwise_gain, interval = judged.gain, judged.pairwise_gain, judged.interval
    return LearningEvaluation(
        **common,
        multipliers=fitted,
        decision=judged.decision,
        refusal=None
        if judged.decision != "no_improvement"
        else proposal_refusal(gain, interval[0], pairwise_gain, cfg.min_ndcg_gain, judged.results),
        training_loss_before=before,
        training_loss_after=after,
        validation_ndcg_gain=gain,
        validation_pairwise_gain=pairwise_gain,
        validation_gain_interval=interval,
        win_tie_loss=win_tie_loss(judged.diffs),
        randomization_p_value=sign_flip_p_value(
            judged.diffs, samples=cfg.bootstrap_samples, seed=cfg.seed
        ),
        queries=judged.results,
    )


class JudgedMultipliers(NamedTuple):
    """Multipliers judged on the validation groups, as gate 1 judges its proposal."""

    results: tuple[QueryLearningResult, ...]  # every group, baseline vs candidate
    diffs: list[float]  # candidate − baseline judged NDCG per validation group, in group order
    gain: float
    pairwise_gain: float
    interval: tuple[float, float]
    decision: Decision


def judge_multipliers(
    obs: Observations,
    table: JudgedTable,
    baseline: tuple[list[float], list[float]],
    multipliers: RankingMultipliers,
) -> JudgedMultipliers:
    """Rank every observed request under ``multipliers`` with the exact replay and apply §E.11
    to the validation groups against ``baseline`` (``table.metrics`` under neutral
    multipliers): gate 1's own decision, for its fitted proposal or any other multipliers
    (``bench/quality.py --ceiling`` scores a grid with it)."""
    cfg = obs.config
    candidate = table.metrics(table.positions(table.exact_scores(multipliers)), cfg.ndcg_k)
    results = _group_results(obs.groups, baseline, candidate)
    held_out = [q for q in results if q.split == "validation"]
    diffs = [q.ndcg_diff for q in held_out]
    gain = mean(diffs)
    pairwise_gain = mean([q.pairwise_diff for q in held_out])
    interval = percentile_bootstrap_interval(diffs, samples=cfg.bootstrap_samples, seed=cfg.seed)
    decision = decide_proposal(gain, interval[0], pairwise_gain, cfg.min_ndcg_gain)
    return JudgedMultipliers(results, diffs, gain, pairwise_gain, interval, decision)
