"""Gate reliability on a generated workload (never LoCoMo): the ``--quick`` null simulation.

Under the null every judged request's labels are permuted within the request, and every holdout
query's relevant labels are permuted over what the two arms returned, so no proposal can truly
improve anything: each pass is a false pass. With the workload's planted signal (confidence tells
the current fact from stale ones) both gates should pass almost always.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prme.demo.simulation import (
    GATE1_PASS,
    GATE2_PASS,
    RunResult,
    SimulationSettings,
    pass_rates,
    run_workflow,
    simulate,
    wilson_interval,
)
from prme.models.scoring import RankingMultipliers, ScoringWeights, adjusted_weights

QUICK_RUNS = 20
PLANTED_RUNS = 6
# The bounds issue 16 sets on false passes under the null: gate 1 alone, and both gates.
GATE1_BOUND = 0.05
BOTH_BOUND = 0.01


def test_null_simulation_rarely_passes_both_gates(tmp_path: Path) -> None:
    """The default fit under the null, quick: no rate significantly above its bound."""
    results = simulate(tmp_path, runs=QUICK_RUNS, signal=0.0, workers=2)
    rates = pass_rates(results)

    assert [r.seed for r in results] == list(range(QUICK_RUNS))
    assert rates["runs"] == QUICK_RUNS
    # Each 95 % Wilson interval's lower end stays at or below its bound (20 runs: at most 2
    # gate-1 false passes and at most 1 run through both gates).
    assert rates["gate1"]["interval95"][0] <= GATE1_BOUND
    assert rates["both"]["interval95"][0] <= BOTH_BOUND
    assert rates["both"]["passes"] <= rates["gate1"]["passes"]
    # the workload gives gate 1 enough groups: every run fits and decides
    assert "insufficient_data" not in rates["gate1_decisions"]
    assert all(r.gate1_validation_groups >= 20 for r in results)


def test_null_simulation_with_the_reference_fit(tmp_path: Path) -> None:
    """The reference fit under the null, quick. Its gate-1 false passes sit near the 5 % bound
    (200 runs: see bench/quality.py --parts reliability), so 20 runs can only check that both
    gates together stay rare."""
    settings = SimulationSettings(algorithm="pairwise_weight_multipliers_v1")
    results = simulate(tmp_path, runs=QUICK_RUNS, signal=0.0, workers=2, settings=settings)
    rates = pass_rates(results)

    assert rates["both"]["interval95"][0] <= BOTH_BOUND
    assert rates["both"]["passes"] <= rates["gate1"]["passes"]
    assert "insufficient_data" not in rates["gate1_decisions"]


def test_planted_signal_passes_both_gates_in_most_runs(tmp_path: Path) -> None:
    results = simulate(tmp_path, runs=PLANTED_RUNS, signal=1.0, first_seed=10_000, workers=2)
    rates = pass_rates(results)

    assert rates["both"]["passes"] > PLANTED_RUNS / 2
    learned = [r for r in results if r.both_passed]
    # the planted signal is confidence: a passing proposal raises its share of the (renormalized)
    # weights above base scoring's
    base = ScoringWeights()
    for r in learned:
        applied = adjusted_weights(base, RankingMultipliers(**r.multipliers))
        assert applied.w_confidence > base.w_confidence
    assert all(r.gate2_gain is not None and r.gate2_gain >= 0.01 for r in learned)


def test_simulation_runs_gate_one_with_the_given_validation_fraction(tmp_path: Path) -> None:
    """``SimulationSettings.validation_fraction`` reaches gate 1's split: the same workload and
    seed give more validation groups at 0.5 than at the default 0.3."""
    default = run_workflow(tmp_path / "default", seed=3, signal=0.0)
    half = run_workflow(
        tmp_path / "half", seed=3, signal=0.0, settings=SimulationSettings(validation_fraction=0.5)
    )

    assert SimulationSettings().validation_fraction == 0.3
    assert half.gate1_validation_groups > default.gate1_validation_groups >= 20


def test_pass_rates_count_each_gate_and_both() -> None:
    def run(seed: int, gate1: str, gate2: str | None) -> RunResult:
        return RunResult(seed, 0.0, gate1, None, 20, gate2, None, {})

    results = [
        run(0, GATE1_PASS, GATE2_PASS),
        run(1, GATE1_PASS, "no_improvement"),
        run(2, "no_improvement", GATE2_PASS),
        run(3, "insufficient_data", None),
    ]
    rates = pass_rates(results)

    assert (rates["gate1"]["passes"], rates["gate2"]["passes"], rates["both"]["passes"]) == (
        2,
        2,
        1,
    )
    assert rates["both"]["rate"] == 1 / 4
    assert rates["gate2_decisions"] == {GATE2_PASS: 2, "no_improvement": 1, "not_run": 1}


def test_wilson_interval_matches_the_formula() -> None:
    z = 1.959963984540054
    n, p = 20, 0.0
    high = (p + z * z / (2 * n) + z * (z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    assert wilson_interval(0, n) == pytest.approx((0.0, high), abs=1e-15)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
