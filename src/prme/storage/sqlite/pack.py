"""The SQLite pack's whole-pack rows and integrity checks, over one connection: what
:class:`~prme.storage.sqlite.store.SQLiteStore`'s ``iter_rows``, ``import_*``,
``scan_rows`` and ``check_storage`` run (inside the store's snapshot or write transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from prme.storage import payloads
from prme.storage.base import RowScan, StorageFinding
from prme.storage.pack_rows import (
    MEMORY_CONTENT,
    MEMORY_PINNED,
    RowKind,
    insert_rows,
    select_rows,
    with_pinned,
)

FTS_CHECK = "INSERT INTO memories_fts(memories_fts, rank) VALUES('integrity-check', 1)"
IDENTITY_KEYS = ("pack_id", "secret", "write_seq", "delete_seq")


def iter_rows(conn: sqlite3.Connection, kind: RowKind) -> Iterator[tuple[Any, ...]]:
    """Every row of ``kind`` in export order and neutral form (``pinned`` a bool)."""
    cursor = conn.execute(select_rows(kind, "?"))
    if kind != "memory":
        yield from cursor
        return
    for row in cursor:
        yield with_pinned(row, bool(row[MEMORY_PINNED]))


def import_meta(
    conn: sqlite3.Connection, meta: dict[str, str], embedder: str | None, owners: dict[str, int]
) -> None:
    for key in IDENTITY_KEYS:
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (meta[key], key))
    if embedder is not None:
        conn.execute("INSERT INTO meta(key, value) VALUES ('embedder', ?)", (embedder,))
    conn.executemany(
        "INSERT INTO owner_sequences(user_id, write_seq) VALUES (?, ?)", owners.items()
    )


def import_rows(conn: sqlite3.Connection, kind: RowKind, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert neutral rows of ``kind`` (a memory also gets its lexical row)."""
    if kind == "memory":
        conn.executemany(
            insert_rows(kind, "?"), [with_pinned(r, int(r[MEMORY_PINNED])) for r in rows]
        )
        conn.executemany(
            "INSERT INTO memories_fts(rowid, content) VALUES (?, ?)",
            [(r[0], r[MEMORY_CONTENT]) for r in rows],
        )
    elif kind == "op":
        conn.executemany(
            insert_rows(kind, "?"), [(*r[:7], payloads.encode(r[2], r[7]), r[8]) for r in rows]
        )
    else:
        conn.executemany(insert_rows(kind, "?"), rows)


_ORPHANS = {
    "memory without a vector": "SELECT m.id FROM memories m"
    " LEFT JOIN vectors v ON v.rowid = m.rowid WHERE v.rowid IS NULL",
    "memory without a lexical row": "SELECT m.id FROM memories m"
    " LEFT JOIN memories_fts_docsize d ON d.id = m.rowid WHERE d.id IS NULL",
    "vector without a memory": "SELECT 'rowid ' || v.rowid FROM vectors v"
    " LEFT JOIN memories m ON m.rowid = v.rowid WHERE m.rowid IS NULL",
    "lexical row without a memory": "SELECT 'rowid ' || d.id FROM memories_fts_docsize d"
    " LEFT JOIN memories m ON m.rowid = d.id WHERE m.rowid IS NULL",
    "entity link without a memory": "SELECT e.name FROM entities e"
    " LEFT JOIN memories m ON m.rowid = e.memory_rowid WHERE m.rowid IS NULL",
}


def scan_rows(conn: sqlite3.Connection, dimension: int | None, limit: int) -> RowScan:
    def count(table: str) -> int:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    orphans = [
        (message, str(ref))
        for message, sql in _ORPHANS.items()
        for (ref,) in conn.execute(f"{sql} LIMIT ?", (limit,))
    ]
    bad: list[str] = []
    if dimension is not None:
        bad = [
            str(ref)
            for (ref,) in conn.execute(
                "SELECT 'rowid ' || rowid FROM vectors WHERE length(vec) != ? LIMIT ?",
                (4 * dimension, limit),
            )
        ]
    return RowScan(
        memories=count("memories"),
        vectors=count("vectors"),
        lexical_rows=count("memories_fts_docsize"),
        orphans=tuple(orphans),
        bad_vectors=tuple(bad),
    )


def check_fts(conn: sqlite3.Connection) -> list[StorageFinding]:
    """FTS5's own check of its index against the memories table (a write command)."""
    try:
        conn.execute(FTS_CHECK)
    except sqlite3.DatabaseError as exc:
        return [
            StorageFinding("sqlite", "memories_fts", f"lexical index differs from memories ({exc})")
        ]
    return []


def check_database(conn: sqlite3.Connection) -> list[StorageFinding]:
    """``PRAGMA integrity_check``: every problem SQLite finds in the database file."""
    return [
        StorageFinding("sqlite", None, str(row[0]))
        for row in conn.execute("PRAGMA integrity_check(100)")
        if row[0] != "ok"
    ]
