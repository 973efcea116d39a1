"""The pack digest: SHA-256 over the pack's retrieval-relevant content, kept with the writes.

Construction ``prme-pack-digest-v2`` (pure functions; both SQL backends share them, so a pack
has the same digest on SQLite and PostgreSQL and after an export/import):

- each memory's **row hash** is SHA-256 over the canonical JSON of
  ``{"entities": [its entity link names, sorted], "memory": [its stored columns]}``
  (:data:`prme.storage.columns.VALUE_COLUMNS`, times as UTC microseconds), a ``0x00`` byte and its
  vector's float32 little-endian bytes;
- the pack keeps the number of memories and the **sum of their row hashes** (256-bit
  big-endian integers, modulo 2**256) in its metadata, updated in the transaction of every
  content write (an insert adds its rows' hashes, a delete subtracts, an update does both).
  The sum does not depend on the order of the rows, so no write re-reads other rows;
- the digest is SHA-256 over the canonical JSON of ``{"construction", "embedder",
  "memories", "sum"}``: reading it costs the same at any pack size.

``prme pack check`` recomputes the sum from every stored row and reports a difference from
the kept one. Packs written before this construction (``prme-pack-digest-v1``, a sequential
SHA-256 over every row in id order) are upgraded on open by one full recomputation. Reports
that recorded a v1 ``pack_digest`` keep verifying: their attestation covers the report's own
bytes, and nothing compares a stored report's ``pack_digest`` with the pack's current one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prme.canonical import canonical_bytes, sha256_hex
from prme.storage.columns import PINNED, VALUE_COLUMNS, select_list

CONSTRUCTION = "prme-pack-digest-v2"
MODULUS = 1 << 256
COUNT_KEY = "digest_count"  # meta keys holding the kept state
SUM_KEY = "digest_sum"


@dataclass(frozen=True, slots=True)
class DigestState:
    """The kept part of the digest: how many memories, and the sum of their row hashes."""

    count: int = 0
    total: int = 0

    def add(self, hashes: Iterable[int]) -> DigestState:
        count, total = self.count, self.total
        for value in hashes:
            count += 1
            total += value
        return DigestState(count, total % MODULUS)

    def remove(self, hashes: Iterable[int]) -> DigestState:
        count, total = self.count, self.total
        for value in hashes:
            count -= 1
            total -= value
        return DigestState(count, total % MODULUS)

    def encode(self) -> tuple[str, str]:
        """``(count, sum)`` as the meta values (decimal count, 64 hex digits)."""
        return str(self.count), f"{self.total:064x}"

    @classmethod
    def decode(cls, count: str, total: str) -> DigestState:
        return cls(int(count), int(total, 16))


def row_hash(values: Sequence[Any], entities: Iterable[str], vector_le: bytes | None) -> int:
    """The row hash of one memory from its stored column values (``VALUE_COLUMNS`` order),
    its entity link names (any order, repeats ignored) and its vector bytes (None: missing)."""
    columns = list(values)
    columns[PINNED] = bool(columns[PINNED])  # SQLite: INTEGER 0/1
    head = canonical_bytes({"entities": sorted(set(entities)), "memory": columns})
    digest = hashlib.sha256(head)
    digest.update(b"\x00")
    if vector_le:
        digest.update(vector_le)
    return int.from_bytes(digest.digest(), "big")


def row_hash_queries(where: str, vector: str = "v.vec", prefix: str = "") -> tuple[str, str]:
    """The two SELECTs :func:`row_hashes` reads, for the stored memories ``m`` that ``where``
    selects: their entity links ``(rowid, name)``, and their rows ``(rowid, *VALUE_COLUMNS,
    vector)`` (``vector``: the backend's expression of the vector column ``v.vec``;
    ``prefix``: the tables' schema, with its dot, when not on the search path)."""
    links = (
        f"SELECT e.memory_rowid, e.name FROM {prefix}entities e JOIN {prefix}memories m"
        f" ON m.rowid = e.memory_rowid WHERE {where}"
    )
    rows = (
        f"SELECT m.rowid, {select_list(VALUE_COLUMNS, 'm')}, {vector} FROM {prefix}memories m"
        f" LEFT JOIN {prefix}vectors v ON v.rowid = m.rowid WHERE {where}"
    )
    return links, rows


def row_hashes(
    links: Iterable[Sequence[Any]],
    rows: Iterable[Sequence[Any]],
    vector_le: Callable[[Any], bytes | None] = lambda raw: raw,
) -> Iterator[int]:
    """The row hash of each row of :func:`row_hash_queries`' second query, given the rows of
    its first; ``vector_le`` turns the backend's vector value into little-endian float32
    bytes (None: no vector)."""
    names: dict[int, list[str]] = {}
    for rowid, name in links:
        names.setdefault(int(rowid), []).append(str(name))
    for row in rows:
        vector = None if row[-1] is None else vector_le(row[-1])
        yield row_hash(row[1:-1], names.get(int(row[0]), ()), vector)


def pack_digest(embedder: dict[str, Any] | None, state: DigestState) -> str:
    """The pack digest (SHA-256 hex) from the bound embedder and the kept state."""
    return sha256_hex(
        canonical_bytes(
            {
                "construction": CONSTRUCTION,
                "embedder": embedder,
                "memories": state.count,
                "sum": f"{state.total:064x}",
            }
        )
    )
