"""The learning report's plots as inline SVG: ranking multipliers on a log axis, paired
per-query NDCG, and a gain with its bootstrap interval. They only map the reports' numbers to
coordinates; :mod:`prme.demo.report_html` places them in the page."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from prme.models.scoring import (
    ADDITIVE_FEATURES,
    MULTIPLIER_MAX,
    MULTIPLIER_MIN,
    RankingMultipliers,
)

GRID = 'stroke="#e4e7eb"'
AXIS = 'stroke="#8a939c"'
FONT = 'font-family="system-ui, sans-serif" font-size="12" fill="#1d232a"'
WIN, LOSS, TIE = "#2e7d4f", "#b5432f", "#6b7680"


def interval_text(interval: tuple[float, float] | None) -> str:
    """A bootstrap interval as ``[lo, hi]`` with signs (``—`` when there is none)."""
    return "—" if interval is None else f"[{interval[0]:+.3f}, {interval[1]:+.3f}]"


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
            f"<title>95% bootstrap interval {interval_text(interval)}</title></line>"
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
