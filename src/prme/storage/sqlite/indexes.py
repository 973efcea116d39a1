"""The owners' column indexes of a SQLite pack: read from the tables in batches, and saved
beside the pack (``index/``), with the owners' lexical postings, so that reopening a large pack
loads them instead of rebuilding them."""

from __future__ import annotations

import json
import sqlite3
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from prme.index import index_file
from prme.index.ann import AnnPolicy
from prme.index.owner_index import OwnerIndex
from prme.storage import owner_indexes
from prme.storage.columns import INDEX_COLUMNS, index_row, select_list
from prme.storage.fts5_lexical import first_varint, owner_postings
from prme.storage.owner_indexes import IndexRows, Steps, rows_removed_since, save_due

# Derived search structures (the owners' HNSW segments), rebuilt from the database if missing.
INDEX_DIR = "index"
INDEX_BATCH_ROWS = 32768  # rows read at a time when an owner index is built or refreshed
# The owner's rows past a rowid, by rowid. ``memories_owner`` orders an owner's rows by scope
# and then rowid, so the rows past a rowid are a range within each of the owner's scopes (the
# scopes found by one index seek each): a refresh reads the owner's new rows only, never every
# row of the owner.
_ROWS = (
    "WITH RECURSIVE scopes(scope) AS ("
    " SELECT (SELECT MIN(scope) FROM memories WHERE user_id = :user)"
    " UNION ALL SELECT (SELECT MIN(scope) FROM memories WHERE user_id = :user AND scope > s.scope)"
    " FROM scopes s WHERE s.scope IS NOT NULL)"
    f" SELECT m.rowid, {select_list(INDEX_COLUMNS, 'm')}, d.sz, v.vec FROM memories m"
    " JOIN vectors v ON v.rowid = m.rowid"
    " LEFT JOIN memories_fts_docsize d ON d.id = m.rowid"
    " WHERE m.user_id = :user AND m.scope IN (SELECT scope FROM scopes) AND m.rowid > :after"
    " ORDER BY m.rowid"
)
# The entity names of the given rows (by memory, then name): a seek per row in the key
# ``(memory_rowid, user_id, name)`` (in ``entities_by_memory`` on a read-only pack from before).
_ENTITIES = (
    "SELECT e.memory_rowid, e.name FROM json_each(?) j"
    " JOIN entities e ON e.memory_rowid = j.value"
    " WHERE e.user_id = ? ORDER BY e.memory_rowid, e.name"
)


# The owner-index rows of the given rowids (no vectors: a row changed in place keeps its own).
_CHANGED_ROWS = (
    f"SELECT m.rowid, {select_list(INDEX_COLUMNS, 'm')}, d.sz FROM json_each(:rowids) j"
    " JOIN memories m ON m.rowid = j.value"
    " LEFT JOIN memories_fts_docsize d ON d.id = m.rowid"
    " WHERE m.user_id = :user ORDER BY m.rowid"
)


def logged_steps(conn: sqlite3.Connection, user_id: str) -> Steps:
    """The owner's logged delete-sequence steps on ``conn`` (:data:`Steps`)."""

    def steps(after: int, upto: int) -> list[tuple[int, bool]] | None:
        try:
            rows = conn.execute(
                "SELECT memory_rowid, removed FROM owner_changes"
                " WHERE user_id = ? AND delete_seq > ? AND delete_seq <= ?",
                (user_id, after, upto),
            ).fetchall()
        except sqlite3.OperationalError as exc:  # a read-only pack from before the table
            if "no such table" not in str(exc):
                raise
            return None
        return [(int(rowid), bool(removed)) for rowid, removed in rows]

    return steps


def index_rows(conn: sqlite3.Connection, user_id: str) -> IndexRows:
    """The owner's index rows of given rowids on ``conn`` (:data:`IndexRows`)."""

    def rows(rowids: list[int]) -> list[dict[str, Any]]:
        cursor = conn.execute(_CHANGED_ROWS, {"rowids": json.dumps(rowids), "user": user_id})
        return [index_row(r, first_varint(r[-1])) for r in cursor]

    return rows


def caught_up(
    conn: sqlite3.Connection, index: OwnerIndex, user_id: str, delete_seq: int
) -> OwnerIndex | None:
    """:func:`prme.storage.owner_indexes.caught_up` on ``conn``."""
    steps, rows = logged_steps(conn, user_id), index_rows(conn, user_id)
    return owner_indexes.caught_up(index, delete_seq, steps, rows)


def append_new_rows(conn: sqlite3.Connection, index: OwnerIndex, user_id: str) -> None:
    """Append the owner's rows past the index's last rowid, in batches (a large owner's rows
    never all exist as Python objects at once); a new index gets its final size at once."""
    if index.size == 0:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM memories WHERE user_id = ?", (user_id,)
        ).fetchone()
        index.reserve(int(count))
    cursor = conn.execute(_ROWS, {"user": user_id, "after": index.max_rowid})
    while rows := cursor.fetchmany(INDEX_BATCH_ROWS):
        entities: dict[int, list[str]] = {}
        rowids = json.dumps([r[0] for r in rows])
        for rowid, name in conn.execute(_ENTITIES, (rowids, user_id)):
            entities.setdefault(int(rowid), []).append(str(name))
        vectors = np.frombuffer(b"".join(r[-1] for r in rows), dtype=np.float32)
        index.append(
            [index_row(r, first_varint(r[-2])) for r in rows],
            vectors.reshape(len(rows), index.dimension),
            entities,
        )


def saved(
    conn: sqlite3.Connection,
    root: Path,
    key: tuple[str, str, int, int],
    ann: AnnPolicy | None,
) -> OwnerIndex | None:
    """The owner's index saved under ``root``, when it matches the database: ``key`` is
    ``(pack_id, user_id, the owner's delete_seq, dimension)``, and the owner's rows up to
    its last rowid are as many as it holds. Saved at an earlier delete sequence, it is read
    when every step since is logged, and caught up with them (:func:`caught_up`): the rows
    removed since are not counted."""
    pack_id, user_id, delete_seq, dimension = key
    directory = index_file.owner_directory(root, user_id)
    stamp = index_file.read_stamp(directory)
    if stamp is None:
        return None
    if (stamp.pack_id, stamp.user_id, stamp.dimension) != (pack_id, user_id, dimension):
        return None
    steps = logged_steps(conn, user_id)
    removed = rows_removed_since(steps, stamp.delete_seq, delete_seq, stamp.max_rowid)
    if removed is None:
        return None
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM memories WHERE user_id = ? AND rowid <= ?"
        " AND rowid NOT IN (SELECT value FROM json_each(?))",
        (user_id, stamp.max_rowid, json.dumps(removed)),
    ).fetchone()
    if int(count) != stamp.size - len(removed):
        return None
    index = index_file.load(directory, stamp, ann=ann, ann_dir=root)
    if index is None or stamp.delete_seq == delete_seq:
        return index
    return caught_up(conn, index, user_id, delete_seq)


def save(
    conn: sqlite3.Connection, root: Path, pack_id: str, user_id: str, index: OwnerIndex
) -> None:
    """Save a large owner's index, with its lexical postings (the rows not tokenized yet are,
    on ``conn``), once it has grown enough since it was last saved (a failed write keeps it in
    memory only)."""
    if not save_due(index):
        return
    stamp = index_file.IndexStamp(
        pack_id=pack_id,
        user_id=user_id,
        delete_seq=index.delete_seq,
        dimension=index.dimension,
        size=index.size,
        max_rowid=index.max_rowid,
    )
    postings = owner_postings(conn, index)
    with suppress(OSError):
        index_file.save(index, index_file.owner_directory(root, user_id), stamp, postings)
        index.saved_size = index.size
