"""The SQLite store's memory rows: content writes (insert, delete, supersede), memory reads, and
candidate generation (the owner's column index and its BM25 lexical search).
:class:`~prme.storage.sqlite.SQLiteStore` inherits them."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from prme.index.owner_index import OwnerIndex
from prme.models.enums import Scope
from prme.models.memory import MemoryNode
from prme.models.receipt import PackIdentity
from prme.storage import digest as pack_digest_
from prme.storage.columns import (
    NODE_COLUMNS,
    USER_ID,
    insert_memories_sql,
    node_columns,
    row_to_node,
    select_list,
)
from prme.storage.fts5_lexical import QueryTokenizer, owner_bm25
from prme.storage.owner_indexes import OwnerIndexCache
from prme.storage.sqlite import indexes
from prme.storage.sqlite.indexes import INDEX_DIR

_NODE_COLUMNS = select_list(NODE_COLUMNS)
_INSERT_MEMORIES = insert_memories_sql("?")
# The owner's (write_seq, delete_seq); no row yet means nothing written or deleted: 0.
_OWNER_SEQUENCES = (
    "(SELECT write_seq FROM owner_sequences WHERE user_id = ?),"
    " (SELECT delete_seq FROM owner_deletes WHERE user_id = ?)"
)


class MemoryRows(OwnerIndexCache):
    """The memory-row methods of :class:`~prme.storage.sqlite.SQLiteStore`."""

    path: Path
    read_only_mode: str
    _local: threading.local
    _pack_id: str
    _tokenizer: QueryTokenizer

    if TYPE_CHECKING:  # declared for the type checker; SQLiteStore defines them

        @property
        def conn(self) -> sqlite3.Connection: ...
        def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...
        def read_snapshot(
            self, owner: str | None = None
        ) -> AbstractContextManager[PackIdentity]: ...
        def _refuse_if_frozen(self, operation: str) -> None: ...
        def _sequences(self) -> tuple[int, int]: ...
        def _bump(self, conn: sqlite3.Connection, *keys: str) -> None: ...
        def _bump_owners(self, conn: sqlite3.Connection, user_ids: set[str]) -> None: ...
        def _rows_hashes(self, where: str, params: Sequence[Any]) -> Iterator[int]: ...
        def _update_digest(
            self, conn: sqlite3.Connection, added: Iterable[int], removed: Iterable[int]
        ) -> None: ...
        def embedder_identity(self) -> dict[str, Any] | None: ...
        def pack_identity(self) -> PackIdentity: ...

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
        count = len(nodes)
        blobs = pack_digest_.vectors_le(vectors, count)
        hashes = pack_digest_.column_hashes(columns, entities, blobs)
        with self._write() as conn:
            first = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM memories").fetchone()[0] + 1
            rowids = list(range(first, first + count))
            conn.executemany(_INSERT_MEMORIES, zip(rowids, *columns, strict=True))
            # FTS5 indexes the text just written (read back in SQLite, not bound again).
            conn.execute(
                "INSERT INTO memories_fts(rowid, content)"
                " SELECT rowid, content FROM memories WHERE rowid >= ? ORDER BY rowid",
                (first,),
            )
            conn.executemany(
                "INSERT INTO vectors(rowid, vec) VALUES (?, ?)", zip(rowids, blobs, strict=True)
            )
            conn.executemany(
                "INSERT OR IGNORE INTO entities(user_id, name, memory_rowid) VALUES (?, ?, ?)",
                [
                    (owner, name, rowid)
                    for rowid, owner, names in zip(rowids, columns[USER_ID], entities, strict=True)
                    for name in names
                ],
            )
            self._update_digest(conn, hashes, ())
            self._bump(conn, "write_seq")
            self._bump_owners(conn, set(columns[USER_ID]))

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
        and mark it ``superseded``; a content write that also bumps ``delete_seq`` and (by the
        pack's trigger) the owner's own delete sequence, logging the row in ``owner_changes``:
        the owner's column index re-reads that row, and other owners' indexes are untouched."""
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

    def _snapshot_identity(self, owner: str | None) -> PackIdentity:
        """The pack identity at the start of a read snapshot, and ``owner``'s sequences with
        it in the same statement, kept for the snapshot: until this connection writes, they
        cannot move (:meth:`owner_write_seq` and the owner index read them)."""
        if owner is None:
            return self.pack_identity()
        conn = self.conn
        try:
            row = conn.execute(
                f"SELECT (SELECT value FROM meta WHERE key = 'write_seq'), {_OWNER_SEQUENCES}",
                (owner, owner),
            ).fetchone()
        except sqlite3.OperationalError as exc:  # a read-only pack from before the owner tables
            if "no such table" not in str(exc):
                raise
            return self.pack_identity()
        sequences = (int(row[1] or 0), int(row[2] or 0))
        self._local.owner_sequences = (owner, conn.total_changes, sequences)
        return PackIdentity(pack_id=self._pack_id, write_seq=int(row[0]))

    def _kept_sequences(self, user_id: str) -> tuple[int, int] | None:
        """``user_id``'s sequences kept by the current read snapshot, while this connection
        has written nothing since."""
        kept = getattr(self._local, "owner_sequences", None)
        if kept is None or kept[:2] != (user_id, self.conn.total_changes):
            return None
        sequences: tuple[int, int] = kept[2]
        return sequences

    def owner_write_seq(self, user_id: str) -> int:
        kept = self._kept_sequences(user_id)
        if kept is not None:
            return kept[0]
        row = self.conn.execute(
            "SELECT write_seq FROM owner_sequences WHERE user_id = ?", (user_id,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _owner_index_sequences(self, user_id: str) -> tuple[int, int]:
        """The owner's ``(write_seq, delete_seq)``, which key and refresh the owner's column
        index (another owner's writes move neither; ``owner_deletes`` is kept by the pack's
        triggers on ``memories``). A read-only pack from before the owner
        tables has the pack-wide sequences instead, negated (-1 - seq) so that they never equal
        an owner's own."""
        kept = self._kept_sequences(user_id)
        if kept is not None:
            return kept
        try:
            row = self.conn.execute(f"SELECT {_OWNER_SEQUENCES}", (user_id, user_id)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            write_seq, delete_seq = self._sequences()
            return -1 - write_seq, -1 - delete_seq
        return int(row[0] or 0), int(row[1] or 0)

    def _saved_index_root(self) -> Path | None:
        return self.path / INDEX_DIR

    def _refreshed_index(self, user_id: str, dimension: int) -> OwnerIndex:
        # The owner's own sequences: another owner's writes neither refresh nor rebuild it.
        write_seq, delete_seq = self._owner_index_sequences(user_id)
        root = self.path / INDEX_DIR
        with self._index_lock:
            index = self._indexes.get(user_id)
            if index is not None and (index.write_seq, index.delete_seq) == (write_seq, delete_seq):
                return index.snapshot()
            if index is not None and index.dimension == dimension:
                # rows removed or changed in place since: taken out, re-read; else rebuilt below
                index = indexes.caught_up(self.conn, index, user_id, delete_seq) or index
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
                indexes.save(self.conn, root, self._pack_id, user_id, index)
            return index.snapshot()

    def wait_for_index_saves(self) -> None:
        """Nothing to wait for: this store saves an owner index on the refreshing thread,
        before :meth:`owner_index` returns."""

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
