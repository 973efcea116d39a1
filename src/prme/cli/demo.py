"""``prme demo``: the whole learning workflow on a generated workload, with its report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from prme.cli.options import (
    json_option,
    path_option,
    user_option,
)
from prme.cli.output import (
    emit_json,
    progress_factory,
)
from prme.demo.workflow import (
    DEMO_USER,
    FUSION_NOTE,
    DemoStep,
    run_demo,
)
from prme.embed.registry import provider_names


@click.command()
@path_option("demo-pack")
@click.option("--report", type=click.Path(dir_okay=False, path_type=Path), help="HTML report.")
@click.option(
    "--embedder",
    type=click.Choice(provider_names()),
    default="minilm",
    help="Embedding model: minilm (all-MiniLM-L6-v2, offline) or hash (no weights, fast).",
)
@click.option("--seed", default=0, show_default=True, help="Workload seed.")
@user_option(DEMO_USER)
@json_option
def demo(path: Path, report: Path | None, as_json: bool, **options: Any) -> None:
    """Run the whole learning workflow on a generated workload, with an HTML report.

    PATH must be empty, missing, or an earlier demo pack (which is replaced); the report goes
    to PATH/learning.html unless --report names another file. --embedder hash is fast.
    """
    printed: list[DemoStep] = []

    def show(step: DemoStep) -> None:
        if as_json:
            return
        if not printed:  # the header waits until the pack directory was accepted
            click.echo(f"prme demo: pack {path}; {FUSION_NOTE}")
            click.echo(f"{'STEP':<11} {'RESULT':<33} KEY NUMBERS")
        printed.append(step)
        click.echo(f"{step.step:<11} {step.outcome:<33} {step.details}")

    summary = run_demo(path, report=report, on_step=show, progress=progress_factory(), **options)
    if as_json:
        return emit_json(summary)
    click.echo(f"done in {summary.seconds:.1f}s; report: {summary.report_path}")
    click.echo(  # the pack recorded its settings (weighted fusion, the embedder)
        f"inspect: prme profiles history --path {path} --user-id {summary.user_id} --scope project"
    )
