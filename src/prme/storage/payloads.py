"""The stored form of operation payloads: retrieval receipts are kept zlib-compressed.

A payload is canonical JSON text, and its ``checksum`` is SHA-256 over that text, whatever
the stored form. Receipts (``retrieval_receipt``, the bulk of the log: one per retrieval,
about 15 KB of canonical JSON at limit 20) are stored as a zlib stream of the UTF-8 text
(level 6, deterministic for the input), about 3 KB; every other operation is stored as its
text. Reading turns any stored form back into the exact canonical text, so replay and
checksums see the same bytes as before, and payloads written before compression (text)
still read.

The two forms cannot be confused: a zlib stream starts with byte ``0x78``
(``x``), which no JSON text starts with.
"""

from __future__ import annotations

import zlib

COMPRESSED_OP_TYPES = frozenset({"retrieval_receipt"})
_LEVEL = 6  # zlib's default: receipts come out as small as at 9, in about 80 % of the time
_ZLIB_HEADER = 0x78


def compressed(op_type: str) -> bool:
    """Whether payloads of this operation type are stored compressed."""
    return op_type in COMPRESSED_OP_TYPES


def encode(op_type: str, payload: str) -> str | bytes:
    """The stored form of ``payload``: zlib bytes for receipts, else the text itself."""
    if compressed(op_type):
        return zlib.compress(payload.encode("utf-8"), _LEVEL)
    return payload


def encode_bytes(op_type: str, payload: str) -> bytes:
    """The stored form as bytes (a ``bytea`` column): zlib for receipts, else UTF-8."""
    stored = encode(op_type, payload)
    return stored if isinstance(stored, bytes) else stored.encode("utf-8")


def decode(stored: str | bytes | bytearray | memoryview) -> str:
    """The canonical text of a stored payload in any of its forms."""
    if isinstance(stored, str):
        return stored
    data = bytes(stored)
    if data[:1] != bytes([_ZLIB_HEADER]):
        return data.decode("utf-8")
    inflater = zlib.decompressobj()
    text = inflater.decompress(data) + inflater.flush()
    if not inflater.eof or inflater.unused_data:  # truncated, or bytes after the stream
        raise zlib.error("the stored payload is not exactly one zlib stream")
    return text.decode("utf-8")
