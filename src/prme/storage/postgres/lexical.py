"""Lexical search on PostgreSQL: BM25 with FTS5's formula over the owner's own postings, in
process, as on SQLite (:mod:`prme.storage.fts5_lexical`).

PostgreSQL's text search analyses the text: each memory row keeps the ``tsvector`` of its
content (derived on insert), and each query term is analysed on the server with the same
configuration into its lexemes. The owner's postings (:mod:`prme.index.postings`: each lexeme's
rows, a row once per position the ``tsvector`` lists for it) are read from the ``tsvector`` of
the owner's rows, grow with the owner's column index (the rows appended since are read when a
search first needs them), are shared by its snapshots and saved with it
(:mod:`prme.storage.postgres.saved_index`).

A row's score sums, over the query's (term, lexeme) pairs in term order (a term's lexemes in
byte order), ``idf · (tf · (k1 + 1)) / (tf + k1 · (1 − b + b · D / avgdl))``: ``tf`` the
lexeme's position count in the row's ``tsvector``, ``D`` the row's token count, with the owner's
statistics alone (document count and token total from the owner index, document frequency from
the owner's postings). A query reads only the owner's postings of its lexemes: another owner's
rows, however many hold them, change neither what it reads nor how long it takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from prme.index.arrays import comma_integers
from prme.index.lexical import grown_postings
from prme.index.owner_index import OwnerIndex
from prme.index.postings import OwnerPostings

Run = Callable[[str, Sequence[Any]], psycopg.Cursor[Any]]

BATCH_ROWS = 32768  # owner rows whose lexemes are read at a time

_QUERY_LEXEMES = (
    "SELECT t.ord, l.lexeme FROM unnest(%s::text[]) WITH ORDINALITY AS t(term, ord)"
    " CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector("
    "'prme_english'::regconfig, prme_lexical_text(t.term)))) AS l(lexeme)"
    ' ORDER BY t.ord, l.lexeme COLLATE "C"'
)
# One row per batch: the lexemes (byte order), each one's row count, then for each lexeme in
# that order its rows (ascending) and their position counts, as comma-separated text (a
# Python row per posting would cost several times more).
_ROW_LEXEMES = (
    "SELECT array_agg(g.lexeme ORDER BY g.lexeme), array_agg(g.n ORDER BY g.lexeme),"
    " string_agg(g.rowids, ',' ORDER BY g.lexeme), string_agg(g.tfs, ',' ORDER BY g.lexeme)"
    ' FROM (SELECT u.lexeme COLLATE "C" AS lexeme, count(*) AS n,'
    " string_agg(m.rowid::text, ',' ORDER BY m.rowid) AS rowids,"
    " string_agg(cardinality(u.positions)::text, ',' ORDER BY m.rowid) AS tfs"
    " FROM memories m CROSS JOIN LATERAL unnest(m.tsv) AS u"
    " WHERE m.user_id = %s AND m.rowid = ANY(%s) GROUP BY 1) AS g"
)


def query_phrases(run: Run, terms: Sequence[str]) -> list[tuple[str, ...]]:
    """One single-lexeme phrase per (term, lexeme), in term order, then byte order: the terms
    as the pack's text search configuration analyses them, asked of the server each time (a
    cache shared by the store's owners would let one owner time another's recent queries)."""
    return [(str(lexeme),) for _, lexeme in run(_QUERY_LEXEMES, (list(terms),)).fetchall()]


def owner_postings(run: Run, index: OwnerIndex, user_id: str) -> OwnerPostings:
    """The postings of the owner's rows in ``index``: those read so far, grown by the rows
    appended since (their ``tsvector`` read through ``run``, in the caller's snapshot)."""
    return grown_postings(index, lambda postings: _grown(run, index, postings, user_id))


def _grown(run: Run, index: OwnerIndex, postings: OwnerPostings, user_id: str) -> OwnerPostings:
    rowids = index.col("rowid")
    for start in range(postings.size, index.size, BATCH_ROWS):
        end = min(start + BATCH_ROWS, index.size)
        wanted = rowids[start:end]
        row = run(_ROW_LEXEMES, (user_id, wanted.tolist())).fetchone()
        lexemes, counts, positions, offsets = _instances(row, wanted, start)
        postings = postings.appended(end, lexemes, counts, positions, offsets)
    return postings


def _instances(
    row: tuple[Any, ...] | None, wanted: npt.NDArray[np.int64], start: int
) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """A batch's lexemes, each one's instance count, and the instances (position, then an
    offset counting the row's instances from 0), by lexeme, then position."""
    if row is None or row[0] is None:
        empty = np.zeros(0, np.int64)
        return [], empty, empty, empty
    lexemes = [str(x) for x in row[0]]
    rows_per_lexeme = np.asarray(row[1], dtype=np.int64)
    rowids, tfs = comma_integers(row[2]), comma_integers(row[3])
    positions = start + np.searchsorted(wanted, rowids)
    bounds = np.concatenate(([0], np.cumsum(rows_per_lexeme)))
    counts = np.add.reduceat(tfs, bounds[:-1]) if tfs.size else np.zeros(0, np.int64)
    instance_positions = np.repeat(positions, tfs)
    first = np.concatenate(([0], np.cumsum(tfs)[:-1]))
    offsets = np.arange(instance_positions.size, dtype=np.int64) - np.repeat(first, tfs)
    return lexemes, counts.astype(np.int64), instance_positions.astype(np.int64), offsets
