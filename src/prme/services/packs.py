"""Pack administration that needs no open pack: whether one exists, and upgrading a
PostgreSQL schema (the CLI's ``init`` and ``db upgrade``), through the storage registry."""

from __future__ import annotations

from pathlib import Path

from prme.storage import registry


def pack_exists(path: Path) -> bool:
    """Whether an embedded pack exists in the directory ``path``."""
    return registry.pack_exists(path)


def upgrade_postgres(url: str, *, schema: str | None = None) -> list[int]:
    """Apply pending PostgreSQL migrations; the versions applied (none: already current)."""
    return registry.upgrade_postgres(url, schema=schema)
