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
  (:mod:`prme.retrieval.ann`; the feature identity's ``vector_search``), which are kept in
  memory only (each process builds them on first use); pgvector's own HNSW is not used.
- **One writer for content**: content writes take a pack-wide transaction-scoped advisory lock,
  so row ids grow in commit order and the incremental index refresh never misses a row.
- **Lexical search**: a ``tsvector`` and token count derived from the content on insert (a
  trigger), a GIN index that always goes first (as FTS5's MATCH does), and BM25 computed in SQL
  with FTS5's formula (k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)), non-positive idf → 1e-6)
  and FTS5's statistics taken over the owner's memories only (document count, token total and
  document frequency per term, kept per owner in ``owner_lexical_stats`` and ``owner_lexemes``
  and updated in the content write's transaction), so another owner's content never changes
  an owner's scores.
  Raw scores equal SQLite's wherever both analyzers produce the same tokens. Known differences:
  Snowball English (Porter2) stems instead of Porter, diacritics are removed through NFD rather
  than unicode61's tables, and PostgreSQL keeps at most 256 positions per lexeme (term
  frequency saturates there) and merges positions past 16383. Retrieval min-max normalizes the
  scores over the candidate pool on both backends. Cost: PostgreSQL reads every matching row's
  ``tsvector`` (O(matching documents)), so lexical candidates cost more than in FTS5.
- **Operations log** append-only (a trigger rejects UPDATE, DELETE and TRUNCATE); inserts are
  insert-if-absent and every read re-verifies the payload checksum.
- ``serialized(key)``: one transaction holding ``pg_advisory_xact_lock`` on the first 8 bytes
  of SHA-256 over (schema, key), so API servers on different hosts cannot both win a
  compare-and-swap. ``read_snapshot()``: one REPEATABLE READ transaction.
- A ``psycopg_pool`` pool; a thread's transaction pins one connection, and nested store calls
  on that thread run inside it (like SQLite's ``_write()`` nesting).

An unreachable server raises :class:`StorageUnavailableError` naming the storage; every write is
one transaction, so nothing is ever half-written.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from prme.canonical import canonical_bytes, canonical_json, sha256_hex
from prme.errors import (
    FrozenPackError,
    IntegrityError,
    InvalidInputError,
    PackNotFoundError,
    StorageUnavailableError,
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
    INDEX_COLUMNS,
    MEMORY_COLUMNS,
    NODE_COLUMNS,
    index_row,
    node_rows,
    row_to_node,
    select_list,
)
from prme.storage.oplog_sql import (
    OP_COLUMNS,
    select_op_checksums,
    select_ops,
    stored_payload,
    verified_op,
)
from prme.storage.pack_rows import RowKind, select_rows
from prme.storage.postgres import lexical, pack
from prme.storage.postgres.digest import (
    digest_state,
    recompute_digest_state,
    row_hashes,
    save_digest_state,
)
from prme.storage.postgres.migrations import (
    LATEST_VERSION,
    STORE_SCHEMA_VERSION,
    Conn,
    applied_versions,
    describe,
    lock_key,
    pack_schema,
    upgrade_connection,
    vector_schema,
)
from prme.storage.postgres.vectors import PgVector, VectorDumper, VectorLoader

RETAINED_OP_TYPE = "retrieval_receipt"  # the only operations retention may delete
_MEMORY_COLUMNS = select_list(MEMORY_COLUMNS)
_NODE_COLUMNS = select_list(NODE_COLUMNS)
# Batches up to this size are pipelined INSERTs (few round trips); larger ones use COPY.
_SMALL_BATCH = 32
# Temporary failures (StorageUnavailableError, HTTP 503): no SQLSTATE (client side), class 08
# or the server shutting down; class 53 (disk full, out of memory, too many connections); a
# lock wait past lock_timeout (55P03) or statement_timeout (57014 query_canceled).
_UNAVAILABLE_STATES = ("08", "57P01", "57P02", "57P03", "53", "55P03", "57014")
_SYNCHRONOUS_COMMIT = ("off", "local", "remote_write", "remote_apply", "on")


def _verified(row: Sequence[Any]) -> OpRecord:
    return verified_op(row)


class PostgresStore:
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

    # ----------------------------------------------------------------- connections
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

    def _trace(self, sql: str) -> None:
        if self.tracer is not None:
            self.tracer(sql)

    def _run(
        self, conn: Conn, sql: str, params: Sequence[Any] | None = None, *, binary: bool = False
    ) -> psycopg.Cursor[Any]:
        self._trace(sql)
        return conn.execute(sql, params, binary=binary)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn "cannot reach the server" into one clear error naming the storage."""
        try:
            yield
        except (PoolTimeout, PoolClosed) as exc:
            raise StorageUnavailableError(self.storage_name, str(exc).strip()) from exc
        except psycopg.OperationalError as exc:
            state = exc.sqlstate
            if state is None or state.startswith(_UNAVAILABLE_STATES):
                detail = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise StorageUnavailableError(self.storage_name, detail) from exc
            raise
        except psycopg.InterfaceError as exc:
            raise StorageUnavailableError(self.storage_name, str(exc).strip()) from exc

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("store is closed")

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        """The thread's transaction connection, or a pooled one for autocommit reads."""
        conn: Conn | None = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        self._check_open()
        with self._guard(), self._pool.connection() as pooled:
            yield pooled

    @contextmanager
    def transaction(self, *, snapshot: bool = False) -> Iterator[Conn]:
        """One transaction pinned to this thread (REPEATABLE READ when ``snapshot``).

        Nested calls on the same thread join the enclosing transaction, as SQLite's
        ``_write()`` does; it commits when the outermost block ends and rolls back on error.
        """
        conn: Conn | None = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        self._check_open()
        with self._guard(), self._pool.connection() as pooled:
            # psycopg opens the block with BEGIN [ISOLATION LEVEL REPEATABLE READ]
            pooled.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if snapshot else None
            self._trace("BEGIN ISOLATION LEVEL REPEATABLE READ" if snapshot else "BEGIN")
            try:
                with pooled.transaction():
                    self._local.conn = pooled
                    self._local.locks = set()
                    self._local.sequences = None
                    self._local.snapshot = snapshot
                    try:
                        yield pooled
                    finally:
                        self._local.conn = None
            except BaseException:
                self._trace("ROLLBACK")
                raise
            finally:
                pooled.isolation_level = None
            self._trace("COMMIT")

    def _fetchall(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._connection() as conn:
            return self._run(conn, sql, params).fetchall()

    def _fetchone(self, sql: str, params: Sequence[Any] | None = None) -> tuple[Any, ...] | None:
        with self._connection() as conn:
            row: tuple[Any, ...] | None = self._run(conn, sql, params).fetchone()
            return row

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()

    @contextmanager
    def serialized(self, key: str) -> Iterator[None]:
        """Serialize a read-check-append across processes and hosts (transaction-scoped lock)."""
        with self.transaction() as conn:
            self._lock(conn, key)
            yield

    @contextmanager
    def read_snapshot(self) -> Iterator[PackIdentity]:
        """A consistent read transaction (REPEATABLE READ); yields the pack identity it sees."""
        with self.transaction(snapshot=True):
            if self._local.snapshot and self._local.sequences is None:
                self._local.sequences = self._read_sequences()  # fixed for the snapshot
            yield self.pack_identity()

    def _lock_content(self, conn: Conn) -> None:
        self._lock(conn, "content")

    def _lock(self, conn: Conn, key: str) -> None:
        """Take the transaction-scoped advisory lock of ``key`` (once per transaction)."""
        held: set[str] = self._local.locks
        if key not in held:
            self._run(conn, "SELECT pg_advisory_xact_lock(%s)", (lock_key(self.schema, key),))
            held.add(key)

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
            self._indexes.clear()

    def _meta_values(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._fetchall("SELECT key, value FROM meta")}

    def _meta(self, key: str) -> str:
        row = self._fetchone("SELECT value FROM meta WHERE key = %s", (key,))
        if row is None:
            raise IntegrityError(f"pack metadata {key!r} is missing")
        return str(row[0])

    def _sequences(self) -> tuple[int, int]:
        """``(write_seq, delete_seq)``; read once per snapshot (they cannot move inside one)."""
        in_transaction = getattr(self._local, "conn", None) is not None
        cached: tuple[int, int] | None = self._local.sequences if in_transaction else None
        return cached or self._read_sequences()

    def _read_sequences(self) -> tuple[int, int]:
        rows = dict(
            self._fetchall("SELECT key, value FROM meta WHERE key IN ('write_seq', 'delete_seq')")
        )
        return int(rows["write_seq"]), int(rows["delete_seq"])

    def _bump_owners(self, conn: Conn, user_ids: set[str]) -> None:
        self._run(
            conn,
            "INSERT INTO owner_sequences(user_id, write_seq) SELECT u, 1 FROM unnest(%s::text[])"
            " AS u ORDER BY u ON CONFLICT (user_id)"
            " DO UPDATE SET write_seq = owner_sequences.write_seq + 1",
            (sorted(user_ids),),
        )

    def owner_write_seq(self, user_id: str) -> int:
        row = self._fetchone("SELECT write_seq FROM owner_sequences WHERE user_id = %s", (user_id,))
        return 0 if row is None else int(row[0])

    def _bump(self, conn: Conn, *keys: str) -> None:
        self._local.sequences = None
        self._run(
            conn,
            "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = ANY(%s)",
            (list(keys),),
        )

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

    # ------------------------------------------------------------- whole-pack rows
    def meta_values(self) -> dict[str, str]:
        return self._meta_values()

    def owner_sequences(self) -> dict[str, int]:
        rows = self._fetchall("SELECT user_id, write_seq FROM owner_sequences ORDER BY user_id")
        return {str(user_id): int(seq) for user_id, seq in rows}

    def iter_rows(self, kind: RowKind) -> Iterator[tuple[Any, ...]]:
        with self.transaction() as conn:
            self._trace(select_rows(kind, "%s"))
            yield from pack.iter_rows(conn, kind)

    def import_meta(
        self, meta: dict[str, str], embedder: str | None, owners: dict[str, int]
    ) -> None:
        with self.transaction() as conn:
            pack.import_meta(conn, meta, embedder, owners)
            if embedder is not None:
                self._type_vectors(conn, json.loads(embedder))

    def import_rows(self, kind: RowKind, rows: Sequence[tuple[Any, ...]]) -> None:
        with self.transaction() as conn:
            pack.import_rows(conn, kind, rows, PgVector.encode)

    def finish_import(self) -> None:
        with self.transaction() as conn:
            pack.finish_import(conn)
            self.rebuild_digest_state()

    # ------------------------------------------------------------------- integrity
    def scan_rows(self, dimension: int | None, limit: int) -> RowScan:
        with self.read_snapshot(), self._connection() as conn:
            return pack.scan_rows(conn, dimension, limit)

    def check_storage(self) -> tuple[list[StorageFinding], list[str]]:
        """The owners' BM25 statistics against the stored memories (PostgreSQL checks its
        own tables and indexes)."""
        with self.read_snapshot(), self._connection() as conn:
            return pack.check_lexical_statistics(conn, 100), []

    # ---------------------------------------------------------------- content writes
    def _refuse_if_frozen(self, operation: str) -> None:
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
        encoded = PgVector.encode_rows(vectors, len(nodes))
        little = np.ascontiguousarray(vectors[: len(rows)], dtype="<f4")
        hashes = [
            pack_digest_.row_hash(row, names, little[i].tobytes())
            for i, (row, names) in enumerate(zip(rows, entities, strict=True))
        ]
        with self.transaction() as conn:
            self._lock_content(conn)
            (first,) = self._run(
                conn, "SELECT COALESCE(MAX(rowid), 0) + 1 FROM memories"
            ).fetchone() or (1,)
            last = first + len(rows) - 1
            rowids = range(first, last + 1)
            links = {  # one link per (owner, name, memory), as the primary key wants
                (node.user_id, name, rowid): None
                for rowid, node, names in zip(rowids, nodes, entities, strict=True)
                for name in names
            }
            small = len(rows) <= _SMALL_BATCH
            with conn.pipeline() if small else nullcontext():
                self._bulk(
                    conn,
                    "memories",
                    _MEMORY_COLUMNS,
                    [(r, *row) for r, row in zip(rowids, rows, strict=True)],
                    small,
                )
                self._bulk(
                    conn, "vectors", "rowid, vec", list(zip(rowids, encoded, strict=True)), small
                )
                self._bulk(conn, "entities", "user_id, name, memory_rowid", list(links), small)
                self._count_lexemes(conn, first, last, +1)
                self._bump(conn, "write_seq")
                self._bump_owners(conn, {node.user_id for node in nodes})
            self._update_digest(conn, hashes, ())

    def _bulk(
        self, conn: Conn, table: str, columns: str, rows: Sequence[Sequence[Any]], small: bool
    ) -> None:
        """Insert rows: pipelined INSERTs for a small batch, COPY (binary for vectors) else."""
        if not rows:
            return
        vectors = table == "vectors"
        if small:
            marks = ", ".join(["%s"] * (columns.count(",") + 1))
            sql = f"INSERT INTO {table}({columns}) VALUES ({marks})"
            sql = sql.replace("%s)", "%b)") if vectors else sql
            self._trace(sql)
            with conn.cursor() as cursor:
                cursor.executemany(sql, rows)
            return
        sql = f"COPY {table}({columns}) FROM STDIN" + (" (FORMAT BINARY)" if vectors else "")
        self._trace(sql)
        with conn.cursor() as cursor, cursor.copy(sql) as copy:
            if vectors:
                copy.set_types(["int8", self._vector_oid])
            for row in rows:
                copy.write_row(row)

    def _count_lexemes(self, conn: Conn, first: int, last: int, sign: int) -> None:
        """Add (or remove) the documents ``first..last`` to their owners' BM25 statistics."""
        self._run(
            conn,
            "INSERT INTO owner_lexemes(user_id, lexeme, df)"
            " SELECT m.user_id, l.lexeme, %s * COUNT(*) FROM memories m,"
            " unnest(tsvector_to_array(m.tsv)) AS l(lexeme) WHERE m.rowid BETWEEN %s AND %s"
            " GROUP BY m.user_id, l.lexeme ORDER BY m.user_id, l.lexeme"
            " ON CONFLICT (user_id, lexeme) DO UPDATE SET df = owner_lexemes.df + EXCLUDED.df",
            (sign, first, last),
        )
        self._run(
            conn,
            "INSERT INTO owner_lexical_stats(user_id, n_docs, n_tokens)"
            " SELECT user_id, %s * COUNT(*), %s * COALESCE(SUM(doc_len), 0) FROM memories"
            " WHERE rowid BETWEEN %s AND %s GROUP BY user_id ORDER BY user_id"
            " ON CONFLICT (user_id) DO UPDATE SET"
            " n_docs = owner_lexical_stats.n_docs + EXCLUDED.n_docs,"
            " n_tokens = owner_lexical_stats.n_tokens + EXCLUDED.n_tokens",
            (sign, sign, first, last),
        )
        if sign < 0:
            self._run(
                conn,
                "DELETE FROM owner_lexemes WHERE df = 0 AND user_id IN"
                " (SELECT user_id FROM memories WHERE rowid BETWEEN %s AND %s)",
                (first, last),
            )

    def delete_memory(self, user_id: str, node_id: str) -> bool:
        self._refuse_if_frozen("delete")
        with self.transaction() as conn:
            self._lock_content(conn)
            row = self._run(
                conn,
                "SELECT rowid FROM memories WHERE id = %s AND user_id = %s",
                (node_id, user_id),
            ).fetchone()
            if row is None:
                return False
            rowid = int(row[0])
            self._update_digest(conn, (), row_hashes(conn, "", "m.rowid = %s", (rowid,)))
            self._count_lexemes(conn, rowid, rowid, -1)
            self._run(conn, "DELETE FROM entities WHERE memory_rowid = %s", (rowid,))
            self._run(conn, "DELETE FROM vectors WHERE rowid = %s", (rowid,))
            self._run(conn, "DELETE FROM memories WHERE rowid = %s", (rowid,))
            self._bump(conn, "write_seq", "delete_seq")
            self._bump_owners(conn, {user_id})
        return True

    def supersede_memory(self, user_id: str, node_id: str, ended_at_us: int) -> bool:
        """End the owner's memory at ``ended_at_us`` and mark it ``superseded`` (as SQLite)."""
        self._refuse_if_frozen("update")
        where, params = "m.id = %s AND m.user_id = %s", (node_id, user_id)
        with self.transaction() as conn:
            self._lock_content(conn)
            before = row_hashes(conn, "", where, params)
            cursor = self._run(
                conn,
                "UPDATE memories SET lifecycle_state = 'superseded', updated_at = %s,"
                " valid_to = LEAST(COALESCE(valid_to, %s), %s)"
                " WHERE id = %s AND user_id = %s AND lifecycle_state <> 'superseded'",
                (ended_at_us, ended_at_us, ended_at_us, node_id, user_id),
            )
            if cursor.rowcount != 1:
                return False
            self._update_digest(conn, row_hashes(conn, "", where, params), before)
            self._bump(conn, "write_seq", "delete_seq")
            self._bump_owners(conn, {user_id})
        return True

    def current_contents(self, user_id: str, scope: Scope) -> list[tuple[str, str]]:
        """``(id, content)`` of the owner's memories in ``scope`` not superseded, by rowid."""
        rows = self._fetchall(
            "SELECT id, content FROM memories WHERE user_id = %s AND scope = %s"
            " AND lifecycle_state <> 'superseded' ORDER BY rowid",
            (user_id, scope.value),
        )
        return [(str(r[0]), str(r[1])) for r in rows]

    # ------------------------------------------------------------------ memory reads
    def get_memory(self, user_id: str, node_id: str) -> MemoryNode | None:
        row = self._fetchone(
            f"SELECT {_NODE_COLUMNS} FROM memories WHERE id = %s AND user_id = %s",
            (node_id, user_id),
        )
        return None if row is None else row_to_node(row)

    def list_memories(
        self, user_id: str, scopes: Sequence[Scope] | None, limit: int, after_id: str | None
    ) -> list[MemoryNode]:
        sql = f"SELECT {_NODE_COLUMNS} FROM memories WHERE user_id = %s AND id > %s"
        params: list[Any] = [user_id, after_id or ""]
        if scopes is not None:
            sql += " AND scope = ANY(%s)"
            params.append([s.value for s in scopes])
        sql += " ORDER BY id LIMIT %s"
        params.append(limit)
        return [row_to_node(r) for r in self._fetchall(sql, params)]

    def get_memories_by_rowid(self, rowids: Sequence[int]) -> dict[int, MemoryNode]:
        rows = self._fetchall(
            f"SELECT rowid, {_NODE_COLUMNS} FROM memories WHERE rowid = ANY(%s)",
            ([int(r) for r in rowids],),
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
        with self.read_snapshot(), self._connection() as conn:
            write_seq, delete_seq = self._sequences()
            with self._index_lock:
                index = self._indexes.get(user_id)
                fresh = index is not None and index.write_seq >= write_seq
                if index is not None and fresh and index.delete_seq == delete_seq:
                    return index.snapshot()
                if index is None or index.delete_seq != delete_seq or index.dimension != dimension:
                    index = OwnerIndex(int(dimension), ann=self._ann)
                rows = self._run(
                    conn,
                    f"SELECT m.rowid, {select_list(INDEX_COLUMNS, 'm')}, m.doc_len, v.vec FROM memories m"
                    " JOIN vectors v ON v.rowid = m.rowid WHERE m.user_id = %s AND m.rowid > %s"
                    " ORDER BY m.rowid",
                    (user_id, index.max_rowid),
                    binary=True,
                ).fetchall()
                if rows:
                    entities: dict[int, list[str]] = {}
                    for rowid, name in self._run(
                        conn,
                        "SELECT memory_rowid, name FROM entities WHERE user_id = %s"
                        " AND memory_rowid > %s ORDER BY memory_rowid, name",
                        (user_id, index.max_rowid),
                    ):
                        entities.setdefault(int(rowid), []).append(str(name))
                    raw = b"".join(bytes(r[-1])[4:] for r in rows)
                    vectors = np.frombuffer(raw, dtype=">f4").astype(np.float32)
                    index.append(
                        [index_row(r, int(r[-2])) for r in rows],
                        vectors.reshape(len(rows), int(dimension)),
                        entities,
                    )
                index.write_seq = write_seq
                index.delete_seq = delete_seq
                self._indexes[user_id] = index
                return index.snapshot()

    def lexical_search(
        self, user_id: str, scopes: Sequence[Scope] | None, terms: Sequence[str], k: int
    ) -> list[tuple[int, float]]:
        """BM25 over the owner's memories with FTS5's formula and the owner's statistics:
        ``(rowid, score)``, best first (:mod:`prme.storage.postgres.lexical`)."""
        if not terms:
            return []
        with self._connection() as conn:
            return lexical.search(
                lambda sql, params: self._run(conn, sql, params), user_id, scopes, terms, k
            )

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
        with self._connection() as conn:
            cursor = self._run(
                conn,
                "INSERT INTO oplog(op_id, op_type, user_id, target_id, namespace, created_at,"
                " payload, checksum) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)"
                " ON CONFLICT (op_id) DO NOTHING",
                (
                    op_id,
                    op_type,
                    user_id,
                    target_id,
                    namespace,
                    created_at_us,
                    payloads.encode_bytes(op_type, payload),
                    sha256_hex(payload),
                ),
            )
            return cursor.rowcount == 1

    def get_op(self, op_id: str) -> OpRecord | None:
        row = self._fetchone(f"SELECT {OP_COLUMNS} FROM oplog WHERE op_id = %s", (op_id,))
        return None if row is None else _verified(row)

    def find_ops(self, op_type: str, user_id: str, target_id: str | None = None) -> list[OpRecord]:
        sql, params = select_ops("%s", op_type, user_id, target_id=target_id, by_seq=True)
        return [_verified(r) for r in self._fetchall(sql, params)]

    def op_checksums(
        self,
        op_type: str,
        user_id: str,
        target_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
    ) -> dict[str, str]:
        targets = None if target_ids is None else ("= ANY(%s)", list(target_ids))
        sql, params = select_op_checksums("%s", op_type, user_id, targets=targets, limit=limit)
        return {str(t): str(d) for t, d in self._fetchall(sql, params)}

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
            "%s",
            op_type,
            user_id,
            namespace=namespace,
            after_target=after_target,
            limit=limit,
            newest_first=newest_first,
            order_by_target=order_by_target,
            before=before,
        )
        for row in self._fetchall(sql, params):
            yield _verified(row)

    # ------------------------------------------------------------------ receipt retention
    def op_heads(self, op_type: str, *, created_before_us: int) -> list[OpHead]:
        rows = self._fetchall(
            "SELECT op_id, user_id, target_id, created_at, checksum FROM oplog"
            " WHERE op_type = %s AND created_at < %s ORDER BY seq",
            (op_type, created_before_us),
        )
        return [OpHead(*row) for row in rows]

    def iter_payloads(self, *, exclude_op_types: Sequence[str]) -> Iterator[str]:
        sql = "SELECT payload, op_type, op_id FROM oplog WHERE NOT (op_type = ANY(%s)) ORDER BY seq"
        with self._connection() as conn:
            self._trace(sql)
            if getattr(self._local, "conn", None) is conn:  # in a transaction: stream the rows
                with conn.cursor(name="prme_payloads") as server:
                    server.itersize = 256
                    server.execute(sql, (list(exclude_op_types),))
                    for payload, op_type, op_id in server:
                        yield stored_payload(payload, str(op_type), str(op_id))
                return
            for payload, op_type, op_id in conn.execute(sql, (list(exclude_op_types),)):
                yield stored_payload(payload, str(op_type), str(op_id))

    def delete_ops(self, op_type: str, op_ids: Sequence[str]) -> int:
        """Deletes through the trigger's one admitted path (migration 2): only while this
        transaction sets ``prme.receipt_retention``, and only ``retrieval_receipt`` rows."""
        if op_type != RETAINED_OP_TYPE:
            raise InvalidInputError("op_type", f"only {RETAINED_OP_TYPE} may be deleted", op_type)
        with self.transaction() as conn:
            self._run(conn, "SET LOCAL prme.receipt_retention = 'on'")
            deleted = self._run(
                conn,
                "DELETE FROM oplog WHERE op_type = %s AND op_id = ANY(%s)",
                (op_type, list(op_ids)),
            ).rowcount
            self._run(conn, "SET LOCAL prme.receipt_retention = 'off'")
        return int(deleted)


def drop_schema(url: str, schema: str) -> None:
    """Delete a pack schema and everything in it (irreversible; tests use it to clean up)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {pack_schema(url, schema)} CASCADE")
