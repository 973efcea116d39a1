"""Rendering for people: JSON output, plain tables, readable cells and progress on stderr."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import click
from pydantic import BaseModel

from prme.demo.workflow import (
    ProgressFactory,
    silent_progress,
)
from prme.models.enums import Scope
from prme.models.scoring import ADDITIVE_FEATURES, RankingMultipliers


# ---------------------------------------------------------------------------------- output
def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def emit_json(value: Any) -> None:
    click.echo(json.dumps(_plain(value), indent=2, ensure_ascii=False))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain-text table with left-aligned columns."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def cell(value: object) -> object:
    """Readable table cells: 4-decimal floats, [lo, hi] intervals, ``k v`` counts."""
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, tuple) and all(isinstance(v, float) for v in value):
        return "[" + ", ".join(f"{v:+.4f}" for v in value) + "]"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "—" if value is None else value


def pairs(rows: Sequence[tuple[str, object]]) -> None:
    table(("field", "value"), [(name, cell(value)) for name, value in rows])


def short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def multipliers_text(m: RankingMultipliers | None) -> str:
    if m is None:
        return "none"
    return " ".join(f"{f} ×{getattr(m, f):.2f}" for f in ADDITIVE_FEATURES)


def scopes_text(scopes: Sequence[Scope] | None) -> str:
    return ", ".join(scopes) if scopes else "unfiltered"


def _interactive() -> bool:
    # Progress goes to stderr, so only stderr need be a terminal (`prme … > out.json` still shows it).
    return sys.stderr.isatty()


def progress_factory() -> ProgressFactory:
    """click progress bars (on stderr) when attached to a terminal, otherwise nothing."""
    if not _interactive():
        return silent_progress
    return lambda label, length: click.progressbar(length=length, label=label, file=sys.stderr)


@contextlib.contextmanager
def busy(label: str) -> Iterator[None]:
    """One status line on a terminal for work without steps; silent when piped."""
    if not _interactive():
        yield
        return
    click.echo(f"{label} …", nl=False, err=True)
    started = time.perf_counter()
    yield
    click.echo(f" done ({time.perf_counter() - started:.1f}s)", err=True)
