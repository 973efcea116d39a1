"""The stored form of operation payloads: retrieval receipts are kept zlib-compressed.

A payload is canonical JSON text, and its ``checksum`` is SHA-256 over that text, whatever
the stored form. Receipts (``retrieval_receipt``, the bulk of the log: one per retrieval,
about 15 KB of canonical JSON at limit 20) are stored as a zlib stream of the UTF-8 text,
level 3, with a preset dictionary of what every receipt repeats
(:mod:`prme.storage.receipt_dictionary`, named in the stream by its Adler-32): deterministic
for the input, about 2 KB. Every other operation is stored as its text. Reading turns any
stored form back into the exact canonical text, so replay and checksums see the same bytes
as before; payloads written before compression (text), and receipts compressed before the
dictionary (level 6, no dictionary), still read.

The two forms cannot be confused: a zlib stream starts with byte ``0x78``
(``x``), which no JSON text starts with.
"""

from __future__ import annotations

import zlib

from prme.storage.receipt_dictionary import RECEIPT_DICTIONARY_V1

COMPRESSED_OP_TYPES = frozenset({"retrieval_receipt"})
# With the dictionary, level 3 stores receipts smaller than level 6 without it, in half the time.
_LEVEL = 3
_ZLIB_HEADER = 0x78
_FDICT = 0x20  # the header's flag: a preset dictionary's Adler-32 follows (RFC 1950)
# Every dictionary a stored receipt may name, by Adler-32; the last one compresses.
DICTIONARIES = {zlib.adler32(d): d for d in (RECEIPT_DICTIONARY_V1,)}
_DICTIONARY = RECEIPT_DICTIONARY_V1


def compressed(op_type: str) -> bool:
    """Whether payloads of this operation type are stored compressed."""
    return op_type in COMPRESSED_OP_TYPES


def encode(op_type: str, payload: str) -> str | bytes:
    """The stored form of ``payload``: zlib bytes for receipts, else the text itself."""
    if compressed(op_type):
        deflater = zlib.compressobj(_LEVEL, zdict=_DICTIONARY)
        return deflater.compress(payload.encode("utf-8")) + deflater.flush()
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
    if len(data) >= 6 and data[1] & _FDICT:
        dictionary = DICTIONARIES.get(int.from_bytes(data[2:6], "big"))
        if dictionary is None:
            raise zlib.error("the stored payload names an unknown preset dictionary")
        inflater = zlib.decompressobj(zdict=dictionary)
    text = inflater.decompress(data) + inflater.flush()
    if not inflater.eof or inflater.unused_data:  # truncated, or bytes after the stream
        raise zlib.error("the stored payload is not exactly one zlib stream")
    return text.decode("utf-8")
