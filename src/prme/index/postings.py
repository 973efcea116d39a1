"""An owner's lexical postings: for each token of the owner's memories, the positions (rows of
the owner index) and token offsets of its instances — what FTS5's full-detail index holds for
those rows, since the SQLite pack derives them with FTS5's own tokenizer
(:mod:`prme.storage.fts5_lexical`). They come from the owner's rows alone, so what a query
reads never depends on another owner's memories.

Layout: a :class:`Vocabulary` (token → id, ids in order of first appearance, never reused) and
a few immutable :class:`Segment` s, each over a run of positions ``[start, end)`` in CSR form:
its token ids ascending (``term_ids``, int32), where each token's instances begin
(``term_offsets``, int64, from 0), and the instances by token, then position, then offset
(``positions`` int32; ``offsets`` uint16 when every offset fits, else int32); and the same
instances by document: each token's positions once each (``docs`` int32, ascending) with their
instance counts (``freqs``, uint16 when every count fits, else int32), each token's beginning at ``doc_offsets`` — what BM25 reads
of a single-token phrase, without going through its instances.

Rows appended to the owner index become a new segment; the last two segments are merged while
the older holds fewer than twice the newer's rows (a binary counter: O(log n) segments, each
instance copied O(log n) times), unless the merge would span more than ``MAX_SEGMENT_ROWS``
rows, so that no merge copies more than that many rows' instances. Segments never change once
made: a view over fewer positions (:meth:`OwnerPostings.upto`, for a snapshot of the index)
shares them and cuts what it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index import strings
from prme.index.arrays import renumbered
from prme.index.strings import StringColumn

MAX_SEGMENT_ROWS = 1 << 18
OFFSET_DTYPES = (np.dtype(np.uint16), np.dtype(np.int32))
# The flat arrays a saved index keeps the postings in (:meth:`OwnerPostings.arrays`).
ARRAYS: dict[str, np.dtype[Any]] = {
    "terms.blob": np.dtype(np.uint8),
    "terms.offsets": np.dtype(np.int64),
    "term_ids": np.dtype(np.int32),
    "term_offsets": np.dtype(np.int64),
    "positions": np.dtype(np.int32),
    "offsets": np.dtype(np.int32),  # or uint16 (OFFSET_DTYPES)
    "doc_offsets": np.dtype(np.int64),
    "docs": np.dtype(np.int32),
    "freqs": np.dtype(np.int32),  # or uint16 (OFFSET_DTYPES)
}
# The arrays an index saved before the document postings lacks (they are derived on loading).
DOCUMENT_ARRAYS = ("doc_offsets", "docs", "freqs")

Instances = tuple[npt.NDArray[np.int32], npt.NDArray[Any]]
Documents = tuple[npt.NDArray[np.int32], npt.NDArray[Any]]  # positions, instance counts


class Vocabulary:
    """Tokens and their ids (by first appearance). The tokens of a saved index stay an encoded
    column until the first lookup decodes them into a dictionary."""

    def __init__(self, terms: list[str] | StringColumn | None = None) -> None:
        self._terms: list[str] | StringColumn = [] if terms is None else terms
        self._ids: dict[str, int] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._terms)

    def _index(self) -> dict[str, int]:
        ids = self._ids
        if ids is None:
            with self._lock:
                if self._ids is None:
                    self._ids = _decoded(self._terms)
                ids = self._ids
        return ids

    def ids(self, tokens: Sequence[str]) -> list[int]:
        """Each token's id, -1 for a token no row holds."""
        index = self._index()
        return [index.get(token, -1) for token in tokens]

    def add(self, tokens: Sequence[str]) -> npt.NDArray[np.int64]:
        """The ids of ``tokens``; a new token gets the next id."""
        index = self._index()
        with self._lock:
            found = []
            for token in tokens:
                at = index.get(token)
                if at is None:
                    at = index[token] = len(self._terms)
                    self._terms.append(token)
                found.append(at)
        return np.asarray(found, dtype=np.int64)

    def encoded(self) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
        """The tokens by id as a blob and offsets (:func:`prme.index.strings.encode`)."""
        with self._lock:
            return strings.encode(self._terms, len(self._terms))


def _decoded(terms: list[str] | StringColumn) -> dict[str, int]:
    names: Sequence[str] = terms
    if isinstance(terms, StringColumn):
        split = terms.joined(0, len(terms)).decode().split("\n")
        # one string per token, unless a token holds a newline (a tokenizer's tokenchars)
        names = split if len(split) == len(terms) else list(terms)
    return {name: i for i, name in enumerate(names)}


@dataclass(frozen=True)
class Segment:
    """The instances in positions ``[start, end)``, by token id (see the module's layout)."""

    start: int
    end: int
    term_ids: npt.NDArray[np.int32]
    term_offsets: npt.NDArray[np.int64]
    positions: npt.NDArray[np.int32]
    offsets: npt.NDArray[Any]
    doc_offsets: npt.NDArray[np.int64]
    docs: npt.NDArray[np.int32]
    freqs: npt.NDArray[Any]

    @property
    def rows(self) -> int:
        return self.end - self.start

    def counts(self) -> npt.NDArray[np.int64]:
        """Each token's instance count."""
        return np.diff(self.term_offsets)

    def doc_counts(self) -> npt.NDArray[np.int64]:
        """Each token's document count."""
        return np.diff(self.doc_offsets)

    def cut(self, size: int) -> Segment:
        """The instances at positions below ``size`` (a copy; ``self`` when all are)."""
        if self.end <= size:
            return self
        keep = self.positions < size
        end = max(self.start, size)
        return self._kept(self.start, end, keep, self.positions[keep])

    def _kept(
        self, start: int, end: int, keep: npt.NDArray[np.bool_], positions: npt.NDArray[Any]
    ) -> Segment:
        """A segment over ``[start, end)`` of the instances ``keep`` marks, now at
        ``positions``: the tokens left without one are dropped."""
        kept = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))
        counts = kept[self.term_offsets[1:]] - kept[self.term_offsets[:-1]]
        held = counts > 0
        offsets = np.zeros(int(held.sum()) + 1, dtype=np.int64)
        np.cumsum(counts[held], out=offsets[1:])
        return with_documents(
            start,
            end,
            self.term_ids[held],
            offsets,
            positions.astype(np.int32, copy=False),
            self.offsets[keep],
        )

    def without(self, removed: npt.NDArray[np.int64]) -> Segment:
        """The instances of the positions but ``removed`` (ascending), the later positions
        moved down over them (``self`` when none is removed or moved)."""
        below_start, below_end = np.searchsorted(removed, [self.start, self.end]).tolist()
        start, end = self.start - below_start, self.end - below_end
        if below_end == below_start:  # none inside: the positions move down alike
            if not below_start:
                return self
            shift = np.int32(below_start)
            return replace(
                self, start=start, end=end, positions=self.positions - shift, docs=self.docs - shift
            )
        keep, moved = renumbered(self.positions, removed)
        return self._kept(start, end, keep, moved)


def documents(
    term_offsets: npt.NDArray[np.int64], positions: npt.NDArray[np.int32]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[Any]]:
    """The document postings (``doc_offsets``, ``docs``, ``freqs``) of instances by token,
    then position: a token's run of instances at one position is one document."""
    first = np.ones(positions.size, dtype=np.bool_)
    if positions.size:
        np.not_equal(positions[1:], positions[:-1], out=first[1:])
        first[term_offsets[:-1][term_offsets[:-1] < positions.size]] = True
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, positions.size))
    freqs = counts.astype(_offset_dtype(counts))
    doc_offsets = np.searchsorted(starts, term_offsets).astype(np.int64)
    return doc_offsets, positions[starts], freqs


def with_documents(
    start: int,
    end: int,
    term_ids: npt.NDArray[np.int32],
    term_offsets: npt.NDArray[np.int64],
    positions: npt.NDArray[np.int32],
    offsets: npt.NDArray[Any],
) -> Segment:
    """A segment of these instances, its document postings derived from them."""
    return Segment(
        start, end, term_ids, term_offsets, positions, offsets, *documents(term_offsets, positions)
    )


def _blocks(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The indexes ``starts[0] .. starts[0] + lengths[0] - 1``, then the next block's, ..."""
    ends = np.cumsum(lengths)
    shift = np.repeat(starts - (ends - lengths), lengths)
    return shift + np.arange(int(ends[-1]) if ends.size else 0, dtype=np.int64)


def _offset_dtype(offsets: npt.NDArray[Any]) -> np.dtype[Any]:
    fits = offsets.size == 0 or int(offsets.max()) <= np.iinfo(np.uint16).max
    return OFFSET_DTYPES[0] if fits else OFFSET_DTYPES[1]


def new_segment(
    start: int,
    end: int,
    term_ids: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    positions: npt.NDArray[np.int64],
    offsets: npt.NDArray[np.int64],
) -> Segment:
    """A segment from instances grouped by token in any token order: token ``term_ids[i]``
    has the next ``counts[i]`` instances of ``positions`` and ``offsets`` (each by position,
    then offset)."""
    order = np.argsort(term_ids, kind="stable")
    firsts = np.cumsum(counts) - counts
    taken = _blocks(firsts[order], counts[order])
    term_offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(counts[order], out=term_offsets[1:])
    return with_documents(
        start,
        end,
        term_ids[order].astype(np.int32),
        term_offsets,
        positions[taken].astype(np.int32),
        offsets[taken].astype(_offset_dtype(offsets)),
    )


def merged(segments: Sequence[Segment]) -> Segment:
    """One segment for consecutive ``segments`` (each token's instances and documents stay
    by position)."""
    union = np.unique(np.concatenate([s.term_ids for s in segments]))
    places = [np.searchsorted(union, s.term_ids) for s in segments]
    dtype = max((s.offsets.dtype for s in segments), key=OFFSET_DTYPES.index)
    term_offsets, (positions, offsets) = _interleaved(
        segments, places, len(union), Segment.counts, ("positions", np.int32), ("offsets", dtype)
    )
    counted = max((s.freqs.dtype for s in segments), key=OFFSET_DTYPES.index)
    doc_offsets, (docs, freqs) = _interleaved(
        segments, places, len(union), Segment.doc_counts, ("docs", np.int32), ("freqs", counted)
    )
    return Segment(
        segments[0].start,
        segments[-1].end,
        union.astype(np.int32),
        term_offsets,
        positions,
        offsets,
        doc_offsets,
        docs,
        freqs,
    )


def _interleaved(
    segments: Sequence[Segment],
    places: Sequence[npt.NDArray[np.int64]],
    terms: int,
    lengths_of: Any,
    *columns: tuple[str, Any],
) -> tuple[npt.NDArray[np.int64], list[npt.NDArray[Any]]]:
    """The offsets of ``terms`` tokens and ``columns`` of consecutive ``segments`` (whose
    tokens are at ``places``), each token's entries in segment order (``lengths_of``: each
    token's entry count in a segment)."""
    counts = np.zeros(terms, dtype=np.int64)
    for segment, at in zip(segments, places, strict=True):
        counts[at] += lengths_of(segment)
    offsets = np.zeros(terms + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    found = [np.empty(int(offsets[-1]), dtype=dtype) for _, dtype in columns]
    filled = offsets[:-1].copy()
    for segment, at in zip(segments, places, strict=True):
        lengths = lengths_of(segment)
        into = _blocks(filled[at], lengths)
        for array, (name, _) in zip(found, columns, strict=True):
            array[into] = getattr(segment, name)
        filled[at] += lengths
    return offsets, found


@dataclass(frozen=True)
class OwnerPostings:
    """The instances of every token in the owner's positions ``[0, size)``."""

    vocabulary: Vocabulary
    segments: tuple[Segment, ...] = ()
    size: int = 0

    def appended(
        self,
        end: int,
        tokens: Sequence[str],
        counts: npt.NDArray[np.int64],
        positions: npt.NDArray[np.int64],
        offsets: npt.NDArray[np.int64],
    ) -> OwnerPostings:
        """These postings and the instances of positions ``[size, end)``: token ``tokens[i]``
        has the next ``counts[i]`` of ``positions`` and ``offsets`` (each by position, then
        offset). Segments are merged as the module describes."""
        if end <= self.size:
            return self
        segment = new_segment(
            self.size, end, self.vocabulary.add(tokens), counts, positions, offsets
        )
        segments = [*self.segments, segment]
        while len(segments) > 1:
            older, newer = segments[-2], segments[-1]
            if older.rows >= 2 * newer.rows or older.rows + newer.rows > MAX_SEGMENT_ROWS:
                break
            segments[-2:] = [merged(segments[-2:])]
        return OwnerPostings(self.vocabulary, tuple(segments), end)

    def upto(self, size: int) -> OwnerPostings:
        """The postings of positions ``[0, size)`` (sharing these segments)."""
        if size >= self.size:
            return self
        return OwnerPostings(
            self.vocabulary, tuple(s for s in self.segments if s.start < size), size
        )

    def without(self, removed: npt.NDArray[np.int64]) -> OwnerPostings:
        """The postings of the positions but ``removed`` (ascending; those not covered yet are
        not counted), the later positions moved down over them."""
        gone = removed[removed < self.size]
        if not gone.size:
            return self
        segments = (s.without(gone) for s in self.segments)
        kept = tuple(s for s in segments if s.rows)
        return OwnerPostings(self.vocabulary, kept, self.size - gone.size)

    def lookup(self, tokens: Sequence[str]) -> dict[str, Instances]:
        """Each token's instances: positions (ascending) and offsets, by position then offset."""
        return self._found(tokens, "term_offsets", ("positions", "offsets"), OFFSET_DTYPES[0])

    def documents(self, tokens: Sequence[str]) -> dict[str, Documents]:
        """Each token's documents: positions (ascending) and the token's instance count in
        each."""
        return self._found(tokens, "doc_offsets", ("docs", "freqs"), OFFSET_DTYPES[0])

    def _found(
        self, tokens: Sequence[str], bounds: str, columns: tuple[str, str], empty: np.dtype[Any]
    ) -> dict[str, Any]:
        """Each token's entries of ``columns`` (positions first) over the segments, which
        begin at ``bounds`` for each token of a segment."""
        wanted = list(dict.fromkeys(tokens))
        ids = np.asarray(self.vocabulary.ids(wanted), dtype=np.int32)  # the term_ids' dtype
        parts: list[list[Instances]] = [[] for _ in wanted]
        for segment in self.segments:
            found = np.searchsorted(segment.term_ids, ids)
            inside = found < len(segment.term_ids)
            hit = np.zeros(len(ids), dtype=np.bool_)
            hit[inside] = segment.term_ids[found[inside]] == ids[inside]
            starts = getattr(segment, bounds)
            first, second = (getattr(segment, name) for name in columns)
            for i in np.flatnonzero(hit).tolist():
                a, b = starts[found[i] : found[i] + 2].tolist()
                parts[i].append((first[a:b], second[a:b]))
        cut = bool(self.segments) and self.segments[-1].end > self.size
        result: dict[str, Any] = {}
        for token, found_parts in zip(wanted, parts, strict=True):
            result[token] = _joined(found_parts, self.size if cut else None, empty)
        return result

    def exact(self) -> OwnerPostings:
        """These postings with segments that end at ``size`` (the last one cut if needed)."""
        if not self.segments or self.segments[-1].end <= self.size:
            return self
        cut = tuple(s.cut(self.size) for s in self.segments if s.start < self.size)
        return OwnerPostings(self.vocabulary, cut, self.size)

    def arrays(self) -> tuple[list[list[int]], dict[str, npt.NDArray[Any]]]:
        """The postings (:meth:`exact`) as flat arrays (:data:`ARRAYS`) and each segment's
        ``[start, end, tokens, instances]``, for :meth:`from_arrays`."""
        segments = self.exact().segments
        blob, terms = self.vocabulary.encoded()

        def flat(name: str, dtype: type[np.generic]) -> npt.NDArray[Any]:
            # (uint16 and int32 token offsets concatenate as int32)
            return np.concatenate([getattr(s, name) for s in segments] or [np.zeros(0, dtype)])

        arrays: dict[str, npt.NDArray[Any]] = {
            "terms.blob": blob,
            "terms.offsets": terms,
            "term_ids": flat("term_ids", np.int32),
            "term_offsets": flat("term_offsets", np.int64),
            "positions": flat("positions", np.int32),
            "offsets": flat("offsets", np.uint16),
            "doc_offsets": flat("doc_offsets", np.int64),
            "docs": flat("docs", np.int32),
            "freqs": flat("freqs", np.uint16),
        }
        bounds = [
            [s.start, s.end, len(s.term_ids), len(s.positions), len(s.docs)] for s in segments
        ]
        return bounds, arrays

    @classmethod
    def from_arrays(
        cls, size: int, bounds: Sequence[Sequence[int]], arrays: dict[str, npt.NDArray[Any]]
    ) -> OwnerPostings:
        """The postings :meth:`arrays` gave (views of ``arrays``, which may be memory-mapped).
        Postings saved before the document postings (bounds of four numbers, no
        :data:`DOCUMENT_ARRAYS`) have them derived from their instances.

        Raises:
            ValueError: the arrays do not fit the bounds or ``size``.
        """
        vocabulary = Vocabulary(StringColumn(arrays["terms.blob"], arrays["terms.offsets"]))
        segments: list[Segment] = []
        ids = offsets = instances = docs = expected = 0
        for start, end, terms, count, *rest in bounds:
            term_offsets = arrays["term_offsets"][offsets : offsets + terms + 1]
            if start != expected or end <= start or len(term_offsets) != terms + 1:
                raise ValueError("postings: segment bounds")
            if int(term_offsets[0]) != 0 or int(term_offsets[-1]) != count:
                raise ValueError("postings: segment offsets")
            found = (
                arrays["term_ids"][ids : ids + terms],
                term_offsets,
                arrays["positions"][instances : instances + count],
                arrays["offsets"][instances : instances + count],
            )
            if not rest:  # saved before the document postings
                segments.append(with_documents(start, end, *found))
            else:
                (held,) = rest
                doc_offsets = arrays["doc_offsets"][offsets : offsets + terms + 1]
                if len(doc_offsets) != terms + 1 or int(doc_offsets[-1]) != held:
                    raise ValueError("postings: segment documents")
                segments.append(
                    Segment(
                        start,
                        end,
                        *found,
                        doc_offsets,
                        arrays["docs"][docs : docs + held],
                        arrays["freqs"][docs : docs + held],
                    )
                )
                docs += held
            ids, offsets, instances, expected = (
                ids + terms,
                offsets + terms + 1,
                instances + count,
                end,
            )
        lengths = (len(arrays["term_ids"]), len(arrays["term_offsets"]), len(arrays["positions"]))
        if expected != size or lengths != (ids, offsets, instances):
            raise ValueError("postings: arrays do not match their bounds")
        if len({len(b) for b in bounds}) > 1:
            raise ValueError("postings: segment bounds of two formats")
        if bounds and len(bounds[0]) > 4:
            kept = (len(arrays["doc_offsets"]), len(arrays["docs"]), len(arrays["freqs"]))
            if kept != (offsets, docs, docs):
                raise ValueError("postings: document arrays do not match their bounds")
            if arrays["freqs"].dtype not in OFFSET_DTYPES:
                raise ValueError("postings: document counts")
        if len(arrays["offsets"]) != instances or arrays["offsets"].dtype not in OFFSET_DTYPES:
            raise ValueError("postings: token offsets")
        return cls(vocabulary, tuple(segments), size)


def _joined(parts: list[Instances], size: int | None, empty: np.dtype[Any]) -> Instances:
    """One token's entries from its segments (in position order), below ``size`` if given
    (``empty``: the second array's dtype when there are none)."""
    if not parts:
        return np.zeros(0, np.int32), np.zeros(0, empty)
    positions, offsets = (
        parts[0]
        if len(parts) == 1
        else (
            np.concatenate([p for p, _ in parts]),
            np.concatenate([o for _, o in parts]),
        )
    )
    if size is not None:
        keep = int(np.searchsorted(positions, size))
        positions, offsets = positions[:keep], offsets[:keep]
    return positions, offsets
