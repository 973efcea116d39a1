"""pgvector's binary form: vectors written as ``PgVector`` parameters and read as bytes, so
no type adapter package is needed (the store registers these for the ``vector`` type)."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format


class PgVector(bytes):
    """A vector already encoded in pgvector's binary form (dimension, unused, big-endian f4)."""

    @classmethod
    def encode(cls, values: npt.NDArray[np.float32]) -> PgVector:
        data = np.ascontiguousarray(values, dtype=">f4")
        return cls(struct.pack(">HH", data.shape[0], 0) + data.tobytes())

    @classmethod
    def encode_rows(cls, vectors: npt.NDArray[np.float32], count: int) -> list[PgVector]:
        data = np.ascontiguousarray(vectors[:count], dtype=">f4")
        header = struct.pack(">HH", data.shape[1], 0)
        return [cls(header + data[i].tobytes()) for i in range(count)]


class VectorDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        return bytes(obj)


class VectorLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> bytes:
        return bytes(data)
