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
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring  # what the canonical encoder writes strings with
from typing import Any

import numpy as np
import numpy.typing as npt

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


# Each JSON scalar type's canonical text, as the canonical encoder writes it (compact, UTF-8,
# floats in their shortest repr; non-finite floats are left to the encoder, which rejects them).
_SCALARS: dict[type, Callable[[Any], str]] = {
    str: encode_basestring,
    int: int.__repr__,
    float: float.__repr__,
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "null",
}


_SAMPLE = 32  # a column's first values, which tell whether it repeats few values


def _column_texts(values: list[Any]) -> list[str] | None:
    """The canonical JSON text of each value of one column, or None when a value is not a
    plain JSON scalar (or a float is not finite): the caller then takes the generic path."""
    kinds = set(map(type, values))
    if not kinds <= _SCALARS.keys():
        return None
    if kinds == {float}:  # a float's shortest repr is dear, and a batch repeats few values
        distinct = set(values)
        if not all(map(math.isfinite, distinct)):
            return None
        if 0.0 in distinct:  # 0.0 and -0.0 are one key but two texts
            return list(map(float.__repr__, values))
        return list(map({v: float.__repr__(v) for v in distinct}.__getitem__, values))
    if float in kinds and not all(math.isfinite(v) for v in values if type(v) is float):
        return None
    if len(kinds) == 1:
        encode = _SCALARS[kinds.pop()]
        if len(set(values[:_SAMPLE])) * 4 <= _SAMPLE:  # few distinct values: each encoded once
            return list(map({v: encode(v) for v in set(values)}.__getitem__, values))
        return list(map(encode, values))
    return [_SCALARS[type(v)](v) for v in values]


def vectors_le(vectors: npt.NDArray[Any], count: int) -> list[bytes]:
    """The first ``count`` rows of ``vectors`` as little-endian float32 bytes (what a row hash
    covers, and what SQLite stores).

    Raises:
        ValueError: ``vectors`` does not hold ``count`` rows of one dimension.
    """
    little = np.ascontiguousarray(vectors[:count], dtype="<f4")
    if little.ndim != 2 or little.shape[0] != count:
        raise ValueError(f"{count} memories but vectors of shape {vectors.shape}")
    flat, width = little.tobytes(), little.itemsize * little.shape[1]
    return [flat[at : at + width] for at in range(0, width * count, width)]


def column_hashes(
    columns: Sequence[list[Any]],
    entities: Sequence[Iterable[str]],
    vectors_le: Sequence[bytes | None],
) -> list[int]:
    """:func:`row_hash` of each row of ``columns`` (one list of values per column of
    ``VALUE_COLUMNS``, in order), the same values: a batch's values are encoded column by
    column (each column's values share a type, so each is encoded by one C function over the
    column), and each row's canonical text is joined from its columns' texts."""
    texts = [
        _column_texts(list(map(bool, column)) if at == PINNED else column)
        for at, column in enumerate(columns)
    ]
    names = [sorted(set(n)) for n in entities]
    if (
        len(texts) != len(VALUE_COLUMNS)
        or any(t is None for t in texts)
        or not all(type(name) is str for row_names in names for name in row_names)
    ):
        rows = zip(*columns, strict=True)
        return [row_hash(*args) for args in zip(rows, names, vectors_le, strict=True)]
    hashes = []
    sha256 = hashlib.sha256
    for row_names, memory, vector in zip(
        names, map(",".join, zip(*texts, strict=True)), vectors_le, strict=True
    ):
        head = ",".join(map(encode_basestring, row_names))
        digest = sha256(f'{{"entities":[{head}],"memory":[{memory}]}}'.encode())
        digest.update(b"\x00")
        if vector:
            digest.update(vector)
        hashes.append(int.from_bytes(digest.digest(), "big"))
    return hashes


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
