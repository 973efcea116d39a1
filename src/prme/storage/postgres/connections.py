"""The PostgreSQL store's connections: the pool, transactions pinned to a thread, read
snapshots, a block of calls on one connection, advisory locks and the sequences a snapshot
reads once.

A thread's transaction holds one pooled connection, and nested store calls on that thread run
inside it (like SQLite's ``_write()`` nesting). :meth:`Connections.pinned` holds one connection
for a block of calls: a retrieval checks one out (the pool's liveness check is a round trip),
and its snapshot reads the pack's and the owner's sequences in one statement, once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from prme.errors import StorageUnavailableError
from prme.models.receipt import PackIdentity
from prme.storage.base import Tracer
from prme.storage.postgres.migrations import Conn, lock_key

# Temporary failures (StorageUnavailableError, HTTP 503): no SQLSTATE (client side), class 08
# or the server shutting down; class 53 (disk full, out of memory, too many connections); a
# lock wait past lock_timeout (55P03) or statement_timeout (57014 query_canceled).
_UNAVAILABLE_STATES = ("08", "57P01", "57P02", "57P03", "53", "55P03", "57014")

# An owner's (write_seq, delete_seq), the owner's id as both parameters: one read for the
# owner index's check and for a read snapshot's first statement.
_OWNER_SEQUENCES = (
    "(SELECT write_seq FROM owner_sequences WHERE user_id = %s),"
    " (SELECT delete_seq FROM owner_deletes WHERE user_id = %s)"
)


def _owner_sequences_of(values: Sequence[Any]) -> tuple[int, int]:
    """The owner's sequences read by :data:`_OWNER_SEQUENCES` (an owner without a row has
    written, or deleted, nothing: 0)."""
    return int(values[0] or 0), int(values[1] or 0)


class Connections:
    """Connections, transactions and snapshots of a :class:`PostgresStore` (a mixin)."""

    if TYPE_CHECKING:  # declared for the type checker; PostgresStore defines them

        def pack_identity(self) -> PackIdentity: ...

    _local: threading.local
    _pool: ConnectionPool[Conn]
    _closed: bool
    tracer: Tracer | None
    storage_name: str
    schema: str

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
        """The thread's transaction connection, else its pinned one (:meth:`pinned`), else a
        pooled one for autocommit reads."""
        conn: Conn | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = getattr(self._local, "pinned", None)
        if conn is not None:
            yield conn
            return
        self._check_open()
        with self._guard(), self._pool.connection() as pooled:
            yield pooled

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Run this thread's store calls inside the block on one pooled connection.

        Each checkout from the pool costs a round trip (the pool checks the connection is
        alive); a retrieval's calls would make four. Transactions inside the block run on
        the pinned connection; nested blocks, and blocks inside a transaction, pin nothing."""
        in_transaction = getattr(self._local, "conn", None) is not None
        if in_transaction or getattr(self._local, "pinned", None) is not None:
            yield
            return
        self._check_open()
        with self._guard(), self._pool.connection() as pooled:
            self._local.pinned = pooled
            try:
                yield
            finally:
                self._local.pinned = None

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
        pinned: Conn | None = getattr(self._local, "pinned", None)
        held = self._pool.connection() if pinned is None else nullcontext(pinned)
        with self._guard(), held as pooled:
            # psycopg opens the block with BEGIN [ISOLATION LEVEL REPEATABLE READ]
            pooled.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if snapshot else None
            self._trace("BEGIN ISOLATION LEVEL REPEATABLE READ" if snapshot else "BEGIN")
            try:
                with pooled.transaction():
                    self._local.conn = pooled
                    self._local.locks = set()
                    self._local.sequences = None
                    self._local.owner_sequences = {}
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

    @contextmanager
    def serialized(self, key: str) -> Iterator[None]:
        """Serialize a read-check-append across processes and hosts (transaction-scoped lock)."""
        with self.transaction() as conn:
            self._lock(conn, key)
            yield

    @contextmanager
    def read_snapshot(self, owner: str | None = None) -> Iterator[PackIdentity]:
        """A consistent read transaction (REPEATABLE READ); yields the pack identity it sees.
        The pack's sequences are read once, fixed for the snapshot, and ``owner``'s with them
        (one round trip, not two)."""
        with self.transaction(snapshot=True):
            if self._local.snapshot and self._local.sequences is None:
                self._read_snapshot_sequences(owner)
            yield self.pack_identity()

    def _read_snapshot_sequences(self, owner: str | None) -> None:
        if owner is None:
            self._local.sequences = self._read_sequences()
            return
        row = self._fetchone(
            "SELECT (SELECT value FROM meta WHERE key = 'write_seq'),"
            f" (SELECT value FROM meta WHERE key = 'delete_seq'), {_OWNER_SEQUENCES}",
            (owner, owner),
        )
        assert row is not None  # one row, always
        self._local.sequences = (int(row[0]), int(row[1]))
        self._local.owner_sequences[owner] = _owner_sequences_of(row[2:])

    def _lock_content(self, conn: Conn) -> None:
        self._lock(conn, "content")

    def _lock(self, conn: Conn, key: str) -> None:
        """Take the transaction-scoped advisory lock of ``key`` (once per transaction)."""
        held: set[str] = self._local.locks
        if key not in held:
            self._run(conn, "SELECT pg_advisory_xact_lock(%s)", (lock_key(self.schema, key),))
            held.add(key)

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
        self._local.owner_sequences = {}
        self._run(
            conn,
            "INSERT INTO owner_sequences(user_id, write_seq) SELECT u, 1 FROM unnest(%s::text[])"
            " AS u ORDER BY u ON CONFLICT (user_id)"
            " DO UPDATE SET write_seq = owner_sequences.write_seq + 1",
            (sorted(user_ids),),
        )

    def owner_write_seq(self, user_id: str) -> int:
        return self._owner_sequences(user_id)[0]

    def _owner_sequences(self, user_id: str) -> tuple[int, int]:
        """The owner's ``(write_seq, delete_seq)``; read once per read snapshot (they cannot
        move inside one: a retrieval asks three times, for its receipt and its index twice)."""
        in_snapshot = getattr(self._local, "conn", None) is not None and self._local.snapshot
        cached: dict[str, tuple[int, int]] = self._local.owner_sequences if in_snapshot else {}
        found = cached.get(user_id)
        if found is None:
            with self._connection() as conn:
                found = cached[user_id] = self._owner_index_sequences(conn, user_id)
        return found

    def _owner_index_sequences(self, conn: Conn, user_id: str) -> tuple[int, int]:
        """The owner's ``(write_seq, delete_seq)``, which key and refresh the owner's column
        index (another owner's writes move neither; ``owner_deletes`` is kept by the pack's
        trigger on ``memories``, migration 7), read on ``conn``."""
        row = self._run(conn, f"SELECT {_OWNER_SEQUENCES}", (user_id, user_id)).fetchone()
        return (0, 0) if row is None else _owner_sequences_of(row)

    def _bump(self, conn: Conn, *keys: str) -> None:
        self._local.sequences = None
        self._local.owner_sequences = {}
        self._run(
            conn,
            "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = ANY(%s)",
            (list(keys),),
        )
