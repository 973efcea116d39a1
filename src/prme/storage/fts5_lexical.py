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
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from prme.index.arrays import comma_integers
from prme.index.lexical import grown_postings, postings_bm25
from prme.index.owner_index import OwnerIndex
from prme.index.postings import OwnerPostings

TOKENIZE_BATCH_ROWS = 32768  # rows tokenized at a time when an owner's postings grow
_TOKENIZE = re.compile(r"tokenize\s*=\s*'((?:[^']|'')*)'", re.IGNORECASE)


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
        return Tokenized(
            [str(t) for t, _ in counted], counts, comma_integers(docs), comma_integers(offsets)
        )


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


def owner_postings(conn: sqlite3.Connection, index: OwnerIndex) -> OwnerPostings:
    """The postings of the owner's rows in ``index``: those computed so far, grown by the rows
    appended since (their text read on ``conn``, inside the caller's read snapshot, and
    tokenized as the pack's FTS5 index tokenizes them)."""
    return grown_postings(index, lambda postings: _grown(conn, index, postings))


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
