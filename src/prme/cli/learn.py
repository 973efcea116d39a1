"""The ``learn`` group: gate 1 (``evaluate``), gate 2 (``holdout``), profile creation and
the HTML report."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import click

from prme.cli.options import (
    AwareDateTime,
    CLIError,
    Group,
    Target,
    one_line,
    pack_command,
    path_option,
    read_json,
    read_jsonl,
    resolve_profile_id,
    scope_set,
    scopes_option,
    surface_option,
    user_option,
)
from prme.cli.output import (
    busy,
    cell,
    multipliers_text,
    pairs,
    scopes_text,
)
from prme.client import MemoryClient
from prme.demo.report_html import render_report
from prme.errors import (
    InvalidInputError,
    NotFoundError,
)
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.profiles import RankingProfile
from prme.services.profiles import parse_report


# ------------------------------------------------------------------------------- learning
@click.group(cls=Group)
def learn() -> None:
    """Gate 1, gate 2, profile creation and the HTML report."""


def _show_proposal(p: LearningEvaluation) -> None:
    pairs(
        [
            ("decision", p.decision),
            ("input checksum", p.input_checksum),
            ("coverage", p.coverage),
            ("exclusions", p.exclusions),
            ("validation NDCG gain", p.validation_ndcg_gain),
            ("interval", p.validation_gain_interval),
            ("p-value", p.randomization_p_value),
            ("win/tie/loss", p.win_tie_loss),
            ("multipliers", multipliers_text(p.multipliers)),
            *([("missing groups", p.missing_groups)] if p.missing_groups else []),
        ]
    )


@learn.command("evaluate")
@scopes_option
@surface_option
@click.option("--query-groups", type=click.File("r"), help="JSON {request_id: group name}.")
@click.option("--config", type=click.File("r"), help="JSON LearningConfig (seed, minima, ...).")
@pack_command()
def learn_evaluate(
    target: Target, scopes: Sequence[str], surface: str, query_groups: Any, config: Any
) -> None:
    """Gate 1: fit multipliers on judged candidates and validate them (report is persisted)."""
    groups = None if query_groups is None else read_json(query_groups, "--query-groups")
    settings = None if config is None else read_json(config, "--config")
    with target.open() as memory, busy("gate 1: fitting and validating"):
        proposal = memory.evaluate_learning(
            user_id=target.user_id,
            scopes=scope_set(scopes),
            surface=surface,
            config=settings,
            query_groups=groups,
        )
    target.show(proposal, lambda: _show_proposal(proposal))


def _show_holdout(h: FullRetrievalEvaluation) -> None:
    pairs(
        [
            ("decision", h.decision),
            ("input checksum", h.input_checksum),
            ("coverage", h.coverage),
            ("NDCG", f"{h.baseline_ndcg:.4f} → {h.candidate_ndcg:.4f} ({h.ndcg_gain:+.4f})"),
            ("interval", h.ndcg_gain_interval),
            ("p-value", h.randomization_p_value),
            ("recall", f"{h.baseline_recall:.4f} → {h.candidate_recall:.4f}"),
            ("regression fraction", h.regression_fraction),
            ("win/tie/loss", h.win_tie_loss),
            ("pack digest", h.pack_digest),
            *([("missing query groups", h.missing_query_groups)] if h.missing_query_groups else []),
        ]
    )


def _holdout_query(item: Any) -> Any:
    if isinstance(item, dict) and {"group_id", "query", "relevant_ids"} <= set(item):
        return (item["group_id"], item["query"], item["relevant_ids"])
    return item  # a [group_id, query, relevant_ids] list; the client validates it


@learn.command("holdout")
@click.option("--proposal", type=click.File("r"), required=True, help="Gate-1 report JSON file.")
@click.option("--queries", type=click.File("r"), help="JSONL {group_id, query, relevant_ids}.")
@click.option("--trials", type=click.File("r"), help="JSONL FullRetrievalTrial (already run).")
@click.option("--artifact-sha256", help="Your SHA-256 of the frozen fixture.")
@click.option("--reference-time", type=AwareDateTime(), help="One clock for both arms.")
@click.option("--limit", default=20, show_default=True, help="Results per arm (--queries).")
@click.option("--frozen", is_flag=True, help="Open the pack frozen (no content writes).")
@scopes_option
@pack_command()
def learn_holdout(target: Target, proposal: IO[str], scopes: Sequence[str], **opts: Any) -> None:
    """Gate 2: a fixed holdout of paired full retrievals (--queries runs both arms here;
    --trials evaluates retrievals already made and needs --artifact-sha256)."""
    report = parse_report(LearningEvaluation, read_json(proposal, "--proposal"), "--proposal")
    if (opts["queries"] is None) == (opts["trials"] is None):
        raise CLIError("give either --queries FILE or --trials FILE")
    if opts["trials"] is not None and opts["artifact_sha256"] is None:
        raise CLIError("--trials needs --artifact-sha256 (your digest of the frozen fixture)")
    owner, chosen = target.user_id, scope_set(scopes)
    with target.open(frozen=opts["frozen"]) as memory, busy("gate 2: paired retrievals"):
        if opts["queries"] is not None:
            holdout = memory.run_full_retrieval_holdout(
                [_holdout_query(q) for q in read_jsonl(opts["queries"], "--queries")],
                user_id=owner,
                scopes=chosen,
                proposal=report,
                reference_time=opts["reference_time"] or datetime.now().astimezone(),
                limit=opts["limit"],
                memory_artifact_sha256=opts["artifact_sha256"],
            )
        else:
            holdout = memory.evaluate_full_retrieval(
                read_jsonl(opts["trials"], "--trials"),
                user_id=owner,
                scopes=chosen,
                proposal_input_checksum=report.input_checksum,
                memory_artifact_sha256=opts["artifact_sha256"],
                candidate_multipliers=report.multipliers,
            )
    target.show(holdout, lambda: _show_holdout(holdout))


def show_profile(p: RankingProfile) -> None:
    pairs(
        [
            ("profile id", p.profile_id),
            ("created at", p.created_at.isoformat()),
            ("scopes", scopes_text(p.scopes)),
            ("baseline profile", p.baseline_profile_id or "base scoring"),
            ("multipliers", multipliers_text(p.multipliers)),
            ("gate 1", f"{p.proposal.decision} (gain {cell(p.proposal.validation_ndcg_gain)})"),
            ("gate 2", f"{p.holdout.decision} (gain {cell(p.holdout.ndcg_gain)})"),
        ]
    )


# learn create's report options: the file option, the checksum option, and the client's field.
REPORT_OPTIONS = {
    "proposal": ("--proposal", "--proposal-input-checksum", "proposal_input_checksum"),
    "holdout": ("--holdout", "--holdout-input-checksum", "holdout_input_checksum"),
}


def _report_arguments(
    files: dict[str, IO[str] | None], checksums: dict[str, str | None]
) -> dict[str, Any]:
    """The client's report arguments: each report from its JSON file or by its input checksum,
    exactly one of the two (checked before the pack is opened)."""
    arguments: dict[str, Any] = {}
    for name, (file_option, checksum_option, field) in REPORT_OPTIONS.items():
        source, checksum = files[name], checksums[name]
        if (source is None) == (checksum is None):
            raise CLIError(f"give either {file_option} FILE or {checksum_option} SHA256")
        arguments[name] = None if source is None else read_json(source, file_option)
        arguments[field] = checksum
    return arguments


@learn.command("create")
@click.option("--proposal", type=click.File("r"), help="Gate-1 report JSON file.")
@click.option("--holdout", type=click.File("r"), help="Gate-2 report JSON file.")
@click.option(
    "--proposal-input-checksum", help="Instead of --proposal: a stored gate-1 report's checksum."
)
@click.option(
    "--holdout-input-checksum", help="Instead of --holdout: a stored gate-2 report's checksum."
)
@click.option("--profile-id", help="A UUID making creation idempotent.")
@click.option("--baseline-profile-id", help="The profile active when the holdout ran.")
@pack_command()
def learn_create(
    target: Target,
    proposal: IO[str] | None,
    holdout: IO[str] | None,
    proposal_input_checksum: str | None,
    holdout_input_checksum: str | None,
    **ids: Any,
) -> None:
    """Create an immutable ranking profile from two passing, attested reports, each given as
    its JSON file or by the input checksum of the owner's report stored in the pack."""
    reports = _report_arguments(
        {"proposal": proposal, "holdout": holdout},
        {"proposal": proposal_input_checksum, "holdout": holdout_input_checksum},
    )
    with target.open() as memory, _options_named():
        profile = memory.create_ranking_profile(user_id=target.user_id, **reports, **ids)
    target.show(profile, lambda: show_profile(profile))


@contextlib.contextmanager
def _options_named() -> Iterator[None]:
    """A report error the client names by its field (``proposal_input_checksum``) is shown
    naming the command's option (``--proposal-input-checksum``), worded as the client words it."""
    try:
        yield
    except (InvalidInputError, NotFoundError) as exc:
        options = {field: option for _, option, field in REPORT_OPTIONS.values()}
        option = options.get(exc.field or "")
        if option is None:
            raise
        raise CLIError(f"{option}{one_line(exc).removeprefix(exc.field or '')}") from exc


@learn.command("report")
@click.argument("profile_id")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="File.")
@path_option()
@user_option()
def learn_report(profile_id: str, out: Path, path: Path, user_id: str) -> None:
    """Write the self-contained HTML report of a profile and its pointer history."""
    with MemoryClient(path, create=False) as memory:
        profile_id = resolve_profile_id(memory, user_id, profile_id)
        profile = memory.get_ranking_profile(profile_id, user_id=user_id)
        if profile is None:
            raise NotFoundError("Ranking profile", profile_id)
        scopes = list(profile.scopes) if profile.scopes is not None else None
        history = memory.list_ranking_profile_history(user_id=user_id, scopes=scopes)
    html = render_report(profile.proposal, profile.holdout, profile=profile, history=history)
    out.write_text(html, encoding="utf-8")
    click.echo(str(out))
