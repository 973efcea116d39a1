"""BM25 as SQLite's FTS5 defines it (``fts5_aux.c``), over one owner's statistics.

Both backends score the lexical channel with these functions, over the owner's own memories
(document count, token total, document frequency per query phrase), so no other owner's
content can change an owner's lexical scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

BM25_K1 = 1.2
BM25_B = 0.75
IDF_FLOOR = 1e-6


def bm25_idf(n_docs: int, df: int) -> float:
    """FTS5's idf: ``ln((N - n + 0.5) / (n + 0.5))``, with non-positive values raised to 1e-6.

    Args:
        n_docs: ``N``, the number of documents (the owner's memories).
        df: ``n``, how many of them match the phrase.
    """
    idf = math.log((n_docs - df + 0.5) / (df + 0.5))
    return idf if idf > 0.0 else IDF_FLOOR


def bm25_scores(
    idfs: Sequence[float],
    frequencies: Sequence[npt.NDArray[np.float64]],
    doc_len: npt.NDArray[np.float64],
    avgdl: float,
) -> npt.NDArray[np.float64]:
    """FTS5's ``-bm25()`` of each document, with FTS5's arithmetic in FTS5's order:

    ``score = Σ_i idf_i · (f_i · (k1 + 1)) / (f_i + k1 · (1 − b + b · D / avgdl))``, summed over
    the query phrases ``i`` in query order, starting from 0.0.

    Args:
        idfs: each phrase's :func:`bm25_idf`.
        frequencies: each phrase's instance count in every document (aligned with ``doc_len``).
        doc_len: ``D``, each document's token count.
        avgdl: the mean token count of the owner's documents (token total / document count).
    """
    score = np.zeros(len(doc_len), dtype=np.float64)
    norm = bm25_norms(doc_len, avgdl)
    for idf, freq in zip(idfs, frequencies, strict=True):
        score += bm25_contributions(idf, freq, norm)
    return score


def bm25_norms(doc_len: npt.NDArray[np.float64], avgdl: float) -> npt.NDArray[np.float64]:
    """``k1 · (1 − b + b · D / avgdl)`` of each document length ``D``, in FTS5's order."""
    norm: npt.NDArray[np.float64] = BM25_K1 * (1 - BM25_B + BM25_B * doc_len / avgdl)
    return norm


def bm25_contributions(
    idf: float, freq: npt.NDArray[np.float64], norm: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """One phrase's term of the score, ``idf · (f · (k1 + 1)) / (f + norm)``, per document.
    It grows with ``f`` and shrinks as ``norm`` grows, also as rounded (each operation is
    monotonic), so the largest ``f`` and the smallest ``norm`` bound it."""
    term: npt.NDArray[np.float64] = idf * ((freq * (BM25_K1 + 1.0)) / (freq + norm))
    return term
