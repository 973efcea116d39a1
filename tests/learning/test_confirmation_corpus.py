"""Issue 16's learnable case, end to end with the default MiniLM embedder on a real pack.

Terse confirmed facts (confidence 0.86–0.98) compete with rumours, pitches and open questions
that repeat the question's words (confidence 0.45–0.70): similarity favours the hearsay, only
confidence tells the confirmed fact. Every judged top-10 list labels each returned memory, both
gates run through the public client (``prme.demo.simulation.run_workflow``) and the holdout queries
are other (project, aspect) groups on the frozen pack.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prme.demo.simulation import RunResult, SimulationSettings, run_workflow
from prme.models.scoring import ADDITIVE_FEATURES

SEED = 0


def _run(tmp_path: Path, algorithm: str) -> RunResult:
    settings = SimulationSettings(
        projects=30,
        embedding="minilm",
        workload="confirmation",
        algorithm=algorithm,  # type: ignore[arg-type]
    )
    return run_workflow(tmp_path / "pack", seed=SEED, signal=1.0, settings=settings)


def _largest(result: RunResult) -> str:
    return max(ADDITIVE_FEATURES, key=lambda name: result.multipliers[name])


@pytest.fixture(scope="module")
def listwise(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return _run(tmp_path_factory.mktemp("listwise"), "listwise_ndcg_multipliers_v1")


@pytest.fixture(scope="module")
def pairwise(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return _run(tmp_path_factory.mktemp("pairwise"), "pairwise_weight_multipliers_v1")


def test_default_fit_passes_both_gates_with_confidence_largest(listwise: RunResult) -> None:
    assert listwise.gate1_validation_groups >= 20
    assert listwise.gate1_decision == "improved_on_observed_candidates"
    assert listwise.gate2_decision == "improved_full_retrieval"
    assert _largest(listwise) == "confidence"
    assert listwise.multipliers["confidence"] > 1.0
    assert listwise.gate2_regression_fraction is not None
    assert listwise.gate2_regression_fraction <= 0.1
    # Conservative: features the training groups give no reason to move stay exactly neutral.
    assert [f for f in ADDITIVE_FEATURES if listwise.multipliers[f] != 1.0] == [
        "semantic",
        "lexical",
        "confidence",
    ]


def test_reference_fit_on_the_same_corpus(pairwise: RunResult, listwise: RunResult) -> None:
    """What ``pairwise_weight_multipliers_v1`` does here: it passes too, with confidence at the
    upper bound (clamped) and every other feature moved off neutral — its loss rewards margins,
    not rankings, so it pushes features the judged rankings do not need."""
    assert pairwise.gate1_decision == "improved_on_observed_candidates"
    assert pairwise.gate2_decision == "improved_full_retrieval"
    assert _largest(pairwise) == "confidence"
    assert pairwise.multipliers["confidence"] == 4.0
    moved = [f for f in ADDITIVE_FEATURES if pairwise.multipliers[f] != 1.0]
    assert set(moved) > {"semantic", "lexical", "confidence"}
    # Same judged lists, same holdout groups: the baselines are the same retrievals.
    assert pairwise.gate2_baseline_ndcg == listwise.gate2_baseline_ndcg
