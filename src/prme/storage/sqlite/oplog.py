"""The SQLite store's operations log: appends, reads and receipt retention over the append-only
``oplog`` table. :class:`~prme.storage.sqlite.SQLiteStore` inherits them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from prme.canonical import sha256_hex
from prme.errors import IntegrityError, InvalidInputError
from prme.storage import payloads
from prme.storage.base import OpHead, OpRecord
from prme.storage.oplog_sql import (
    op_columns,
    select_op_checksums,
    select_ops,
    stored_payload,
    verified_op,
)

RETAINED_OP_TYPE = "retrieval_receipt"  # the only operations retention may delete
_DELETE_GUARD = "oplog_append_only_delete"


class OperationsLog:
    """The operations-log methods of :class:`~prme.storage.sqlite.SQLiteStore`."""

    if TYPE_CHECKING:  # declared for the type checker; SQLiteStore defines them

        @property
        def conn(self) -> sqlite3.Connection: ...
        def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...

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
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO oplog(op_id, op_type, user_id, target_id, namespace,"
                " created_at, payload, checksum) VALUES (?,?,?,?,?,?,?,?)",
                (
                    op_id,
                    op_type,
                    user_id,
                    target_id,
                    namespace,
                    created_at_us,
                    payloads.encode(op_type, payload),
                    sha256_hex(payload),
                ),
            )
            return cursor.rowcount == 1

    @staticmethod
    def _op(row: tuple[Any, ...]) -> OpRecord:
        return verified_op(row)

    def get_op(self, op_id: str) -> OpRecord | None:
        row = self.conn.execute(
            f"SELECT {op_columns('?')} FROM oplog WHERE op_id = ?", (op_id,)
        ).fetchone()
        return None if row is None else self._op(row)

    def find_ops(self, op_type: str, user_id: str, target_id: str | None = None) -> list[OpRecord]:
        sql, params = select_ops("?", op_type, user_id, target_id=target_id, by_seq=True)
        return [self._op(r) for r in self.conn.execute(sql, params).fetchall()]

    def op_checksums(
        self,
        op_type: str,
        user_id: str,
        target_ids: Sequence[str] | None = None,
        *,
        limit: int | None = None,
    ) -> dict[str, str]:
        targets = None
        if target_ids is not None:
            targets = ("IN (SELECT value FROM json_each(?))", json.dumps(list(target_ids)))
        sql, params = select_op_checksums("?", op_type, user_id, targets=targets, limit=limit)
        return {str(t): str(d) for t, d in self.conn.execute(sql, params).fetchall()}

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
            "?",
            op_type,
            user_id,
            namespace=namespace,
            after_target=after_target,
            limit=limit,
            newest_first=newest_first,
            order_by_target=order_by_target,
            before=before,
        )
        for row in self.conn.execute(sql, params).fetchall():
            yield self._op(row)

    # ------------------------------------------------------------------ receipt retention
    def op_heads(self, op_type: str, *, created_before_us: int) -> list[OpHead]:
        rows = self.conn.execute(
            "SELECT op_id, user_id, target_id, created_at, checksum FROM oplog"
            " WHERE op_type = ? AND created_at < ? ORDER BY seq",
            (op_type, created_before_us),
        ).fetchall()
        return [OpHead(*row) for row in rows]

    def iter_payloads(self, *, exclude_op_types: Sequence[str]) -> Iterator[str]:
        cursor = self.conn.execute(
            "SELECT CAST(payload AS BLOB), op_type, op_id FROM oplog"
            " WHERE op_type NOT IN (SELECT value FROM json_each(?)) ORDER BY seq",
            (json.dumps(list(exclude_op_types)),),
        )
        for payload, op_type, op_id in cursor:
            yield stored_payload(payload, str(op_type), str(op_id))

    def delete_ops(self, op_type: str, op_ids: Sequence[str]) -> int:
        """The delete trigger is dropped, the receipts deleted and the trigger re-created from
        its own stored text, all inside the caller's transaction: no other connection ever sees
        the log unguarded, and a failure anywhere rolls all of it back."""
        if op_type != RETAINED_OP_TYPE:
            raise InvalidInputError("op_type", f"only {RETAINED_OP_TYPE} may be deleted", op_type)
        with self._write() as conn:
            row = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
                (_DELETE_GUARD,),
            ).fetchone()
            if row is None:
                raise IntegrityError(f"the operations log has lost its {_DELETE_GUARD} trigger")
            conn.execute(f"DROP TRIGGER {_DELETE_GUARD}")
            deleted = conn.execute(
                "DELETE FROM oplog WHERE op_type = ? AND op_id IN (SELECT value FROM json_each(?))",
                (op_type, json.dumps(list(op_ids))),
            ).rowcount
            conn.execute(str(row[0]))
        return int(deleted)
