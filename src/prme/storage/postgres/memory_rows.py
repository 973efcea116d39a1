"""The PostgreSQL store's memory rows: content writes (insert, delete, supersede, with the
owners' BM25 statistics), memory reads, and candidate generation (the owner's column index and
its lexical search). :class:`~prme.storage.postgres.PostgresStore` inherits them.

An owner's index due to be saved in the pack (:mod:`~prme.storage.postgres.saved_index`) is
saved in the background (:mod:`~prme.storage.postgres.index_saves`): the retrieve that refreshed
it hands a fixed view (:meth:`OwnerIndex.snapshot`) to the store's saving thread and returns. The
view never changes while the live index keeps appending (it reads positions below its size
only: appends write past it, an array that grows is replaced by a copy holding the same rows
below, a compacted graph is a new object), and its segments are built like a retrieve's, in a
cache of its own (:meth:`SegmentCache.up_to`: the live index's later segments are not the saved
index's, and are never deleted as superseded by it). Once the save
commits, the live index's ``saved_size`` becomes the view's size; a failed or skipped save
leaves it, so the index is saved again when next refreshed while still due."""

from __future__ import annotations

import hashlib
import itertools
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg_pool import ConnectionPool

from prme.errors import StorageUnavailableError
from prme.index.index_file import IndexStamp
from prme.index.lexical import postings_bm25
from prme.index.owner_index import OwnerIndex
from prme.models.enums import Scope
from prme.models.memory import MemoryNode
from prme.models.receipt import PackIdentity
from prme.storage import digest as pack_digest_
from prme.storage.columns import (
    INDEX_COLUMNS,
    MEMORY_COLUMNS,
    NODE_COLUMNS,
    index_row,
    node_columns,
    row_to_node,
    select_list,
)
from prme.storage.owner_indexes import OwnerIndexCache, save_due
from prme.storage.postgres import changes, lexical, saved_index
from prme.storage.postgres.digest import row_hashes
from prme.storage.postgres.index_saves import IndexSaves
from prme.storage.postgres.migrations import Conn, lock_key
from prme.storage.postgres.saved_index import ANN
from prme.storage.postgres.vectors import PgVector

_MEMORY_COLUMNS = select_list(MEMORY_COLUMNS)
_NODE_COLUMNS = select_list(NODE_COLUMNS)
INDEX_BATCH_ROWS = 32768  # rows read at a time when an owner index is built or refreshed
_INDEX_ROWS = (
    f"SELECT m.rowid, {select_list(INDEX_COLUMNS, 'm')}, m.doc_len, v.vec FROM memories m"
    " JOIN vectors v ON v.rowid = m.rowid WHERE m.user_id = %s AND m.rowid > %s"
    " ORDER BY m.rowid"
)
_cursors = itertools.count()
# Batches up to this size are pipelined INSERTs (few round trips); larger ones use COPY.
_SMALL_BATCH = 32


class MemoryRows(OwnerIndexCache):
    """The memory-row methods of :class:`~prme.storage.postgres.PostgresStore`."""

    _vector_oid: int

    if TYPE_CHECKING:  # declared for the type checker; PostgresStore defines them

        def transaction(self, *, snapshot: bool = False) -> AbstractContextManager[Conn]: ...
        def _connection(self) -> AbstractContextManager[Conn]: ...
        def _trace(self, sql: str) -> None: ...
        def _run(
            self, conn: Conn, sql: str, params: Sequence[Any] | None = None, *, binary: bool = False
        ) -> psycopg.Cursor[Any]: ...
        def _fetchall(
            self, sql: str, params: Sequence[Any] | None = None
        ) -> list[tuple[Any, ...]]: ...
        def _fetchone(
            self, sql: str, params: Sequence[Any] | None = None
        ) -> tuple[Any, ...] | None: ...
        def read_snapshot(
            self, owner: str | None = None
        ) -> AbstractContextManager[PackIdentity]: ...
        def _lock_content(self, conn: Conn) -> None: ...
        def _refuse_if_frozen(self, operation: str) -> None: ...
        def _sequences(self) -> tuple[int, int]: ...
        def _bump(self, conn: Conn, *keys: str) -> None: ...
        def _bump_owners(self, conn: Conn, user_ids: set[str]) -> None: ...
        def _owner_sequences(self, user_id: str) -> tuple[int, int]: ...
        def _owner_index_sequences(self, conn: Conn, user_id: str) -> tuple[int, int]: ...
        def _update_digest(
            self, conn: Conn, added: Iterable[int], removed: Iterable[int]
        ) -> None: ...
        def embedder_identity(self) -> dict[str, Any] | None: ...
        def attest(self, payload: Any) -> str: ...
        def _guard(self) -> AbstractContextManager[None]: ...

    _pack_id: str
    _pool: ConnectionPool[Conn]
    _workdir: Path | None
    _remove_workdir: weakref.finalize[..., Any] | None = None  # a private one only
    _index_cache: Path | None
    _saves: IndexSaves | None = None  # the saving thread, created by first use
    storage_name: str
    schema: str

    # ---------------------------------------------------------------- content writes
    def insert_memories(
        self,
        nodes: Sequence[MemoryNode],
        vectors: npt.NDArray[np.float32],
        entities: Sequence[Sequence[str]],
    ) -> None:
        self._refuse_if_frozen("store")
        if not nodes:
            return
        columns = node_columns(nodes)
        encoded = PgVector.encode_rows(vectors, len(nodes))
        blobs = pack_digest_.vectors_le(vectors, len(nodes))
        hashes = pack_digest_.column_hashes(columns, entities, blobs)
        with self.transaction() as conn:
            self._lock_content(conn)
            (first,) = self._run(
                conn, "SELECT COALESCE(MAX(rowid), 0) + 1 FROM memories"
            ).fetchone() or (1,)
            last = first + len(nodes) - 1
            rowids = range(first, last + 1)
            links = {  # one link per (owner, name, memory), as the primary key wants
                (node.user_id, name, rowid): None
                for rowid, node, names in zip(rowids, nodes, entities, strict=True)
                for name in names
            }
            small = len(nodes) <= _SMALL_BATCH
            with conn.pipeline() if small else nullcontext():
                self._bulk(
                    conn,
                    "memories",
                    _MEMORY_COLUMNS,
                    list(zip(rowids, *columns, strict=True)),
                    small,
                )
                self._bulk(
                    conn, "vectors", "rowid, vec", list(zip(rowids, encoded, strict=True)), small
                )
                self._bulk(conn, "entities", "user_id, name, memory_rowid", list(links), small)
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
    def owner_index(self, user_id: str) -> OwnerIndex | None:
        """The owner's column index, refreshed to the current write sequence (a fixed view)."""
        dimension = (self.embedder_identity() or {}).get("dimension")
        if dimension is None:
            return None
        with self.read_snapshot(), self._connection() as conn:
            # The owner's own sequences: another owner's writes neither refresh nor rebuild it.
            write_seq, delete_seq = self._owner_sequences(user_id)
            with self._index_lock:
                index = self._indexes.get(user_id)
                fresh = index is not None and index.write_seq >= write_seq
                if index is not None and fresh and index.delete_seq == delete_seq:
                    return index.snapshot()
                if index is not None and index.dimension == dimension:
                    # rows removed or changed in place since: taken out, re-read; else rebuilt below
                    index = (
                        changes.caught_up(self._trace, conn, index, user_id, delete_seq) or index
                    )
                if index is None or index.delete_seq != delete_seq or index.dimension != dimension:
                    key = (self._pack_id, user_id, delete_seq, int(dimension))
                    root = self._index_root()
                    # never while this process saves the owner's index (the same directory)
                    index = None
                    if not self._index_saves().pending(user_id):
                        index = saved_index.load(
                            self._trace, conn, root, key, self._ann, self.attest
                        )
                    index = index or OwnerIndex(int(dimension), ann=self._ann, ann_dir=root / ANN)
                self._append_new_rows(conn, index, user_id)
                index.write_seq = write_seq
                index.delete_seq = delete_seq
                self._indexes[user_id] = index
                if save_due(index):
                    self._schedule_save(user_id, index)
                return index.snapshot()

    def _append_new_rows(self, conn: Conn, index: OwnerIndex, user_id: str) -> None:
        """Append the owner's rows past the index's last rowid, read in batches through a
        server-side cursor (a large owner's rows never all exist as Python objects at once); a
        new index gets its final size at once."""
        if index.size == 0:
            row = self._run(
                conn, "SELECT COUNT(*) FROM memories WHERE user_id = %s", (user_id,)
            ).fetchone()
            index.reserve(int(row[0]) if row else 0)
        self._trace(_INDEX_ROWS)
        with conn.cursor(name=f"prme_index_{next(_cursors)}", binary=True) as cursor:
            cursor.execute(_INDEX_ROWS, (user_id, index.max_rowid))
            while rows := cursor.fetchmany(INDEX_BATCH_ROWS):
                entities: dict[int, list[str]] = {}
                for rowid, name in self._run(
                    conn,
                    "SELECT memory_rowid, name FROM entities WHERE user_id = %s"
                    " AND memory_rowid BETWEEN %s AND %s ORDER BY memory_rowid, name",
                    (user_id, rows[0][0], rows[-1][0]),
                ):
                    entities.setdefault(int(rowid), []).append(str(name))
                raw = b"".join(bytes(r[-1])[4:] for r in rows)
                vectors = np.frombuffer(raw, dtype=">f4").astype(np.float32)
                index.append(
                    [index_row(r, int(r[-2])) for r in rows],
                    vectors.reshape(len(rows), index.dimension),
                    entities,
                )

    def _saved_index_root(self) -> Path | None:
        return self._workdir

    def _index_root(self) -> Path:
        """Where the owner indexes this store loads or saves are kept on this host
        (:mod:`prme.storage.postgres.saved_index`; memory-mapped): under the index cache, one
        directory per pack location and pack id, else a private temporary directory."""
        if self._workdir is None:
            if self._index_cache is None:
                self._workdir = Path(tempfile.mkdtemp(prefix="prme-pg-index-"))
                # removed by close(), else when the store is collected or the process exits
                self._remove_workdir = weakref.finalize(
                    self, shutil.rmtree, self._workdir, ignore_errors=True
                )
            else:
                where = f"{self.storage_name}\n{self._pack_id}".encode()
                self._workdir = self._index_cache / hashlib.sha256(where).hexdigest()[:32]
                self._workdir.mkdir(parents=True, exist_ok=True)
        return self._workdir

    def _schedule_save(self, user_id: str, index: OwnerIndex) -> None:
        """Save a fixed view of the owner's live ``index`` on the store's saving thread (the
        caller holds ``_index_lock``); none while one of the owner's saves is pending."""
        view = index.snapshot()
        # the view's own segments: a later one the live index builds meanwhile is not the saved
        # index's, and must not be deleted as one it superseded (index_file.save)
        view.graphs = index.graphs.up_to(view.size)
        root, logged_in = self._index_root(), index.index_dir

        def save() -> None:
            saved = False
            try:
                saved = self._save_index(user_id, view, root)
            finally:
                with self._index_lock:
                    if saved:
                        index.saved_size = view.size
                        index.index_dir = view.index_dir
                    elif index.index_dir is None:
                        index.index_dir = logged_in

        if self._index_saves().submit(user_id, save):
            # the segments the live index builds during the save are not logged in the
            # directory the save replaces (it would delete them as superseded)
            index.index_dir = None

    def _index_saves(self) -> IndexSaves:
        """The store's saving thread (the caller holds ``_index_lock``)."""
        if self._saves is None:
            self._saves = IndexSaves(f"prme-index-save-{self.schema}")
        return self._saves

    def wait_for_index_saves(self) -> None:
        """Wait for the owner-index saves scheduled so far to finish (they run on the store's
        saving thread)."""
        with self._index_lock:
            saves = self._index_saves()
        saves.wait()

    def _close_index_saves(self) -> None:
        """Schedule no more saves and wait for the running one (before the pool closes)."""
        with self._index_lock:
            saves = self._index_saves()
        saves.close()

    def _save_index(self, user_id: str, index: OwnerIndex, root: Path) -> bool:
        """Save the owner's index (a fixed view) in the pack, in a transaction of its own;
        whether it was saved (skipped while another process saves it, or when a delete made it
        stale; a failure keeps it in memory only). Its segments are built first, before a
        connection is held."""
        stamp = IndexStamp(
            self._pack_id, user_id, index.delete_seq, index.dimension, index.size, index.max_rowid
        )
        lock = lock_key(self.schema, "owner-index", user_id)
        try:
            index.complete_segments()
            with self._guard(), self._pool.connection() as conn, conn.transaction():
                # one snapshot: the owner's rows whose lexemes are read are the checked ones
                self._run(conn, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                row = self._run(conn, "SELECT pg_try_advisory_xact_lock(%s)", (lock,)).fetchone()
                if not (row and row[0]):
                    return False
                current = self._owner_index_sequences(conn, user_id)[1] == index.delete_seq
                if not current or stamp.pack_id != self._pack_id:
                    return False  # never loaded: it would only replace a newer save

                postings = lexical.owner_postings(self._runner(conn), index, user_id)
                saved_index.save(self._trace, conn, root, stamp, index, self.attest, postings)
        except (OSError, psycopg.Error, StorageUnavailableError):
            return False
        return True

    def lexical_search(
        self, user_id: str, scopes: Sequence[Scope] | None, terms: Sequence[str], k: int
    ) -> list[tuple[int, float]]:
        """BM25 over the owner's memories with FTS5's formula and the owner's statistics:
        ``(rowid, score)``, best first, then by rowid (:mod:`prme.storage.postgres.lexical`)."""
        if not terms:
            return []
        with self.read_snapshot(), self._connection() as conn:
            index = self.owner_index(user_id)  # the owner index and the postings: one state
            if index is None:  # no embedder bound, so nothing is stored
                return []
            run = self._runner(conn)
            phrases = lexical.query_phrases(run, terms)
            postings = lexical.owner_postings(run, index, user_id)
            return postings_bm25(postings, index, index.scope_mask(scopes), phrases, k)

    def _runner(self, conn: Conn) -> lexical.Run:
        """Statements on ``conn`` for :mod:`~prme.storage.postgres.lexical` (traced as all are)."""
        return lambda sql, params: self._run(conn, sql, params)
