"""The PostgreSQL pack's whole-pack rows and integrity checks, over one connection: what
:class:`~prme.storage.postgres.PostgresStore`'s ``iter_rows``, ``import_*``, ``scan_rows`` and
``check_storage`` run (inside the store's transaction); :class:`PackRows` holds those methods."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np

from prme.models.receipt import PackIdentity
from prme.storage import payloads
from prme.storage.base import RowScan, StorageFinding
from prme.storage.pack_rows import MEMORY_PINNED, RowKind, insert_rows, select_rows, with_pinned
from prme.storage.postgres.digest import Conn, vector_le
from prme.storage.postgres.vectors import PgVector

BATCH = 1000  # rows a server-side cursor fetches at a time
IDENTITY_KEYS = ("pack_id", "secret", "write_seq", "delete_seq")
_cursors = itertools.count()


def iter_rows(conn: Conn, kind: RowKind) -> Iterator[tuple[Any, ...]]:
    """Every row of ``kind`` in export order and neutral form, through a server-side cursor
    (``conn`` is in a transaction); vectors are read in pgvector's binary form."""
    with conn.cursor(name=f"prme_rows_{next(_cursors)}", binary=True) as cursor:
        cursor.itersize = BATCH
        cursor.execute(select_rows(kind, "%s"))
        for row in cursor:
            if kind == "vector":
                yield (row[0], vector_le(row[1]))
            elif kind == "memory":
                yield with_pinned(tuple(row), bool(row[MEMORY_PINNED]))
            else:
                yield tuple(row)


def import_meta(
    conn: Conn, meta: dict[str, str], embedder: str | None, owners: dict[str, int]
) -> None:
    for key in IDENTITY_KEYS:
        conn.execute("UPDATE meta SET value = %s WHERE key = %s", (meta[key], key))
    if embedder is not None:
        conn.execute("INSERT INTO meta(key, value) VALUES ('embedder', %s)", (embedder,))
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO owner_sequences(user_id, write_seq) VALUES (%s, %s)", list(owners.items())
        )


def import_rows(
    conn: Conn, kind: RowKind, rows: Sequence[tuple[Any, ...]], encode_vector: Any
) -> None:
    """Insert neutral rows of ``kind`` (``encode_vector``: little-endian float32 values to
    the store's binary vector parameter)."""
    with conn.cursor() as cursor:
        if kind == "vector":
            encoded = [(rowid, encode_vector(np.frombuffer(le, dtype="<f4"))) for rowid, le in rows]
            cursor.executemany("INSERT INTO vectors(rowid, vec) VALUES (%s, %b)", encoded)
            return
        if kind == "memory":
            rows = [with_pinned(r, bool(r[MEMORY_PINNED])) for r in rows]
        elif kind == "op":
            rows = [(*r[:7], payloads.encode_bytes(r[2], r[7]), r[8]) for r in rows]
        cursor.executemany(insert_rows(kind, "%s"), rows)


def finish_import(conn: Conn) -> None:
    """Move the log's sequence past its rows, and drop any saved owner index (the rows were
    written directly: they are rebuilt from them)."""
    conn.execute("DELETE FROM owner_index_parts")
    conn.execute("DELETE FROM owner_indexes")
    conn.execute(
        "SELECT setval(pg_get_serial_sequence('oplog', 'seq'),"
        " GREATEST(MAX(seq), 1), MAX(seq) IS NOT NULL) FROM oplog"
    )


_ORPHANS = {
    "memory without a vector": "SELECT m.id FROM memories m"
    " LEFT JOIN vectors v ON v.rowid = m.rowid WHERE v.rowid IS NULL",
    "vector without a memory": "SELECT 'rowid ' || v.rowid FROM vectors v"
    " LEFT JOIN memories m ON m.rowid = v.rowid WHERE m.rowid IS NULL",
    "entity link without a memory": "SELECT e.name FROM entities e"
    " LEFT JOIN memories m ON m.rowid = e.memory_rowid WHERE m.rowid IS NULL",
}


def scan_rows(conn: Conn, dimension: int | None, limit: int) -> RowScan:
    """The memory tables' counts and orphans. A memory's lexical row is its own ``tsv`` and
    ``doc_len`` columns (never missing, never orphaned): each memory counts as one."""

    def count(table: str) -> int:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return 0 if row is None else int(row[0])

    orphans = [
        (message, str(ref))
        for message, sql in _ORPHANS.items()
        for (ref,) in conn.execute(f"{sql} LIMIT %s", (limit,))
    ]
    bad: list[str] = []
    if dimension is not None:
        bad = [
            str(ref)
            for (ref,) in conn.execute(
                "SELECT 'rowid ' || rowid FROM vectors WHERE vector_dims(vec) <> %s LIMIT %s",
                (dimension, limit),
            )
        ]
    memories = count("memories")
    return RowScan(
        memories=memories,
        vectors=count("vectors"),
        lexical_rows=memories,
        orphans=tuple(orphans),
        bad_vectors=tuple(bad),
    )


def check_lexical_rows(conn: Conn, limit: int) -> list[StorageFinding]:
    """The memories whose ``tsv`` or ``doc_len`` is not what the insert trigger derives from
    their content (what the owners' lexical postings are read from; the counterpart of FTS5's
    integrity check)."""
    return [
        StorageFinding("postgres", str(node_id), "lexical row differs from the content")
        for (node_id,) in conn.execute(
            "SELECT m.id FROM memories m CROSS JOIN LATERAL (SELECT to_tsvector("
            "'prme_english'::regconfig, prme_lexical_text(m.content)) AS tsv) d"
            " WHERE m.tsv <> d.tsv OR m.doc_len <> (SELECT COALESCE(SUM(cardinality("
            "u.positions)), 0) FROM unnest(d.tsv) AS u) ORDER BY m.rowid LIMIT %s",
            (limit,),
        )
    ]


class PackRows:
    """The whole-pack row and integrity methods of :class:`~prme.storage.postgres.PostgresStore`
    (export, import, ``pack check``): each runs the module function of the same name above (or
    ``check_lexical_rows``) inside one transaction."""

    if TYPE_CHECKING:  # declared for the type checker; PostgresStore defines them

        def transaction(self, *, snapshot: bool = False) -> AbstractContextManager[Conn]: ...
        def read_snapshot(
            self, owner: str | None = None
        ) -> AbstractContextManager[PackIdentity]: ...
        def _connection(self) -> AbstractContextManager[Conn]: ...
        def _trace(self, sql: str) -> None: ...
        def _type_vectors(self, conn: Conn, identity: dict[str, Any] | None) -> None: ...
        def rebuild_digest_state(self) -> None: ...

    def iter_rows(self, kind: RowKind) -> Iterator[tuple[Any, ...]]:
        with self.transaction() as conn:
            self._trace(select_rows(kind, "%s"))
            yield from iter_rows(conn, kind)

    def import_meta(
        self, meta: dict[str, str], embedder: str | None, owners: dict[str, int]
    ) -> None:
        with self.transaction() as conn:
            import_meta(conn, meta, embedder, owners)
            if embedder is not None:
                self._type_vectors(conn, json.loads(embedder))

    def import_rows(self, kind: RowKind, rows: Sequence[tuple[Any, ...]]) -> None:
        with self.transaction() as conn:
            import_rows(conn, kind, rows, PgVector.encode)

    def finish_import(self) -> None:
        with self.transaction() as conn:
            finish_import(conn)
            self.rebuild_digest_state()

    # ------------------------------------------------------------------- integrity
    def scan_rows(self, dimension: int | None, limit: int) -> RowScan:
        with self.read_snapshot(), self._connection() as conn:
            return scan_rows(conn, dimension, limit)

    def check_storage(self) -> tuple[list[StorageFinding], list[str]]:
        """Each memory's lexical row (``tsv``, ``doc_len``) against its content (PostgreSQL
        checks its own tables and indexes)."""
        with self.read_snapshot(), self._connection() as conn:
            return check_lexical_rows(conn, 100), []
