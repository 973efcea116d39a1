"""Whole-pack rows, the same on every backend: what export, import and ``pack check`` read.

:meth:`prme.storage.base.Store.iter_rows` yields each kind's rows in the export order below,
already in the neutral form (``pinned`` a bool, vectors as little-endian float32 bytes, op
payloads as stored: :func:`prme.storage.oplog_sql.stored_payload` decodes them), and
:meth:`~prme.storage.base.Store.import_rows` takes them back in the same form.
"""

from __future__ import annotations

from typing import Any, Literal

from prme.storage.columns import MEMORY_COLUMNS, select_list
from prme.storage.oplog_sql import OP_COLUMNS, op_columns

RowKind = Literal["memory", "vector", "entity", "op"]
ROW_KINDS: tuple[RowKind, ...] = ("memory", "vector", "entity", "op")
VECTOR_COLUMNS = ("rowid", "vec")
ENTITY_COLUMNS = ("user_id", "name", "memory_rowid")
OPLOG_COLUMNS = tuple(c.strip() for c in OP_COLUMNS.split(","))
COLUMNS: dict[RowKind, tuple[str, ...]] = {
    "memory": MEMORY_COLUMNS,
    "vector": VECTOR_COLUMNS,
    "entity": ENTITY_COLUMNS,
    "op": OPLOG_COLUMNS,
}
TABLES: dict[RowKind, str] = {
    "memory": "memories",
    "vector": "vectors",
    "entity": "entities",
    "op": "oplog",
}
_ORDER: dict[RowKind, str] = {
    "memory": "rowid",
    "vector": "rowid",
    "entity": "memory_rowid, user_id, name",
    "op": "seq",
}
MEMORY_PINNED = MEMORY_COLUMNS.index("pinned")
MEMORY_CONTENT = MEMORY_COLUMNS.index("content")


def select_rows(kind: RowKind, mark: str) -> str:
    """The SELECT of every row of ``kind`` in export order (``mark``: the backend's
    placeholder, which decides how the op payload is read)."""
    columns = op_columns(mark) if kind == "op" else select_list(COLUMNS[kind])
    return f"SELECT {columns} FROM {TABLES[kind]} ORDER BY {_ORDER[kind]}"


def insert_rows(kind: RowKind, mark: str) -> str:
    """The INSERT of one row of ``kind`` (its :data:`COLUMNS`)."""
    names = COLUMNS[kind]
    marks = ",".join([mark] * len(names))
    return f"INSERT INTO {TABLES[kind]}({select_list(names)}) VALUES ({marks})"


def with_pinned(row: tuple[Any, ...], pinned: Any) -> tuple[Any, ...]:
    """A memory row with its ``pinned`` value replaced (the backend's stored type)."""
    return (*row[:MEMORY_PINNED], pinned, *row[MEMORY_PINNED + 1 :])
