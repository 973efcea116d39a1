"""The SQLite pack's lexical channel: FTS5's BM25 over one owner's memories.

FTS5's ``bm25()`` takes its statistics (row count, average length, document frequency) from the
whole table, so one owner's writes would move every other owner's scores, and its postings list
every owner's rows. Here FTS5 still tokenizes and indexes everything for the pack, but the score
is computed from the owner's own postings with the owner's statistics alone
(:mod:`prme.index.bm25`):

- each query term is tokenized by FTS5 itself (the pack's tokenizer, in a private in-memory
  database), so a term is the same phrase FTS5's ``MATCH '"term"'`` would search;
- the owner's postings (:mod:`prme.index.postings`) hold every instance of every token of the
  owner's rows, tokenized by the pack's FTS5 tokenizer in a private in-memory database (so they
  are what FTS5's index holds for those rows); they grow with the owner index (the rows appended
  since are tokenized when a search first needs them), are kept with the index in memory, and
  are saved with it (:mod:`prme.index.index_file`); a single-token phrase's instance count in
  each row is read from the token's document postings, a longer phrase's is the number of
  positions where its tokens follow each other, as FTS5 counts them;
- the owner's column index supplies the owner's rows, their scopes and token counts (FTS5's
  ``docsize``), hence the owner's document count, mean length and, from the postings, the
  owner's document frequency of each phrase.

A query reads only the owner's postings of its tokens: no other owner's rows, however many hold
them, change what it reads or how long it takes. The ``k`` best rows are found without scoring
every matching row (:mod:`prme.index.bm25_topk`: bounds of each row's score rule out the rows
that cannot be among them), and are exactly the rows, scores and order that scoring every
matching row gives.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from prme.index.bm25_topk import PhraseDocuments, top_k
from prme.index.owner_index import OwnerIndex
from prme.index.postings import Instances, OwnerPostings, Vocabulary

TOKENIZE_BATCH_ROWS = 32768  # rows tokenized at a time when an owner's postings grow
POSTINGS = "lexical_postings"  # the key of an owner index's postings in its derived values
_TOKENIZE = re.compile(r"tokenize\s*=\s*'((?:[^']|'')*)'", re.IGNORECASE)

Postings = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]


def first_varint(blob: bytes | None) -> int:
    """The first SQLite varint of an FTS5 ``docsize`` blob: the row's token count."""
    if not blob:
        return 0
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


class QueryTokenizer:
    """FTS5's tokenizer (the pack's configuration) applied to query terms. Terms are tokenized
    on every call, not cached: a cache shared by the pack's owners would let one owner time
    another's recent queries (a term another owner asked would come back sooner)."""

    def __init__(self, tokenize: str) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute(f"CREATE VIRTUAL TABLE terms USING fts5(term, tokenize='{tokenize}')")
        self._conn.execute("CREATE VIRTUAL TABLE terms_instance USING fts5vocab(terms, instance)")
        self._lock = threading.Lock()

    def tokens(self, terms: Sequence[str]) -> list[tuple[str, ...]]:
        """Each term's tokens in order (an empty tuple for a term FTS5 drops entirely)."""
        distinct = sorted(set(terms))
        found: dict[int, list[str]] = {}
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                conn.executemany(
                    "INSERT INTO terms(rowid, term) VALUES (?, ?)", enumerate(distinct)
                )
                for doc, token in conn.execute(
                    "SELECT doc, term FROM terms_instance ORDER BY doc, offset"
                ):
                    found.setdefault(int(doc), []).append(str(token))
            finally:
                conn.execute("ROLLBACK")
        tokens = {term: tuple(found.get(i, ())) for i, term in enumerate(distinct)}
        return [tokens[t] for t in terms]

    def close(self) -> None:
        self._conn.close()


def _integers(text: str | None) -> npt.NDArray[np.int64]:
    if not text:
        return np.zeros(0, np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


@dataclass(frozen=True)
class Tokenized:
    """Documents as FTS5 indexes them: token ``tokens[i]`` (ascending) has the next
    ``counts[i]`` instances of ``docs`` and ``offsets`` (by document, then offset)."""

    tokens: list[str]
    counts: npt.NDArray[np.int64]
    docs: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]


class DocumentTokenizer:
    """FTS5's tokenizer (one configuration) applied to documents, in a private in-memory
    database per thread: one owner's rows never wait for another's."""

    def __init__(self, tokenize: str) -> None:
        self._tokenize = tokenize
        self._local = threading.local()

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            # contentless, without sizes: only the index is kept (a third less work)
            conn.execute(
                "CREATE VIRTUAL TABLE docs USING fts5(content, content='', columnsize=0,"
                f" tokenize='{self._tokenize}')"
            )
            conn.execute("CREATE VIRTUAL TABLE docs_row USING fts5vocab(docs, row)")
            conn.execute("CREATE VIRTUAL TABLE docs_instance USING fts5vocab(docs, instance)")
            self._local.conn = conn
        return conn

    def tokenized(self, rows: Iterable[tuple[int, str]]) -> Tokenized:
        """The instances of every token of ``rows`` (``(doc, text)``), as FTS5 indexes them.
        Both vocabulary tables list tokens in FTS5's order, and the instances come back as one
        comma-separated text (a Python row per instance costs several times more)."""
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO docs(rowid, content) VALUES (?, ?)", rows)
            counted = conn.execute("SELECT term, cnt FROM docs_row").fetchall()
            docs, offsets = conn.execute(
                "SELECT group_concat(doc), group_concat(offset) FROM docs_instance"
            ).fetchone()
        finally:
            conn.execute("ROLLBACK")
        counts = np.fromiter((int(c) for _, c in counted), np.int64, len(counted))
        return Tokenized([str(t) for t, _ in counted], counts, _integers(docs), _integers(offsets))


_DOCUMENT_TOKENIZERS: dict[str, DocumentTokenizer] = {}
_DOCUMENT_TOKENIZERS_LOCK = threading.Lock()


def pack_tokenizer(conn: sqlite3.Connection) -> DocumentTokenizer:
    """A tokenizer with the pack's FTS5 configuration (as ``memories_fts`` declares it)."""
    (sql,) = conn.execute(
        "SELECT sql FROM main.sqlite_master WHERE name = 'memories_fts'"
    ).fetchone()
    found = _TOKENIZE.search(str(sql))
    tokenize = found.group(1).replace("''", "'") if found else "unicode61"
    with _DOCUMENT_TOKENIZERS_LOCK:
        tokenizer = _DOCUMENT_TOKENIZERS.get(tokenize)
        if tokenizer is None:
            tokenizer = _DOCUMENT_TOKENIZERS[tokenize] = DocumentTokenizer(tokenize)
        return tokenizer


@dataclass
class SharedPostings:
    """An owner index's postings, shared by every snapshot of the index (kept in its derived
    values): they cover ``postings.size`` positions, and grow under ``lock``."""

    postings: OwnerPostings = field(default_factory=lambda: OwnerPostings(Vocabulary()))
    lock: threading.Lock = field(default_factory=threading.Lock)


def shared_postings(index: OwnerIndex) -> SharedPostings:
    """The postings ``index`` and its snapshots share (none computed yet for a new index)."""
    found = index.derived_values.get(POSTINGS)
    if found is None:  # (the size is unused: the postings say which positions they cover)
        found = index.derived_values.setdefault(POSTINGS, (-1, SharedPostings()))
    shared: SharedPostings = found[1]
    return shared


def owner_postings(conn: sqlite3.Connection, index: OwnerIndex) -> OwnerPostings:
    """The postings of the owner's rows in ``index``: those computed so far, grown by the rows
    appended since (their text read on ``conn``, inside the caller's read snapshot, and
    tokenized as the pack's FTS5 index tokenizes them)."""
    shared = shared_postings(index)
    with shared.lock:
        postings = shared.postings
        if postings.size < index.size:
            postings = shared.postings = _grown(conn, index, postings)
    return postings.upto(index.size)


def _grown(conn: sqlite3.Connection, index: OwnerIndex, postings: OwnerPostings) -> OwnerPostings:
    tokenizer = pack_tokenizer(conn)
    rowids = index.col("rowid")
    for start in range(postings.size, index.size, TOKENIZE_BATCH_ROWS):
        end = min(start + TOKENIZE_BATCH_ROWS, index.size)
        wanted = rowids[start:end]
        rows = conn.execute(
            "SELECT rowid, content FROM memories WHERE rowid IN (SELECT value FROM json_each(?))"
            " ORDER BY rowid",
            (json.dumps(wanted.tolist()),),
        ).fetchall()
        found = np.fromiter((int(r) for r, _ in rows), np.int64, len(rows))
        positions = (start + np.searchsorted(wanted, found)).tolist()
        batch = tokenizer.tokenized(zip(positions, (str(c or "") for _, c in rows), strict=True))
        postings = postings.appended(end, batch.tokens, batch.counts, batch.docs, batch.offsets)
    return postings


def _run_lengths(docs: npt.NDArray[Any]) -> Postings:
    """Each distinct row of ``docs`` (ascending, as postings list them) once, and how many
    times it occurs."""
    if docs.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    first = np.empty(docs.size, dtype=np.bool_)
    first[0] = True
    np.not_equal(docs[1:], docs[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.empty(starts.size, dtype=np.float64)
    np.subtract(starts[1:], starts[:-1], out=counts[:-1])
    counts[-1] = docs.size - starts[-1]
    return docs[starts].astype(np.int64), counts


def _phrase_frequencies(found: dict[str, Instances], tokens: Sequence[str]) -> Postings:
    """Rows holding the tokens at consecutive offsets, and how many times (FTS5 phrases): the
    starts ``(row, offset - i)`` of the ``i``-th token common to every token, as one int64 key
    each (row in the high half)."""
    starts: npt.NDArray[np.int64] | None = None
    for shift, token in enumerate(tokens):
        docs, offsets = found[token]
        start = offsets.astype(np.int64) - shift
        valid = start >= 0  # the first token's offsets are never negative
        keys = (docs[valid].astype(np.int64) << 32) | start[valid]  # ascending, distinct
        starts = keys if starts is None else np.intersect1d(starts, keys, assume_unique=True)
        if starts.size == 0:
            break
    if starts is None or starts.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    return _run_lengths(starts >> 32)


def owner_bm25(
    conn: sqlite3.Connection,
    index: OwnerIndex,
    in_scope: npt.NDArray[np.bool_],
    phrases: Sequence[tuple[str, ...]],
    k: int,
) -> list[tuple[int, float]]:
    """The owner's ``k`` best in-scope rows for the OR of ``phrases``: ``(rowid, score)``, by
    score descending then rowid, with FTS5's BM25 over the owner's memories (``index``)."""
    if index.size == 0 or k <= 0:
        return []
    return postings_bm25(owner_postings(conn, index), index, in_scope, phrases, k)


def postings_bm25(
    postings: OwnerPostings,
    index: OwnerIndex,
    in_scope: npt.NDArray[np.bool_],
    phrases: Sequence[tuple[str, ...]],
    k: int,
) -> list[tuple[int, float]]:
    """:func:`owner_bm25` over ``postings`` (the owner's, covering ``index``'s positions), however
    they were derived: FTS5's tokens on SQLite, PostgreSQL's lexemes there."""
    if index.size == 0 or k <= 0:
        return []
    doc_len = index.col("doc_len")
    shortest: int = index.derived("doc_len_min", lambda: int(doc_len.min()))
    positions, scores = ranked(
        postings, doc_len, index.doc_len_total(), in_scope, phrases, k, shortest
    )
    rowids = index.col("rowid")[positions]
    return list(zip(rowids.tolist(), scores.tolist(), strict=True))


def ranked(
    postings: OwnerPostings,
    doc_len: npt.NDArray[Any],
    doc_len_total: int,
    in_scope: npt.NDArray[np.bool_],
    phrases: Sequence[tuple[str, ...]],
    k: int,
    shortest: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The ``k`` best in-scope positions of ``postings`` for the OR of ``phrases`` and their
    BM25 scores, by score descending then position (``doc_len``: each position's token count,
    ``doc_len_total``: their sum, ``shortest``: their minimum, computed when not given).
    A single-token phrase reads the token's document postings; a longer one its tokens'
    instances."""
    n_docs = postings.size
    if n_docs == 0 or k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    single = postings.documents([t[0] for t in phrases if len(t) == 1])
    longer = [t for tokens in phrases if len(tokens) > 1 for t in tokens]
    found = postings.lookup(longer) if longer else {}
    per_phrase: list[PhraseDocuments] = []
    for tokens in phrases:
        if not tokens:  # FTS5 matches nothing for an empty phrase
            continue
        per_phrase.append(
            single[tokens[0]] if len(tokens) == 1 else _phrase_frequencies(found, tokens)
        )
    avgdl = float(doc_len_total) / float(n_docs)
    if shortest is None:
        shortest = int(doc_len[:n_docs].min())
    return top_k(per_phrase, n_docs, doc_len, avgdl, shortest, in_scope, k)
