"""Storing, retrieving and judging: ``store``, ``retrieve``, ``receipt``, ``judge`` and the
``memories`` group (list, get, update, delete)."""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from typing import IO, Any

import click

from prme.cli.options import (
    SCOPES,
    AwareDateTime,
    CLIError,
    Group,
    Target,
    create_option,
    pack_command,
    read_json,
    read_jsonl,
    scope_set,
    scopes_option,
    surface_option,
)
from prme.cli.output import (
    cell,
    multipliers_text,
    pairs,
    progress_factory,
    scopes_text,
    short,
    table,
)
from prme.errors import (
    NotFoundError,
)
from prme.models.enums import NodeType
from prme.models.memory import MemoryRecord


@click.command()
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
    lines = read_jsonl(jsonl or sys.stdin, "--jsonl")
    items = [{**fields, **(i if isinstance(i, dict) else {"content": i})} for i in lines]
    ids: list[str] = []
    with opened as memory, progress_factory()("storing", len(items)) as bar:
        for start in range(0, len(items), batch_size):
            batch = items[start : start + batch_size]
            ids.extend(memory.store_many(batch, user_id=target.user_id))
            bar.update(len(batch))
    target.show(ids, lambda: click.echo("\n".join(ids)))


@click.command()
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
            scope=scope_set(scopes),
            limit=limit,
            reference_time=reference_time,
        )
    meta = response.metadata

    def render() -> None:
        rows = [
            (i, f"{r.composite_score:.4f}", r.node.id, r.node.scope, short(r.node.content))
            for i, r in enumerate(response.results, start=1)
        ]
        table(("rank", "score", "node id", "scope", "content"), rows)
        why = f" ({meta.ranking_profile_reason})" if meta.ranking_profile_reason else ""
        click.echo(
            f"request {meta.request_id}; receipt saved: {meta.receipt_persisted}; fusion "
            f"{meta.fusion}; profile: {meta.ranking_profile_status}{why}"
        )

    target.show(response, render)


@click.command()
@click.argument("request_id")
@pack_command()
def receipt(target: Target, request_id: str) -> None:
    """Show the saved receipt of one retrieval."""
    with target.open() as memory:
        found = memory.get_retrieval_receipt(request_id, user_id=target.user_id)
    if found is None:
        raise NotFoundError("Retrieval receipt", request_id)

    def render() -> None:
        pairs(
            [
                ("request id", found.request_id),
                ("query", found.query),
                ("reference time", found.reference_time.isoformat()),
                ("scopes", scopes_text(found.scopes)),
                ("fusion", found.scoring.fusion),
                ("multipliers", multipliers_text(found.ranking_multipliers)),
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


@click.command()
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
@click.group(cls=Group)
def memories() -> None:
    """List, show, update (supersede) and delete the owner's memories."""


def _show_memory(record: MemoryRecord) -> None:
    pairs(
        [
            ("id", record.id),
            ("scope", record.scope),
            ("node type", record.node_type),
            ("content", record.content),
            ("lifecycle", record.lifecycle_state),
            ("valid", f"{record.valid_from.isoformat()} → {cell(record.valid_to)}"),
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
def memories_list(target: Target, scopes: Sequence[str], limit: int, after_id: str | None) -> None:
    """The owner's memories ordered by id, a page at a time."""
    with target.open() as memory:
        page = memory.list(
            user_id=target.user_id, scope=scope_set(scopes), limit=limit, after_id=after_id
        )
    rows = [(m.id, m.scope, m.lifecycle_state, short(m.content, 60)) for m in page]
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
        changes["metadata"] = read_json(io.StringIO(metadata), "--metadata")
    with target.open() as memory:
        record = memory.update(node_id, user_id=target.user_id, **changes)
    target.show(record, lambda: _show_memory(record))
