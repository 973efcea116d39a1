"""Layering: package-level import rules, and a pure core that reads no clock, env or global RNG.

The rules are a whitelist per unit (a subpackage of prme, or a top-level module): surfaces →
client → services → gates / storage → models → foundation. Each current exception is listed
with the issue item that removes it; an exception that no longer occurs fails too, so the list
only ever shrinks."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import prme

SRC = Path(prme.__file__).parent
PURE = ["canonical.py", "models", "retrieval/scoring.py", "learning"]
FORBIDDEN = ("prme.storage", "prme.services", "prme.http", "prme.mcp", "prme.cli", "prme.engine")


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_path(name: str) -> Path | None:
    base = SRC.parent.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports_of(path: Path) -> set[str]:
    """Every prme module ``path`` imports (``from x import y`` counts y when it is a module)."""
    tree = ast.parse(path.read_text("utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent / "x")
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            for alias in node.names:
                if module_path(f"{target}.{alias.name}") is not None:
                    found.add(f"{target}.{alias.name}")
    return {name for name in found if name == "prme" or name.startswith("prme.")}


# Foundation: small modules every layer may use (errors, limits, canonical JSON, input checks,
# word runs, new ids).
FOUNDATION = frozenset(
    {"errors", "limits", "bulk", "timeutil", "canonical", "glossary", "validation", "text", "ids"}
)
MAY_IMPORT: dict[str, frozenset[str]] = {
    **dict.fromkeys(FOUNDATION, FOUNDATION),
    "auth": FOUNDATION,
    "models": FOUNDATION,
    "config": FOUNDATION | {"models"},
    "embed": FOUNDATION | {"models"},
    # The owner index (columns, entity graph, vector segments, BM25): storage builds and saves
    # it, retrieval searches it.
    "index": FOUNDATION | {"models"},
    "retrieval": FOUNDATION | {"models", "index"},
    "learning": FOUNDATION | {"models", "retrieval"},
    "storage": FOUNDATION | {"models", "index"},
    # The engine declares the feature identity, the vector index settings included.
    "engine": FOUNDATION | {"models", "config", "embed", "index", "retrieval", "storage"},
    "services": FOUNDATION
    | {"models", "config", "embed", "index", "retrieval", "learning", "storage", "engine"},
    "client": FOUNDATION | {"models", "config", "embed", "engine", "services", "storage"},
    # The async client: the same methods as coroutines (annotations name the same models).
    "async_client": FOUNDATION | {"models", "config", "engine", "client", "services", "storage"},
    # A server stopped with SIGTERM unwinds and closes its pack (the standard library only).
    "stopping": frozenset(),
    # The surfaces call the client (the CLI also reads pack settings through a service).
    "http": FOUNDATION | {"auth", "models", "config", "client", "stopping"},
    "mcp": FOUNDATION | {"auth", "models", "config", "client", "stopping"},
    "adapters": FOUNDATION | {"models", "client"},
    # The demo package: the workflow, its workloads, the gate simulation and the HTML report.
    "demo": FOUNDATION | {"models", "config", "embed", "client"},
    "cli": FOUNDATION
    | {"auth", "models", "config", "embed", "client", "services", "http", "mcp", "demo"},
    "__main__": frozenset({"cli"}),
    "prme": FOUNDATION | {"models", "config", "client", "async_client", "services", "learning"},
}
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def unit_of(module: str) -> str:
    """The unit a prme module belongs to: its subpackage or top-level module (``prme`` itself
    for the package's ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def unit_imports() -> dict[tuple[str, str], list[str]]:
    """Every import between two different units, with the files that make it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        source = unit_of(module_name(path))
        for name in sorted(imports_of(path)):
            target = unit_of(name)
            if target != source:
                edges.setdefault((source, target), []).append(f"{path.relative_to(SRC)}: {name}")
    return edges


def test_every_unit_has_import_rules() -> None:
    units = {unit_of(module_name(path)) for path in SRC.rglob("*.py")}
    assert units == set(MAY_IMPORT)
    for unit, allowed in MAY_IMPORT.items():
        assert allowed <= set(MAY_IMPORT), unit


def test_package_imports_follow_the_layers() -> None:
    edges = unit_imports()
    assert len(edges) >= 60
    violations = [
        where
        for (source, target), files in sorted(edges.items())
        if target not in MAY_IMPORT[source] and (source, target) not in KNOWN_EXCEPTIONS
        for where in files
    ]
    assert violations == []
    # A removed violation must leave the list: exceptions are never kept "just in case".
    assert sorted(set(KNOWN_EXCEPTIONS) - set(edges)) == []


def test_import_rules_state_the_layering() -> None:
    """The whitelist itself keeps the layering's promises (so a loosened entry fails here)."""
    surfaces = {"http", "mcp", "cli", "adapters", "__main__"}
    outer = surfaces | {
        "client",
        "async_client",
        "services",
        "engine",
        "storage",
        "embed",
        "config",
    }
    assert MAY_IMPORT["models"] & outer == set()
    for core in ("retrieval", "learning"):
        assert MAY_IMPORT[core] & outer == set(), core
    assert "learning" not in MAY_IMPORT["retrieval"]
    assert MAY_IMPORT["storage"] & (outer | {"retrieval", "learning"}) == set()
    assert MAY_IMPORT["services"] & (surfaces | {"client"}) == set()
    assert MAY_IMPORT["client"] & surfaces == set()
    for surface in ("http", "mcp", "adapters"):
        assert MAY_IMPORT[surface] & {"services", "storage", "engine"} == set(), surface
    assert {unit for unit, allowed in MAY_IMPORT.items() if "demo" in allowed} == {"cli"}


def pure_files() -> list[Path]:
    files: list[Path] = []
    for entry in PURE:
        path = SRC / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files


def test_pure_core_imports_no_outer_layer() -> None:
    files = pure_files()
    assert len(files) >= 10
    violations = [
        f"{path.relative_to(SRC)} imports {name}"
        for path in files
        for name in sorted(imports_of(path))
        if name.startswith(FORBIDDEN)
    ]
    assert violations == []


def test_pure_core_closure_stays_pure() -> None:
    """Follow prme imports transitively from the pure modules: no outer layer is reachable."""
    seen: set[str] = set()
    todo = [module_name(p) for p in pure_files()]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_path(name)
        if path is not None:
            todo.extend(imports_of(path) - seen)
    assert sorted(n for n in seen if n.startswith(FORBIDDEN)) == []


def test_pure_core_reads_no_clock_env_or_global_rng() -> None:
    banned_calls = {"datetime.now", "datetime.utcnow", "time.time", "os.getenv", "os.environ"}
    banned_random = {"random.random", "random.seed", "np.random.seed", "numpy.random.seed"}
    offenders = []
    for path in pure_files():
        text = path.read_text("utf-8")
        for token in banned_calls | banned_random:
            if token + "(" in text or (token == "os.environ" and token in text):
                offenders.append(f"{path.relative_to(SRC)}: {token}")
    assert offenders == []


def test_every_public_name_is_importable() -> None:
    assert prme.__all__ == sorted(prme.__all__)
    assert len(set(prme.__all__)) == len(prme.__all__)
    module = importlib.import_module("prme")
    for name in prme.__all__:
        assert getattr(module, name, None) is not None, name
    namespace: dict[str, object] = {}
    exec("from prme import *", namespace)
    assert set(prme.__all__) <= set(namespace)


STORAGE_BACKENDS = ("prme.storage.sqlite", "prme.storage.postgres")
# The neutral storage modules that may import a backend package: the registry opens one by its
# configured name (and checks for a pack, upgrades a schema, for the CLI).
OPENS_BACKENDS = {"prme.storage.registry"}


def _backend_of(module: str) -> str | None:
    return next((b for b in STORAGE_BACKENDS if module == b or module.startswith(f"{b}.")), None)


def test_each_storage_backend_is_a_package_of_its_own() -> None:
    """No backend imports another backend, the neutral storage modules import none (but the
    registry), and no storage module imports another module's private names."""
    crossings = []
    private = []
    for path in sorted((SRC / "storage").rglob("*.py")):
        name = module_name(path)
        own = _backend_of(name)
        for imported in sorted(imports_of(path)):
            other = _backend_of(imported)
            if other is not None and other != own and name not in OPENS_BACKENDS:
                crossings.append(f"{name} imports {imported}")
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                private += [
                    f"{name} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                ]
    assert crossings == []
    assert private == []
    assert all(
        (SRC / b.removeprefix("prme.").replace(".", "/") / "__init__.py").is_file()
        for b in STORAGE_BACKENDS
    )


def test_no_test_module_imports_another() -> None:
    """Shared test code lives in ``tests/support/`` (or a conftest), never in a test module that
    others import: a test module is run, not used."""
    tests = Path(__file__).resolve().parent
    names = {p.stem for p in tests.rglob("test_*.py")}
    crossings = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module]
            else:
                continue
            crossings += [
                f"{path.relative_to(tests)} imports {t}" for t in targets if t.split(".")[0] in names
            ]
    assert crossings == []
