"""The scale-out store: PostgreSQL with pgvector, shared by any number of API processes.

It keeps the SQLite pack's tables and semantics (``storage/sqlite/``), so the engine cannot
tell them apart except through the feature identity (``storage: postgres``, ``lexical``):

- **Pack identity** in ``meta``: pack id, attestation secret, content write and delete
  sequences, the bound embedder. Every content write bumps ``write_seq`` in its own transaction,
  and each written owner's sequence in ``owner_sequences`` (what an owner's receipts record).
- **Memories, vectors, entity links** in tables; vectors are pgvector ``vector(d)`` (typed when
  the pack's embedder is bound). Vector search runs in the in-process :class:`OwnerIndex`,
  refreshed incrementally from ``write_seq`` exactly as on SQLite: exact cosine, or the same
  deterministic HNSW segments past the engine's ``vector_index_min_rows``
  (:mod:`prme.index.ann`; the feature identity's ``vector_search``); pgvector's own HNSW
  is not used. A large owner's index (and its segments) is saved in the pack itself, off the
  retrieve path (``owner_indexes``, :mod:`prme.storage.postgres.saved_index`, the SQLite pack's
  file format; :mod:`prme.storage.postgres.index_saves`), so a new process loads it instead.
- **One writer for content**: content writes take a pack-wide transaction-scoped advisory lock,
  so row ids grow in commit order and the incremental index refresh never misses a row.
- **Lexical search**: a ``tsvector`` and token count derived from the content on insert (a
  trigger); BM25 with FTS5's formula (k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)),
  non-positive idf → 1e-6) over the owner's own postings, in process
  (:mod:`prme.storage.postgres.lexical`): read once from the owner's rows' ``tsvector``, kept and
  saved with the owner index, with the owner's statistics alone, so another owner's content
  never changes an owner's scores nor what a query reads (no row, once the postings are built).
  Raw scores equal SQLite's wherever both analyzers produce the same tokens. Known differences:
  Snowball English (Porter2) stems instead of Porter, diacritics are removed through NFD rather
  than unicode61's tables, and PostgreSQL keeps at most 256 positions per lexeme (term
  frequency saturates there) and merges positions past 16383. Retrieval min-max normalizes the
  scores over the candidate pool on both backends. The writes still keep the owner-keyed GIN
  index and per-owner statistics of migrations 3 and 8.
- **Operations log** append-only (a trigger rejects UPDATE, DELETE and TRUNCATE); inserts are
  insert-if-absent and every read re-verifies the payload checksum.
- ``serialized(key)``: one transaction holding ``pg_advisory_xact_lock`` on the first 8 bytes
  of SHA-256 over (schema, key), so API servers on different hosts cannot both win a
  compare-and-swap. ``read_snapshot()``: one REPEATABLE READ transaction.
- A ``psycopg_pool`` pool; a thread's transaction pins one connection, and nested store calls
  on that thread run inside it (like SQLite's ``_write()`` nesting); a retrieval's calls share
  one (:mod:`prme.storage.postgres.connections`).

An unreachable server raises :class:`StorageUnavailableError` naming the storage; every write is
one transaction, so nothing is ever half-written.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool

from prme.canonical import canonical_bytes, canonical_json
from prme.errors import (
    FrozenPackError,
    IntegrityError,
    InvalidInputError,
    PackNotFoundError,
)
from prme.index.ann import AnnPolicy
from prme.index.bm25 import BM25_B, BM25_K1
from prme.index.owner_index import OwnerIndex
from prme.models.receipt import PackIdentity
from prme.storage import digest as pack_digest_
from prme.storage.base import Tracer
from prme.storage.postgres.connections import Connections
from prme.storage.postgres.digest import (
    digest_state,
    recompute_digest_state,
    save_digest_state,
)
from prme.storage.postgres.memory_rows import MemoryRows
from prme.storage.postgres.migrations import (
    LATEST_VERSION,
    STORE_SCHEMA_VERSION,
    Conn,
    applied_versions,
    describe,
    pack_schema,
    upgrade_connection,
    vector_schema,
)
from prme.storage.postgres.oplog import OperationsLog
from prme.storage.postgres.pack import PackRows
from prme.storage.postgres.vectors import PgVector, VectorDumper, VectorLoader

_SYNCHRONOUS_COMMIT = ("off", "local", "remote_write", "remote_apply", "on")


class PostgresStore(Connections, MemoryRows, OperationsLog, PackRows):
    """A memory pack in one PostgreSQL schema, shared by any number of processes.

    Args:
        url: a libpq URL, e.g. ``postgresql://prme:secret@db.internal/prme``.
        schema: the pack's schema (one database may hold several packs); by default the
            URL's ``options=-csearch_path=NAME``, else ``prme``.
        frozen: refuse content writes (retrieval, receipts, judgments, reports still append).
        tracer: receives every SQL statement (and ``BEGIN``/``COMMIT``/``ROLLBACK``).
        min_size, max_size: connection pool bounds.
        timeout: seconds to wait for a connection before :class:`StorageUnavailableError`.
        upgrade: apply pending migrations on open (``prme db upgrade`` does it explicitly).
        synchronous_commit: ``off`` (default) matches the SQLite pack's ``synchronous=NORMAL``
            in WAL mode: a crash may lose the last moments of commits, never corrupts them;
            ``on`` waits for the WAL flush on every commit (about one disk sync each).
        index_cache: a directory on this host where the owners' saved indexes are kept once
            read from the pack (:mod:`prme.storage.postgres.saved_index`), so that later
            processes map them instead of reading them again; a copy is used only while the
            pack's attested manifest still names it. None: a private temporary directory,
            deleted on close.

    Raises:
        StorageUnavailableError: the server cannot be reached.
        IntegrityError: the schema is behind and ``upgrade=False``.
        InvalidInputError: a bad schema name, or pgvector missing and not installable.
    """

    backend_name = "postgres"

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        frozen: bool = False,
        tracer: Tracer | None = None,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = 10.0,
        upgrade: bool = True,
        synchronous_commit: str = "off",
        create: bool = True,
        index_cache: str | Path | None = None,
    ) -> None:
        if synchronous_commit not in _SYNCHRONOUS_COMMIT:
            raise InvalidInputError(
                "synchronous_commit", f"must be one of {', '.join(_SYNCHRONOUS_COMMIT)}"
            )
        self.synchronous_commit = synchronous_commit
        self.url = url
        self.schema = pack_schema(url, schema)
        self.frozen = frozen
        self.tracer = tracer
        self.timeout = timeout
        self.storage_name = describe(url, self.schema)
        self._local = threading.local()
        self._indexes: dict[str, OwnerIndex] = {}
        self._index_lock = threading.Lock()
        self._ann: AnnPolicy | None = None
        self._embedder: dict[str, Any] | None = None
        self._closed = False
        self._workdir: Path | None = None
        self._index_cache = None if index_cache is None else Path(index_cache)
        connect_timeout = max(1, math.ceil(timeout))
        with (
            self._guard(),
            psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout) as conn,
        ):
            self.created = not applied_versions(conn, self.schema)
            if self.created and not create:
                raise PackNotFoundError(self.storage_name, postgres=True)
            if upgrade:
                upgrade_connection(conn, self.schema)
            if LATEST_VERSION not in applied_versions(conn, self.schema):
                raise IntegrityError(
                    f"PostgreSQL pack schema {self.schema!r} is not at version {LATEST_VERSION};"
                    " run `prme db upgrade`"
                )
            self._vector_schema = vector_schema(conn) or "public"
            info = TypeInfo.fetch(conn, f"{self._vector_schema}.vector")
        if info is None:
            raise IntegrityError("the pgvector type 'vector' is missing")
        self._vector_oid = info.oid
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True, "connect_timeout": connect_timeout},
            configure=self._configure,
            check=ConnectionPool.check_connection,
            timeout=timeout,
            name=f"prme-{self.schema}",
            open=False,
        )
        try:
            with self._guard():
                self._pool.open(wait=True, timeout=timeout)
            self.reload()
        except BaseException:
            self._pool.close()
            raise

    # ------------------------------------------------------- lexical identity, connections
    @property
    def lexical_identity(self) -> dict[str, Any]:
        return {
            "backend": "postgres-tsvector-bm25",
            "tokenizer": "nfd-strip-marks alnum-split snowball-english no-stopwords",
            "bm25": {"k1": BM25_K1, "b": BM25_B, "idf": "fts5", "statistics": "owner"},
            "normalization": "minmax",
        }

    def _configure(self, conn: Conn) -> None:
        conn.execute(f"SET search_path TO {self.schema}, {self._vector_schema}")
        conn.execute(f"SET synchronous_commit TO {self.synchronous_commit}")
        dumper = type("PgVectorDumper", (VectorDumper,), {"oid": self._vector_oid})
        conn.adapters.register_dumper(PgVector, dumper)
        conn.adapters.register_loader(self._vector_oid, VectorLoader)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close_index_saves()  # a save in progress finishes first
            with self._index_lock:
                self._drop_indexes()
            self._pool.close()
            if self._remove_workdir is not None:
                self._remove_workdir()

    def reload(self) -> None:
        """Re-read the pack identity and secret and drop caches (after an import)."""
        values = self._meta_values()
        version = values.get("store_schema_version")
        if version != STORE_SCHEMA_VERSION:
            raise IntegrityError(f"unsupported pack schema version {version!r}")
        self._secret = bytes.fromhex(values["secret"])
        self._pack_id = values["pack_id"]
        self._embedder = None
        with self._index_lock:
            self._drop_indexes()

    def _meta_values(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._fetchall("SELECT key, value FROM meta")}

    def _meta(self, key: str) -> str:
        row = self._fetchone("SELECT value FROM meta WHERE key = %s", (key,))
        if row is None:
            raise IntegrityError(f"pack metadata {key!r} is missing")
        return str(row[0])

    # ------------------------------------------------------------ identity, secret
    def pack_identity(self) -> PackIdentity:
        return PackIdentity(pack_id=self._pack_id, write_seq=self._sequences()[0])

    def attest(self, payload: Any) -> str:
        return hmac.new(self._secret, canonical_bytes(payload), hashlib.sha256).hexdigest()

    def verify_attestation(self, payload: Any, attestation: str) -> bool:
        return hmac.compare_digest(self.attest(payload), attestation)

    def embedder_identity(self) -> dict[str, Any] | None:
        # Immutable once bound, so it is cached after the first successful read.
        if self._embedder is None:
            row = self._fetchone("SELECT value FROM meta WHERE key = 'embedder'")
            self._embedder = None if row is None else dict(json.loads(row[0]))
        return self._embedder

    def bind_embedder(self, identity: dict[str, Any]) -> None:
        """Record the pack's embedder on first use and type the vector column ``vector(d)``."""
        if self._embedder is not None:  # bound already, and a binding never changes
            return
        with self.transaction() as conn:
            self._lock_content(conn)
            if self._run(conn, "SELECT 1 FROM meta WHERE key = 'embedder'").fetchone() is None:
                self._refuse_if_frozen("bind embedder")
                self._run(
                    conn,
                    "INSERT INTO meta(key, value) VALUES ('embedder', %s)",
                    (canonical_json(identity),),
                )
                self._type_vectors(conn, identity)
                self._bump(conn, "write_seq")

    def pack_settings(self) -> dict[str, Any] | None:
        row = self._fetchone("SELECT value FROM meta WHERE key = 'settings'")
        return None if row is None else dict(json.loads(row[0]))

    def record_settings(self, settings: dict[str, Any], *, bump: bool) -> None:
        self._refuse_if_frozen("configure")
        with self.transaction() as conn:
            self._lock_content(conn)
            self._run(
                conn,
                "INSERT INTO meta(key, value) VALUES ('settings', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (canonical_json(settings),),
            )
            if bump:
                # Settings change every owner's retrievals: every owner's sequence moves too.
                self._bump(conn, "write_seq")
                self._run(conn, "UPDATE owner_sequences SET write_seq = write_seq + 1")

    def _type_vectors(self, conn: Conn, identity: dict[str, Any] | None) -> None:
        dimension = (identity or {}).get("dimension")
        if isinstance(dimension, int) and dimension > 0:
            self._run(conn, f"ALTER TABLE vectors ALTER COLUMN vec TYPE vector({dimension})")

    def pack_digest(self) -> str:
        """SHA-256 over the pack's retrieval-relevant content (:mod:`prme.storage.digest`),
        equal to the SQLite pack's: read from the state kept with the writes (O(1))."""
        with self.read_snapshot(), self._connection() as conn:
            state = self._digest_state(conn)
            return pack_digest_.pack_digest(self.embedder_identity(), state)

    def _digest_state(self, conn: Conn, *, for_update: bool = False) -> pack_digest_.DigestState:
        return digest_state(conn, "", for_update=for_update)

    def kept_digest_state(self) -> pack_digest_.DigestState:
        """The digest state kept with the writes."""
        with self._connection() as conn:
            return self._digest_state(conn)

    def recompute_digest_state(self) -> pack_digest_.DigestState:
        """The digest state recomputed from every stored memory (``pack check``, import)."""
        with self.read_snapshot(), self._connection() as conn:
            return recompute_digest_state(conn, "")

    def rebuild_digest_state(self) -> None:
        """Recompute and keep the digest state (after rows were written directly: import)."""
        with self.transaction() as conn:
            self._lock_content(conn)
            save_digest_state(conn, "", recompute_digest_state(conn, ""))

    def _update_digest(self, conn: Conn, added: Iterable[int], removed: Iterable[int]) -> None:
        """Add and remove row hashes (the caller holds the content lock: one writer)."""
        state = self._digest_state(conn, for_update=True)
        save_digest_state(conn, "", state.remove(removed).add(added))

    # ------------------------------------------------------------------ pack metadata
    def meta_values(self) -> dict[str, str]:
        return self._meta_values()

    def owner_sequences(self) -> dict[str, int]:
        rows = self._fetchall("SELECT user_id, write_seq FROM owner_sequences ORDER BY user_id")
        return {str(user_id): int(seq) for user_id, seq in rows}

    # ---------------------------------------------------------- refused content writes
    def _refuse_if_frozen(self, operation: str) -> None:
        if self.frozen:
            raise FrozenPackError(operation)


def drop_schema(url: str, schema: str) -> None:
    """Delete a pack schema and everything in it (irreversible; tests use it to clean up)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {pack_schema(url, schema)} CASCADE")
