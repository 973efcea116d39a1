"""The owner changes a PostgreSQL pack logs (``owner_changes``, migration 10), read to catch an
owner index up with the rows removed or superseded since it was built or saved, instead of
rebuilding it (:func:`prme.storage.owner_indexes.caught_up`)."""

from __future__ import annotations

from typing import Any

from prme.index.owner_index import OwnerIndex
from prme.storage import owner_indexes
from prme.storage.base import Tracer
from prme.storage.columns import INDEX_COLUMNS, index_row, select_list
from prme.storage.owner_indexes import IndexRows, Steps
from prme.storage.postgres.migrations import Conn

_STEPS = (
    "SELECT memory_rowid, removed FROM owner_changes"
    " WHERE user_id = %s AND delete_seq > %s AND delete_seq <= %s"
)
_ROWS = (
    f"SELECT m.rowid, {select_list(INDEX_COLUMNS, 'm')}, m.doc_len FROM memories m"
    " WHERE m.user_id = %s AND m.rowid = ANY(%s) ORDER BY m.rowid"
)


def logged_steps(trace: Tracer, conn: Conn, user_id: str) -> Steps:
    """The owner's logged delete-sequence steps on ``conn`` (:data:`Steps`)."""

    def steps(after: int, upto: int) -> list[tuple[int, bool]]:
        trace(_STEPS)
        rows = conn.execute(_STEPS, (user_id, after, upto)).fetchall()
        return [(int(rowid), bool(removed)) for rowid, removed in rows]

    return steps


def index_rows(trace: Tracer, conn: Conn, user_id: str) -> IndexRows:
    """The owner's index rows of given rowids on ``conn`` (:data:`IndexRows`)."""

    def rows(rowids: list[int]) -> list[dict[str, Any]]:
        trace(_ROWS)
        return [index_row(r, int(r[-1])) for r in conn.execute(_ROWS, (user_id, rowids))]

    return rows


def caught_up(
    trace: Tracer, conn: Conn, index: OwnerIndex, user_id: str, delete_seq: int
) -> OwnerIndex | None:
    """:func:`prme.storage.owner_indexes.caught_up` on ``conn``."""
    steps, rows = logged_steps(trace, conn, user_id), index_rows(trace, conn, user_id)
    return owner_indexes.caught_up(index, delete_seq, steps, rows)
