"""The kept pack digest on PostgreSQL (:mod:`prme.storage.digest`): module functions over a
plain connection, so the store and migration 5 keep and compute the same state (the row
hash queries and the hash itself are the shared ones).

``prefix`` is ``"schema."`` outside the pack's ``search_path`` (``""`` inside it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from prme.errors import IntegrityError
from prme.storage import digest as pack_digest_

Conn = psycopg.Connection[Any]


def digest_state(conn: Conn, prefix: str, *, for_update: bool = False) -> pack_digest_.DigestState:
    rows = dict(
        conn.execute(
            f"SELECT key, value FROM {prefix}meta WHERE key = ANY(%s)"
            + (" FOR UPDATE" if for_update else ""),
            ([pack_digest_.COUNT_KEY, pack_digest_.SUM_KEY],),
        ).fetchall()
    )
    if len(rows) != 2:
        raise IntegrityError("pack metadata digest_count/digest_sum is missing")
    return pack_digest_.DigestState.decode(
        str(rows[pack_digest_.COUNT_KEY]), str(rows[pack_digest_.SUM_KEY])
    )


def save_digest_state(conn: Conn, prefix: str, state: pack_digest_.DigestState) -> None:
    count, total = state.encode()
    with conn.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {prefix}meta(key, value) VALUES (%s, %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [(pack_digest_.COUNT_KEY, count), (pack_digest_.SUM_KEY, total)],
        )


def row_hashes(
    conn: Conn, prefix: str, where: str, params: Sequence[Any], vector_prefix: str = ""
) -> list[int]:
    """Row hashes of the stored memories selected by ``where`` (on ``m``), as stored. The
    vector is read with pgvector's binary send function (``vector_prefix``: its schema when
    not on the search_path), so no type adapter is needed."""
    links, rows = pack_digest_.row_hash_queries(where, f"{vector_prefix}vector_send(v.vec)", prefix)
    return list(
        pack_digest_.row_hashes(
            conn.execute(links, params).fetchall(), conn.execute(rows, params), vector_le
        )
    )


def vector_le(data: Any) -> bytes:
    """Little-endian float32 bytes (the SQLite pack's BLOB layout) of pgvector's binary form
    (dimension, unused, big-endian float32 values)."""
    return np.frombuffer(bytes(data), ">f4", offset=4).astype("<f4").tobytes()


def recompute_digest_state(
    conn: Conn, prefix: str, vector_prefix: str = ""
) -> pack_digest_.DigestState:
    return pack_digest_.DigestState().add(row_hashes(conn, prefix, "TRUE", (), vector_prefix))
