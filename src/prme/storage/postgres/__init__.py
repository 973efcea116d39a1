"""The scale-out backend: PostgreSQL with pgvector (the ``postgres`` extra), with its own
numbered migrations (:mod:`prme.storage.postgres.migrations`); :mod:`prme.storage.registry`
opens it by the name ``postgres``."""

from __future__ import annotations

from prme.storage.postgres.store import PostgresStore, drop_schema
from prme.storage.postgres.vectors import PgVector

__all__ = ["PgVector", "PostgresStore", "drop_schema"]
