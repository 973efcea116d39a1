"""Layering: the pure core imports nothing from storage, services or the surfaces."""

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
