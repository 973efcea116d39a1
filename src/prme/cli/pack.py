"""Pack-level commands: ``init``, the ``pack`` group (settings, configure, digest, index,
check, prune, export, import) and ``db upgrade`` for PostgreSQL schemas."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import click

from prme.cli.options import (
    CLIError,
    Group,
    Target,
    json_option,
    pack_command,
    path_option,
)
from prme.cli.output import (
    busy,
    emit_json,
    pairs,
    table,
)
from prme.client import MemoryClient
from prme.config import EmbeddingConfig, PRMEConfig
from prme.embed.registry import provider_names
from prme.models.retrieval import VECTOR_INDEXES
from prme.services import packs
from prme.services.pack_settings import scoring_for


# ----------------------------------------------------------------------------------- pack
@click.group(cls=Group)
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
        ("vector index", settings.get("retrieval", {}).get("vector_index")),
    ]


FUSIONS = click.Choice(["weighted", "rrf"])


@click.command()
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
    if postgres_url is None and packs.pack_exists(path):
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
    target.show(settings, lambda: pairs(rows))


@pack.command("settings")
@pack_command(user=False)
def pack_settings_show(target: Target) -> None:
    """Show the retrieval settings the pack records (embedder, fusion, packing budget)."""
    with target.open() as memory:
        settings = memory.pack_settings()
    target.show(settings, lambda: pairs(_settings_rows(settings)))


@pack.command("configure")
@click.option("--fusion", type=FUSIONS, help="New score fusion: weighted or rrf.")
@click.option(
    "--embedder",
    type=click.Choice(provider_names()),
    help="New embedding provider (only before any memory is stored).",
)
@click.option(
    "--vector-index",
    type=click.Choice(VECTOR_INDEXES),
    help="New vector search: exact (every cosine) or hnsw (HNSW segments past the threshold).",
)
@pack_command(user=False)
def pack_configure(
    target: Target, fusion: str | None, embedder: str | None, vector_index: str | None
) -> None:
    """Change the pack's recorded settings (a content write: the write sequence moves)."""
    base = PRMEConfig()
    config = PRMEConfig.model_construct(storage=base.storage, api=base.api, mcp=base.mcp)
    with MemoryClient(target.path, config=config, create=False) as memory:
        settings = memory.configure_pack(
            fusion=fusion, embedder=embedder, vector_index=vector_index
        )
    target.show(settings, lambda: pairs(_settings_rows(settings)))


@pack.command("digest")
@pack_command(user=False)
def pack_digest(target: Target) -> None:
    """Print the SHA-256 over the pack's retrieval-relevant content."""
    with target.open() as memory:
        digest = memory.pack_digest()
    target.show({"pack_digest": digest}, lambda: click.echo(digest))


@pack.command("index")
@pack_command()
def pack_index(target: Target) -> None:
    """Build and save the owner's index now (after a bulk load), not in the next retrieve."""
    with target.open() as memory, busy("building the owner's index"):
        report = memory.build_index(user_id=target.user_id)
    target.show(report, lambda: pairs(list(report.model_dump().items())))


@pack.command("check")
@pack_command(user=False)
def pack_check(target: Target) -> None:
    """Check the pack's integrity (SQLite, log checksums, receipts, pointers); exit 1 on problems."""
    with target.open() as memory, busy("checking the pack"):
        report = memory.check_pack()

    def render() -> None:
        pairs([(k, v) for k, v in report.model_dump().items() if k != "problems"])
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
    target.show(summary, lambda: pairs([*shown, ("audit records", len(summary.audit_op_ids))]))


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
    target.show(shown, lambda: pairs(list(shown.items())))


@pack.command("import")
@click.argument(
    "file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@pack_command(user=False)
def pack_import(target: Target, file: Path) -> None:
    """Load FILE (from ``prme pack export``; ``-`` reads stdin) into an empty pack;
    PRME_STORAGE__POSTGRES_URL selects PostgreSQL."""
    with target.open(create=None) as memory, busy("importing the pack"):
        summary = memory.import_pack(sys.stdin if str(file) == "-" else file)
    shown = dataclasses.asdict(summary)
    target.show(shown, lambda: pairs(list(shown.items())))


@click.group(cls=Group)
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
    applied = packs.upgrade_postgres(postgres_url, schema=schema)
    if as_json:
        emit_json({"applied": applied})
    else:
        click.echo(f"applied migrations {applied}" if applied else "the schema is up to date")
