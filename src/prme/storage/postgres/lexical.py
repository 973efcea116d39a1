"""Lexical search on PostgreSQL: BM25 in SQL with FTS5's formula and the owner's own
statistics (``owner_lexemes``, ``owner_lexical_stats``), over the ``tsvector`` each memory row
keeps; see :mod:`prme.storage.postgres.store` for the known differences from FTS5."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from prme.index.bm25 import BM25_B, BM25_K1, bm25_idf
from prme.models.enums import Scope

Run = Callable[[str, Sequence[Any]], psycopg.Cursor[Any]]


def search(
    run: Run, user_id: str, scopes: Sequence[Scope] | None, terms: Sequence[str], k: int
) -> list[tuple[int, float]]:
    """``(rowid, score)`` of the owner's best ``k`` memories for ``terms`` (each one phrase),
    best first, then by rowid; ``run`` executes one statement on the store's connection."""
    # One row per (query term, lexeme): FTS5 scores each query phrase separately.
    found = run(
        "SELECT t.ord, l.lexeme, COALESCE(x.df, 0), s.n_docs, s.n_tokens"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS t(term, ord)"
        " CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector("
        "'prme_english'::regconfig, prme_lexical_text(t.term)))) AS l(lexeme)"
        " LEFT JOIN owner_lexemes x ON x.user_id = %s AND x.lexeme = l.lexeme"
        " CROSS JOIN (SELECT COALESCE(MAX(n_docs), 0) AS n_docs,"
        " COALESCE(MAX(n_tokens), 0) AS n_tokens FROM owner_lexical_stats"
        " WHERE user_id = %s) AS s ORDER BY t.ord, l.lexeme",
        (list(terms), user_id, user_id),
    ).fetchall()
    n_docs, n_tokens = (int(found[0][3]), int(found[0][4])) if found else (0, 0)
    if n_docs == 0 or n_tokens == 0:
        return []
    query = [
        (int(ord_), str(lexeme), bm25_idf(n_docs, int(df))) for ord_, lexeme, df, _, _ in found
    ]
    ords, lexemes, idfs = (list(column) for column in zip(*query, strict=True))
    scope_sql, scope_params = "", []
    if scopes is not None:
        scope_sql = " AND h.scope = ANY(%s)"
        scope_params = [sorted({s.value for s in scopes})]
    # The exact arithmetic of FTS5's bm25(), summed in query-term order. The owner's GIN
    # entries go first (as FTS5's MATCH does; :mod:`prme.storage.postgres.migrations_lexical`),
    # then the owner and scope filter.
    rows = run(
        "SELECT h.rowid, SUM(w.idf * ((u.tf * (%s + 1.0))"
        " / (u.tf + %s * (1.0 - %s + %s * h.doc_len / %s))) ORDER BY w.ord)"
        " AS score FROM prme_owner_lexical_hits(%s, %s::text[]) AS h CROSS JOIN LATERAL"
        " (SELECT lexeme, cardinality(positions)::float8 AS tf FROM unnest(h.tsv)) AS u"
        " JOIN unnest(%s::int[], %s::text[], %s::float8[]) AS w(ord, lexeme, idf)"
        " ON w.lexeme = u.lexeme"
        f" WHERE h.user_id = %s{scope_sql}"
        " GROUP BY h.rowid ORDER BY score DESC, h.rowid LIMIT %s",
        [
            BM25_K1,
            BM25_K1,
            BM25_B,
            BM25_B,
            n_tokens / n_docs,
            user_id,
            sorted(set(lexemes)),
            ords,
            lexemes,
            idfs,
            user_id,
            *scope_params,
            k,
        ],
    ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]
