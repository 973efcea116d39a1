"""The SQLite pack's schema, applied when a pack is opened for writing: ``schema.sql`` creates
what the pack lacks, then the layouts earlier versions left are upgraded in the same
transaction. A read-only pack keeps its layout: every query reads both.

Upgrades (each keeps every row and the pack's identity, sequences and digest):

- ``entities`` keyed by ``(user_id, name, memory_rowid)``, with a second index
  ``entities_by_memory``, is re-keyed by ``(memory_rowid, user_id, name)``: the same rows and
  the same uniqueness, in one tree that every read uses and a batch appends to.
- The owner triggers of packs from before ``owner_changes`` are recreated so that they log
  each step of an owner's delete sequence there (the steps before stay unlogged).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

ENTITIES_BY_NAME = ("user_id", "name", "memory_rowid")  # the key of packs from before
ENTITIES_BY_MEMORY = ("memory_rowid", "user_id", "name")  # the key schema.sql declares


def entity_key(conn: sqlite3.Connection) -> tuple[str, ...]:
    """The primary-key columns of the pack's ``entities`` table, in key order."""
    rows = conn.execute(
        "SELECT name FROM pragma_table_info('entities') WHERE pk > 0 ORDER BY pk"
    ).fetchall()
    return tuple(str(r[0]) for r in rows)


def _run(conn: sqlite3.Connection, statements: Sequence[str]) -> None:
    for statement in statements:
        conn.execute(statement)


def apply_schema(conn: sqlite3.Connection, statements: Sequence[str]) -> None:
    """Create what the pack lacks (``schema.sql``'s ``statements``) and upgrade earlier
    layouts, inside the caller's write transaction."""
    _run(conn, statements)
    if entity_key(conn) == ENTITIES_BY_NAME:
        conn.execute("ALTER TABLE entities RENAME TO entities_by_name")
        _run(conn, statements)  # creates entities with the current key
        conn.execute(
            "INSERT INTO entities(user_id, name, memory_rowid)"
            " SELECT user_id, name, memory_rowid FROM entities_by_name"
            " ORDER BY memory_rowid, user_id, name"
        )
        conn.execute("DROP TABLE entities_by_name")  # and its index entities_by_memory
    # Redundant with the key (an earlier version opening an upgraded pack would add it back).
    conn.execute("DROP INDEX IF EXISTS entities_by_memory")
    if _unlogged_triggers(conn):  # recreated with their owner_changes entries
        for name in OWNER_TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        _run(conn, statements)


OWNER_TRIGGERS = ("memories_owner_delete", "memories_owner_update")


def _unlogged_triggers(conn: sqlite3.Connection) -> bool:
    """Whether the owner triggers are those of packs from before ``owner_changes``."""
    rows = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?)", OWNER_TRIGGERS
    ).fetchall()
    return any("owner_changes" not in str(r[0]) for r in rows)
