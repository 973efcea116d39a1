"""The retrieval stages read only their inputs: no storage, services, engine or surface is
reachable from them, and they read no clock or environment."""

from __future__ import annotations

import ast
from pathlib import Path

import prme

SRC = Path(prme.__file__).parent
STAGES = (
    "validate", "candidates", "ranking", "selection", "packing", "receipt_builder", "replay",
    "scan", "settings",
)  # fmt: skip
OUTER = (
    "prme.storage", "prme.services", "prme.engine", "prme.config", "prme.http", "prme.mcp",
    "prme.cli",
)  # fmt: skip


def prme_imports(module: str) -> set[str]:
    """The prme modules ``module`` imports, anywhere in its file (``from a import b`` counts
    ``a.b`` when that is a module)."""
    base = SRC.parent.joinpath(*module.split("."))
    path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            for alias in node.names:
                sub = SRC.parent.joinpath(*f"{node.module}.{alias.name}".split("."))
                if sub.with_suffix(".py").is_file():
                    found.add(f"{node.module}.{alias.name}")
    return {name for name in found if name.startswith("prme.")}


def test_no_outer_layer_is_reachable_from_a_stage() -> None:
    seen: set[str] = set()
    todo = [f"prme.retrieval.{stage}" for stage in STAGES]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(prme_imports(name) - seen)
    assert {f"prme.retrieval.{stage}" for stage in STAGES} <= seen
    assert sorted(n for n in seen if n.startswith(OUTER)) == []


def test_stages_read_no_clock_or_environment() -> None:
    banned = ("datetime.now(", "time.time(", "os.environ", "os.getenv(", "random.")
    offenders = [
        f"{stage}: {token}"
        for stage in STAGES
        for token in banned
        if token in (SRC / "retrieval" / f"{stage}.py").read_text("utf-8")
    ]
    assert offenders == []
