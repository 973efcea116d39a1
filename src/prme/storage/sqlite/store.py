"""The embedded default store: one SQLite database (WAL) inside the pack directory.

This module keeps the connections, transactions, metadata, pack identity and digest; the memory
rows (:mod:`prme.storage.sqlite.memory_rows`) and the operations log
(:mod:`prme.storage.sqlite.oplog`) are mixins :class:`SQLiteStore` inherits."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from importlib import resources
from pathlib import Path
from typing import Any

from prme.canonical import canonical_bytes, canonical_json
from prme.errors import FrozenPackError, IntegrityError, PackNotFoundError, ReadOnlyPackError
from prme.index.ann import AnnPolicy
from prme.index.bm25 import BM25_B, BM25_K1
from prme.index.owner_index import OwnerIndex
from prme.models.receipt import PackIdentity
from prme.storage import digest as pack_digest_
from prme.storage.base import RowScan, StorageFinding, Tracer, new_pack_meta
from prme.storage.fts5_lexical import QueryTokenizer
from prme.storage.pack_rows import RowKind
from prme.storage.sqlite import connection, pack, upgrades
from prme.storage.sqlite.indexes import INDEX_DIR
from prme.storage.sqlite.memory_rows import MemoryRows
from prme.storage.sqlite.oplog import OperationsLog

DB_FILE = "pack.sqlite3"
STORE_SCHEMA_VERSION = "1"
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
CACHE_KIB = 16384  # each writable connection's page cache (SQLite's default: 2000 KiB)
# About 160 MB of log between automatic checkpoints: fewer checkpoints copy an id-index leaf
# dirtied by many batches once (store_many filling 1M: 5-9% faster than 10000; CHANGELOG).
WAL_CHECKPOINT_PAGES = 40000


class SQLiteStore(MemoryRows, OperationsLog):
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
                # A batch dirties pages all over the id index: a larger page cache re-reads
                # fewer of them, and checkpointing every WAL_CHECKPOINT_PAGES pages (not
                # SQLite's 1000) copies a page dirtied by many batches once.
                conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
                conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
            conn.execute("PRAGMA foreign_keys = ON")
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
        with self._index_lock:
            self._drop_indexes()  # nothing more is written in the pack once it is closed
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
    def pinned(self) -> Iterator[None]:
        """Nothing to pin: each thread has its own connection."""
        yield

    @contextmanager
    def read_snapshot(self, owner: str | None = None) -> Iterator[PackIdentity]:
        """A consistent read transaction; yields the pack identity it sees, read with
        ``owner``'s sequences in one statement (:meth:`_snapshot_identity`)."""
        conn = self.conn
        if conn.in_transaction:
            yield self.pack_identity()
            return
        conn.execute("BEGIN")
        self._local.snapshot_indexes = {}  # owner indexes seen by this read transaction
        try:
            yield self._snapshot_identity(owner)
        finally:
            self._local.snapshot_indexes = self._local.owner_sequences = None
            conn.execute("COMMIT")

    def _initialize(self) -> None:
        script = resources.files("prme.storage.sqlite").joinpath("schema.sql").read_text("utf-8")
        conn = self.conn
        with self._write():
            upgrades.apply_schema(conn, [s for s in script.split(";\n") if s.strip()])
            for key, value in new_pack_meta(STORE_SCHEMA_VERSION).items():
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
            self._drop_indexes()

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
        """Rebuild the kept digest and drop every saved owner index in the pack's directory:
        an import starts each owner's delete count at 0, so index files an earlier pack of the
        same id left there could match the imported rows' stamps without matching their
        content."""
        self.rebuild_digest_state()
        with self._index_lock:
            self._drop_indexes()
            shutil.rmtree(self.path / INDEX_DIR, ignore_errors=True)

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

    # ---------------------------------------------------------- refused content writes
    def _refuse_if_frozen(self, operation: str) -> None:
        if self.read_only_mode:
            raise ReadOnlyPackError(operation, str(self.path), self.read_only_reason)
        if self.frozen:
            raise FrozenPackError(operation)
