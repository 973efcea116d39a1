"""Storage backends by name: ``sqlite`` (the embedded pack, :mod:`prme.storage.sqlite`) and
``postgres`` (scale-out, :mod:`prme.storage.postgres`). Each backend is a package imported only
when its name is configured; nothing else in ``prme.storage`` imports one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prme.errors import InvalidInputError
from prme.storage.base import Store, Tracer


@dataclass(frozen=True)
class StoreOptions:
    """What a backend may need: the pack directory (sqlite) or the server URL (postgres)."""

    path: Path | None = None
    url: str | None = None
    frozen: bool = False
    tracer: Tracer | None = None
    busy_timeout_ms: int = 10000
    create: bool = True  # False: a missing pack is a PackNotFoundError, never created
    index_cache: Path | None = None  # postgres: the host's saved-index directory


def _sqlite(options: StoreOptions) -> Store:
    if options.url:
        raise InvalidInputError(
            "storage.postgres_url", "the sqlite backend opens a pack directory, not a URL"
        )
    from prme.storage.sqlite import SQLiteStore

    return SQLiteStore(
        options.path or Path("."),
        frozen=options.frozen,
        busy_timeout_ms=options.busy_timeout_ms,
        tracer=options.tracer,
        create=options.create,
    )


def _postgres(options: StoreOptions) -> Store:
    if not options.url:
        raise InvalidInputError("storage.postgres_url", "the postgres backend needs a URL")
    try:
        from prme.storage.postgres import PostgresStore
    except ImportError as exc:  # the optional extra is not installed
        raise InvalidInputError(
            "storage.backend",
            f"the postgres backend needs psycopg; install prme[postgres] ({exc.name} missing)",
        ) from None
    return PostgresStore(
        options.url,
        frozen=options.frozen,
        tracer=options.tracer,
        create=options.create,
        index_cache=options.index_cache,
    )


BACKENDS: dict[str, Callable[[StoreOptions], Store]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


def backend_name(configured: str | None, url: str | None) -> str:
    """The backend to open: the configured name (``storage.backend``), else ``postgres`` when
    a URL is given, else ``sqlite``."""
    if configured is not None:
        return configured
    return "postgres" if url else "sqlite"


def make_store(name: str, options: StoreOptions) -> Store:
    """Open the store of backend ``name``.

    Raises:
        InvalidInputError: an unknown backend (the message lists every valid name), a
            missing URL (postgres) or a URL given (sqlite), or the postgres extra not installed.
    """
    factory = BACKENDS.get(name)
    if factory is None:
        valid = ", ".join(sorted(BACKENDS))
        raise InvalidInputError(
            "storage.backend", f"unknown storage backend {name!r}; valid: {valid}", name
        )
    return factory(options)


def pack_exists(path: Path) -> bool:
    """Whether an embedded (sqlite) pack exists in the directory ``path``."""
    from prme.storage.sqlite import DB_FILE

    return (path / DB_FILE).exists()


def upgrade_postgres(url: str, *, schema: str | None = None) -> list[int]:
    """Apply the PostgreSQL backend's pending migrations to ``schema`` (default: the URL's
    search_path option, else ``prme``); the versions applied, in order."""
    try:
        from prme.storage.postgres.migrations import upgrade
    except ImportError as exc:  # the optional extra is not installed
        raise InvalidInputError(
            "storage.backend",
            f"the postgres backend needs psycopg; install prme[postgres] ({exc.name} missing)",
        ) from None
    return upgrade(url, schema=schema)
