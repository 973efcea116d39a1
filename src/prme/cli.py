"""The ``prme`` command line: a thin surface over :class:`~prme.client.MemoryClient`.

Every command opens the pack named by ``--path`` (configured from ``PRME_*`` variables), calls
one public client method and renders its result: a table for people, or with ``--json`` the same
``model_dump(mode="json")`` the HTTP API returns. Errors print one line, ``error: <message>``,
and exit with status 1. Owners come from ``--user-id`` or ``PRME_USER_ID``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click
from pydantic import BaseModel

from prme.client import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig
from prme.demo.report_html import render_report
from prme.demo.workflow import (
    DEMO_USER,
    FUSION_NOTE,
    DemoStep,
    ProgressFactory,
    run_demo,
    silent_progress,
)
from prme.embed.registry import provider_names
from prme.errors import (
    NotFoundError,
    PackNotFoundError,
    PRMEError,
    http_status_for,
    public_message,
    serve_hint,
)
from prme.models.enums import NodeType, Scope
from prme.models.holdout import FullRetrievalEvaluation
from prme.models.learning import LearningEvaluation
from prme.models.memory import MemoryRecord
from prme.models.profiles import RankingProfile, RankingProfileState
from prme.models.scoring import ADDITIVE_FEATURES, RankingMultipliers
from prme.services.pack_settings import scoring_for
from prme.storage.sqlite import DB_FILE

F = TypeVar("F", bound=Callable[..., Any])
SCOPES = click.Choice([s.value for s in Scope], case_sensitive=False)
SURFACES = click.Choice(["results", "context"])


# ---------------------------------------------------------------- errors and the root group
class CLIError(click.ClickException):
    """A failed command: printed as one line ``error: <message>``, exit status 1."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def one_line(exc: BaseException) -> str:
    """The error's message on one line, worded as the HTTP and MCP surfaces word it."""
    if isinstance(exc, PRMEError | OSError) or http_status_for(exc) < 500:
        text = str(exc)
    else:
        text = f"{public_message(exc)} ({type(exc).__name__}: {exc})"
    return " ".join(text.split()) or type(exc).__name__


class _Group(click.Group):
    """Turns every unexpected exception of a subcommand into a one-line CLIError."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            raise CLIError(one_line(exc)) from exc


# ---------------------------------------------------------------------------- shared options
@dataclass(frozen=True)
class Target:
    """The pack, owner and output mode every pack command receives (``--path``, ``--user-id``,
    ``--json``)."""

    path: Path
    user_id: str
    as_json: bool

    def open(self, *, frozen: bool = False, create: bool | None = False) -> MemoryClient:
        """Open the pack; by default a missing one is an error (only ``prme init``, ``demo``,
        ``store --create``, ``serve --create``, ``mcp --create`` and ``pack import`` create
        packs)."""
        return MemoryClient(self.path, frozen=frozen, create=create)

    def show(self, value: Any, render: Callable[[], None]) -> None:
        """Print ``value`` as JSON with ``--json``, otherwise call ``render`` (a table)."""
        if self.as_json:
            emit_json(value)
        else:
            render()


def path_option(default: str = ".") -> Callable[[F], F]:
    kind = click.Path(file_okay=False, path_type=Path)
    return click.option(
        "--path", default=default, show_default=True, type=kind, help="Memory pack directory."
    )


def user_option(default: str | None = None) -> Callable[[F], F]:
    help = "Owner of the memories and judgments (env PRME_USER_ID)."
    if default is None:  # required: no default at all (click treats None as a value)
        return click.option("--user-id", envvar="PRME_USER_ID", required=True, help=help)
    return click.option(
        "--user-id", envvar="PRME_USER_ID", default=default, show_default=True, help=help
    )


json_option = click.option("--json", "as_json", is_flag=True, help="Print the HTTP API's JSON.")
scopes_option = click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=SCOPES,
    help="Scope set; repeat for several; none: unfiltered.",
)
create_option = click.option(
    "--create", is_flag=True, help="Create the pack if missing (settings from the environment)."
)
change_option = click.option("--change-id", help="A stable UUID making a retried change safe.")
surface_option = click.option(
    "--surface", type=SURFACES, default="results", show_default=True, help="Judged surface."
)


def pack_command(*, user: bool = True) -> Callable[[F], F]:
    """Adds ``--path``, ``--user-id`` and ``--json`` and passes them as one ``target``."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, path: Path, as_json: bool, user_id: str = "", **kwargs: Any) -> Any:
            return fn(*args, target=Target(path, user_id, as_json), **kwargs)

        options = [path_option(), *([user_option()] if user else []), json_option]
        return functools.reduce(lambda f, option: option(f), reversed(options), wrapper)  # type: ignore[return-value]

    return decorate


if TYPE_CHECKING:
    _DateTimeParam = click.ParamType[datetime, Any]
else:  # click < 8.3 has no generic ParamType
    _DateTimeParam = click.ParamType


class AwareDateTime(_DateTimeParam):
    """An ISO-8601 timestamp with a timezone (``2026-09-14T00:00:00Z``)."""

    name = "timestamp"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            raise CLIError(f"{value!r} is not an ISO-8601 timestamp") from None
        if parsed.tzinfo is None:
            raise CLIError(f"{value!r} needs a timezone, e.g. 2026-09-14T00:00:00Z")
        return parsed


def _scope_set(scopes: Sequence[str]) -> list[str] | None:
    return list(scopes) or None


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


def _value(value: object) -> object:
    """Readable table cells: 4-decimal floats, [lo, hi] intervals, ``k v`` counts."""
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, tuple) and all(isinstance(v, float) for v in value):
        return "[" + ", ".join(f"{v:+.4f}" for v in value) + "]"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "—" if value is None else value


def _pairs(rows: Sequence[tuple[str, object]]) -> None:
    table(("field", "value"), [(name, _value(value)) for name, value in rows])


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _multipliers(m: RankingMultipliers | None) -> str:
    if m is None:
        return "none"
    return " ".join(f"{f} ×{getattr(m, f):.2f}" for f in ADDITIVE_FEATURES)


def _scopes_text(scopes: Sequence[Scope] | None) -> str:
    return ", ".join(scopes) if scopes else "unfiltered"


def _interactive() -> bool:
    # Progress goes to stderr, so only stderr need be a terminal (`prme … > out.json` still shows it).
    return sys.stderr.isatty()


def progress_factory() -> ProgressFactory:
    """click progress bars (on stderr) when attached to a terminal, otherwise nothing."""
    if not _interactive():
        return silent_progress
    return lambda label, length: click.progressbar(length=length, label=label, file=sys.stderr)


_PROFILE_PREFIX = re.compile(r"^[0-9a-f]{8,32}$")


def _profile_id(memory: MemoryClient, user_id: str, given: str) -> str:
    """A full profile UUID, or the one profile of the owner whose id starts with ``given`` (at
    least 8 hex digits, as the demo and tables print them); several matches are an error."""
    text = given.strip().lower()
    try:
        return str(uuid.UUID(text))
    except ValueError:
        pass
    if not _PROFILE_PREFIX.match(text.replace("-", "")):
        raise CLIError(f"profile_id: {given!r} is neither a UUID nor a prefix of 8+ hex digits")
    prefix = text.replace("-", "")
    matches: list[str] = []
    after: str | None = None
    while True:
        page = memory.list_ranking_profiles(user_id=user_id, limit=1000, after_id=after)
        matches += [str(p.profile_id) for p in page if p.profile_id.hex.startswith(prefix)]
        if len(page) < 1000:
            break
        after = str(page[-1].profile_id)
    if not matches:
        raise NotFoundError("Ranking profile", given)
    if len(matches) > 1:
        raise CLIError(f"profile_id: {given!r} matches {len(matches)} profiles: {', '.join(matches)}")
    return matches[0]


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


def _read_json(source: IO[str], what: str) -> Any:
    try:
        return json.load(source)
    except json.JSONDecodeError as exc:
        raise CLIError(f"{what}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


def _read_jsonl(source: IO[str], what: str) -> list[Any]:
    items: list[Any] = []
    for number, line in enumerate(source, start=1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CLIError(f"{what} line {number}: not valid JSON ({exc.msg})") from None
    return items


# -------------------------------------------------------------------------------- commands
@click.group(cls=_Group)
@click.version_option(package_name="prme")
def main() -> None:
    """prme: a local-first memory engine whose ranking learns safely from judgments."""


@main.command()
@path_option()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8000, show_default=True, help="TCP port.")
@click.option("--log-level", default="info", show_default=True, help="uvicorn log level.")
@click.option("--postgres", "postgres_url", help="PostgreSQL URL: serve that pack, not --path.")
@create_option
def serve(
    path: Path, host: str, port: int, log_level: str, postgres_url: str | None, create: bool
) -> None:
    """Serve the pack over HTTP (FastAPI; OpenAPI at /docs). The pack must exist (`prme init`)
    unless --create is given."""
    from prme.http.server import serve as serve_http

    try:
        serve_http(path, host, port, log_level=log_level, postgres_url=postgres_url, create=create)
    except PackNotFoundError as exc:
        raise CLIError(serve_hint(exc)) from None


@main.command()
@path_option()
@click.option("--user-id", envvar="PRME_USER_ID", help="Bind every call to this owner.")
@click.option(
    "--multi-owner", is_flag=True, help="Bind nobody: every call names its user_id (explicit)."
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    help="MCP transport: stdio or streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP listen address.")
@click.option("--port", default=8765, show_default=True, help="HTTP port (0: any free one).")
@click.option(
    "--tools",
    type=click.Choice(["core", "all"]),
    default=None,
    help="Tool set: core (store, retrieve, judge, memories) or all (adds learning and profiles).",
)
@create_option
@click.pass_context
def mcp(
    ctx: click.Context,
    /,
    path: Path,
    user_id: str | None,
    multi_owner: bool,
    create: bool,
    **listen: Any,
) -> None:
    """Serve the pack as an MCP server (stdio or streamable HTTP).

    The pack must exist (`prme init`) unless --create is given. It refuses to start when it
    would bind nobody (no --user-id, no HTTP keys) unless --multi-owner is given.
    """
    from prme.mcp.server import main as mcp_main

    argv = ["--path", str(path), *(f"--{k}={v}" for k, v in listen.items() if v is not None)]
    argv += ["--user-id", user_id] if user_id else []
    argv += ["--create"] if create else []
    ctx.exit(mcp_main([*argv, *(["--multi-owner"] if multi_owner else [])]))


@main.command()
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


@main.command()
@click.argument("text", required=False)
@click.option(
    "--jsonl", type=click.File("r"), help="Bulk: a JSON text or object per line; - stdin."
)
@click.option("--batch-size", default=500, type=click.IntRange(1), help="Memories per batch.")
@click.option("--scope", type=SCOPES, help="Scope (default: personal).")
@click.option("--node-type", type=click.Choice([t.value for t in NodeType]), help="Node type.")
@click.option("--confidence", type=float, help="Confidence in [0, 1].")
@click.option(
    "--dedupe", is_flag=True, help="Same normalised text already stored: print that memory's id."
)
@create_option
@pack_command()
def store(
    target: Target,
    text: str | None,
    jsonl: IO[str] | None,
    batch_size: int,
    dedupe: bool,
    create: bool,
    **given: Any,
) -> None:
    """Store one memory (TEXT), or many with --jsonl in batches of store_many."""
    fields = {k: v for k, v in given.items() if v is not None}
    if (text is None) == (jsonl is None):
        raise CLIError("give either TEXT or --jsonl FILE")
    if dedupe and jsonl is not None:
        raise CLIError("--dedupe stores one TEXT at a time")
    opened = target.open(create=bool(create))
    if text is not None:
        with opened as memory:
            extra = {"dedupe": True} if dedupe else {}
            receipt = memory.store_with_receipt(text, user_id=target.user_id, **extra, **fields)
        return target.show(receipt, lambda: click.echo(receipt["node_id"]))
    lines = _read_jsonl(jsonl or sys.stdin, "--jsonl")
    items = [{**fields, **(i if isinstance(i, dict) else {"content": i})} for i in lines]
    ids: list[str] = []
    with opened as memory, progress_factory()("storing", len(items)) as bar:
        for start in range(0, len(items), batch_size):
            batch = items[start : start + batch_size]
            ids.extend(memory.store_many(batch, user_id=target.user_id))
            bar.update(len(batch))
    target.show(ids, lambda: click.echo("\n".join(ids)))


@main.command()
@click.argument("query")
@scopes_option
@click.option("--limit", type=click.IntRange(0), help="Maximum results.")
@click.option("--reference-time", type=AwareDateTime(), help="Request clock (ISO 8601, with TZ).")
@pack_command()
def retrieve(
    target: Target, query: str, scopes: Sequence[str], limit: int | None, reference_time: Any
) -> None:
    """Hybrid retrieval; the saved receipt is named by the printed request id."""
    with target.open() as memory:
        response = memory.retrieve(
            query,
            user_id=target.user_id,
            scope=_scope_set(scopes),
            limit=limit,
            reference_time=reference_time,
        )
    meta = response.metadata

    def render() -> None:
        rows = [
            (i, f"{r.composite_score:.4f}", r.node.id, r.node.scope, _short(r.node.content))
            for i, r in enumerate(response.results, start=1)
        ]
        table(("rank", "score", "node id", "scope", "content"), rows)
        why = f" ({meta.ranking_profile_reason})" if meta.ranking_profile_reason else ""
        click.echo(
            f"request {meta.request_id}; receipt saved: {meta.receipt_persisted}; fusion "
            f"{meta.fusion}; profile: {meta.ranking_profile_status}{why}"
        )

    target.show(response, render)


@main.command()
@click.argument("request_id")
@pack_command()
def receipt(target: Target, request_id: str) -> None:
    """Show the saved receipt of one retrieval."""
    with target.open() as memory:
        found = memory.get_retrieval_receipt(request_id, user_id=target.user_id)
    if found is None:
        raise NotFoundError("Retrieval receipt", request_id)

    def render() -> None:
        _pairs(
            [
                ("request id", found.request_id),
                ("query", found.query),
                ("reference time", found.reference_time.isoformat()),
                ("scopes", _scopes_text(found.scopes)),
                ("fusion", found.scoring.fusion),
                ("multipliers", _multipliers(found.ranking_multipliers)),
                ("pack · write seq", f"{found.pack.pack_id} · {found.pack.write_seq}"),
                ("checksum", found.checksum),
            ]
        )
        rows = [
            (i, f"{c.score:.4f}", c.node_id, "+".join(c.paths))
            for i, c in enumerate(found.candidates, start=1)
        ]
        table(("rank", "score", "node id", "paths"), rows)

    target.show(found, render)


def _label(raw: str) -> tuple[str, bool]:
    node, sep, value = raw.partition("=")
    if not sep or not node.strip() or value.strip().lower() not in ("true", "false"):
        raise CLIError(f"--label {raw!r}: expected NODE=true or NODE=false")
    return node.strip(), value.strip().lower() == "true"


@main.command()
@click.option("--request-id", required=True, help="The retrieval's request id.")
@click.option("--label", "labels", multiple=True, required=True, help="NODE=true|false (repeat).")
@surface_option
@click.option(
    "--method",
    type=click.Choice(["explicit_user", "structured_evaluation"]),
    help="Who judged (default: explicit_user).",
)
@click.option("--feedback-id", help="Reuse only to retry the same judgment.")
@pack_command()
def judge(target: Target, labels: Sequence[str], **fields: Any) -> None:
    """Record explicit relevance labels on candidates a retrieval returned."""
    submission = {k: v for k, v in fields.items() if v is not None}
    submission["labels"] = dict(_label(raw) for raw in labels)
    with target.open() as memory:
        record = memory.record_relevance(submission, user_id=target.user_id)
    if not target.as_json:
        for warning in getattr(record, "warnings", ()):
            click.echo(f"warning: {warning}", err=True)
    target.show(
        record,
        lambda: click.echo(
            f"feedback {record.feedback_id}: {len(record.labels)} labels on {record.request_id}"
        ),
    )


# ------------------------------------------------------------------------------- memories
@main.group(cls=_Group)
def memories() -> None:
    """List, show, update (supersede) and delete the owner's memories."""


def _show_memory(record: MemoryRecord) -> None:
    _pairs(
        [
            ("id", record.id),
            ("scope", record.scope),
            ("node type", record.node_type),
            ("content", record.content),
            ("lifecycle", record.lifecycle_state),
            ("valid", f"{record.valid_from.isoformat()} → {_value(record.valid_to)}"),
            ("supersedes", record.supersedes),
            ("superseded by", record.superseded_by),
            ("expired", record.expired),
        ]
    )


@memories.command("list")
@scopes_option
@click.option("--limit", default=100, show_default=True, help="Page size (1–1000).")
@click.option("--after-id", help="Last memory id of the previous page.")
@pack_command()
def memories_list(
    target: Target, scopes: Sequence[str], limit: int, after_id: str | None
) -> None:
    """The owner's memories ordered by id, a page at a time."""
    with target.open() as memory:
        page = memory.list(
            user_id=target.user_id, scope=_scope_set(scopes), limit=limit, after_id=after_id
        )
    rows = [(m.id, m.scope, m.lifecycle_state, _short(m.content, 60)) for m in page]
    target.show(page, lambda: table(("id", "scope", "lifecycle", "content"), rows))


@memories.command("get")
@click.argument("node_id")
@pack_command()
def memories_get(target: Target, node_id: str) -> None:
    """Show one memory."""
    with target.open() as memory:
        record = memory.get(node_id, user_id=target.user_id)
    if record is None:
        raise NotFoundError("Memory", node_id)
    target.show(record, lambda: _show_memory(record))


@memories.command("delete")
@click.argument("node_id")
@pack_command()
def memories_delete(target: Target, node_id: str) -> None:
    """Delete one memory (saved receipts keep their traces)."""
    with target.open() as memory:
        if not memory.delete(node_id, user_id=target.user_id):
            raise NotFoundError("Memory", node_id)
    result = {"deleted": True, "node_id": node_id}
    target.show(result, lambda: click.echo(f"deleted {node_id}"))


@memories.command("update")
@click.argument("node_id")
@click.option("--content", help="The new text of the memory.")
@click.option("--scope", type=SCOPES, help="A new scope.")
@click.option("--node-type", type=click.Choice([t.value for t in NodeType]), help="Node type.")
@click.option("--confidence", type=float, help="Confidence in [0, 1].")
@click.option("--salience", type=float, help="Salience in [0, 1].")
@click.option("--pinned/--unpinned", default=None, help="Pin (always a candidate) or unpin.")
@click.option("--metadata", help="A JSON object replacing the metadata.")
@pack_command()
def memories_update(target: Target, node_id: str, metadata: str | None, **given: Any) -> None:
    """Supersede a memory with a new version; the old one is kept, valid until now."""
    changes = {k: v for k, v in given.items() if v is not None}
    if metadata is not None:
        changes["metadata"] = _read_json(io.StringIO(metadata), "--metadata")
    with target.open() as memory:
        record = memory.update(node_id, user_id=target.user_id, **changes)
    target.show(record, lambda: _show_memory(record))


# ------------------------------------------------------------------------------- learning
@main.group(cls=_Group)
def learn() -> None:
    """Gate 1, gate 2, profile creation and the HTML report."""


def _show_proposal(p: LearningEvaluation) -> None:
    _pairs(
        [
            ("decision", p.decision),
            ("input checksum", p.input_checksum),
            ("coverage", p.coverage),
            ("exclusions", p.exclusions),
            ("validation NDCG gain", p.validation_ndcg_gain),
            ("interval", p.validation_gain_interval),
            ("p-value", p.randomization_p_value),
            ("win/tie/loss", p.win_tie_loss),
            ("multipliers", _multipliers(p.multipliers)),
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
    groups = None if query_groups is None else _read_json(query_groups, "--query-groups")
    settings = None if config is None else _read_json(config, "--config")
    with target.open() as memory, busy("gate 1: fitting and validating"):
        proposal = memory.evaluate_learning(
            user_id=target.user_id,
            scopes=_scope_set(scopes),
            surface=surface,
            config=settings,
            query_groups=groups,
        )
    target.show(proposal, lambda: _show_proposal(proposal))


def _show_holdout(h: FullRetrievalEvaluation) -> None:
    _pairs(
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
    report = LearningEvaluation.model_validate(_read_json(proposal, "--proposal"))
    if (opts["queries"] is None) == (opts["trials"] is None):
        raise CLIError("give either --queries FILE or --trials FILE")
    if opts["trials"] is not None and opts["artifact_sha256"] is None:
        raise CLIError("--trials needs --artifact-sha256 (your digest of the frozen fixture)")
    owner, scope_set = target.user_id, _scope_set(scopes)
    with target.open(frozen=opts["frozen"]) as memory, busy("gate 2: paired retrievals"):
        if opts["queries"] is not None:
            holdout = memory.run_full_retrieval_holdout(
                [_holdout_query(q) for q in _read_jsonl(opts["queries"], "--queries")],
                user_id=owner,
                scopes=scope_set,
                proposal=report,
                reference_time=opts["reference_time"] or datetime.now().astimezone(),
                limit=opts["limit"],
                memory_artifact_sha256=opts["artifact_sha256"],
            )
        else:
            holdout = memory.evaluate_full_retrieval(
                _read_jsonl(opts["trials"], "--trials"),
                user_id=owner,
                scopes=scope_set,
                proposal_input_checksum=report.input_checksum,
                memory_artifact_sha256=opts["artifact_sha256"],
                candidate_multipliers=report.multipliers,
            )
    target.show(holdout, lambda: _show_holdout(holdout))


def _show_profile(p: RankingProfile) -> None:
    _pairs(
        [
            ("profile id", p.profile_id),
            ("created at", p.created_at.isoformat()),
            ("scopes", _scopes_text(p.scopes)),
            ("baseline profile", p.baseline_profile_id or "base scoring"),
            ("multipliers", _multipliers(p.multipliers)),
            ("gate 1", f"{p.proposal.decision} (gain {_value(p.proposal.validation_ndcg_gain)})"),
            ("gate 2", f"{p.holdout.decision} (gain {_value(p.holdout.ndcg_gain)})"),
        ]
    )


@learn.command("create")
@click.option("--proposal", type=click.File("r"), required=True, help="Gate-1 report JSON file.")
@click.option("--holdout", type=click.File("r"), required=True, help="Gate-2 report JSON file.")
@click.option("--profile-id", help="A UUID making creation idempotent.")
@click.option("--baseline-profile-id", help="The profile active when the holdout ran.")
@pack_command()
def learn_create(target: Target, proposal: IO[str], holdout: IO[str], **ids: Any) -> None:
    """Create an immutable ranking profile from two passing, attested reports."""
    reports = (_read_json(proposal, "--proposal"), _read_json(holdout, "--holdout"))
    with target.open() as memory:
        profile = memory.create_ranking_profile(*reports, user_id=target.user_id, **ids)
    target.show(profile, lambda: _show_profile(profile))


@learn.command("report")
@click.argument("profile_id")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="File.")
@path_option()
@user_option()
def learn_report(profile_id: str, out: Path, path: Path, user_id: str) -> None:
    """Write the self-contained HTML report of a profile and its pointer history."""
    with MemoryClient(path, create=False) as memory:
        profile_id = _profile_id(memory, user_id, profile_id)
        profile = memory.get_ranking_profile(profile_id, user_id=user_id)
        if profile is None:
            raise NotFoundError("Ranking profile", profile_id)
        scopes = list(profile.scopes) if profile.scopes is not None else None
        history = memory.list_ranking_profile_history(user_id=user_id, scopes=scopes)
    html = render_report(profile.proposal, profile.holdout, profile=profile, history=history)
    out.write_text(html, encoding="utf-8")
    click.echo(str(out))


# ------------------------------------------------------------------------------- profiles
@main.group(cls=_Group)
def profiles() -> None:
    """Inspect ranking profiles and move the activation pointer."""


def _show_states(states: Sequence[RankingProfileState | None]) -> None:
    rows = [
        (
            s.changed_at.isoformat(),
            s.action,
            s.previous_profile_id or "base",
            s.active_profile_id or "base",
            s.change_id,
        )
        for s in states
        if s is not None
    ]
    if not rows:
        click.echo("no change: no profile was active")
        return
    table(("changed at", "action", "previous", "active", "change id"), rows)


@profiles.command("list")
@click.option("--limit", default=100, show_default=True, help="Page size (1–1000).")
@click.option("--after-id", help="Last profile id of the previous page.")
@pack_command()
def profiles_list(target: Target, limit: int, after_id: str | None) -> None:
    """List the owner's ranking profiles, newest first."""
    with target.open() as memory:
        found = memory.list_ranking_profiles(user_id=target.user_id, limit=limit, after_id=after_id)
    rows = [
        (
            p.profile_id,
            p.created_at.isoformat(),
            _scopes_text(p.scopes),
            _multipliers(p.multipliers),
        )
        for p in found
    ]
    target.show(found, lambda: table(("profile id", "created at", "scopes", "multipliers"), rows))


@profiles.command("show")
@click.argument("profile_id")
@pack_command()
def profiles_show(target: Target, profile_id: str) -> None:
    """Show a profile, whether it is active, and its pointer's latest change."""
    with target.open() as memory:
        profile_id = _profile_id(memory, target.user_id, profile_id)
        status = memory.get_ranking_profile_status(profile_id, user_id=target.user_id)
    if status is None:
        raise NotFoundError("Ranking profile", profile_id)

    def render() -> None:
        _show_profile(status.profile)
        click.echo(f"active: {status.active}")
        _show_states([status.latest_change])

    target.show(status, render)


@profiles.command("active")
@scopes_option
@pack_command()
def profiles_active(target: Target, scopes: Sequence[str]) -> None:
    """Show the profile active for the exact scope set (or base scoring)."""
    with target.open() as memory:
        active = memory.get_active_ranking_profile(
            user_id=target.user_id, scopes=_scope_set(scopes)
        )
    if active is None:
        return target.show(None, lambda: click.echo("base scoring (no active profile)"))
    target.show(active, lambda: _show_profile(active))


@profiles.command("history")
@scopes_option
@click.option("--limit", default=100, show_default=True, help="Most recent transitions (1–1000).")
@click.option("--after-change-id", help="Last change id of the previous page (older ones next).")
@pack_command()
def profiles_history(
    target: Target, scopes: Sequence[str], limit: int, after_change_id: str | None
) -> None:
    """List the pointer transitions of the exact scope set, newest first."""
    with target.open() as memory:
        states = memory.list_ranking_profile_history(
            user_id=target.user_id,
            scopes=_scope_set(scopes),
            limit=limit,
            after_change_id=after_change_id,
        )
    target.show(states, lambda: _show_states(states))


@profiles.command("activate")
@click.argument("profile_id")
@change_option
@pack_command()
def profiles_activate(target: Target, profile_id: str, change_id: str | None) -> None:
    """Activate a profile for its owner and exact scope set."""
    with target.open() as memory:
        state = memory.activate_ranking_profile(
            _profile_id(memory, target.user_id, profile_id),
            user_id=target.user_id,
            change_id=change_id,
        )
    target.show(state, lambda: _show_states([state]))


@profiles.command("deactivate")
@scopes_option
@change_option
@pack_command()
def profiles_deactivate(target: Target, scopes: Sequence[str], change_id: str | None) -> None:
    """Return the exact scope set to base scoring."""
    with target.open() as memory:
        state = memory.deactivate_ranking_profile(
            user_id=target.user_id, scopes=_scope_set(scopes), change_id=change_id
        )
    target.show(state, lambda: _show_states([state]))


@profiles.command("rollback")
@click.argument("profile_id", required=False)
@click.option("--to-base", is_flag=True, help="Roll back to base scoring instead of a profile.")
@scopes_option
@change_option
@pack_command()
def profiles_rollback(
    target: Target, profile_id: str | None, to_base: bool, scopes: Sequence[str], change_id: Any
) -> None:
    """Point the scope set back at a profile it had active before (or --to-base)."""
    if (profile_id is None) != to_base:
        raise CLIError("give either PROFILE_ID or --to-base")
    with target.open() as memory:
        if profile_id is not None:
            profile_id = _profile_id(memory, target.user_id, profile_id)
        state = memory.rollback_ranking_profile(
            profile_id, user_id=target.user_id, scopes=_scope_set(scopes), change_id=change_id
        )
    target.show(state, lambda: _show_states([state]))


# ----------------------------------------------------------------------------------- pack
@main.group(cls=_Group)
def pack() -> None:
    """Pack-level commands."""


def _settings_rows(settings: dict[str, Any] | None) -> list[tuple[str, object]]:
    if settings is None:
        return [("settings", "none recorded (the environment decides)")]
    embedding, scoring = settings.get("embedding", {}), settings.get("scoring", {})
    return [
        ("embedder", embedding.get("provider")),
        ("fusion", scoring.get("fusion")),
        ("token budget", settings.get("retrieval", {}).get("token_budget")),
    ]


FUSIONS = click.Choice(["weighted", "rrf"])


@main.command()
@path_option()
@click.option(
    "--fusion",
    type=FUSIONS,
    help="Score fusion: weighted (learning-ready, profiles apply) or rrf (default).",
)
@click.option(
    "--embedder", type=click.Choice(provider_names()), help="Embedding provider (default minilm)."
)
@click.option(
    "--postgres",
    "postgres_url",
    envvar="PRME_STORAGE__POSTGRES_URL",
    help="PostgreSQL URL: create the pack there, not at --path (env PRME_STORAGE__POSTGRES_URL).",
)
@json_option
def init(
    path: Path, fusion: str | None, embedder: str | None, postgres_url: str | None, as_json: bool
) -> None:
    """Create a memory pack at PATH (or in a PostgreSQL schema) that records its retrieval
    settings; later commands on it need no PRME_* variables. A learning-ready pack:
    prme init --path DIR --fusion weighted."""
    exists = "a pack already exists at {}; change it with `prme pack configure`"
    if postgres_url is None and (path / DB_FILE).exists():
        raise CLIError(exists.format(path))
    config = PRMEConfig()
    update: dict[str, Any] = {}
    if fusion is not None:
        update["scoring"] = scoring_for(fusion)
    if embedder is not None:
        update["embedding"] = EmbeddingConfig(provider=embedder)
    config = PRMEConfig(**{**dict(config), **update}) if update else config
    with MemoryClient(path, config=config, create=True, postgres_url=postgres_url) as memory:
        where = getattr(memory.engine.store, "storage_name", path) if postgres_url else path
        if not getattr(memory.engine.store, "created", True):
            raise CLIError(exists.format(where))
        settings = memory.pack_settings()
    rows = [("pack", where), *_settings_rows(settings)]
    target = Target(path, "", as_json)
    target.show(settings, lambda: _pairs(rows))


@pack.command("settings")
@pack_command(user=False)
def pack_settings_show(target: Target) -> None:
    """Show the retrieval settings the pack records (embedder, fusion, packing budget)."""
    with target.open() as memory:
        settings = memory.pack_settings()
    target.show(settings, lambda: _pairs(_settings_rows(settings)))


@pack.command("configure")
@click.option("--fusion", type=FUSIONS, help="New score fusion: weighted or rrf.")
@click.option(
    "--embedder",
    type=click.Choice(provider_names()),
    help="New embedding provider (only before any memory is stored).",
)
@pack_command(user=False)
def pack_configure(target: Target, fusion: str | None, embedder: str | None) -> None:
    """Change the pack's recorded settings (a content write: the write sequence moves)."""
    base = PRMEConfig()
    config = PRMEConfig.model_construct(storage=base.storage, api=base.api, mcp=base.mcp)
    with MemoryClient(target.path, config=config, create=False) as memory:
        settings = memory.configure_pack(fusion=fusion, embedder=embedder)
    target.show(settings, lambda: _pairs(_settings_rows(settings)))


@pack.command("digest")
@pack_command(user=False)
def pack_digest(target: Target) -> None:
    """Print the SHA-256 over the pack's retrieval-relevant content."""
    with target.open() as memory:
        digest = memory.pack_digest()
    target.show({"pack_digest": digest}, lambda: click.echo(digest))


@pack.command("check")
@pack_command(user=False)
def pack_check(target: Target) -> None:
    """Check the pack's integrity (SQLite, log checksums, receipts, pointers); exit 1 on problems."""
    with target.open() as memory, busy("checking the pack"):
        report = memory.check_pack()

    def render() -> None:
        _pairs([(k, v) for k, v in report.model_dump().items() if k != "problems"])
        if report.problems:
            rows = [(p.check, p.ref, p.message) for p in report.problems]
            table(("check", "ref", "problem"), rows)

    target.show(report, render)
    if not report.ok:
        raise click.exceptions.Exit(1)


@pack.command("prune")
@click.option(
    "--receipts-older-than",
    "days",
    type=float,
    required=True,
    help="Remove receipts saved more than DAYS ago that nothing refers to.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be removed; write nothing.")
@pack_command(user=False)
def pack_prune(target: Target, days: float, dry_run: bool) -> None:
    """Remove old retrieval receipts no judgment, report or profile refers to (audited)."""
    with target.open() as memory, busy("pruning receipts"):
        summary = memory.prune_receipts(older_than=days, dry_run=dry_run)
    shown = [(k, v) for k, v in summary.model_dump(mode="json").items() if k != "audit_op_ids"]
    target.show(summary, lambda: _pairs([*shown, ("audit records", len(summary.audit_op_ids))]))


@pack.command("export")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@pack_command(user=False)
def pack_export(target: Target, file: Path) -> None:
    """Write the whole pack, secret included, to FILE (JSON Lines) for ``prme pack import``;
    ``-`` writes to stdout (the summary then goes to stderr)."""
    to_stdout = str(file) == "-"
    with target.open() as memory, busy("exporting the pack"):
        summary = memory.export_pack(sys.stdout if to_stdout else file)
    shown = dataclasses.asdict(summary)
    if to_stdout:
        click.echo(json.dumps(shown, ensure_ascii=False), err=True)
        return
    target.show(shown, lambda: _pairs(list(shown.items())))


@pack.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@pack_command(user=False)
def pack_import(target: Target, file: Path) -> None:
    """Load FILE (from ``prme pack export``; ``-`` reads stdin) into an empty pack;
    PRME_STORAGE__POSTGRES_URL selects PostgreSQL."""
    with target.open(create=None) as memory, busy("importing the pack"):
        summary = memory.import_pack(sys.stdin if str(file) == "-" else file)
    shown = dataclasses.asdict(summary)
    target.show(shown, lambda: _pairs(list(shown.items())))


@main.group(cls=_Group)
def db() -> None:
    """PostgreSQL schema commands."""


@db.command("upgrade")
@click.option(
    "--postgres",
    "postgres_url",
    envvar="PRME_STORAGE__POSTGRES_URL",
    required=True,
    help="PostgreSQL URL (env PRME_STORAGE__POSTGRES_URL).",
)
@click.option("--schema", help="Pack schema (default: the URL's search_path option, else prme).")
@json_option
def db_upgrade(postgres_url: str, schema: str | None, as_json: bool) -> None:
    """Apply pending PostgreSQL schema migrations (versioned, idempotent)."""
    from prme.storage.migrations import upgrade

    applied = upgrade(postgres_url, schema=schema)
    if as_json:
        emit_json({"applied": applied})
    else:
        click.echo(f"applied migrations {applied}" if applied else "the schema is up to date")
