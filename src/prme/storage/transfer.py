"""Move a pack between backends (SQLite ↔ PostgreSQL) losslessly, as one JSON Lines file.

Lines, in order: a ``header`` (format, pack id, **secret**, write and delete sequences, each
owner's content write sequence, bound embedder), every ``memory`` (raw stored columns, row id included), every ``vector`` (float32
little-endian, base64), every ``entity`` link, every ``op`` of the operations log in sequence
order with its checksum, and an ``end`` line with the counts (a truncated file is refused).

Because the pack id, write sequences and secret move with the pack, receipts keep their
checksums and pack identity and attestations made by the source verify in the target. The
import runs in one transaction into an empty pack: on any error nothing is written.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from prme.canonical import canonical_json, sha256_hex
from prme.errors import FrozenPackError, IntegrityError, InvalidInputError
from prme.storage.base import Store
from prme.storage.oplog_sql import stored_payload
from prme.storage.pack_rows import (
    COLUMNS,
    ENTITY_COLUMNS,
    OPLOG_COLUMNS,
    ROW_KINDS,
    RowKind,
)

FORMAT = "prme-pack"
FORMAT_VERSION = 1
BATCH = 1000
MEMORY_COLUMNS = COLUMNS["memory"]
KINDS = ROW_KINDS
_META_KEYS = ("pack_id", "secret", "write_seq", "delete_seq")


@dataclass(frozen=True)
class TransferSummary:
    """What moved: the pack identity and the number of rows of each kind."""

    pack_id: str
    write_seq: int
    counts: dict[str, int] = field(default_factory=dict)


# -------------------------------------------------------------------------- export
def _records(store: Store) -> Iterator[dict[str, Any]]:
    meta = store.meta_values()
    embedder = meta.get("embedder")
    yield {
        "kind": "header",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "source_backend": store.backend_name,
        "embedder": None if embedder is None else json.loads(embedder),
        **{key: meta[key] for key in _META_KEYS},
        "owner_sequences": store.owner_sequences(),
        # The pack's recorded retrieval settings (services/pack_settings.py), when it has any.
        **({"settings": json.loads(meta["settings"])} if "settings" in meta else {}),
    }
    counts = dict.fromkeys(KINDS, 0)
    for row in store.iter_rows("memory"):
        counts["memory"] += 1
        yield {"kind": "memory", **dict(zip(MEMORY_COLUMNS, row, strict=True))}
    for rowid, vector in store.iter_rows("vector"):
        counts["vector"] += 1
        data = base64.b64encode(vector).decode("ascii")
        yield {"kind": "vector", "rowid": rowid, "f32le": data}
    for row in store.iter_rows("entity"):
        counts["entity"] += 1
        yield {"kind": "entity", **dict(zip(ENTITY_COLUMNS, row, strict=True))}
    for row in store.iter_rows("op"):
        op = dict(zip(OPLOG_COLUMNS, row, strict=True))
        # the export carries the canonical text, whatever the stored form (storage/payloads.py)
        op["payload"] = stored_payload(op["payload"], str(op["op_type"]), str(op["op_id"]))
        if sha256_hex(op["payload"]) != op["checksum"]:
            raise IntegrityError(f"operations log checksum mismatch for {op['op_id']}")
        counts["op"] += 1
        yield {"kind": "op", **op}
    yield {"kind": "end", "counts": counts}


@contextmanager
def _text(target: str | Path | IO[str], mode: str) -> Iterator[IO[str]]:
    if isinstance(target, str | Path):
        with Path(target).open(mode, encoding="utf-8", newline="\n") as handle:
            yield handle
    else:
        with nullcontext(target) as handle:
            yield handle


def export_pack(store: Store, target: str | Path | IO[str]) -> TransferSummary:
    """Write the whole pack (one consistent snapshot) to ``target`` as JSON Lines.

    Args:
        store: an open SQLite or PostgreSQL store.
        target: a file path or a text file open for writing.

    Returns:
        The pack identity and row counts written.

    Raises:
        IntegrityError: a stored operation fails its checksum (nothing trustworthy to move).
    """
    header: dict[str, Any] = {}
    counts: dict[str, int] = {}
    with store.read_snapshot(), _text(target, "w") as out:
        for record in _records(store):
            if record["kind"] == "header":
                header = record
            if record["kind"] == "end":
                counts = record["counts"]
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    return TransferSummary(str(header["pack_id"]), int(header["write_seq"]), counts)


# -------------------------------------------------------------------------- import
def _is_empty(store: Store) -> bool:
    meta = store.meta_values()
    if "embedder" in meta or meta.get("write_seq") != "0" or meta.get("delete_seq") != "0":
        return False
    return not any(next(iter(store.iter_rows(kind)), None) for kind in ("memory", "op"))


def _parse(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError("source", f"line {number} is not JSON: {exc.msg}") from None
        if not isinstance(record, dict) or "kind" not in record:
            raise InvalidInputError("source", f"line {number} is not a pack record")
        yield record


def _row(record: dict[str, Any], dimension: int | None) -> tuple[Any, ...]:
    kind = record["kind"]
    if kind == "memory":
        if sha256_hex(record["content"]) != record["content_sha256"]:
            raise IntegrityError(f"memory {record['id']}: content checksum mismatch")
        return tuple(record[c] for c in MEMORY_COLUMNS)
    if kind == "vector":
        data = base64.b64decode(record["f32le"], validate=True)
        if dimension is not None and len(data) != 4 * dimension:
            raise IntegrityError(f"vector {record['rowid']}: expected {dimension} dimensions")
        return (record["rowid"], data)
    if kind == "entity":
        return tuple(record[c] for c in ENTITY_COLUMNS)
    if sha256_hex(record["payload"]) != record["checksum"]:
        raise IntegrityError(f"operations log checksum mismatch for {record['op_id']}")
    return tuple(record[c] for c in OPLOG_COLUMNS)


def _owner_sequences(value: object) -> dict[str, int]:
    """The header's ``{owner: content write sequence}`` (absent from older exports: none)."""
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in value.items()
    ):
        raise InvalidInputError("source", "owner_sequences must map owners to sequences >= 0")
    return dict(sorted(value.items()))


def import_pack(store: Store, source: str | Path | IO[str]) -> TransferSummary:
    """Load an exported pack into an **empty** store, in one transaction.

    The target takes the source's pack id, secret, write sequence and embedder, so receipts,
    reports and profiles verify there exactly as in the source.

    Args:
        store: an open, empty SQLite or PostgreSQL store (not frozen).
        source: a file path or a text file open for reading.

    Returns:
        The pack identity and row counts read.

    Raises:
        InvalidInputError: the target is not empty, or the file is not a prme pack.
        IntegrityError: a checksum fails or the file is truncated (nothing is written).
        FrozenPackError: the target store is frozen.
    """
    if getattr(store, "frozen", False):
        raise FrozenPackError("import")
    counts: dict[str, int] = dict.fromkeys(KINDS, 0)
    with _text(source, "r") as handle, store.serialized("content"):
        if not _is_empty(store):
            raise InvalidInputError("store", "the target pack is not empty; import needs a new one")
        records = _parse(handle)
        header = next(records, None)
        if header is None or header.get("format") != FORMAT:
            raise InvalidInputError("source", "not a prme pack export (no header line)")
        if header.get("version") != FORMAT_VERSION:
            raise InvalidInputError("source", f"unsupported pack format {header.get('version')}")
        embedder = header.get("embedder")
        dimension = None if embedder is None else int(embedder["dimension"])
        store.import_meta(
            {key: str(header[key]) for key in _META_KEYS},
            None if embedder is None else canonical_json(embedder),
            _owner_sequences(header.get("owner_sequences", {})),
        )
        settings = header.get("settings")
        if settings is not None:
            if not isinstance(settings, dict):
                raise InvalidInputError("source", "the header's settings are not an object")
            store.record_settings(settings, bump=False)
        pending: list[tuple[Any, ...]] = []
        current: RowKind = "memory"
        end: dict[str, Any] | None = None
        for record in records:
            kind = record["kind"]
            if kind == "end":
                end = record
                break
            if kind not in KINDS:
                raise InvalidInputError("source", f"unknown record kind {kind!r}")
            if pending and (kind != current or len(pending) >= BATCH):
                store.import_rows(current, pending)
                pending = []
            current = cast(RowKind, kind)
            pending.append(_row(record, dimension))
            counts[kind] += 1
        if pending:
            store.import_rows(current, pending)
        if end is None or end.get("counts") != counts:
            raise IntegrityError("the pack export is truncated or its counts do not match")
        store.finish_import()
    store.reload()
    return TransferSummary(str(header["pack_id"]), int(header["write_seq"]), counts)
