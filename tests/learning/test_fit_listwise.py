"""The default fit ``listwise_ndcg_multipliers_v1`` on hand-built receipts (§M.9's fixture)."""

from __future__ import annotations

import math

import pytest
from support.gate1 import REFERENCE, reference_fixture, run

from prme.canonical import canonical_json
from prme.learning.groups import group_id, is_validation
from prme.learning.metrics import judged_ndcg
from prme.learning.verify_reports import ReportVerificationError, verify_report
from prme.models.learning import LearningConfig, LearningEvaluation, learning_input_checksum
from prme.models.scoring import RankingMultipliers

LISTWISE = LearningConfig()


def test_listwise_is_the_default_and_named_in_the_report() -> None:
    report = run(*reference_fixture())
    assert report.config.algorithm == report.algorithm == "listwise_ndcg_multipliers_v1"
    assert report.optimizer == "guarded_pattern_search_log_space_v1"


def test_the_smallest_move_that_keeps_the_gain() -> None:
    """Every group returns a lexical match a (relevant) and a semantic + graph match b. Only
    semantic, lexical and graph differ between them, so a outranks b iff
    ``0.25·m_s·(0.2−0.9) + 0.20·m_l·(0.9−0.1) + 0.20·m_g·(0−1) > 0``, i.e. with the other
    two neutral ``m_l > 0.375 / 0.16``. The search's first step (lexical +1 in log space)
    flips every training group; the shrink then keeps the smallest ``t/16`` of that step that
    still flips them: ``exp(14/16)``, since ``exp(13/16) < 0.375/0.16 < exp(14/16)``."""
    report = run(*reference_fixture())
    threshold = 0.375 / 0.16
    assert math.exp(13 / 16) < threshold < math.exp(14 / 16)
    assert report.multipliers == RankingMultipliers(lexical=math.exp(14 / 16))
    base_ndcg = judged_ndcg(["n", "p"], ["p"], 10)  # every training group at base: 1/log2(3)
    assert base_ndcg == pytest.approx(1 / math.log2(3))
    assert report.training_loss_before == pytest.approx(1 - base_ndcg, abs=1e-12)
    # After: every training group at NDCG 1, no regressions, the pull λ·(14/16)².
    assert report.training_loss_after == pytest.approx(0.01 * (14 / 16) ** 2, abs=1e-12)
    assert report.decision == "improved_on_observed_candidates"
    assert report.validation_ndcg_gain == pytest.approx(1 - base_ndcg, abs=1e-12)
    # The reference fit moves every feature to get the same rankings.
    reference = run(*reference_fixture(), config=REFERENCE)
    assert reference.validation_ndcg_gain == report.validation_ndcg_gain
    assert sum(v != 1.0 for v in reference.multipliers.as_tuple()) == 6


def test_a_move_that_regresses_too_many_training_groups_is_not_taken() -> None:
    # Reversing the labels of every 7th group: raising lexical helps 6 groups in 7 and makes
    # the 7th worse than base. More than 10 % of training groups would regress, so the fit
    # stays neutral; the reference fit still raises lexical.
    flipped = set(range(0, 100, 7))
    training = [
        i for i in range(100) if not is_validation(42, group_id(["query", f"query {i}"]), 0.3)
    ]
    share = sum(1 for i in training if i in flipped) / len(training)
    assert share > 0.1
    report = run(*reference_fixture(flip=flipped))
    assert report.multipliers.is_neutral
    assert report.training_loss_after == report.training_loss_before
    assert report.decision == "no_improvement"
    reference = run(*reference_fixture(flip=flipped), config=REFERENCE)
    assert reference.multipliers.lexical > 1.0


def test_the_fit_never_ends_worse_than_neutral_on_its_loss() -> None:
    for flip in (set(), set(range(100)), set(range(0, 100, 2)), set(range(0, 100, 3))):
        report = run(*reference_fixture(flip=flip))
        assert report.training_loss_after is not None and report.training_loss_before is not None
        assert report.training_loss_after <= report.training_loss_before
        assert all(0.25 <= m <= 4.0 for m in report.multipliers.as_tuple())


def test_reference_reports_keep_their_bytes_and_identity() -> None:
    """A reference-fit report dumps its config without ``algorithm`` (as before it was a
    setting), so its checksum and attestation inputs are unchanged; it still parses back."""
    reference = run(*reference_fixture(), config=REFERENCE)
    dumped = reference.model_dump(mode="json")
    assert "algorithm" not in dumped["config"]
    assert dumped["algorithm"] == "pairwise_weight_multipliers_v1"
    assert LearningEvaluation.model_validate(dumped) == reference
    assert LearningEvaluation.model_validate_json(canonical_json(reference)) == reference
    listwise = run(*reference_fixture())
    assert listwise.model_dump(mode="json")["config"]["algorithm"] == listwise.algorithm
    assert LearningEvaluation.model_validate_json(canonical_json(listwise)) == listwise
    # The algorithm is bound by the input checksum.
    assert listwise.input_checksum != reference.input_checksum
    assert listwise.input_checksum == learning_input_checksum(
        snapshot_checksum=listwise.snapshot_checksum,
        user_id="alice",
        scopes=listwise.scopes,
        surface="results",
        config=LISTWISE,
        query_groups=None,
    )
    # A report whose algorithm disagrees with its config fails verification.
    edited = dumped | {"config": {**dumped["config"], "algorithm": "listwise_ndcg_multipliers_v1"}}
    with pytest.raises(ReportVerificationError, match="algorithm"):
        verify_report(LearningEvaluation.model_validate(edited))
