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
import itertools
import json
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from prme.canonical import canonical_json, sha256_hex
from prme.errors import FrozenPackError, IntegrityError, InvalidInputError
from prme.storage import payloads
from prme.storage.base import Store
from prme.storage.oplog_sql import stored_payload
from prme.storage.rows import VALUE_COLUMNS
from prme.storage.sqlite import SQLiteStore

if TYPE_CHECKING:
    from prme.storage.postgres import PostgresStore

FORMAT = "prme-pack"
FORMAT_VERSION = 1
BATCH = 1000
MEMORY_COLUMNS = ("rowid", *VALUE_COLUMNS)
ENTITY_COLUMNS = ("user_id", "name", "memory_rowid")
OP_COLUMNS = (
    "seq",
    "op_id",
    "op_type",
    "user_id",
    "target_id",
    "namespace",
    "created_at",
    "payload",
    "checksum",
)
KINDS = ("memory", "vector", "entity", "op")
_META_KEYS = ("pack_id", "secret", "write_seq", "delete_seq")


@dataclass(frozen=True)
class TransferSummary:
    """What moved: the pack identity and the number of rows of each kind."""

    pack_id: str
    write_seq: int
    counts: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------------ backends
class _Backend:
    """The few SQL differences between the two stores, behind one interface."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def snapshot(self) -> AbstractContextManager[Any]:
        return self.store.read_snapshot()

    def rows(self, sql: str) -> Iterator[tuple[Any, ...]]:
        raise NotImplementedError

    def vector_le(self, raw: Any) -> bytes:
        return bytes(raw)

    def write(self) -> AbstractContextManager[Any]:
        return self.store.serialized("content")

    def insert(self, kind: str, rows: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    def set_meta(self, meta: dict[str, str], embedder: str | None, owners: dict[str, int]) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Rebuild derived state after all rows are in (inside the import transaction): the
        kept digest state is recomputed from the imported rows."""
        raise NotImplementedError

    def reload(self) -> None:
        raise NotImplementedError


class _SQLite(_Backend):
    store: SQLiteStore

    def rows(self, sql: str) -> Iterator[tuple[Any, ...]]:
        yield from self.store.conn.execute(sql)

    def insert(self, kind: str, rows: list[tuple[Any, ...]]) -> None:
        conn = self.store.conn
        if kind == "memory":
            marks = ",".join("?" * len(MEMORY_COLUMNS))
            conn.executemany(
                f"INSERT INTO memories({', '.join(MEMORY_COLUMNS)}) VALUES ({marks})",
                [(*r[:26], int(r[26]), *r[27:]) for r in rows],
            )
            conn.executemany(
                "INSERT INTO memories_fts(rowid, content) VALUES (?, ?)",
                [(r[0], r[5]) for r in rows],
            )
        elif kind == "vector":
            conn.executemany("INSERT INTO vectors(rowid, vec) VALUES (?, ?)", rows)
        elif kind == "entity":
            conn.executemany(
                "INSERT INTO entities(user_id, name, memory_rowid) VALUES (?, ?, ?)", rows
            )
        else:
            marks = ",".join("?" * len(OP_COLUMNS))
            conn.executemany(
                f"INSERT INTO oplog({', '.join(OP_COLUMNS)}) VALUES ({marks})",
                [(*r[:7], payloads.encode(r[2], r[7]), r[8]) for r in rows],
            )

    def set_meta(self, meta: dict[str, str], embedder: str | None, owners: dict[str, int]) -> None:
        conn = self.store.conn
        for key in _META_KEYS:
            conn.execute("UPDATE meta SET value = ? WHERE key = ?", (meta[key], key))
        if embedder is not None:
            conn.execute("INSERT INTO meta(key, value) VALUES ('embedder', ?)", (embedder,))
        conn.executemany(
            "INSERT INTO owner_sequences(user_id, write_seq) VALUES (?, ?)", owners.items()
        )

    def finish(self) -> None:
        self.store.rebuild_digest_state()

    def reload(self) -> None:
        # SQLiteStore caches its identity at open; refresh it to the imported pack.
        store = self.store
        store._secret = bytes.fromhex(store._meta("secret"))
        store._pack_id = store._meta("pack_id")
        store._embedder = None
        with store._index_lock:
            store._indexes.clear()


class _Postgres(_Backend):
    store: PostgresStore
    _cursors = itertools.count()

    def rows(self, sql: str) -> Iterator[tuple[Any, ...]]:
        name = f"prme_transfer_{next(self._cursors)}"
        with self.store.transaction() as conn, conn.cursor(name=name, binary=True) as cur:
            cur.itersize = BATCH
            cur.execute(sql)
            yield from cur

    def vector_le(self, raw: Any) -> bytes:
        return np.frombuffer(bytes(raw), dtype=">f4", offset=4).astype("<f4").tobytes()

    def insert(self, kind: str, rows: list[tuple[Any, ...]]) -> None:
        from prme.storage.postgres import PgVector

        columns = {"memory": MEMORY_COLUMNS, "entity": ENTITY_COLUMNS, "op": OP_COLUMNS}
        table = {"memory": "memories", "entity": "entities", "op": "oplog"}
        with self.store.transaction() as conn, conn.cursor() as cur:
            if kind == "vector":
                encoded = [
                    (rowid, PgVector.encode(np.frombuffer(le, dtype="<f4"))) for rowid, le in rows
                ]
                cur.executemany("INSERT INTO vectors(rowid, vec) VALUES (%s, %b)", encoded)
                return
            names = columns[kind]
            marks = ",".join(["%s"] * len(names))
            if kind == "memory":
                rows = [(*r[:26], bool(r[26]), *r[27:]) for r in rows]
            elif kind == "op":
                rows = [(*r[:7], payloads.encode_bytes(r[2], r[7]), r[8]) for r in rows]
            cur.executemany(f"INSERT INTO {table[kind]}({', '.join(names)}) VALUES ({marks})", rows)

    def set_meta(self, meta: dict[str, str], embedder: str | None, owners: dict[str, int]) -> None:
        with self.store.transaction() as conn:
            for key in _META_KEYS:
                conn.execute("UPDATE meta SET value = %s WHERE key = %s", (meta[key], key))
            if embedder is not None:
                conn.execute("INSERT INTO meta(key, value) VALUES ('embedder', %s)", (embedder,))
                self.store._type_vectors(conn, json.loads(embedder))
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO owner_sequences(user_id, write_seq) VALUES (%s, %s)",
                    list(owners.items()),
                )

    def finish(self) -> None:
        from prme.storage.migrations import lexical_statistics_rebuild

        with self.store.transaction() as conn:
            for statement in lexical_statistics_rebuild():
                conn.execute(statement)
            conn.execute(
                "SELECT setval(pg_get_serial_sequence('oplog', 'seq'),"
                " GREATEST(MAX(seq), 1), MAX(seq) IS NOT NULL) FROM oplog"
            )
            self.store.rebuild_digest_state()

    def reload(self) -> None:
        self.store.reload()


def _backend(store: Store) -> _Backend:
    if isinstance(store, SQLiteStore):
        return _SQLite(store)
    if store.backend_name == "postgres":
        return _Postgres(store)  # a PostgresStore: the only other backend
    raise InvalidInputError("store", f"cannot transfer a {store.backend_name!r} pack")


# -------------------------------------------------------------------------- export
def _records(backend: _Backend) -> Iterator[dict[str, Any]]:
    meta = dict(backend.rows("SELECT key, value FROM meta"))
    embedder = meta.get("embedder")
    yield {
        "kind": "header",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "source_backend": backend.store.backend_name,
        "embedder": None if embedder is None else json.loads(embedder),
        **{key: meta[key] for key in _META_KEYS},
        "owner_sequences": {
            str(user_id): int(seq)
            for user_id, seq in backend.rows(
                "SELECT user_id, write_seq FROM owner_sequences ORDER BY user_id"
            )
        },
        # The pack's recorded retrieval settings (services/pack_settings.py), when it has any.
        **({"settings": json.loads(meta["settings"])} if "settings" in meta else {}),
    }
    counts = dict.fromkeys(KINDS, 0)
    for row in backend.rows(f"SELECT {', '.join(MEMORY_COLUMNS)} FROM memories ORDER BY rowid"):
        counts["memory"] += 1
        values = dict(zip(MEMORY_COLUMNS, row, strict=True))
        values["pinned"] = bool(values["pinned"])
        yield {"kind": "memory", **values}
    for rowid, raw in backend.rows("SELECT rowid, vec FROM vectors ORDER BY rowid"):
        counts["vector"] += 1
        data = base64.b64encode(backend.vector_le(raw)).decode("ascii")
        yield {"kind": "vector", "rowid": rowid, "f32le": data}
    for row in backend.rows(
        "SELECT user_id, name, memory_rowid FROM entities ORDER BY memory_rowid, user_id, name"
    ):
        counts["entity"] += 1
        yield {"kind": "entity", **dict(zip(ENTITY_COLUMNS, row, strict=True))}
    for row in backend.rows(f"SELECT {', '.join(OP_COLUMNS)} FROM oplog ORDER BY seq"):
        op = dict(zip(OP_COLUMNS, row, strict=True))
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
    backend = _backend(store)
    header: dict[str, Any] = {}
    counts: dict[str, int] = {}
    with backend.snapshot(), _text(target, "w") as out:
        for record in _records(backend):
            if record["kind"] == "header":
                header = record
            if record["kind"] == "end":
                counts = record["counts"]
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    return TransferSummary(str(header["pack_id"]), int(header["write_seq"]), counts)


# -------------------------------------------------------------------------- import
def _is_empty(backend: _Backend) -> bool:
    meta = dict(backend.rows("SELECT key, value FROM meta"))
    if "embedder" in meta or meta.get("write_seq") != "0" or meta.get("delete_seq") != "0":
        return False
    return not any(
        list(backend.rows(f"SELECT 1 FROM {table} LIMIT 1")) for table in ("memories", "oplog")
    )


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
    return tuple(record[c] for c in OP_COLUMNS)


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
    backend = _backend(store)
    counts = dict.fromkeys(KINDS, 0)
    with _text(source, "r") as handle, backend.write():
        if not _is_empty(backend):
            raise InvalidInputError("store", "the target pack is not empty; import needs a new one")
        records = _parse(handle)
        header = next(records, None)
        if header is None or header.get("format") != FORMAT:
            raise InvalidInputError("source", "not a prme pack export (no header line)")
        if header.get("version") != FORMAT_VERSION:
            raise InvalidInputError("source", f"unsupported pack format {header.get('version')}")
        embedder = header.get("embedder")
        dimension = None if embedder is None else int(embedder["dimension"])
        backend.set_meta(
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
        current = ""
        end: dict[str, Any] | None = None
        for record in records:
            kind = record["kind"]
            if kind == "end":
                end = record
                break
            if kind not in KINDS:
                raise InvalidInputError("source", f"unknown record kind {kind!r}")
            if pending and (kind != current or len(pending) >= BATCH):
                backend.insert(current, pending)
                pending = []
            current = kind
            pending.append(_row(record, dimension))
            counts[kind] += 1
        if pending:
            backend.insert(current, pending)
        if end is None or end.get("counts") != counts:
            raise IntegrityError("the pack export is truncated or its counts do not match")
        backend.finish()
    backend.reload()
    return TransferSummary(str(header["pack_id"]), int(header["write_seq"]), counts)
