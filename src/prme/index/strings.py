"""A column of strings kept as one UTF-8 blob and offsets, decoded only when read.

A saved owner index keeps its memory ids, content checksums and evidence references this way
(:mod:`prme.index.index_file`): loading memory-maps the two arrays instead of decoding a
million Python strings, and a retrieval decodes only the few it reads. Strings appended after
loading are kept as a list. String ``i`` of the blob is ``blob[offsets[i]:offsets[i + 1] - 1]``
(each is followed by a newline), so a run of consecutive strings joined by newlines is one
slice of the blob (:meth:`StringColumn.joined`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

SEPARATOR = b"\n"


def encode(values: Sequence[str], size: int) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """``values[:size]`` as (blob, offsets): each string's UTF-8 bytes followed by a newline
    (a loaded column's blob is reused as it is)."""
    if isinstance(values, StringColumn) and size <= values._stored:
        end = int(values._offsets[size])
        return np.asarray(values._blob[:end]), np.asarray(values._offsets[: size + 1])
    parts = [v.encode() + SEPARATOR for v in values[:size]]
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(np.fromiter((len(p) for p in parts), np.int64, len(parts)), out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets


class StringColumn(Sequence[str]):
    """Strings from a blob (usually memory-mapped), then those appended since."""

    def __init__(self, blob: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> None:
        self._blob = blob
        self._offsets = offsets
        self._stored = len(offsets) - 1
        self._appended: list[str] = []

    def __len__(self) -> int:
        return self._stored + len(self._appended)

    def _one(self, i: int) -> str:
        if 0 <= i < self._stored:  # the common case first: a stored string (a hot path)
            offsets = self._offsets
            return self._blob[offsets[i] : offsets[i + 1] - 1].tobytes().decode()
        if i < 0:
            i += len(self)
        if i < 0 or i >= len(self):
            raise IndexError(i)
        if i >= self._stored:
            return self._appended[i - self._stored]
        return self._one(i)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self._one(j) for j in range(*i.indices(len(self)))]
        return self._one(int(i))

    def __iter__(self) -> Iterator[str]:
        for i in range(len(self)):
            yield self._one(i)

    def append(self, value: str) -> None:
        self._appended.append(value)

    def joined(self, start: int, end: int) -> bytes:
        """Strings ``[start, end)`` joined by newlines, UTF-8 (a slice of the blob when they
        were all loaded)."""
        if end <= self._stored:
            if end <= start:
                return b""
            return bytes(self._blob[int(self._offsets[start]) : int(self._offsets[end]) - 1])
        return "\n".join(self[start:end]).encode()

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (StringColumn, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def without(
    values: Sequence[str], size: int, removed: npt.NDArray[np.int64]
) -> list[str] | StringColumn:
    """``values[:size]`` but the strings at the ``removed`` positions (ascending, below
    ``size``), in a new column: a loaded column's blob is cut around them, not decoded."""
    gone = removed.tolist()
    if not isinstance(values, StringColumn):
        kept: list[str] = []
        start = 0
        for position in [*gone, size]:
            kept += values[start:position]
            start = position + 1
        return kept
    stored = min(values._stored, size)
    cuts = [p for p in gone if p < stored]
    offsets = values._offsets
    if not cuts:  # the loaded strings stay as they are
        column = StringColumn(values._blob[: offsets[stored]], offsets[: stored + 1])
        column._appended = _without_appended(values, size, stored, gone)
        return column
    lengths = np.diff(offsets[: stored + 1])
    keep = np.ones(stored, dtype=np.bool_)
    keep[cuts] = False
    runs = zip([0, *(p + 1 for p in cuts)], [*cuts, stored], strict=True)
    blob = np.concatenate(
        [values._blob[offsets[a] : offsets[b]] for a, b in runs if b > a] or [values._blob[:0]]
    )
    new_offsets = np.zeros(int(keep.sum()) + 1, np.int64)
    np.cumsum(lengths[keep], out=new_offsets[1:])
    column = StringColumn(np.asarray(blob, dtype=np.uint8), new_offsets)
    column._appended = _without_appended(values, size, stored, gone)
    return column


def _without_appended(values: StringColumn, size: int, stored: int, gone: list[int]) -> list[str]:
    """The strings appended to ``values`` (after its ``stored`` ones) up to ``size`` but the
    ``gone`` positions."""
    appended = {p - values._stored for p in gone if p >= values._stored}
    return [v for i, v in enumerate(values._appended[: size - stored]) if i not in appended]


def joined(values: Sequence[str], start: int, end: int) -> bytes:
    """``"\\n".join(values[start:end])`` in UTF-8, for a list or a :class:`StringColumn`."""
    if isinstance(values, StringColumn):
        return values.joined(start, end)
    return "\n".join(values[start:end]).encode()
