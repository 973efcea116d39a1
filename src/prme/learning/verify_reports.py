"""Verifying an evaluation report: :func:`verify_report` re-derives everything a report states
about itself from its own fields (reference §E.13, §F.6).

The report models (:class:`~prme.models.learning.LearningEvaluation`,
:class:`~prme.models.holdout.FullRetrievalEvaluation`) are plain data: parsing checks each
field, not the report as a whole. This module checks the whole: sort orders, request-id
consistency, coverage, every aggregate, the decision rule, the refusal and the
``input_checksum``. It is called where a report comes from outside the gate that made it:
stored reports and profiles as they are read (``services.records``, so also ``pack check``),
and reports sent whole (``services.profile_creation.parse_report``: HTTP, MCP, the CLI and the
Python client); each gate verifies the report it builds, once. An edited report fails here; a
consistently fabricated one is caught only by its attestation (``prme.services.reports.verify``).
"""

from __future__ import annotations

import math
from uuid import UUID

from prme.canonical import checksum
from prme.learning import decisions
from prme.learning.groups import normalize_query
from prme.learning.stats import TIE_TOLERANCE, mean, win_tie_loss
from prme.models import holdout as gate2
from prme.models import learning as gate1
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.scope import scope_set_key


class ReportVerificationError(ValueError):
    """A report whose own fields contradict each other (an edited or hand-made report)."""


def verify_report(report: LearningEvaluation | FullRetrievalEvaluation) -> None:
    """Raise :class:`ReportVerificationError` unless ``report`` is consistent in itself
    (:func:`verify_learning_evaluation` or :func:`verify_full_retrieval_evaluation`)."""
    if isinstance(report, LearningEvaluation):
        verify_learning_evaluation(report)
    else:
        verify_full_retrieval_evaluation(report)


def _fail(message: str) -> ReportVerificationError:
    return ReportVerificationError(message)


# --------------------------------------------------------------------------------- gate 1
def verify_learning_evaluation(report: LearningEvaluation) -> None:
    """A gate-1 report: its algorithm and optimizer, scope set, sorted ids, coverage and
    exclusion keys, input checksum, then per decision its statistics and decision rule.

    Raises:
        ReportVerificationError: the first inconsistency found.
    """
    r = report
    if r.algorithm != r.config.algorithm:
        raise _fail("report algorithm differs from config.algorithm")
    if r.optimizer != gate1.OPTIMIZERS[r.algorithm]:
        raise _fail(f"algorithm {r.algorithm} is fitted by {gate1.OPTIMIZERS[r.algorithm]}")
    if r.scopes is not None and scope_set_key(r.scopes) != r.scopes:
        raise _fail("report scopes must be a non-empty, sorted, unique scope set")
    order = [f.int for f in r.feedback_ids]  # .int order is canonical-text order
    if order != sorted(set(order)):
        raise _fail("feedback_ids must be unique and sorted")
    if set(r.coverage) != set(gate1.COVERAGE_KEYS):
        raise _fail(f"coverage must have exactly the keys {list(gate1.COVERAGE_KEYS)}")
    if set(r.exclusions) != set(gate1.EXCLUSION_KEYS):
        raise _fail(f"exclusions must have exactly the keys {list(gate1.EXCLUSION_KEYS)}")
    if any(v < 0 for v in (*r.coverage.values(), *r.exclusions.values())):
        raise _fail("coverage and exclusion counts must be nonnegative")
    if r.coverage["feedback_records"] != len(r.feedback_ids):
        raise _fail("aggregate metrics: feedback_records differs from feedback_ids")
    if r.query_groups is not None and not set(r.query_groups) <= set(r.receipt_checksums):
        raise _fail("Query groups refer to unknown receipts")
    expected = gate1.learning_input_checksum(
        snapshot_checksum=r.snapshot_checksum,
        user_id=r.user_id,
        scopes=r.scopes,
        surface=r.surface,
        config=r.config,
        query_groups=r.query_groups,
    )
    if expected != r.input_checksum:
        raise _fail("Learning evaluation input checksum does not match its inputs")
    if r.decision == "insufficient_data":
        _check_insufficient(r)
    else:
        _check_fitted(r)


def _check_insufficient(r: LearningEvaluation) -> None:
    statistics = (
        r.training_loss_before,
        r.training_loss_after,
        r.validation_ndcg_gain,
        r.validation_pairwise_gain,
        r.validation_gain_interval,
        r.win_tie_loss,
        r.randomization_p_value,
    )
    if (
        not r.multipliers.is_neutral
        or r.queries
        or r.refusal is not None
        or any(s is not None for s in statistics)
    ):
        raise _fail(
            "Insufficient learning evaluation is inconsistent: it must carry neutral "
            "multipliers, no queries and no statistics"
        )
    cov = r.coverage
    if (
        cov["training_queries"] >= r.config.min_training_queries
        and cov["validation_queries"] >= r.config.min_validation_queries
    ):
        raise _fail("Insufficient learning evaluation is inconsistent with its coverage")
    if r.missing_groups != decisions.missing_groups(cov, r.config):
        raise _fail("Insufficient learning evaluation misstates its missing groups")


def _check_fitted(r: LearningEvaluation) -> None:
    if r.missing_groups is not None:
        raise _fail("missing_groups is reported only for insufficient_data")
    cfg = r.config
    if not r.queries:
        raise _fail("Learning evaluation lacks required validation evidence")
    ids = [q.group_id for q in r.queries]
    if ids != sorted(set(ids)):
        raise _fail("aggregate metrics: query groups must be unique and sorted by id")
    requests = [rid for q in r.queries for rid in q.request_ids]
    if len(set(requests)) != len(requests) or not set(requests) <= set(r.receipt_checksums):
        raise _fail("aggregate metrics: request ids must be unique saved receipts")
    for query in r.queries:
        order = [rid.int for rid in query.request_ids]  # .int order is canonical-text order
        if order != sorted(order):
            raise _fail("aggregate metrics: request ids must be sorted")
    train = [q for q in r.queries if q.split == "train"]
    validation = [q for q in r.queries if q.split == "validation"]
    cov = r.coverage
    if (
        cov["training_queries"] != len(train)
        or cov["validation_queries"] != len(validation)
        or cov["requests_with_pairs"] != len(requests)
    ):
        raise _fail("aggregate metrics: coverage does not match the queries")
    if len(train) < cfg.min_training_queries or len(validation) < cfg.min_validation_queries:
        raise _fail("Learning evaluation lacks required validation evidence")
    _check_statistics(r, validation)


def _check_statistics(r: LearningEvaluation, validation: list[gate1.QueryLearningResult]) -> None:
    cfg = r.config
    before, after = r.training_loss_before, r.training_loss_after
    gain, pairwise, interval = (
        r.validation_ndcg_gain,
        r.validation_pairwise_gain,
        r.validation_gain_interval,
    )
    if (
        before is None
        or after is None
        or gain is None
        or pairwise is None
        or interval is None
        or r.win_tie_loss is None
        or r.randomization_p_value is None
    ):
        raise _fail("Learning evaluation lacks required validation evidence")
    if before < 0.0 or after < 0.0 or after > before + gate1.TOLERANCE:
        raise _fail("aggregate metrics: training losses must be nonnegative, nonincreasing")
    diffs = [q.ndcg_diff for q in validation]
    pairwise_diffs = [q.pairwise_diff for q in validation]
    if not _close(gain, mean(diffs), gate1.TOLERANCE) or not _close(
        pairwise, mean(pairwise_diffs), gate1.TOLERANCE
    ):
        raise _fail("aggregate metrics do not match the validation queries")
    if not (-1.0 <= interval[0] <= interval[1] <= 1.0):
        raise _fail("aggregate metrics: the gain interval must be ordered within [-1, 1]")
    if r.win_tie_loss != win_tie_loss(diffs):
        raise _fail("aggregate metrics: win_tie_loss does not match the validation queries")
    if r.decision != decisions.decide_proposal(gain, interval[0], pairwise, cfg.min_ndcg_gain):
        raise _fail("Learning evaluation decision does not match its metrics")
    if r.refusal is not None and (
        r.decision != "no_improvement"
        or r.refusal
        != decisions.proposal_refusal(gain, interval[0], pairwise, cfg.min_ndcg_gain, r.queries)
    ):
        raise _fail("Learning evaluation refusal does not match its metrics")


def _close(observed: float, expected: float, tolerance: float) -> bool:
    return math.isclose(observed, expected, rel_tol=0.0, abs_tol=tolerance)


# --------------------------------------------------------------------------------- gate 2
def verify_full_retrieval_evaluation(report: FullRetrievalEvaluation) -> None:
    """A gate-2 report: its structure (scope set, fixed texts, feature identity checksum, sort
    orders, request ids, normalized queries, coverage), every aggregate and the decision, the
    refusal, then the input checksum.

    Raises:
        ReportVerificationError: the first inconsistency found.
    """
    _check_structure(report)
    _check_metrics(report)
    _check_refusal(report)
    if report.input_checksum != _recomputed_input_checksum(report):
        raise _fail("Full retrieval evaluation input checksum does not match its inputs")


def _recomputed_input_checksum(r: FullRetrievalEvaluation) -> str:
    return gate2.input_checksum(
        user_id=r.user_id,
        scopes=r.scopes,
        proposal_input_checksum=r.proposal_input_checksum,
        memory_artifact_sha256=r.memory_artifact_sha256,
        pack_digest=r.pack_digest,
        pack_id=r.pack_id,
        write_seq=r.write_seq,
        baseline_multipliers=r.baseline_multipliers,
        candidate_multipliers=r.candidate_multipliers,
        base_scoring=r.base_scoring,
        feature_identity=r.feature_identity,
        config=r.config,
        trials=r.trials,
        receipt_checksums=r.receipt_checksums,
    )


def _check_structure(r: FullRetrievalEvaluation) -> None:
    if r.scopes is not None and r.scopes != scope_set_key(r.scopes):
        raise _fail("Full retrieval evaluation scopes must be a normalized scope set")
    if r.limitations != gate2.LIMITATIONS or r.gain_formula != gate2.GAIN_FORMULA:
        raise _fail("Full retrieval evaluation limitations or gain formula were altered")
    if checksum(r.feature_identity) != r.feature_identity_sha256:
        raise _fail("Full retrieval evaluation feature identity checksum mismatch")
    keys = [t.sort_key for t in r.trials]
    if keys != sorted(keys):
        raise _fail("Full retrieval trials must be sorted by group_id and request id")
    groups = [q.group_id for q in r.queries]
    if groups != sorted(set(groups)):
        raise _fail("Full retrieval queries must be unique and sorted by group_id")
    by_group: dict[str, tuple[list[UUID], list[UUID]]] = {}
    for trial in r.trials:
        base, cand = by_group.setdefault(trial.group_id, ([], []))
        base.append(trial.baseline_request_id)
        cand.append(trial.candidate_request_id)
    request_ids = [str(rid) for b, c in by_group.values() for rid in (*b, *c)]
    if (
        list(by_group) != groups
        or any(
            (list(q.baseline_request_ids), list(q.candidate_request_ids)) != by_group[q.group_id]
            for q in r.queries
        )
        or len(set(request_ids)) != len(request_ids)
        or set(request_ids) != set(r.receipt_checksums)
    ):
        raise _fail("Full retrieval evaluation request ids do not match its trials")
    for q in r.queries:
        if list(q.normalized_queries) != sorted(set(q.normalized_queries)) or any(
            normalize_query(text) != text or not text for text in q.normalized_queries
        ):
            raise _fail("Full retrieval normalized_queries must be normalized and sorted")
    expected = {
        "trials": len(r.trials),
        "query_groups": len(r.queries),
        "relevant_nodes": sum(len(t.relevant_node_ids) for t in r.trials),
    }
    if r.coverage != expected:
        raise _fail("Full retrieval evaluation coverage does not match its trials")


_AGGREGATES = (
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
)


def _check_metrics(r: FullRetrievalEvaluation) -> None:
    agg = decisions.aggregate(r.queries)
    for name in _AGGREGATES:
        if not _close(getattr(r, name), getattr(agg, name), TIE_TOLERANCE):
            raise _fail(
                f"Full retrieval evaluation aggregate metrics do not match its queries ({name})"
            )
    if r.win_tie_loss != agg.win_tie_loss:
        raise _fail(
            "Full retrieval evaluation aggregate metrics do not match its queries (win_tie_loss)"
        )
    insufficient = len(r.queries) < r.config.min_query_groups
    missing = r.config.min_query_groups - len(r.queries) if insufficient else None
    if r.missing_query_groups != missing:
        raise _fail("Full retrieval evaluation misstates its missing query groups")
    if insufficient:
        if r.ndcg_gain_interval is not None or r.randomization_p_value is not None:
            raise _fail("Insufficient full retrieval evaluation is inconsistent")
    elif r.ndcg_gain_interval is None or r.randomization_p_value is None:
        raise _fail("Full retrieval evaluation lacks required validation evidence")
    elif not (-1.0 <= r.ndcg_gain_interval[0] <= r.ndcg_gain_interval[1] <= 1.0):
        raise _fail("Full retrieval evaluation interval must be ordered within [-1, 1]")
    rule = decisions.decide_holdout(
        r.config,
        len(r.queries),
        ndcg_gain=r.ndcg_gain,
        interval=r.ndcg_gain_interval,
        baseline_recall=r.baseline_recall,
        candidate_recall=r.candidate_recall,
        regression_fraction=r.regression_fraction,
    )
    if r.decision != rule:
        raise _fail("Full retrieval evaluation decision does not match its evidence")


def _check_refusal(r: FullRetrievalEvaluation) -> None:
    if r.refusal is None:
        return
    if r.decision != "no_improvement" or r.ndcg_gain_interval is None:
        raise _fail("Full retrieval evaluation refusal is only for no_improvement")
    expected = decisions.holdout_refusal(
        r.config,
        ndcg_gain=r.ndcg_gain,
        interval_low=r.ndcg_gain_interval[0],
        baseline_recall=r.baseline_recall,
        candidate_recall=r.candidate_recall,
        regression_fraction=r.regression_fraction,
        queries=r.queries,
    )
    if r.refusal != expected:
        raise _fail("Full retrieval evaluation refusal does not match its evidence")
