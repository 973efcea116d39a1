"""The learning report as one self-contained HTML file (inline CSS and SVG, no script, no network).

Rendering only: every number shown comes from the gate reports and the profile models
(:class:`~prme.models.learning.LearningEvaluation`, :class:`~prme.models.holdout.
FullRetrievalEvaluation`, :class:`~prme.models.profiles.RankingProfile` and its pointer
transitions). Nothing is recomputed here; plots only map those numbers to coordinates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape

from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import TRAINING_LOSS, LearningEvaluation
from prme.models.profiles import RankingProfile, RankingProfileState
from prme.models.refusal import Refusal
from prme.models.scoring import (
    ADDITIVE_FEATURES,
    MULTIPLIER_MAX,
    MULTIPLIER_MIN,
    RankingMultipliers,
)

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


def _interval(interval: tuple[float, float] | None) -> str:
    return "—" if interval is None else f"[{interval[0]:+.3f}, {interval[1]:+.3f}]"


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


GRID = 'stroke="#e4e7eb"'
AXIS = 'stroke="#8a939c"'
FONT = 'font-family="system-ui, sans-serif" font-size="12" fill="#1d232a"'
WIN, LOSS, TIE = "#2e7d4f", "#b5432f", "#6b7680"


def _svg_open(width: float, height: float, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
        f'<rect width="{width}" height="{height}" fill="#ffffff"/><g {FONT}>'
    )


def multipliers_svg(multipliers: RankingMultipliers) -> str:
    """Bars from neutral (×1) on a log₂ axis spanning the allowed range [0.25, 4]; a multiplier
    at either bound is labelled "clamped" (the fit wanted to go further)."""
    width, row, left, right = 660, 30, 110, 110
    span = width - left - right
    lo, hi = math.log2(MULTIPLIER_MIN), math.log2(MULTIPLIER_MAX)

    def x(value: float) -> float:
        return left + (math.log2(value) - lo) / (hi - lo) * span

    height = row * len(ADDITIVE_FEATURES) + 40
    parts = [_svg_open(width, height, "learned multipliers against neutral")]
    for tick in (0.25, 0.5, 1.0, 2.0, 4.0):
        tx = x(tick)
        parts.append(f'<line {GRID} x1="{tx:.1f}" y1="8" x2="{tx:.1f}" y2="{height - 26}"/>')
        parts.append(f'<text x="{tx:.1f}" y="{height - 10}" text-anchor="middle">×{tick:g}</text>')
    for i, name in enumerate(ADDITIVE_FEATURES):
        value = float(getattr(multipliers, name))
        y = 12 + i * row
        x0, x1 = sorted((x(1.0), x(value)))
        color = WIN if value > 1.0 else LOSS if value < 1.0 else TIE
        parts.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{name}</text>')
        parts.append(
            f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 1.5):.1f}" height="{row - 10}" '
            f'fill="{color}"><title>{name} ×{value:.4f}</title></rect>'
        )
        bound = value in (MULTIPLIER_MIN, MULTIPLIER_MAX)
        note = " clamped" if bound else ""
        parts.append(
            f'<text x="{x(MULTIPLIER_MAX) + 8:.1f}" y="{y + 15}">×{value:.3f}'
            + (f'<tspan fill="{LOSS}" font-weight="600">{note}</tspan>' if bound else "")
            + "</text>"
        )
    neutral = x(1.0)
    parts.append(
        f'<line {AXIS} stroke-width="1.5" x1="{neutral:.1f}" y1="6" x2="{neutral:.1f}" '
        f'y2="{height - 26}"/></g></svg>'
    )
    return "".join(parts)


def paired_svg(points: Sequence[tuple[str, float, float]], *, title: str) -> str:
    """Per-group scatter of (baseline, candidate) NDCG; above the diagonal the candidate won.

    Groups with identical values share one marker whose area grows with their number.
    """
    size, pad, legend = 340, 44, 46
    span = size - 2 * pad

    def sx(value: float) -> float:
        return pad + value * span

    def sy(value: float) -> float:
        return size - pad - value * span

    parts = [_svg_open(size, size + legend, title)]
    for lx, color, text in (
        (14, WIN, "candidate better"),
        (134, TIE, "equal"),
        (204, LOSS, "candidate worse"),
    ):
        parts.append(
            f'<circle cx="{lx + 5}" cy="{size + 12}" r="5" fill="{color}" fill-opacity="0.55" '
            f'stroke="{color}"/><text x="{lx + 14}" y="{size + 16}">{text}</text>'
        )
    parts.append(
        f'<text x="14" y="{size + 36}" fill="#5b6570">one marker per distinct (baseline, '
        "candidate); its area and number count the groups</text>"
    )
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line {GRID} x1="{sx(tick):.1f}" y1="{sy(0):.1f}" x2="{sx(tick):.1f}" '
            f'y2="{sy(1):.1f}"/><line {GRID} x1="{sx(0):.1f}" y1="{sy(tick):.1f}" '
            f'x2="{sx(1):.1f}" y2="{sy(tick):.1f}"/>'
            f'<text x="{sx(tick):.1f}" y="{size - pad + 16}" text-anchor="middle">{tick:g}</text>'
            f'<text x="{pad - 6}" y="{sy(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>'
        )
    parts.append(
        f'<line {AXIS} stroke-dasharray="4 3" x1="{sx(0)}" y1="{sy(0)}" x2="{sx(1)}" '
        f'y2="{sy(1)}"/><text x="{size / 2}" y="{size - 8}" text-anchor="middle">baseline NDCG'
        f'</text><text x="12" y="{size / 2}" text-anchor="middle" '
        f'transform="rotate(-90 12 {size / 2})">candidate NDCG</text>'
    )
    shared: dict[tuple[float, float], list[str]] = {}
    for label, base, cand in points:
        shared.setdefault((base, cand), []).append(label)
    for (base, cand), labels in sorted(shared.items()):
        color = WIN if cand > base else LOSS if cand < base else TIE
        radius = min(4.0 * math.sqrt(len(labels)), 20.0)
        names = ", ".join(labels)
        parts.append(
            f'<circle cx="{sx(base):.1f}" cy="{sy(cand):.1f}" r="{radius:.1f}" fill="{color}" '
            f'fill-opacity="0.55" stroke="{color}"><title>{len(labels)} group(s) '
            f"{base:.3f} → {cand:.3f}: {escape(names)}</title></circle>"
        )
        if len(labels) > 1:
            parts.append(
                f'<text x="{sx(base) + radius + 3:.1f}" y="{sy(cand) + 4:.1f}">{len(labels)}</text>'
            )
    parts.append("</g></svg>")
    return "".join(parts)


def interval_svg(gain: float | None, interval: tuple[float, float] | None, threshold: float) -> str:
    """The mean gain, its bootstrap interval, zero and the minimum-gain threshold on one axis."""
    width, height, pad = 460, 74, 30
    values: list[float] = [0.0, threshold, *([gain] if gain is not None else []), *(interval or ())]
    lo, hi = min(values), max(values)
    margin = max((hi - lo) * 0.15, 0.01)
    lo, hi = lo - margin, hi + margin

    def x(value: float) -> float:
        return pad + (value - lo) / (hi - lo) * (width - 2 * pad)

    parts = [
        _svg_open(width, height, "mean gain and its bootstrap interval"),
        f'<line {AXIS} x1="{pad}" y1="36" x2="{width - pad}" y2="36"/>'
        f'<line stroke="#1d232a" x1="{x(0):.1f}" y1="22" x2="{x(0):.1f}" y2="50"/>'
        f'<text x="{x(0):.1f}" y="16" text-anchor="middle">0</text>'
        f'<line stroke="#c98a00" stroke-dasharray="3 2" x1="{x(threshold):.1f}" y1="24" '
        f'x2="{x(threshold):.1f}" y2="48"/><text x="{x(threshold):.1f}" y="66" '
        f'text-anchor="middle" fill="#8a6100">min gain {threshold:g}</text>',
    ]
    if interval is not None:
        parts.append(
            f'<line stroke="#2f5d8a" stroke-width="6" stroke-linecap="round" '
            f'x1="{x(interval[0]):.1f}" y1="36" x2="{x(interval[1]):.1f}" y2="36">'
            f"<title>95% bootstrap interval {_interval(interval)}</title></line>"
            f'<text x="{x(interval[0]):.1f}" y="16" text-anchor="middle" fill="#2f5d8a">'
            f'{interval[0]:+.3f}</text><text x="{x(interval[1]):.1f}" y="16" '
            f'text-anchor="middle" fill="#2f5d8a">{interval[1]:+.3f}</text>'
        )
    if gain is not None:
        parts.append(
            f'<circle cx="{x(gain):.1f}" cy="36" r="6" fill="#1d232a">'
            f"<title>mean gain {gain:+.4f}</title></circle>"
            f'<text x="{x(gain):.1f}" y="66" text-anchor="middle">mean {gain:+.3f}</text>'
        )
    parts.append("</g></svg>")
    return "".join(parts)


def _gate1(proposal: LearningEvaluation) -> str:
    cfg = proposal.config
    wtl = proposal.win_tie_loss or {}
    stats = _rows(
        [
            ("validation NDCG gain", _signed(proposal.validation_ndcg_gain, 4)),
            ("95% paired bootstrap interval", _interval(proposal.validation_gain_interval)),
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
            ("95% paired bootstrap interval", _interval(holdout.ndcg_gain_interval)),
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
