"""The SQLite pack's lexical channel: FTS5's BM25 over one owner's memories.

FTS5's ``bm25()`` takes its statistics (row count, average length, document frequency) from the
whole table, so one owner's writes would move every other owner's scores. Here FTS5 still
tokenizes and indexes everything, but the score is computed from FTS5's own term data with the
owner's statistics alone (:mod:`prme.index.bm25`):

- each query term is tokenized by FTS5 itself (the pack's tokenizer, in a private in-memory
  database), so a term is the same phrase FTS5's ``MATCH '"term"'`` would search;
- the postings of each token come from an ``fts5vocab`` ``instance`` table (per connection, in
  the ``temp`` schema, so the pack file is unchanged); a phrase's instance count in a row is
  the number of positions where its tokens follow each other, as FTS5 counts them;
- the owner's column index supplies which rows are the owner's, their scopes and token counts
  (FTS5's ``docsize``), hence the owner's document count, mean length and, from the postings,
  the owner's document frequency of each phrase.

Every matching row of the pack is read (as FTS5's ``MATCH`` does), and only the owner's count.
Nothing is stored beyond FTS5's index, so packs of every version work unchanged.
"""

from __future__ import annotations

import bisect
import json
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from prme.index.bm25 import bm25_idf, bm25_scores
from prme.index.owner_index import OwnerIndex

INSTANCE_TABLE = "temp.prme_fts_instance"
_CACHE_LIMIT = 4096
# An owner with at most this many memories takes its postings from its own rows (tokenized
# once per index size): its query then costs the same in a pack of any size. A larger owner
# reads the pack's postings of each query token.
OWNER_POSTINGS_ROWS = 1024
_TOKENIZE = re.compile(r"tokenize\s*=\s*'((?:[^']|'')*)'", re.IGNORECASE)

Postings = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]


def create_instance_table(conn: sqlite3.Connection) -> None:
    """The pack's FTS5 postings as ``(term, doc, col, offset)`` rows, on this connection."""
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {INSTANCE_TABLE}"
        " USING fts5vocab(main, memories_fts, instance)"
    )


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
    """FTS5's tokenizer (the pack's configuration) applied to query terms, with a cache."""

    def __init__(self, tokenize: str) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute(f"CREATE VIRTUAL TABLE terms USING fts5(term, tokenize='{tokenize}')")
        self._conn.execute("CREATE VIRTUAL TABLE terms_instance USING fts5vocab(terms, instance)")
        self._conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(content, tokenize='{tokenize}')")
        self._conn.execute("CREATE VIRTUAL TABLE docs_instance USING fts5vocab(docs, instance)")
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, ...]] = {}

    def tokens(self, terms: Sequence[str]) -> list[tuple[str, ...]]:
        """Each term's tokens in order (an empty tuple for a term FTS5 drops entirely)."""
        with self._lock:
            missing = sorted({t for t in terms if t not in self._cache})
            if missing:
                if len(self._cache) + len(missing) > _CACHE_LIMIT:
                    self._cache.clear()
                found: dict[int, list[str]] = {}
                conn = self._conn
                conn.execute("BEGIN")
                try:
                    conn.executemany(
                        "INSERT INTO terms(rowid, term) VALUES (?, ?)", enumerate(missing)
                    )
                    for doc, token in conn.execute(
                        "SELECT doc, term FROM terms_instance ORDER BY doc, offset"
                    ):
                        found.setdefault(int(doc), []).append(str(token))
                finally:
                    conn.execute("ROLLBACK")
                for i, term in enumerate(missing):
                    self._cache[term] = tuple(found.get(i, ()))
            return [self._cache[t] for t in terms]

    def postings(self, rows: Sequence[tuple[int, str]]) -> OwnerPostings:
        """The instances of every token of ``rows`` (``(rowid, text)``), as FTS5 indexes them."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN")
            try:
                conn.executemany("INSERT INTO docs(rowid, content) VALUES (?, ?)", rows)
                found = conn.execute("SELECT term, doc, offset FROM docs_instance").fetchall()
            finally:
                conn.execute("ROLLBACK")
        terms = sorted({str(t) for t, _, _ in found})
        numbers = {t: i for i, t in enumerate(terms)}
        term_ids = np.fromiter((numbers[str(t)] for t, _, _ in found), np.int64, len(found))
        docs = np.fromiter((int(d) for _, d, _ in found), np.int64, len(found))
        positions = np.fromiter((int(o) for _, _, o in found), np.int64, len(found))
        order = np.lexsort((positions, docs, term_ids))  # by term, then row, then offset
        offsets = np.zeros(len(terms) + 1, np.int64)
        np.cumsum(np.bincount(term_ids, minlength=len(terms)), out=offsets[1:])
        return OwnerPostings(tuple(terms), offsets, docs[order], positions[order])

    def close(self) -> None:
        self._conn.close()


_DOCUMENT_TOKENIZERS: dict[str, QueryTokenizer] = {}
_DOCUMENT_TOKENIZERS_LOCK = threading.Lock()


def pack_tokenizer(conn: sqlite3.Connection) -> QueryTokenizer:
    """A tokenizer with the pack's FTS5 configuration (as ``memories_fts`` declares it)."""
    (sql,) = conn.execute(
        "SELECT sql FROM main.sqlite_master WHERE name = 'memories_fts'"
    ).fetchone()
    found = _TOKENIZE.search(str(sql))
    tokenize = found.group(1).replace("''", "'") if found else "unicode61"
    with _DOCUMENT_TOKENIZERS_LOCK:
        tokenizer = _DOCUMENT_TOKENIZERS.get(tokenize)
        if tokenizer is None:
            tokenizer = _DOCUMENT_TOKENIZERS[tokenize] = QueryTokenizer(tokenize)
        return tokenizer


def owner_postings(conn: sqlite3.Connection, index: OwnerIndex) -> OwnerPostings:
    """The postings of the owner's rows in ``index`` (their text read on ``conn``, inside the
    caller's read snapshot), tokenized as the pack's FTS5 index tokenizes them."""
    rows = conn.execute(
        "SELECT rowid, content FROM memories WHERE rowid IN (SELECT value FROM json_each(?))"
        " ORDER BY rowid",
        (json.dumps(index.col("rowid").tolist()),),
    ).fetchall()
    return pack_tokenizer(conn).postings([(int(r), str(c or "")) for r, c in rows])


def _integers(text: str | None) -> npt.NDArray[np.int64]:
    if not text:
        return np.zeros(0, np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


class PackPostings:
    """A token's instances from the pack's FTS5 index (every row of the pack holding it). The
    postings come back as one comma-separated text (fetching a Python row per posting costs
    several times more)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def docs(self, token: str) -> npt.NDArray[np.int64]:
        """The rows of the token's instances, by row."""
        (docs,) = self._conn.execute(
            f"SELECT group_concat(doc) FROM {INSTANCE_TABLE} WHERE term = ?", (token,)
        ).fetchone()
        return _integers(docs)

    def instances(self, token: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The rows and token offsets of the token's instances (pairwise)."""
        # Both aggregates see the rows in the same order, so they pair up.
        docs, offsets = self._conn.execute(
            f"SELECT group_concat(doc), group_concat(offset) FROM {INSTANCE_TABLE} WHERE term = ?",
            (token,),
        ).fetchone()
        return _integers(docs), _integers(offsets)


@dataclass(frozen=True, slots=True)
class OwnerPostings:
    """The instances of every token in one owner's rows, as CSR arrays: token ``terms[i]``'s
    instances are ``rowids[offsets[i]:offsets[i + 1]]`` with their token offsets
    ``positions[...]``, by row then offset — what FTS5's index holds for those rows, since it
    is the same tokenizer over the same text."""

    terms: tuple[str, ...]  # ascending
    offsets: npt.NDArray[np.int64]
    rowids: npt.NDArray[np.int64]
    positions: npt.NDArray[np.int64]

    def _row(self, token: str) -> int | None:
        at = bisect.bisect_left(self.terms, token)
        return at if at < len(self.terms) and self.terms[at] == token else None

    def docs(self, token: str) -> npt.NDArray[np.int64]:
        return self.instances(token)[0]

    def instances(self, token: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        row = self._row(token)
        if row is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        a, b = int(self.offsets[row]), int(self.offsets[row + 1])
        return self.rowids[a:b], self.positions[a:b]


PostingSource = PackPostings | OwnerPostings


def _token_frequencies(source: PostingSource, token: str) -> Postings:
    """Rows holding the token and how many times."""
    return _run_lengths(source.docs(token))


def _run_lengths(docs: npt.NDArray[np.int64]) -> Postings:
    """Each distinct row of ``docs`` once, ascending, and how many times it occurs. FTS5 lists
    a term's instances by row, so the runs are usually sorted already (a linear pass, no
    sort); otherwise they are sorted first."""
    if docs.size == 0:
        return docs, np.zeros(0, np.float64)
    if docs.size > 1 and bool((docs[1:] < docs[:-1]).any()):
        docs = np.sort(docs, kind="stable")
    starts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
    counts = np.diff(np.append(starts, docs.size)).astype(np.float64)
    return docs[starts], counts


def _distinct(positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct values of ``positions``, ascending."""
    ordered = np.sort(positions)
    if ordered.size < 2:
        return ordered
    keep = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    result: npt.NDArray[np.int64] = ordered[keep]
    return result


def _phrase_frequencies(source: PostingSource, tokens: Sequence[str]) -> Postings:
    """Rows holding the tokens at consecutive positions, and how many times (FTS5 phrases)."""
    starts: set[tuple[int, int]] | None = None
    for shift, token in enumerate(tokens):
        docs, offsets = source.instances(token)
        at = set(zip(docs.tolist(), (offsets - shift).tolist(), strict=True))
        starts = at if starts is None else starts & at
        if not starts:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
    rows, counts = np.unique(np.asarray([d for d, _ in starts or ()], np.int64), return_counts=True)
    return rows.astype(np.int64), counts.astype(np.float64)


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
    source: PostingSource = PackPostings(conn)
    if index.size <= OWNER_POSTINGS_ROWS:
        source = index.derived("owner_postings", lambda: owner_postings(conn, index))
    cache: dict[str, Postings] = {}
    per_phrase: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = []
    for tokens in phrases:
        if not tokens:  # FTS5 matches nothing for an empty phrase
            continue
        if len(tokens) == 1:
            if tokens[0] not in cache:
                cache[tokens[0]] = _token_frequencies(source, tokens[0])
            docs, freq = cache[tokens[0]]
        else:
            docs, freq = _phrase_frequencies(source, tokens)
        positions, mine = index.positions_of(docs)
        per_phrase.append((positions, freq[mine]))
    matched = [positions for positions, _ in per_phrase if positions.size]
    if not matched:
        return []
    pool = matched[0] if len(matched) == 1 else _distinct(np.concatenate(matched))
    pool = pool[in_scope[pool]]
    if pool.size == 0:
        return []
    doc_len = index.col("doc_len")
    n_docs = index.size
    avgdl = float(index.doc_len_total()) / float(n_docs)
    idfs, frequencies = [], []
    for positions, freq in per_phrase:
        idfs.append(bm25_idf(n_docs, int(positions.size)))
        aligned = np.zeros(pool.size, dtype=np.float64)
        at = np.searchsorted(pool, positions)
        inside = at < pool.size
        hit = np.zeros(positions.size, dtype=np.bool_)
        hit[inside] = pool[at[inside]] == positions[inside]
        aligned[at[hit]] = freq[hit]
        frequencies.append(aligned)
    scores = bm25_scores(idfs, frequencies, doc_len[pool].astype(np.float64), avgdl)
    rowids = index.col("rowid")[pool]
    order = np.lexsort((rowids, -scores))[:k]
    return list(zip(rowids[order].tolist(), scores[order].tolist(), strict=True))
