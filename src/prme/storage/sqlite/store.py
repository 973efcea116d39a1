"""The embedded default store: one SQLite database (WAL) inside the pack directory."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.canonical import canonical_bytes, canonical_json, sha256_hex
from prme.errors import (
    FrozenPackError,
    IntegrityError,
    InvalidInputError,
    PackNotFoundError,
    ReadOnlyPackError,
)
from prme.models.enums import Scope
from prme.models.memory import MemoryNode
from prme.models.receipt import PackIdentity
from prme.retrieval.ann import AnnPolicy
from prme.retrieval.bm25 import BM25_B, BM25_K1
from prme.retrieval.owner_index import OwnerIndex
from prme.storage import digest as pack_digest_
from prme.storage import payloads
from prme.storage.base import OpHead, OpRecord, RowScan, StorageFinding, Tracer
from prme.storage.columns import (
    NODE_COLUMNS,
    insert_memories_sql,
    node_rows,
    row_to_node,
    select_list,
)
from prme.storage.fts5_lexical import (
    QueryTokenizer,
    create_instance_table,
    owner_bm25,
)
from prme.storage.oplog_sql import (
    op_columns,
    select_op_checksums,
    select_ops,
    stored_payload,
    verified_op,
)
from prme.storage.pack_rows import RowKind
from prme.storage.sqlite import connection, indexes, pack
from prme.storage.sqlite.indexes import INDEX_DIR

DB_FILE = "pack.sqlite3"
STORE_SCHEMA_VERSION = "1"
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
_NODE_COLUMNS = select_list(NODE_COLUMNS)
_INSERT_MEMORIES = insert_memories_sql("?")


class SQLiteStore:
    """A pack directory holding ``pack.sqlite3``. Many readers, one writer, across processes."""

    backend_name = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        frozen: bool = False,
        busy_timeout_ms: int = 10000,
        tracer: Tracer | None = None,
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        self.db_path = self.path / DB_FILE
        self.created = not self.db_path.exists()
        if self.created:  # a new pack (an existing one is never created again)
            if not create:
                raise PackNotFoundError(self.path)
            self.path.mkdir(parents=True, exist_ok=True)
        self.frozen = frozen
        # "" (writable), "ro" (read-only through SQLite's WAL index) or "immutable" (read-only
        # media where not even the WAL index can be created).
        self.read_only_mode = ""
        self.read_only_reason = ""
        self.tracer = tracer
        self._busy_timeout_ms = busy_timeout_ms
        self._lock_window = max(busy_timeout_ms / 1000, connection.LOCK_RETRY_SECONDS)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._indexes: dict[str, OwnerIndex] = {}
        self._index_lock = threading.Lock()
        self._ann: AnnPolicy | None = None
        self._closed = False
        self._embedder: dict[str, Any] | None = None
        self._digest: tuple[int, pack_digest_.DigestState] | None = None
        self._tokenizer = QueryTokenizer(FTS_TOKENIZER)
        try:
            try:
                self._initialize()
            except sqlite3.OperationalError as exc:
                if not self._read_only_failure(exc):
                    raise
                self._open_read_only(exc)
            self._secret = bytes.fromhex(self._meta("secret"))
            self._pack_id = self._meta("pack_id")
        except BaseException:
            self.close()  # a pack that cannot be opened leaves no connection behind
            raise

    # ----------------------------------------------------------------- read-only packs
    @property
    def read_only(self) -> bool:
        """True when the pack was opened read-only (it could not be written)."""
        return bool(self.read_only_mode)

    def _read_only_failure(self, exc: sqlite3.OperationalError) -> bool:
        """Whether opening for writing failed only because the pack cannot be written: SQLite
        says so, and the file or its directory is indeed not writable (``access()`` also
        reports read-only mounts to root), so a passing failure never makes a pack read-only."""
        name = str(getattr(exc, "sqlite_errorname", ""))
        return (
            name.startswith(connection.READ_ONLY_ERRORS)
            and self.db_path.is_file()
            and os.access(self.db_path, os.R_OK)
            and not (os.access(self.db_path, os.W_OK) and os.access(self.path, os.W_OK))
        )

    def _open_read_only(self, cause: sqlite3.OperationalError) -> None:
        """Reopen an existing pack read-only: through SQLite's WAL index when it can be read
        (``mode=ro``), else as immutable media, which is only sound when no WAL holds
        committed pages that the database file lacks (then a typed error says what to do)."""
        self._close_connections()
        self._closed = False
        self._local = threading.local()
        self.read_only_reason = connection.describe(cause)
        self.read_only_mode = "ro"
        try:
            self._check_schema()
            return
        except sqlite3.OperationalError as exc:
            if not self._read_only_failure(exc):
                raise
            self._close_connections()
            self._closed = False
            self._local = threading.local()
        wal = self.db_path.with_name(DB_FILE + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise ReadOnlyPackError(
                "open",
                str(self.path),
                f"{self.read_only_reason}, and its write-ahead log {wal.name} holds changes "
                "that can only be read with write access to the directory",
            ) from cause
        self.read_only_mode = "immutable"
        self._check_schema()

    # ----------------------------------------------------------------- connections
    @property
    def lexical_identity(self) -> dict[str, Any]:
        return {
            "backend": "sqlite-fts5-bm25",
            "tokenizer": FTS_TOKENIZER,
            "bm25": {"k1": BM25_K1, "b": BM25_B, "idf": "fts5", "statistics": "owner"},
            "normalization": "minmax",
        }

    def _connect(self) -> sqlite3.Connection:
        if self.read_only_mode:
            query = "mode=ro" if self.read_only_mode == "ro" else "immutable=1"
            conn = sqlite3.connect(
                f"{self.db_path.resolve().as_uri()}?{query}",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=30.0,
            )
        else:
            conn = sqlite3.connect(
                self.db_path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            if not self.read_only_mode:
                # Several processes opening a new pack at once race to switch it to WAL.
                connection.retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL"), self._lock_window)
                conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            create_instance_table(conn)
        except BaseException:
            conn.close()
            raise
        if self.tracer is not None:
            conn.set_trace_callback(self.tracer)
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def close(self) -> None:
        self._close_connections()
        self._tokenizer.close()

    def _close_connections(self) -> None:
        self._closed = True
        with self._connections_lock:
            for conn in self._connections:
                with suppress(sqlite3.Error):
                    conn.close()
            self._connections.clear()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """:meth:`_transaction`, where a lock wait past the busy timeout or a full disk raises
        :class:`StorageUnavailableError` (temporary: retry later)."""
        with self._temporary_errors(), self._transaction() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``), or the enclosing one when nested."""
        if self.read_only_mode:
            raise ReadOnlyPackError("write", str(self.path), self.read_only_reason)
        conn = self.conn
        if conn.in_transaction:
            yield conn
            return
        connection.retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"), self._lock_window)
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            # After a full disk or an I/O error SQLite has already rolled back; a second
            # ROLLBACK would fail and hide the real error behind "no transaction is active".
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                exc.add_note(
                    f"prme: the write to {self.db_path} was rolled back; nothing was saved"
                )
            raise

    def _temporary_errors(self) -> AbstractContextManager[None]:
        return connection.temporary_errors(self.db_path, self._lock_window)

    @contextmanager
    def serialized(self, key: str) -> Iterator[None]:
        """Serialize a read-check-append across threads and processes (``BEGIN IMMEDIATE``)."""
        del key  # SQLite has one writer at a time; the whole database is the lock.
        with self._write():
            yield

    @contextmanager
    def read_snapshot(self) -> Iterator[PackIdentity]:
        """A consistent read transaction; yields the pack identity it sees."""
        conn = self.conn
        if conn.in_transaction:
            yield self.pack_identity()
            return
        conn.execute("BEGIN")
        self._local.snapshot_indexes = {}  # owner indexes seen by this read transaction
        try:
            yield self.pack_identity()
        finally:
            self._local.snapshot_indexes = None
            conn.execute("COMMIT")

    def _initialize(self) -> None:
        script = resources.files("prme.storage.sqlite").joinpath("schema.sql").read_text("utf-8")
        conn = self.conn
        with self._write():
            for statement in script.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            defaults = {
                "store_schema_version": STORE_SCHEMA_VERSION,
                "pack_id": str(uuid.uuid4()),
                "secret": secrets.token_hex(32),
                "write_seq": "0",
                "delete_seq": "0",
            }
            for key, value in defaults.items():
                conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))
            if self._digest_state() is None:  # a new pack, or one from before the kept digest
                self._save_digest_state(conn, self.recompute_digest_state())
        self._check_schema()

    def _check_schema(self) -> None:
        version = self._meta("store_schema_version")
        if version != STORE_SCHEMA_VERSION:
            raise IntegrityError(f"unsupported pack schema version {version!r}")

    def _meta(self, key: str) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise IntegrityError(f"pack metadata {key!r} is missing")
        return str(row[0])

    def _sequences(self) -> tuple[int, int]:
        rows = dict(
            self.conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('write_seq', 'delete_seq')"
            ).fetchall()
        )
        return int(rows["write_seq"]), int(rows["delete_seq"])

    def _bump_owners(self, conn: sqlite3.Connection, user_ids: set[str]) -> None:
        conn.executemany(
            "INSERT INTO owner_sequences(user_id, write_seq) VALUES (?, 1)"
            " ON CONFLICT(user_id) DO UPDATE SET write_seq = write_seq + 1",
            [(user_id,) for user_id in sorted(user_ids)],
        )

    def owner_write_seq(self, user_id: str) -> int:
        row = self.conn.execute(
            "SELECT write_seq FROM owner_sequences WHERE user_id = ?", (user_id,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _bump(self, conn: sqlite3.Connection, *keys: str) -> None:
        for key in keys:
            conn.execute(
                "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = ?",
                (key,),
            )

    # ------------------------------------------------------------ identity, secret
    def pack_identity(self) -> PackIdentity:
        return PackIdentity(pack_id=self._pack_id, write_seq=int(self._meta("write_seq")))

    def attest(self, payload: Any) -> str:
        return hmac.new(self._secret, canonical_bytes(payload), hashlib.sha256).hexdigest()

    def verify_attestation(self, payload: Any, attestation: str) -> bool:
        return hmac.compare_digest(self.attest(payload), attestation)

    def embedder_identity(self) -> dict[str, Any] | None:
        # Immutable once bound, so it is cached after the first successful read.
        if self._embedder is None:
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
            self._embedder = None if row is None else dict(json.loads(row[0]))
        return self._embedder

    def bind_embedder(self, identity: dict[str, Any]) -> None:
        """Record the pack's embedder on first use (a retrieval configuration write)."""
        if self.read_only_mode:  # nothing to record, or the write is refused by name
            if self.embedder_identity() is None:
                self._refuse_if_frozen("store")
            return
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM meta WHERE key = 'embedder'").fetchone() is None:
                self._refuse_if_frozen("store")
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('embedder', ?)",
                    (canonical_json(identity),),
                )
                self._bump(conn, "write_seq")

    def pack_settings(self) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def record_settings(self, settings: dict[str, Any], *, bump: bool) -> None:
        self._refuse_if_frozen("configure")
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('settings', ?)",
                (canonical_json(settings),),
            )
            if bump:
                # Settings change every owner's retrievals: every owner's sequence moves too.
                self._bump(conn, "write_seq")
                conn.execute("UPDATE owner_sequences SET write_seq = write_seq + 1")

    def pack_digest(self) -> str:
        """SHA-256 over the pack's retrieval-relevant content (:mod:`prme.storage.digest`):
        read from the state kept with the writes, so it costs the same at any pack size."""
        with self.read_snapshot() as identity:
            state = self._digest_state()
            if state is None:  # a read-only pack from before the kept digest: recompute
                if self._digest is None or self._digest[0] != identity.write_seq:
                    self._digest = (identity.write_seq, self.recompute_digest_state())
                state = self._digest[1]
            return pack_digest_.pack_digest(self.embedder_identity(), state)

    def _digest_state(self) -> pack_digest_.DigestState | None:
        rows = dict(
            self.conn.execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?)",
                (pack_digest_.COUNT_KEY, pack_digest_.SUM_KEY),
            ).fetchall()
        )
        if len(rows) != 2:
            return None
        return pack_digest_.DigestState.decode(
            rows[pack_digest_.COUNT_KEY], rows[pack_digest_.SUM_KEY]
        )

    def kept_digest_state(self) -> pack_digest_.DigestState | None:
        """The digest state kept with the writes (None: a read-only pack from before it)."""
        return self._digest_state()

    def _save_digest_state(self, conn: sqlite3.Connection, state: pack_digest_.DigestState) -> None:
        count, total = state.encode()
        conn.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [(pack_digest_.COUNT_KEY, count), (pack_digest_.SUM_KEY, total)],
        )

    def _rows_hashes(self, where: str, params: Sequence[Any]) -> Iterator[int]:
        """Row hashes of the stored memories selected by ``where`` (on ``m``), read from the
        tables as stored."""
        links, rows = pack_digest_.row_hash_queries(where)
        conn = self.conn
        return pack_digest_.row_hashes(conn.execute(links, params), conn.execute(rows, params))

    def recompute_digest_state(self) -> pack_digest_.DigestState:
        """The digest state recomputed from every stored memory (``pack check``, upgrades)."""
        return pack_digest_.DigestState().add(self._rows_hashes("1", ()))

    def rebuild_digest_state(self) -> None:
        """Recompute and keep the digest state (after rows were written directly: import)."""
        with self._write() as conn:
            self._save_digest_state(conn, self.recompute_digest_state())

    def _update_digest(
        self, conn: sqlite3.Connection, added: Iterable[int], removed: Iterable[int]
    ) -> None:
        state = self._digest_state() or self.recompute_digest_state()
        self._save_digest_state(conn, state.remove(removed).add(added))

    def reload(self) -> None:
        """Re-read the pack identity and secret and drop caches (after an import)."""
        self._secret = bytes.fromhex(self._meta("secret"))
        self._pack_id = self._meta("pack_id")
        self._embedder = None
        with self._index_lock:
            self._indexes.clear()

    # ------------------------------------------------------------- whole-pack rows
    def meta_values(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def owner_sequences(self) -> dict[str, int]:
        rows = self.conn.execute("SELECT user_id, write_seq FROM owner_sequences ORDER BY user_id")
        return {str(user_id): int(seq) for user_id, seq in rows}

    def iter_rows(self, kind: RowKind) -> Iterator[tuple[Any, ...]]:
        return pack.iter_rows(self.conn, kind)

    def import_meta(
        self, meta: dict[str, str], embedder: str | None, owners: dict[str, int]
    ) -> None:
        with self._write() as conn:
            pack.import_meta(conn, meta, embedder, owners)

    def import_rows(self, kind: RowKind, rows: Sequence[tuple[Any, ...]]) -> None:
        with self._write() as conn:
            pack.import_rows(conn, kind, rows)

    def finish_import(self) -> None:
        self.rebuild_digest_state()

    # ------------------------------------------------------------------- integrity
    def scan_rows(self, dimension: int | None, limit: int) -> RowScan:
        return pack.scan_rows(self.conn, dimension, limit)

    def check_storage(self) -> tuple[list[StorageFinding], list[str]]:
        """SQLite's ``PRAGMA integrity_check`` and FTS5's check of its index (a write
        command: skipped on a read-only pack)."""
        found: list[StorageFinding] = []
        skipped: list[str] = []
        if self.read_only:
            skipped.append(
                "sqlite: the FTS5 integrity-check command needs write access (the pack is"
                " read-only)"
            )
        else:
            with self.serialized("integrity"):  # the FTS5 check is an INSERT: a write lock
                found += pack.check_fts(self.conn)
        with self.read_snapshot():
            found += pack.check_database(self.conn)
        return found, skipped

    # ---------------------------------------------------------------- content writes
    def _refuse_if_frozen(self, operation: str) -> None:
        if self.read_only_mode:
            raise ReadOnlyPackError(operation, str(self.path), self.read_only_reason)
        if self.frozen:
            raise FrozenPackError(operation)

    def insert_memories(
        self,
        nodes: Sequence[MemoryNode],
        vectors: npt.NDArray[np.float32],
        entities: Sequence[Sequence[str]],
    ) -> None:
        self._refuse_if_frozen("store")
        if not nodes:
            return
        rows = node_rows(nodes)
        blobs = [row.tobytes() for row in np.ascontiguousarray(vectors[: len(rows)], dtype="<f4")]
        hashes = [
            pack_digest_.row_hash(row, names, blob)
            for row, names, blob in zip(rows, entities, blobs, strict=True)
        ]
        with self._write() as conn:
            first = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM memories").fetchone()[0] + 1
            rowids = list(range(first, first + len(rows)))
            conn.executemany(
                _INSERT_MEMORIES, [(rowid, *row) for rowid, row in zip(rowids, rows, strict=True)]
            )
            conn.executemany(
                "INSERT INTO memories_fts(rowid, content) VALUES (?, ?)",
                [(rowid, node.content) for rowid, node in zip(rowids, nodes, strict=True)],
            )
            conn.executemany(
                "INSERT INTO vectors(rowid, vec) VALUES (?, ?)", zip(rowids, blobs, strict=True)
            )
            conn.executemany(
                "INSERT OR IGNORE INTO entities(user_id, name, memory_rowid) VALUES (?, ?, ?)",
                [
                    (node.user_id, name, rowid)
                    for rowid, node, names in zip(rowids, nodes, entities, strict=True)
                    for name in names
                ],
            )
            self._update_digest(conn, hashes, ())
            self._bump(conn, "write_seq")
            self._bump_owners(conn, {node.user_id for node in nodes})

    def delete_memory(self, user_id: str, node_id: str) -> bool:
        self._refuse_if_frozen("delete")
        with self._write() as conn:
            row = conn.execute(
                "SELECT rowid, content FROM memories WHERE id = ? AND user_id = ?",
                (node_id, user_id),
            ).fetchone()
            if row is None:
                return False
            rowid, content = row
            self._update_digest(conn, (), list(self._rows_hashes("m.rowid = ?", (rowid,))))
            conn.execute(
                "INSERT INTO memories_fts(memories_fts, rowid, content) VALUES('delete', ?, ?)",
                (rowid, content),
            )
            conn.execute("DELETE FROM entities WHERE memory_rowid = ?", (rowid,))
            conn.execute("DELETE FROM vectors WHERE rowid = ?", (rowid,))
            conn.execute("DELETE FROM memories WHERE rowid = ?", (rowid,))
            self._bump(conn, "write_seq", "delete_seq")
            self._bump_owners(conn, {user_id})
        return True

    def supersede_memory(self, user_id: str, node_id: str, ended_at_us: int) -> bool:
        """End the owner's memory at ``ended_at_us`` (``valid_to``, kept when already earlier)
        and mark it ``superseded``; a content write that also bumps ``delete_seq`` (an indexed
        row changed, so the owner's column index is rebuilt)."""
        self._refuse_if_frozen("update")
        where = "m.id = ? AND m.user_id = ?"
        with self._write() as conn:
            before = list(self._rows_hashes(where, (node_id, user_id)))
            cursor = conn.execute(
                "UPDATE memories SET lifecycle_state = 'superseded', updated_at = ?,"
                " valid_to = MIN(COALESCE(valid_to, ?), ?)"
                " WHERE id = ? AND user_id = ? AND lifecycle_state != 'superseded'",
                (ended_at_us, ended_at_us, ended_at_us, node_id, user_id),
            )
            if cursor.rowcount != 1:
                return False
            self._update_digest(conn, list(self._rows_hashes(where, (node_id, user_id))), before)
            self._bump(conn, "write_seq", "delete_seq")
            self._bump_owners(conn, {user_id})
        return True

    def current_contents(self, user_id: str, scope: Scope) -> list[tuple[str, str]]:
        """``(id, content)`` of the owner's memories in ``scope`` not superseded, by rowid."""
        rows = self.conn.execute(
            "SELECT id, content FROM memories WHERE user_id = ? AND scope = ?"
            " AND lifecycle_state != 'superseded' ORDER BY rowid",
            (user_id, scope.value),
        ).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    # ------------------------------------------------------------------ memory reads
    def get_memory(self, user_id: str, node_id: str) -> MemoryNode | None:
        row = self.conn.execute(
            f"SELECT {_NODE_COLUMNS} FROM memories WHERE id = ? AND user_id = ?",
            (node_id, user_id),
        ).fetchone()
        return None if row is None else row_to_node(row)

    def list_memories(
        self, user_id: str, scopes: Sequence[Scope] | None, limit: int, after_id: str | None
    ) -> list[MemoryNode]:
        sql = f"SELECT {_NODE_COLUMNS} FROM memories WHERE user_id = ? AND id > ?"
        params: list[Any] = [user_id, after_id or ""]
        if scopes is not None:
            sql += f" AND scope IN ({','.join('?' * len(scopes))})"
            params += [s.value for s in scopes]
        sql += " ORDER BY id LIMIT ?"
        params.append(limit)
        return [row_to_node(r) for r in self.conn.execute(sql, params)]

    def get_memories_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryNode]:
        rows = self.conn.execute(
            f"SELECT rowid, {_NODE_COLUMNS} FROM memories"
            " WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(list(rowids)),),
        )
        return {int(r[0]): row_to_node(r[1:]) for r in rows}

    # ------------------------------------------------------------ candidate generation
    def configure_vector_index(self, policy: AnnPolicy | None) -> None:
        """Search vectors approximately past ``policy``'s size (None: exact scans only)."""
        with self._index_lock:
            if policy != self._ann:
                self._indexes.clear()
            self._ann = policy

    def owner_index(self, user_id: str) -> OwnerIndex | None:
        """The owner's column index, refreshed to the current write sequence (a fixed view)."""
        dimension = (self.embedder_identity() or {}).get("dimension")
        if dimension is None:
            return None
        # Inside one read snapshot the owner's rows change only by this connection's own
        # writes: its index is refreshed once (retrieval asks for it, then the lexical channel).
        seen: dict[tuple[str, int], OwnerIndex] | None = getattr(
            self._local, "snapshot_indexes", None
        )
        key = (user_id, self.conn.total_changes)
        if seen is not None and key in seen:
            return seen[key]
        index = self._refreshed_index(user_id, int(dimension))
        if seen is not None:
            seen[key] = index
        return index

    def _refreshed_index(self, user_id: str, dimension: int) -> OwnerIndex:
        write_seq, delete_seq = self._sequences()
        root = self.path / INDEX_DIR
        with self._index_lock:
            index = self._indexes.get(user_id)
            if index is not None and index.write_seq == write_seq:
                return index.snapshot()
            if index is None or index.delete_seq != delete_seq or index.dimension != dimension:
                saved = indexes.saved(
                    self.conn, root, (self._pack_id, user_id, delete_seq, dimension), self._ann
                )
                index = saved or OwnerIndex(dimension, ann=self._ann, ann_dir=root)
            indexes.append_new_rows(self.conn, index, user_id)
            index.write_seq = write_seq
            index.delete_seq = delete_seq
            self._indexes[user_id] = index
            if not self.read_only_mode:  # a read-only pack keeps it in memory only
                indexes.save(root, self._pack_id, user_id, index)
            return index.snapshot()

    def lexical_search(
        self, user_id: str, scopes: Sequence[Scope] | None, terms: Sequence[str], k: int
    ) -> list[tuple[int, float]]:
        """BM25 over the owner's memories: ``(rowid, score)``, best first, then by rowid.

        FTS5's formula and tokens with the owner's own statistics (see
        :mod:`prme.storage.fts5_lexical`): another owner's memories change neither which of
        the owner's rows match nor their scores. Each query term is one phrase, as in
        ``MATCH '"t1" OR "t2"'``.
        """
        if not terms:
            return []
        if not self.conn.in_transaction:  # the owner index and the postings see one state
            with self.read_snapshot():
                return self.lexical_search(user_id, scopes, terms, k)
        index = self.owner_index(user_id)
        if index is None:  # no embedder bound, so nothing is stored
            return []
        phrases = self._tokenizer.tokens(terms)
        return owner_bm25(self.conn, index, index.scope_mask(scopes), phrases, k)

    # ---------------------------------------------------------------- operations log
    def append_op(
        self,
        *,
        op_id: str,
        op_type: str,
        user_id: str,
        target_id: str | None,
        namespace: str | None,
        created_at_us: int,
        payload: str,
    ) -> bool:
        """Insert if absent; returns False when ``op_id`` already exists (nothing overwritten)."""
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO oplog(op_id, op_type, user_id, target_id, namespace,"
                " created_at, payload, checksum) VALUES (?,?,?,?,?,?,?,?)",
                (
                    op_id,
                    op_type,
                    user_id,
                    target_id,
                    namespace,
                    created_at_us,
                    payloads.encode(op_type, payload),
                    sha256_hex(payload),
                ),
            )
            return cursor.rowcount == 1

    @staticmethod
    def _op(row: tuple[Any, ...]) -> OpRecord:
        return verified_op(row)

    def get_op(self, op_id: str) -> OpRecord | None:
        row = self.conn.execute(
            f"SELECT {op_columns('?')} FROM oplog WHERE op_id = ?", (op_id,)
        ).fetchone()
        return None if row is None else self._op(row)

    def find_ops(self, op_type: str, user_id: str, target_id: str | None = None) -> list[OpRecord]:
        sql, params = select_ops("?", op_type, user_id, target_id=target_id, by_seq=True)
        return [self._op(r) for r in self.conn.execute(sql, params).fetchall()]

    def op_checksums(
        self,
        op_type: str,
        user_id: str,
        target_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
    ) -> dict[str, str]:
        targets = None
        if target_ids is not None:
            targets = ("IN (SELECT value FROM json_each(?))", json.dumps(list(target_ids)))
        sql, params = select_op_checksums("?", op_type, user_id, targets=targets, limit=limit)
        return {str(t): str(d) for t, d in self.conn.execute(sql, params).fetchall()}

    def iter_ops(
        self,
        op_type: str,
        user_id: str,
        *,
        namespace: str | None = None,
        after_target: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        order_by_target: bool = False,
        before: tuple[int, int] | None = None,
    ) -> Iterator[OpRecord]:
        sql, params = select_ops(
            "?",
            op_type,
            user_id,
            namespace=namespace,
            after_target=after_target,
            limit=limit,
            newest_first=newest_first,
            order_by_target=order_by_target,
            before=before,
        )
        for row in self.conn.execute(sql, params).fetchall():
            yield self._op(row)

    # ------------------------------------------------------------------ receipt retention
    def op_heads(self, op_type: str, *, created_before_us: int) -> list[OpHead]:
        rows = self.conn.execute(
            "SELECT op_id, user_id, target_id, created_at, checksum FROM oplog"
            " WHERE op_type = ? AND created_at < ? ORDER BY seq",
            (op_type, created_before_us),
        ).fetchall()
        return [OpHead(*row) for row in rows]

    def iter_payloads(self, *, exclude_op_types: Sequence[str]) -> Iterator[str]:
        cursor = self.conn.execute(
            "SELECT CAST(payload AS BLOB), op_type, op_id FROM oplog"
            " WHERE op_type NOT IN (SELECT value FROM json_each(?)) ORDER BY seq",
            (json.dumps(list(exclude_op_types)),),
        )
        for payload, op_type, op_id in cursor:
            yield stored_payload(payload, str(op_type), str(op_id))

    def delete_ops(self, op_type: str, op_ids: Sequence[str]) -> int:
        """The delete trigger is dropped, the receipts deleted and the trigger re-created from
        its own stored text, all inside the caller's transaction: no other connection ever sees
        the log unguarded, and a failure anywhere rolls all of it back."""
        if op_type != RETAINED_OP_TYPE:
            raise InvalidInputError("op_type", f"only {RETAINED_OP_TYPE} may be deleted", op_type)
        with self._write() as conn:
            row = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
                (_DELETE_GUARD,),
            ).fetchone()
            if row is None:
                raise IntegrityError(f"the operations log has lost its {_DELETE_GUARD} trigger")
            conn.execute(f"DROP TRIGGER {_DELETE_GUARD}")
            deleted = conn.execute(
                "DELETE FROM oplog WHERE op_type = ? AND op_id IN (SELECT value FROM json_each(?))",
                (op_type, json.dumps(list(op_ids))),
            ).rowcount
            conn.execute(str(row[0]))
        return int(deleted)


RETAINED_OP_TYPE = "retrieval_receipt"  # the only operations retention may delete
_DELETE_GUARD = "oplog_append_only_delete"
