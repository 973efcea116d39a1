"""The embedded default backend: one SQLite database (WAL) inside the pack directory, with its
own schema (``schema.sql``); :mod:`prme.storage.registry` opens it by the name ``sqlite``."""

from __future__ import annotations

from prme.storage.base import Tracer
from prme.storage.owner_indexes import SAVE_INDEX_ROWS
from prme.storage.sqlite.connection import LOCK_RETRY_SECONDS
from prme.storage.sqlite.indexes import INDEX_DIR
from prme.storage.sqlite.store import DB_FILE, SQLiteStore

__all__ = ["DB_FILE", "INDEX_DIR", "LOCK_RETRY_SECONDS", "SAVE_INDEX_ROWS", "SQLiteStore", "Tracer"]
