"""The PostgreSQL store's operations log: appends, reads and receipt retention over the
append-only ``oplog`` table. :class:`~prme.storage.postgres.PostgresStore` inherits them."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import psycopg

from prme.canonical import sha256_hex
from prme.errors import InvalidInputError
from prme.storage import payloads
from prme.storage.base import OpHead, OpRecord
from prme.storage.oplog_sql import (
    OP_COLUMNS,
    select_op_checksums,
    select_ops,
    stored_payload,
    verified_op,
)
from prme.storage.postgres.migrations import Conn

RETAINED_OP_TYPE = "retrieval_receipt"  # the only operations retention may delete


def _verified(row: Sequence[Any]) -> OpRecord:
    return verified_op(row)


class OperationsLog:
    """The operations-log methods of :class:`~prme.storage.postgres.PostgresStore`."""

    _local: threading.local

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
