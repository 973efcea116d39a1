"""The operations-log queries both SQL backends share (only the placeholder differs)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from prme.canonical import sha256_hex
from prme.errors import IntegrityError
from prme.storage import payloads
from prme.storage.base import OpRecord

OP_COLUMNS = "seq, op_id, op_type, user_id, target_id, namespace, created_at, payload, checksum"
# SQLite reads the payload as bytes whatever its stored type (text, or a compressed BLOB), so
# a damaged text is reported by the decoding rather than failing the whole query.
_SQLITE_OP_COLUMNS = OP_COLUMNS.replace(" payload,", " CAST(payload AS BLOB),")


def op_columns(mark: str) -> str:
    """``OP_COLUMNS`` as the backend with placeholder ``mark`` selects them."""
    return _SQLITE_OP_COLUMNS if mark == "?" else OP_COLUMNS


def select_ops(
    mark: str,
    op_type: str,
    user_id: str,
    *,
    target_id: str | None = None,
    namespace: str | None = None,
    after_target: str | None = None,
    limit: int | None = None,
    newest_first: bool = False,
    order_by_target: bool = False,
    by_seq: bool = False,
    before: tuple[int, int] | None = None,
) -> tuple[str, list[Any]]:
    """SQL and parameters selecting an owner's operations; ``mark`` is ``?`` or ``%s``.

    ``before`` = ``(created_at, seq)`` of the last operation of the previous page keeps only
    older ones (``newest_first`` paging). A newest-first page across namespaces is chosen from
    the ``oplog_namespace`` index alone (created_at and seq, no payload), and only the page's
    rows are then read: the owner's other payloads are never loaded."""
    where = f" FROM oplog WHERE op_type = {mark} AND user_id = {mark}"
    params: list[Any] = [op_type, user_id]
    for clause, value in (
        (f"target_id = {mark}", target_id),
        (f"namespace = {mark}", namespace),
        (f"target_id > {mark}", after_target),
    ):
        if value is not None:
            where += f" AND {clause}"
            params.append(value)
    if before is not None:
        where += f" AND (created_at < {mark} OR (created_at = {mark} AND seq < {mark}))"
        params += [before[0], before[0], before[1]]
    if by_seq:
        order = " ORDER BY seq"
    elif order_by_target:
        order = " ORDER BY target_id, seq"
    elif newest_first:
        order = " ORDER BY created_at DESC, seq DESC"
    else:
        order = " ORDER BY created_at, seq"
    if limit is not None and newest_first and namespace is None and target_id is None:
        page = f"SELECT seq{where}{order} LIMIT {mark}"
        columns = op_columns(mark)
        return f"SELECT {columns} FROM oplog WHERE seq IN ({page}){order}", [*params, limit]
    sql = f"SELECT {op_columns(mark)}{where}{order}"
    if limit is not None:
        sql += f" LIMIT {mark}"
        params.append(limit)
    return sql, params


def select_op_checksums(
    mark: str,
    op_type: str,
    user_id: str,
    *,
    targets: tuple[str, Any] | None = None,
    limit: int | None = None,
) -> tuple[str, list[Any]]:
    """SQL and parameters for ``(target_id, checksum)`` of an owner's operations by target id;
    ``targets`` is the backend's ``(membership clause, parameter)`` restricting the targets."""
    sql = f"SELECT target_id, checksum FROM oplog WHERE op_type = {mark} AND user_id = {mark}"
    params: list[Any] = [op_type, user_id]
    if targets is not None:
        clause, value = targets
        sql += f" AND target_id {clause}"
        params.append(value)
    sql += " ORDER BY target_id, seq"
    if limit is not None:
        sql += f" LIMIT {mark}"
        params.append(limit)
    return sql, params


def stored_payload(row_payload: Any, op_type: str, op_id: str) -> str:
    """The canonical text of a stored payload (:mod:`prme.storage.payloads`)."""
    try:
        return payloads.decode(row_payload)
    except (zlib.error, UnicodeDecodeError) as exc:
        raise IntegrityError(
            f"operations log checksum mismatch for {op_type} {op_id}: the stored payload"
            f" cannot be read ({exc})"
        ) from None


def op_record(row: Sequence[Any], payload: str) -> OpRecord:
    """An ``OP_COLUMNS`` row as a record carrying the decoded ``payload``."""
    seq, op_id, op_type, user_id, target_id, namespace, created_at, _, checksum = row
    return OpRecord(
        seq, op_id, op_type, user_id, target_id, namespace, created_at, payload, checksum
    )


def verified_op(row: Sequence[Any]) -> OpRecord:
    """An ``OP_COLUMNS`` row as a record: payload decoded, and checked against its checksum."""
    payload = stored_payload(row[7], str(row[2]), str(row[1]))
    record = op_record(row, payload)
    if sha256_hex(payload) != record.checksum:
        raise IntegrityError(
            f"operations log checksum mismatch for {record.op_type} {record.op_id}"
        )
    return record
