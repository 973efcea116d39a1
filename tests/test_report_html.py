"""The HTML learning report: self-contained, and every number shown comes from the models."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import make_config

from prme import MemoryClient, RankingMultipliers, Scope
from prme.cli import main
from prme.demo.report_html import EVIDENCE_BOUNDARY, multipliers_svg, paired_svg, render_report
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.profiles import RankingProfile, RankingProfileState

SEED_BOUNDARY = (
    "A positive profile establishes improvement under its recorded judged-candidate and "
    "full-retrieval protocols. It does not establish answer quality, truth, causality, transfer "
    "to another model/index identity, or superiority on another task distribution. Use an "
    "answer-level holdout before making task-quality claims."
)


@dataclass
class Evidence:
    summary: dict[str, Any]
    proposal: LearningEvaluation
    holdout: FullRetrievalEvaluation
    profile: RankingProfile
    history: list[RankingProfileState]
    html: str


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evidence]:
    """One real demo run (``prme demo --json``, hashing embedder): real, attested reports."""
    path = tmp_path_factory.mktemp("report") / "pack"
    args = ["demo", "--path", str(path), "--embedder", "hash", "--json"]
    result = CliRunner().invoke(main, args, env={"PRME_USER_ID": "bob"})
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    with MemoryClient(path, config=make_config()) as memory:
        profile = memory.get_ranking_profile(summary["profile_id"], user_id="bob")
        assert profile is not None
        history = memory.list_ranking_profile_history(user_id="bob", scopes=[Scope.PROJECT])
    yield Evidence(
        summary,
        profile.proposal,
        profile.holdout,
        profile,
        history,
        Path(summary["report_path"]).read_text("utf-8"),
    )


def test_the_demo_summary_names_what_the_report_shows(evidence: Evidence) -> None:
    summary = evidence.summary
    assert summary["user_id"] == "bob" and summary["fusion"] == "weighted"
    assert summary["proposal_decision"] == evidence.proposal.decision
    assert summary["holdout_decision"] == evidence.holdout.decision
    assert summary["proposal_input_checksum"] == evidence.proposal.input_checksum
    assert summary["multipliers"] == evidence.profile.multipliers.model_dump(mode="json")
    assert summary["statuses"] == {
        "activated": "applied",
        "deactivated": "none",
        "rolled_back": "applied",
    }
    assert summary["transitions"] == ["activate", "deactivate", "rollback"]
    assert [step["step"] for step in summary["steps"]] == [
        "pack", "store", "judge", "gate 1", "freeze", "gate 2", "profile",
        "activate", "deactivate", "rollback", "report",
    ]  # fmt: skip


def test_report_is_one_self_contained_file(evidence: Evidence) -> None:
    html = evidence.html
    assert html.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "<link", "src=", "href=", "url(", "@import"):
        assert forbidden not in html
    assert html.count("<svg") == 5  # two intervals, multipliers, two paired plots


def test_report_shows_the_decisions_thresholds_and_statistics(evidence: Evidence) -> None:
    html, p, h = evidence.html, evidence.proposal, evidence.holdout
    assert p.decision == "improved_on_observed_candidates" and p.decision in html
    assert h.decision == "improved_full_retrieval" and h.decision in html
    assert p.validation_ndcg_gain is not None and p.validation_gain_interval is not None
    assert f"{p.validation_ndcg_gain:+.4f}" in html
    lo, hi = p.validation_gain_interval
    assert f"[{lo:+.3f}, {hi:+.3f}]" in html
    assert f"{p.randomization_p_value:.4f}" in html
    assert f"{h.baseline_ndcg:.3f} → {h.candidate_ndcg:.3f} ({h.ndcg_gain:+.4f})" in html
    assert f"{h.baseline_recall:.3f} → {h.candidate_recall:.3f}" in html
    for counts in (p.win_tie_loss, h.win_tie_loss):
        assert counts is not None
        assert f"{counts['wins']} / {counts['ties']} / {counts['losses']}" in html
    assert f'<th>NDCG gain at least</th><td class="num">{p.config.min_ndcg_gain:g}</td>' in html
    assert f"{h.config.max_regression_fraction:g}" in html
    for key, value in [*p.coverage.items(), *p.exclusions.items(), *h.coverage.items()]:
        assert f'<th>{key}</th><td class="num">{value}</td>' in html


def test_report_plots_every_group_and_every_multiplier(evidence: Evidence) -> None:
    html, p, h = evidence.html, evidence.proposal, evidence.holdout
    titles = re.findall(r"<title>(\d+) group\(s\) ", html)
    validation = [q for q in p.queries if q.split == "validation"]
    assert sum(int(n) for n in titles) == len(validation) + len(h.queries)
    for name, value in evidence.profile.multipliers.model_dump().items():
        assert f"{name} ×{value:.4f}" in html


def test_report_carries_the_boundary_history_and_identity(evidence: Evidence) -> None:
    html = evidence.html
    assert EVIDENCE_BOUNDARY == SEED_BOUNDARY
    assert SEED_BOUNDARY in html
    assert [s.action for s in evidence.history] == ["rollback", "deactivate", "activate"]
    for state in evidence.history:
        assert str(state.change_id) in html
    for checksum in (evidence.proposal.input_checksum, evidence.holdout.input_checksum):
        assert checksum in html
    assert str(evidence.profile.profile_id) in html


def test_render_is_deterministic_and_works_without_a_holdout(evidence: Evidence) -> None:
    first, second = (
        render_report(
            evidence.proposal, evidence.holdout, profile=evidence.profile, history=evidence.history
        )
        for _ in range(2)
    )
    assert first == second == evidence.html
    partial = render_report(evidence.proposal)
    assert "Gate 1" in partial and "Gate 2" not in partial
    assert partial.count("<svg") == 3


def test_multiplier_bars_start_at_neutral_on_a_log_axis() -> None:
    # left = 110, span = 620 - 110 - 70 = 440 over log2 range [-2, 2]: x(m) = 110 + (log2 m + 2) * 110
    svg = multipliers_svg(RankingMultipliers(confidence=4.0, semantic=0.5))
    neutral = 110 + (0 + 2) * 110
    assert f'<rect x="{neutral:.1f}" y="{12 + 5 * 30 + 3}" width="{2 * 110:.1f}"' in svg
    half = 110 + (math.log2(0.5) + 2) * 110
    assert f'<rect x="{half:.1f}" y="{12 + 3}" width="{neutral - half:.1f}"' in svg
    assert svg.count(' width="1.5" ') == 4  # the four neutral features


def test_paired_plot_merges_identical_points_and_escapes_labels() -> None:
    svg = paired_svg([("a<b>", 0.5, 1.0), ("c&d", 0.5, 1.0), ("e", 1.0, 0.25)], title="t")
    assert "<title>2 group(s) 0.500 → 1.000: a&lt;b&gt;, c&amp;d</title>" in svg
    assert "<title>1 group(s) 1.000 → 0.250: e</title>" in svg
    assert "a<b>" not in svg


def test_report_explains_a_refusal_flags_clamps_and_floors() -> None:
    """Built from real gate-1 reports on §M.9's fixture (tests/learning/test_gate1.py)."""
    from learning.test_gate1 import REFERENCE, reference_fixture, run

    from prme.learning.groups import group_id, is_validation

    # The reference fit reaches lexical ×4 (the bound) and a p-value at its floor 1/(B+1).
    reference = run(*reference_fixture(), config=REFERENCE)
    assert reference.multipliers.lexical == 4.0
    assert reference.randomization_p_value == 1 / (reference.config.bootstrap_samples + 1)
    html = render_report(reference)
    assert "×4.000<tspan" in html and "clamped</tspan>" in html
    assert html.count("clamped</tspan>") == 1  # the other five are inside the bounds
    floor = f"{1 / 2001:.4f} (resampling floor 1/(B+1), B = 2000: p ≤ this)"
    assert floor in html
    assert "pairwise_weight_multipliers_v1" in html and "coordinate_descent_log_space_v1" in html
    assert "Why it was refused" not in html
    for legend in ("candidate better", "equal", "candidate worse"):
        assert f">{legend}</text>" in html
    # A refused proposal: reversed validation labels make every validation group regress.
    held_out = {i for i in range(100) if is_validation(42, group_id(["query", f"query {i}"]), 0.3)}
    refused = run(*reference_fixture(flip=held_out), config=REFERENCE)
    assert refused.refusal is not None
    html = render_report(refused)
    assert "Why it was refused" in html
    for rule in refused.refusal.rules:
        assert f"<code>{rule.rule}</code>" in html and f"{rule.observed:+.4f}" in html
    assert f"Regressed validation groups ({len(held_out)})" in html
    for group in refused.refusal.regressed_groups:
        row = f'<td>{group.group_label}</td><td class="num">{group.baseline_ndcg:.3f} → '
        assert row in html
