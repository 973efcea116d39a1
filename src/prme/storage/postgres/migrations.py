"""Versioned, idempotent PostgreSQL schema migrations, recorded in ``schema_migrations``.

Each migration runs once per pack schema, in one transaction, under a database-wide advisory
lock (so several API processes may start at the same time). ``upgrade(url)`` applies what is
pending and returns the versions it applied (empty when the schema is current); ``pending``
only reads. ``prme db upgrade`` calls :func:`upgrade`.

Lexical analysis (``prme_english``) mirrors the SQLite pack's FTS5 ``unicode61
remove_diacritics 2`` + ``porter`` tokenizer as closely as PostgreSQL allows without extra
extensions: NFD and combining marks removed, every run of non-alphanumerics is a separator,
lower-cased, stemmed with the Snowball English stemmer (Porter2), **no** stop words (FTS5 keeps
them too). Document length is the token count, as FTS5 counts it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from prme.errors import InvalidInputError, StorageUnavailableError
from prme.storage.base import new_pack_meta
from prme.storage.postgres.migrations_lexical import (
    lexical_search_in_process,
    owner_lexical_index,
)

DEFAULT_SCHEMA = "prme"
STORE_SCHEMA_VERSION = "1"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_MIGRATION_LOCK = "prme:migrations"

Conn = psycopg.Connection[Any]


def describe(url: str, schema: str) -> str:
    """``postgres host=… port=… dbname=… schema=…`` for messages (credentials left out)."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return f"postgres (unparseable URL) schema={schema}"
    parts = [f"{k}={info[k]}" for k in ("host", "port", "dbname") if info.get(k)]
    return " ".join(["postgres", *parts, f"schema={schema}"])


def connect(url: str, schema: str) -> Conn:
    """An autocommit connection, or :class:`StorageUnavailableError` naming the storage."""
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        detail = (str(exc).strip().splitlines() or [repr(exc)])[0]
        raise StorageUnavailableError(describe(url, schema), detail) from exc


_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*([A-Za-z0-9_]+)")


def pack_schema(url: str, schema: str | None = None) -> str:
    """The pack schema: ``schema`` if given, else the first ``search_path`` entry in the URL's
    ``options`` (``?options=-csearch_path%3Dteam_a``), else ``prme``."""
    if schema is None:
        try:
            options = conninfo_to_dict(url).get("options")
        except psycopg.ProgrammingError:
            raise InvalidInputError("storage.postgres_url", "not a PostgreSQL URL") from None
        found = _SEARCH_PATH.search(str(options or ""))
        schema = found.group(1) if found else DEFAULT_SCHEMA
    return check_schema(schema)


def check_schema(schema: str) -> str:
    """A pack schema name: lower-case letters, digits and ``_`` (it is put into SQL verbatim)."""
    if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
        raise InvalidInputError(
            "schema", "must match [a-z_][a-z0-9_]* (at most 63 characters)", schema
        )
    return schema


def lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key: the first 8 bytes of SHA-256 over the parts."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def vector_schema(conn: Conn) -> str | None:
    """The schema holding the pgvector extension, or None when it is not installed."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = 'vector'"
    ).fetchone()
    return None if row is None else str(row[0])


def extension_schema(conn: Conn, pack: str) -> str:
    """Where to create pgvector: ``public`` when it exists (the extension is database-wide and
    other packs share it), else the pack's own schema. Never the session's current schema: a
    URL's ``search_path`` may name a schema that does not exist yet (SQLSTATE 3F000)."""
    row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'public'").fetchone()
    return "public" if row is not None else pack


def _v1(conn: Conn, s: str, v: str) -> None:
    """The initial schema: the same tables as the SQLite pack, plus BM25 statistics.

    Over 80 lines because it is the schema's DDL, one statement per table and index."""
    statements = [
        f"""CREATE TABLE {s}.meta (
            key text COLLATE "C" PRIMARY KEY,
            value text NOT NULL)""",
        f"""CREATE TEXT SEARCH DICTIONARY {s}.prme_english_stem
            (TEMPLATE = pg_catalog.snowball, Language = english)""",
        f"CREATE TEXT SEARCH CONFIGURATION {s}.prme_english (COPY = pg_catalog.english)",
        f"""ALTER TEXT SEARCH CONFIGURATION {s}.prme_english
            ALTER MAPPING FOR asciiword, word, asciihword, hword, hword_asciipart, hword_part
            WITH {s}.prme_english_stem""",
        f"""CREATE FUNCTION {s}.prme_lexical_text(content text) RETURNS text
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT pg_catalog.regexp_replace(
                pg_catalog.regexp_replace(pg_catalog.normalize(content, 'NFD'),
                    '[' || pg_catalog.chr(768) || '-' || pg_catalog.chr(879) || ']', '', 'g'),
                '[^[:alnum:]]+', ' ', 'g') $$""",
        f"""CREATE TABLE {s}.memories (
            rowid bigint PRIMARY KEY,
            id text COLLATE "C" NOT NULL UNIQUE,
            user_id text COLLATE "C" NOT NULL,
            scope text COLLATE "C" NOT NULL,
            node_type text NOT NULL,
            content text NOT NULL,
            content_sha256 text NOT NULL,
            metadata text,
            condition_state text,
            session_id text,
            role text NOT NULL,
            created_at bigint NOT NULL,
            updated_at bigint NOT NULL,
            event_time bigint,
            valid_from bigint NOT NULL,
            valid_to bigint,
            confidence double precision NOT NULL,
            salience double precision NOT NULL,
            confidence_base double precision NOT NULL,
            salience_base double precision NOT NULL,
            epistemic_type text NOT NULL,
            source_type text NOT NULL,
            lifecycle_state text NOT NULL,
            decay_profile text NOT NULL,
            last_reinforced_at bigint NOT NULL,
            reinforcement_boost double precision NOT NULL,
            pinned boolean NOT NULL,
            evidence_refs text NOT NULL,
            ttl_days integer,
            tsv tsvector NOT NULL,
            doc_len integer NOT NULL)""",
        # The lexical index of a row (and its token count, FTS5's document length) is
        # derived from its content on insert, once.
        f"""CREATE FUNCTION {s}.prme_index_content() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                NEW.tsv := pg_catalog.to_tsvector('{s}.prme_english'::regconfig,
                    {s}.prme_lexical_text(NEW.content));
                NEW.doc_len := (SELECT COALESCE(SUM(pg_catalog.cardinality(u.positions)), 0)
                    FROM pg_catalog.unnest(NEW.tsv) AS u);
                RETURN NEW;
            END $$""",
        f"""CREATE TRIGGER memories_index_content BEFORE INSERT OR UPDATE OF content
            ON {s}.memories FOR EACH ROW EXECUTE FUNCTION {s}.prme_index_content()""",
        f"CREATE INDEX memories_owner ON {s}.memories(user_id, scope)",
        f"CREATE INDEX memories_owner_rowid ON {s}.memories(user_id, rowid)",
        f"CREATE INDEX memories_tsv ON {s}.memories USING gin(tsv)",
        # Lexical candidates always come from the GIN index first, as FTS5's MATCH does
        # (the function-level setting keeps a stale row estimate from choosing a seq scan).
        f"""CREATE FUNCTION {s}.prme_lexical_hits(query tsquery)
            RETURNS TABLE(rowid bigint, user_id text, scope text, tsv tsvector, doc_len integer)
            LANGUAGE sql STABLE SET enable_seqscan = off AS $$
            SELECT m.rowid, m.user_id, m.scope, m.tsv, m.doc_len FROM {s}.memories m
            WHERE m.tsv @@ query $$""",
        f"""CREATE TABLE {s}.vectors (
            rowid bigint PRIMARY KEY,
            vec {v}.vector NOT NULL)""",
        f"""CREATE TABLE {s}.entities (
            user_id text COLLATE "C" NOT NULL,
            name text COLLATE "C" NOT NULL,
            memory_rowid bigint NOT NULL,
            PRIMARY KEY (user_id, name, memory_rowid))""",
        f"CREATE INDEX entities_by_memory ON {s}.entities(memory_rowid)",
        f"""CREATE TABLE {s}.lexemes (
            lexeme text COLLATE "C" PRIMARY KEY,
            df bigint NOT NULL)""",
        f"""CREATE TABLE {s}.lexical_stats (
            id integer PRIMARY KEY CHECK (id = 1),
            n_docs bigint NOT NULL,
            n_tokens bigint NOT NULL)""",
        f"INSERT INTO {s}.lexical_stats VALUES (1, 0, 0)",
        f"""CREATE TABLE {s}.oplog (
            seq bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            op_id text COLLATE "C" NOT NULL UNIQUE,
            op_type text COLLATE "C" NOT NULL,
            user_id text COLLATE "C" NOT NULL,
            target_id text COLLATE "C",
            namespace text COLLATE "C",
            created_at bigint NOT NULL,
            payload text NOT NULL,
            checksum text NOT NULL)""",
        f"CREATE INDEX oplog_target ON {s}.oplog(op_type, user_id, target_id)",
        f"""CREATE INDEX oplog_namespace
            ON {s}.oplog(op_type, user_id, namespace, created_at, seq)""",
        f"""CREATE FUNCTION {s}.prme_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'operations log is append-only'; END $$""",
        f"""CREATE TRIGGER oplog_append_only BEFORE UPDATE OR DELETE ON {s}.oplog
            FOR EACH ROW EXECUTE FUNCTION {s}.prme_append_only()""",
        f"""CREATE TRIGGER oplog_no_truncate BEFORE TRUNCATE ON {s}.oplog
            FOR EACH STATEMENT EXECUTE FUNCTION {s}.prme_append_only()""",
    ]
    for statement in statements:
        conn.execute(statement)
    for key, value in new_pack_meta(STORE_SCHEMA_VERSION).items():
        conn.execute(f"INSERT INTO {s}.meta(key, value) VALUES (%s, %s)", (key, value))


def _v2(conn: Conn, s: str, v: str) -> None:
    """Receipt retention: the append-only trigger admits one deliberate path, deleting
    ``retrieval_receipt`` rows while the transaction sets ``prme.receipt_retention`` to ``on``
    (``PostgresStore.delete_ops``). Every other UPDATE, DELETE and TRUNCATE is still refused."""
    conn.execute(
        f"""CREATE OR REPLACE FUNCTION {s}.prme_append_only() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'DELETE' THEN
                    IF OLD.op_type = 'retrieval_receipt' AND pg_catalog.current_setting(
                            'prme.receipt_retention', true) = 'on' THEN
                        RETURN OLD;
                    END IF;
                END IF;
                RAISE EXCEPTION 'operations log is append-only';
            END $$"""
    )


def lexical_statistics_rebuild(prefix: str = "") -> tuple[str, ...]:
    """Statements that recompute every owner's BM25 statistics from the stored memories
    (``prefix`` is ``"schema."`` outside the pack's ``search_path``)."""
    p = prefix
    return (
        f"DELETE FROM {p}owner_lexemes",
        f"""INSERT INTO {p}owner_lexemes(user_id, lexeme, df)
            SELECT m.user_id, l.lexeme, COUNT(*) FROM {p}memories m,
            pg_catalog.unnest(pg_catalog.tsvector_to_array(m.tsv)) AS l(lexeme)
            GROUP BY m.user_id, l.lexeme""",
        f"DELETE FROM {p}owner_lexical_stats",
        f"""INSERT INTO {p}owner_lexical_stats(user_id, n_docs, n_tokens)
            SELECT user_id, COUNT(*), COALESCE(SUM(doc_len), 0) FROM {p}memories
            GROUP BY user_id""",
    )


def _v3(conn: Conn, s: str, v: str) -> None:
    """Per-owner BM25 statistics: an owner's lexical scores depend on the owner's memories only
    (the pack-wide ``lexemes`` and ``lexical_stats`` are replaced, and rebuilt per owner)."""
    del v
    statements = [
        f"""CREATE TABLE {s}.owner_lexemes (
            user_id text COLLATE "C" NOT NULL,
            lexeme text COLLATE "C" NOT NULL,
            df bigint NOT NULL,
            PRIMARY KEY (user_id, lexeme))""",
        f"""CREATE TABLE {s}.owner_lexical_stats (
            user_id text COLLATE "C" PRIMARY KEY,
            n_docs bigint NOT NULL,
            n_tokens bigint NOT NULL)""",
        *lexical_statistics_rebuild(f"{s}."),
        f"DROP TABLE {s}.lexemes",
        f"DROP TABLE {s}.lexical_stats",
    ]
    for statement in statements:
        conn.execute(statement)


def _v4(conn: Conn, s: str, v: str) -> None:
    """Per-owner content write sequences: an owner's receipts and frozen-pack check follow the
    owner's own content writes only (``meta.write_seq`` stays pack-wide)."""
    del v
    conn.execute(
        f"""CREATE TABLE {s}.owner_sequences (
            user_id text COLLATE "C" PRIMARY KEY,
            write_seq bigint NOT NULL)"""
    )


def _v5(conn: Conn, s: str, v: str) -> None:
    """Storage at scale. The kept pack digest (:mod:`prme.storage.digest`): the number of
    memories and the sum of their row hashes, in ``meta``, computed once here from every stored
    row and then updated by each content write, so reading the digest no longer re-reads the
    pack. Compact receipts (:mod:`prme.storage.payloads`): ``oplog.payload`` becomes ``bytea``
    (the existing texts as their UTF-8 bytes, unchanged) so receipts can be stored
    compressed."""
    from prme.storage.postgres.digest import recompute_digest_state, save_digest_state

    save_digest_state(conn, f"{s}.", recompute_digest_state(conn, f"{s}.", f"{v}."))
    conn.execute(
        f"ALTER TABLE {s}.oplog ALTER COLUMN payload TYPE bytea"
        " USING pg_catalog.convert_to(payload, 'UTF8')"
    )


def _v6(conn: Conn, s: str, v: str) -> None:
    """Saved owner indexes (:mod:`prme.storage.postgres.saved_index`): an owner's index files
    (the SQLite pack's ``index/`` format, :mod:`prme.index.index_file`, and its HNSW segment
    files) stored as parts, with a stamp row saying what they were made from, so a new process
    loads the owner's index instead of rebuilding it. A cache: it may always be deleted."""
    del v
    statements = [
        f"""CREATE TABLE {s}.owner_indexes (
            user_id text COLLATE "C" PRIMARY KEY,
            manifest text NOT NULL,
            attestation text NOT NULL)""",
        f"""CREATE TABLE {s}.owner_index_parts (
            user_id text COLLATE "C" NOT NULL,
            name text COLLATE "C" NOT NULL,
            part integer NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY (user_id, name, part))""",
        # float arrays and HNSW graphs barely compress: stored out of line, uncompressed
        f"ALTER TABLE {s}.owner_index_parts ALTER COLUMN data SET STORAGE EXTERNAL",
    ]
    for statement in statements:
        conn.execute(statement)


def _v7(conn: Conn, s: str, v: str) -> None:
    """Per-owner delete sequences: bumped by a trigger in the transaction of every delete and
    update (supersede) of the owner's memories, whichever version writes them, they key the
    owner's column index (in memory and in ``owner_indexes``), so another owner's deletes never
    make it stale. An owner without a row has deleted nothing since (0); indexes saved under the
    pack-wide sequence are rebuilt."""
    del v
    statements = [
        f"""CREATE TABLE {s}.owner_deletes (
            user_id text COLLATE "C" PRIMARY KEY,
            delete_seq bigint NOT NULL)""",
        f"""CREATE FUNCTION {s}.prme_owner_delete() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO {s}.owner_deletes(user_id, delete_seq) VALUES (OLD.user_id, 1)
                    ON CONFLICT (user_id)
                    DO UPDATE SET delete_seq = {s}.owner_deletes.delete_seq + 1;
                RETURN NULL;
            END $$""",
        f"""CREATE TRIGGER memories_owner_delete AFTER DELETE OR UPDATE ON {s}.memories
            FOR EACH ROW EXECUTE FUNCTION {s}.prme_owner_delete()""",
    ]
    for statement in statements:
        conn.execute(statement)


def _v10(conn: Conn, s: str, v: str) -> None:
    """Which memory each step of an owner's delete sequence changed, and whether it left the
    owner's rows (a delete, or an update that moved it to another owner) or was changed in
    place (a supersede), logged by the same trigger: an owner index re-reads the rows changed
    in place instead of being rebuilt. The steps before this migration are not logged (an
    index from before them is rebuilt, as before)."""
    del v
    statements = [
        f"""CREATE TABLE {s}.owner_changes (
            user_id text COLLATE "C" NOT NULL,
            delete_seq bigint NOT NULL,
            memory_rowid bigint NOT NULL,
            removed boolean NOT NULL,
            PRIMARY KEY (user_id, delete_seq))""",
        f"""CREATE OR REPLACE FUNCTION {s}.prme_owner_delete() RETURNS trigger
            LANGUAGE plpgsql AS $$
            DECLARE
                step bigint;
                removed boolean := true;
            BEGIN
                INSERT INTO {s}.owner_deletes(user_id, delete_seq) VALUES (OLD.user_id, 1)
                    ON CONFLICT (user_id)
                    DO UPDATE SET delete_seq = {s}.owner_deletes.delete_seq + 1
                    RETURNING delete_seq INTO step;
                IF TG_OP = 'UPDATE' THEN
                    removed := NEW.user_id IS DISTINCT FROM OLD.user_id;
                END IF;
                INSERT INTO {s}.owner_changes(user_id, delete_seq, memory_rowid, removed)
                    VALUES (OLD.user_id, step, OLD.rowid, removed);
                RETURN NULL;
            END $$""",
    ]
    for statement in statements:
        conn.execute(statement)


@dataclass(frozen=True)
class Migration:
    """One schema step: ``apply(conn, schema, vector_schema)`` inside the upgrade transaction."""

    version: int
    name: str
    apply: Callable[[Conn, str, str], None]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _v1),
    Migration(2, "receipt retention", _v2),
    Migration(3, "per-owner lexical statistics", _v3),
    Migration(4, "per-owner content write sequences", _v4),
    Migration(5, "kept pack digest and compact receipts", _v5),
    Migration(6, "saved owner indexes", _v6),
    Migration(7, "per-owner delete sequences", _v7),
    Migration(8, "owner-keyed lexical index", owner_lexical_index),
    Migration(9, "lexical search in process", lexical_search_in_process),
    Migration(10, "logged owner changes", _v10),
)
LATEST_VERSION = MIGRATIONS[-1].version


def applied_versions(conn: Conn, schema: str) -> list[int]:
    """Versions recorded in the schema's ``schema_migrations`` (empty for a new schema)."""
    exists = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'schema_migrations'",
        (check_schema(schema),),
    ).fetchone()
    if exists is None:
        return []
    rows = conn.execute(f"SELECT version FROM {schema}.schema_migrations ORDER BY version")
    return [int(r[0]) for r in rows]


def pending(url: str, *, schema: str | None = None) -> list[int]:
    """Versions :func:`upgrade` would apply (reads only)."""
    name = pack_schema(url, schema)
    with connect(url, name) as conn:
        done = set(applied_versions(conn, name))
    return [m.version for m in MIGRATIONS if m.version not in done]


def upgrade_connection(conn: Conn, schema: str) -> list[int]:
    """Apply pending migrations on an autocommit connection; returns the versions applied."""
    s = check_schema(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(_MIGRATION_LOCK),))
        done = set(applied_versions(conn, s))
        todo = [m for m in MIGRATIONS if m.version not in done]
        if not todo:
            return []
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        v = vector_schema(conn)
        if v is None:
            try:
                with conn.transaction():
                    conn.execute(
                        f"CREATE EXTENSION IF NOT EXISTS vector SCHEMA {extension_schema(conn, s)}"
                    )
            except psycopg.Error as exc:
                raise InvalidInputError(
                    "storage.postgres_url",
                    "the pgvector extension is not installed and could not be created "
                    f"({exc.sqlstate}); run CREATE EXTENSION vector as a superuser",
                ) from None
            v = vector_schema(conn) or "public"
        conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {s}.schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        for migration in todo:
            migration.apply(conn, s, v)
            conn.execute(
                f"INSERT INTO {s}.schema_migrations(version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
        return [m.version for m in todo]


def upgrade(url: str, *, schema: str | None = None) -> list[int]:
    """Bring the pack schema at ``url`` up to date (idempotent; safe to run concurrently).

    Args:
        url: a libpq connection URL (``postgresql://user@host/db``).
        schema: the pack's schema (one database can hold several packs); by default the
            URL's ``search_path`` option, else ``prme``.

    Returns:
        The versions applied now, in order (``[]`` when already current).

    Raises:
        InvalidInputError: a bad schema name, or pgvector missing and not installable.
        StorageUnavailableError: the server is unreachable.
    """
    name = pack_schema(url, schema)
    with connect(url, name) as conn:
        return upgrade_connection(conn, name)
