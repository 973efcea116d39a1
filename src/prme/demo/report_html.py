"""The learning report as one self-contained HTML file (inline CSS and SVG, no script, no network).

Rendering only: every number shown comes from the gate reports and the profile models
(:class:`~prme.models.learning.LearningEvaluation`, :class:`~prme.models.holdout.
FullRetrievalEvaluation`, :class:`~prme.models.profiles.RankingProfile` and its pointer
transitions). Nothing is recomputed here; plots only map those numbers to coordinates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from prme.demo.report_svg import interval_svg, interval_text, multipliers_svg, paired_svg
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import TRAINING_LOSS, LearningEvaluation
from prme.models.profiles import RankingProfile, RankingProfileState
from prme.models.refusal import Refusal

EVIDENCE_BOUNDARY = (
    "A positive profile establishes improvement under its recorded judged-candidate and "
    "full-retrieval protocols. It does not establish answer quality, truth, causality, transfer "
    "to another model/index identity, or superiority on another task distribution. Use an "
    "answer-level holdout before making task-quality claims."
)

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232a;
background:#f6f7f9}
main{max-width:1040px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 10px;border-bottom:1px solid #d5d9df;
padding-bottom:4px}h3{font-size:16px;margin:16px 0 6px}
.sub{color:#5b6570;margin:0 0 16px}.grid{display:grid;grid-template-columns:1fr 1fr;gap:16px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:14px 16px}
.decision{display:inline-block;font-weight:600;border-radius:4px;padding:2px 8px;font-size:14px}
.pass{background:#e3f4e8;color:#17653a}.fail{background:#fbe6e4;color:#922b21}
.neutral{background:#eceff3;color:#3c4650}
table{border-collapse:collapse;width:100%;font-size:14px}
td,th{text-align:left;padding:4px 8px;border-bottom:1px solid #eceff3;vertical-align:top}
th{color:#5b6570;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
.boundary{background:#fff8e1;border:1px solid #f0d98c;border-radius:8px;padding:12px 16px}
footer{color:#5b6570;font-size:13px;margin-top:32px}
@media (max-width:760px){.grid{grid-template-columns:1fr}}
"""


def _f(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _signed(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


def p_value_text(p_value: float | None, samples: int) -> str:
    """The p-value to 4 places; at its resampling floor ``1/(B+1)`` it says so, since the true
    value may be smaller than any B rounds can show."""
    if p_value is None:
        return "—"
    if p_value == 1 / (samples + 1):
        return f"{p_value:.4f} (resampling floor 1/(B+1), B = {samples}: p ≤ this)"
    return f"{p_value:.4f}"


def _badge(decision: str, positive: str) -> str:
    kind = (
        "pass" if decision == positive else "neutral" if decision == "insufficient_data" else "fail"
    )
    return f'<span class="decision {kind}">{escape(decision)}</span>'


def _rows(rows: Iterable[tuple[str, str]], numeric: bool = True) -> str:
    cls = ' class="num"' if numeric else ""
    return "".join(f"<tr><th>{escape(k)}</th><td{cls}>{v}</td></tr>" for k, v in rows)


def _scopes(scopes: Sequence[object] | None) -> str:
    return "unfiltered" if scopes is None else ", ".join(str(s) for s in scopes)


def _gate1(proposal: LearningEvaluation) -> str:
    cfg = proposal.config
    wtl = proposal.win_tie_loss or {}
    stats = _rows(
        [
            ("validation NDCG gain", _signed(proposal.validation_ndcg_gain, 4)),
            ("95% paired bootstrap interval", interval_text(proposal.validation_gain_interval)),
            (
                "sign-flip p-value",
                escape(p_value_text(proposal.randomization_p_value, cfg.bootstrap_samples)),
            ),
            ("validation pairwise gain", _signed(proposal.validation_pairwise_gain, 4)),
            (
                "win / tie / loss",
                f"{wtl.get('wins', 0)} / {wtl.get('ties', 0)} / {wtl.get('losses', 0)}",
            ),
            (
                "training loss before → after",
                f"{_f(proposal.training_loss_before, 4)} → {_f(proposal.training_loss_after, 4)}",
            ),
        ]
    )
    fit = _rows(
        [
            ("algorithm", escape(proposal.algorithm)),
            ("optimizer", escape(proposal.optimizer)),
            ("training loss", escape(TRAINING_LOSS[proposal.algorithm])),
        ],
        numeric=False,
    )
    thresholds = _rows(
        [
            ("NDCG gain at least", f"{cfg.min_ndcg_gain:g}"),
            ("interval lower endpoint", "&gt; 0"),
            ("pairwise gain", "≥ 0"),
            ("training groups at least", str(cfg.min_training_queries)),
            ("validation groups at least", str(cfg.min_validation_queries)),
            ("validation fraction · seed", f"{cfg.validation_fraction:g} · {cfg.seed}"),
            ("judged NDCG cutoff k", str(cfg.ndcg_k)),
            ("bootstrap samples", str(cfg.bootstrap_samples)),
        ]
    )
    return (
        '<div class="card"><h3>Gate 1 — judged candidates</h3>'
        f"<p>{_badge(proposal.decision, 'improved_on_observed_candidates')}</p>"
        f"<table>{stats}</table>{refusal_html(proposal.refusal, 'validation')}"
        f"<h3>Fit</h3><table>{fit}</table>"
        f"<h3>Thresholds</h3><table>{thresholds}</table>"
        + interval_svg(
            proposal.validation_ndcg_gain, proposal.validation_gain_interval, cfg.min_ndcg_gain
        )
        + "</div>"
    )


def _gate2(holdout: FullRetrievalEvaluation) -> str:
    cfg = holdout.config
    wtl = holdout.win_tie_loss
    stats = _rows(
        [
            (
                "NDCG baseline → candidate",
                f"{_f(holdout.baseline_ndcg)} → {_f(holdout.candidate_ndcg)} ({_signed(holdout.ndcg_gain, 4)})",
            ),
            ("95% paired bootstrap interval", interval_text(holdout.ndcg_gain_interval)),
            (
                "sign-flip p-value",
                escape(p_value_text(holdout.randomization_p_value, cfg.bootstrap_samples)),
            ),
            (
                "recall baseline → candidate",
                f"{_f(holdout.baseline_recall)} → {_f(holdout.candidate_recall)}",
            ),
            (
                "MRR baseline → candidate",
                f"{_f(holdout.baseline_mrr)} → {_f(holdout.candidate_mrr)}",
            ),
            ("regression fraction", _f(holdout.regression_fraction)),
            (
                "win / tie / loss",
                f"{wtl.get('wins', 0)} / {wtl.get('ties', 0)} / {wtl.get('losses', 0)}",
            ),
        ]
    )
    thresholds = _rows(
        [
            ("NDCG gain at least", f"{cfg.min_ndcg_gain:g}"),
            ("interval lower endpoint", "&gt; 0"),
            ("candidate recall", "≥ baseline recall"),
            ("regression fraction at most", f"{cfg.max_regression_fraction:g}"),
            ("query groups at least", str(cfg.min_query_groups)),
            ("cutoff k · seed", f"{cfg.k} · {cfg.seed}"),
            ("bootstrap samples", str(cfg.bootstrap_samples)),
        ]
    )
    return (
        '<div class="card"><h3>Gate 2 — full-retrieval holdout</h3>'
        f"<p>{_badge(holdout.decision, 'improved_full_retrieval')}</p>"
        f"<table>{stats}</table>{refusal_html(holdout.refusal, 'holdout')}"
        f"<h3>Thresholds</h3><table>{thresholds}</table>"
        + interval_svg(holdout.ndcg_gain, holdout.ndcg_gain_interval, cfg.min_ndcg_gain)
        + "</div>"
    )


def refusal_html(refusal: Refusal | None, kind: str) -> str:
    """Why the gate refused: each failed rule (observed against required) and every regressed
    group with its baseline and candidate NDCG, worst first. Empty when nothing was refused."""
    if refusal is None:
        return ""
    rules = "".join(
        f'<tr><td><code>{escape(r.rule)}</code></td><td class="num">{r.observed:+.4f}</td>'
        f"<td>{escape(r.required)}</td></tr>"
        for r in refusal.rules
    )
    groups = "".join(
        f'<tr><td>{escape(g.group_label)}</td><td class="num">{g.baseline_ndcg:.3f} → '
        f"{g.candidate_ndcg:.3f}</td></tr>"
        for g in refusal.regressed_groups
    )
    regressed = (
        f"<h3>Regressed {kind} groups ({len(refusal.regressed_groups)})</h3>"
        f"<table><tr><th>group</th><th>NDCG baseline → candidate</th></tr>{groups}</table>"
        if refusal.regressed_groups
        else f"<p>No {kind} group regressed.</p>"
    )
    return (
        "<h3>Why it was refused</h3><table><tr><th>rule</th><th>observed</th><th>required</th>"
        f"</tr>{rules}</table>{regressed}"
    )


def _coverage(proposal: LearningEvaluation, holdout: FullRetrievalEvaluation | None) -> str:
    parts = [
        '<div class="grid"><div class="card"><h3>Gate 1 coverage</h3><table>',
        _rows((k, str(v)) for k, v in sorted(proposal.coverage.items())),
        "</table><h3>Exclusions</h3><table>",
        _rows((k, str(v)) for k, v in sorted(proposal.exclusions.items())),
        "</table></div>",
    ]
    if holdout is not None:
        parts += [
            '<div class="card"><h3>Gate 2 coverage</h3><table>',
            _rows((k, str(v)) for k, v in sorted(holdout.coverage.items())),
            "</table></div>",
        ]
    parts.append("</div>")
    return "".join(parts)


def _history(history: Sequence[RankingProfileState]) -> str:
    if not history:
        return "<p>No pointer transitions yet.</p>"
    rows = "".join(
        f"<tr><td>{escape(s.changed_at.isoformat())}</td><td>{escape(s.action)}</td>"
        f"<td><code>{escape(str(s.previous_profile_id or 'base scoring'))}</code></td>"
        f"<td><code>{escape(str(s.active_profile_id or 'base scoring'))}</code></td>"
        f"<td><code>{escape(str(s.change_id))}</code></td></tr>"
        for s in history
    )
    return (
        "<table><tr><th>changed at (UTC)</th><th>action</th><th>previous</th><th>active</th>"
        f"<th>change id</th></tr>{rows}</table>"
    )


def _identity(
    proposal: LearningEvaluation,
    holdout: FullRetrievalEvaluation | None,
    profile: RankingProfile | None,
) -> str:
    rows: list[tuple[str, str]] = []
    if profile is not None:
        rows += [
            ("profile id", str(profile.profile_id)),
            ("created at", profile.created_at.isoformat()),
            ("baseline profile", str(profile.baseline_profile_id or "base scoring")),
        ]
    rows.append(("proposal input_checksum", proposal.input_checksum))
    if holdout is not None:
        rows += [
            ("holdout input_checksum", holdout.input_checksum),
            ("holdout pack_digest", holdout.pack_digest),
            ("memory_artifact_sha256", holdout.memory_artifact_sha256),
            ("pack · write sequence", f"{holdout.pack_id} · {holdout.write_seq}"),
            ("feature identity sha256", holdout.feature_identity_sha256),
            ("base scoring version", holdout.base_scoring.version_id),
        ]
    rows.append(("proposal attested", "yes" if proposal.attestation else "no"))
    if holdout is not None:
        rows.append(("holdout attested", "yes" if holdout.attestation else "no"))
    return (
        "<table>"
        + "".join(
            f"<tr><th>{escape(k)}</th><td><code>{escape(v)}</code></td></tr>" for k, v in rows
        )
        + "</table>"
    )


def render_report(
    proposal: LearningEvaluation,
    holdout: FullRetrievalEvaluation | None = None,
    *,
    profile: RankingProfile | None = None,
    history: Sequence[RankingProfileState] = (),
    title: str = "prme learning report",
) -> str:
    """The whole report as an HTML document (a string).

    Args:
        proposal: the gate-1 report.
        holdout: the gate-2 report (None when the workflow stopped before gate 2).
        profile: the ranking profile created from both reports, if any.
        history: the pointer transitions of the profile's scope set, newest first.
        title: the page title.
    """
    multipliers = profile.multipliers if profile is not None else proposal.multipliers
    validation = [
        (q.group_label, q.baseline_judged_ndcg, q.candidate_judged_ndcg)
        for q in proposal.queries
        if q.split == "validation"
    ]
    sections = [
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">owner <b>{escape(proposal.user_id)}</b> · scopes '
        f"<b>{escape(_scopes(proposal.scopes))}</b> · surface {escape(proposal.surface)}"
        + (f" · profile <code>{profile.profile_id}</code>" if profile is not None else "")
        + "</p>",
        "<h2>Decisions</h2>",
        '<div class="grid">' + _gate1(proposal) + (_gate2(holdout) if holdout else "") + "</div>",
        "<h2>Coverage and exclusions</h2>",
        _coverage(proposal, holdout),
        "<h2>Learned multipliers against neutral</h2>",
        '<div class="card">' + multipliers_svg(multipliers) + "</div>",
        "<h2>Per-group NDCG, baseline against candidate</h2>",
        '<div class="grid"><div class="card"><h3>Gate 1 validation groups (judged NDCG@'
        f"{proposal.config.ndcg_k})</h3>"
        + paired_svg(validation, title="gate 1 validation groups")
        + "</div>",
    ]
    if holdout is not None:
        points = [(q.group_id, q.baseline_ndcg, q.candidate_ndcg) for q in holdout.queries]
        sections.append(
            f'<div class="card"><h3>Gate 2 holdout groups (NDCG@{holdout.config.k})</h3>'
            + paired_svg(points, title="gate 2 holdout groups")
            + "</div>"
        )
    sections.append("</div>")
    limitations = [*proposal.limitations, *(holdout.limitations if holdout else ())]
    sections += [
        "<h2>Evidence boundary</h2>",
        f'<div class="boundary"><p>{escape(EVIDENCE_BOUNDARY)}</p><ul>'
        + "".join(f"<li>{escape(item)}</li>" for item in limitations)
        + "</ul></div>",
        "<h2>Profile and pointer history</h2>",
        _history(history),
        "<h2>Identity</h2>",
        _identity(proposal, holdout, profile),
        "<footer>Generated by prme from the persisted, attested reports. Points above the "
        "diagonal are groups where the candidate ranking scored higher.</footer>",
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_CSS}</style></head><body><main>" + "".join(sections) + "</main></body></html>\n"
    )


__all__ = [
    "EVIDENCE_BOUNDARY",
    "interval_svg",
    "multipliers_svg",
    "p_value_text",
    "paired_svg",
    "refusal_html",
    "render_report",
]
