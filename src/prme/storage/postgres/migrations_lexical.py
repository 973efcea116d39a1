"""Migration 8, the owner-keyed lexical index: an owner's lexical search reads the owner's own
index entries only, so its cost never depends on what other owners store.

Before it, lexical search asked the pack-wide GIN index on ``memories.tsv`` for every row
holding a query lexeme, whoever owned it, and only then kept the owner's rows: an owner's query
took longer the more matching documents other owners had (a timing channel between owners).
``btree_gin`` (a composite ``(user_id, tsv)`` GIN index) is not always installable, so the
owner goes into the index keys instead:

- ``memories.owner_lexeme_keys bigint[]``, a stored generated column: one key per distinct
  lexeme of the row's ``tsv``, the first 8 bytes (big-endian, signed) of SHA-256 over
  SHA-256(``user_id``) followed by the lexeme, both UTF-8. Generated from ``user_id`` and
  ``tsv`` (itself set from the content by the ``prme_index_content`` trigger, which runs
  first), PostgreSQL keeps it right on every insert, COPY and update, including an update of
  ``user_id``, and computes it for the existing rows when the column is added (a table
  rewrite, no per-row triggers).
- ``memories_owner_lexeme_keys``, a GIN index on it, replacing ``memories_tsv``. Its pending
  list is off (``fastupdate = off``): a pending list is read whole by every search, so recent
  writes by any owner would again cost every owner's queries.
- ``prme_owner_lexical_hits(owner, lexemes)``, replacing ``prme_lexical_hits(tsquery)`` (so a
  process of an earlier version cannot search a pack upgraded past it): the rows whose keys
  meet the owner's keys for ``lexemes``. Two keys may collide (two owners, or two lexemes); a
  row found only through a collision belongs to another owner (the search's ``user_id``
  filter drops it) or holds none of the query's lexemes (the search scores the row's ``tsv``
  lexemes: nothing to score, no hit), so a collision costs time, never a different result.
"""

from __future__ import annotations

from typing import Any

import psycopg

Conn = psycopg.Connection[Any]


def owner_lexical_index(conn: Conn, s: str, v: str) -> None:
    """Migration 8 (see the module docstring); rewrites ``memories`` once."""
    del v
    statements = [
        # IMMUTABLE although convert_to() is only STABLE: converting to UTF-8 gives the same
        # bytes for the same text in any database encoding.
        f"""CREATE FUNCTION {s}.prme_owner_lexeme_keys(owner text, lexemes text[])
            RETURNS bigint[] LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT ARRAY(SELECT ('x' || pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(
                    o.digest || pg_catalog.convert_to(l.lexeme, 'UTF8')), 1, 8), 'hex'))
                    ::pg_catalog.bit(64)::bigint
                FROM (SELECT pg_catalog.sha256(pg_catalog.convert_to(owner, 'UTF8')) AS digest) o,
                    pg_catalog.unnest(lexemes) AS l(lexeme)) $$""",
        f"""ALTER TABLE {s}.memories ADD COLUMN owner_lexeme_keys bigint[] NOT NULL
            GENERATED ALWAYS AS ({s}.prme_owner_lexeme_keys(
                user_id, pg_catalog.tsvector_to_array(tsv))) STORED""",
        f"""CREATE INDEX memories_owner_lexeme_keys ON {s}.memories
            USING gin(owner_lexeme_keys) WITH (fastupdate = off)""",
        f"DROP FUNCTION {s}.prme_lexical_hits(tsquery)",
        f"DROP INDEX {s}.memories_tsv",
        # The GIN index goes first (as FTS5's MATCH does; the function-level setting keeps a
        # stale row estimate from choosing a seq scan); the caller filters the owner.
        f"""CREATE FUNCTION {s}.prme_owner_lexical_hits(owner text, lexemes text[])
            RETURNS TABLE(rowid bigint, user_id text, scope text, tsv tsvector, doc_len integer)
            LANGUAGE sql STABLE SET enable_seqscan = off AS $$
            SELECT m.rowid, m.user_id, m.scope, m.tsv, m.doc_len FROM {s}.memories m
            WHERE m.owner_lexeme_keys OPERATOR(pg_catalog.&&)
                {s}.prme_owner_lexeme_keys(owner, lexemes) $$""",
    ]
    for statement in statements:
        conn.execute(statement)


def lexical_search_in_process(conn: Conn, s: str, v: str) -> None:
    """Migration 9: lexical search runs in process over each owner's own postings, read from
    the rows' ``tsv`` and kept with the owner index (:mod:`prme.storage.postgres.lexical`), so
    what served it in the server is dropped, and the writes no longer keep it: the owner-keyed
    GIN index and its key column and functions (migration 8), and the per-owner BM25 statistics
    (``owner_lexemes``, ``owner_lexical_stats``, migration 3; the owner index counts the
    owner's rows and tokens, the postings each lexeme's documents). ``tsv`` and ``doc_len``
    stay: they are what the postings are read from."""
    del v
    statements = [
        f"DROP FUNCTION {s}.prme_owner_lexical_hits(text, text[])",
        f"DROP INDEX {s}.memories_owner_lexeme_keys",
        f"ALTER TABLE {s}.memories DROP COLUMN owner_lexeme_keys",
        f"DROP FUNCTION {s}.prme_owner_lexeme_keys(text, text[])",
        f"DROP TABLE {s}.owner_lexemes",
        f"DROP TABLE {s}.owner_lexical_stats",
    ]
    for statement in statements:
        conn.execute(statement)
