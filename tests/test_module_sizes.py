"""Issue 20's size rule on the surfaces: no module over about 500 lines and no function over about
80 in the CLI, MCP, HTTP, client and demo packages (see docs/architecture.md), so a change to one
command group, tool group or client concern stays in one small module; and no module over about
500 lines in the storage package, whose backends keep connections, memory rows and the operations
log in modules of their own."""

from __future__ import annotations

import ast
from pathlib import Path

import prme

SRC = Path(prme.__file__).parent
SURFACES = ("cli", "mcp", "http", "client", "demo")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def surface_modules() -> list[Path]:
    """Every module of the surface units, whether a unit is a package or a single module."""
    found: list[Path] = []
    for unit in SURFACES:
        package, module = SRC / unit, SRC / f"{unit}.py"
        found += sorted(package.rglob("*.py")) if package.is_dir() else [module]
    return found


def test_surface_modules_stay_under_the_size_limit() -> None:
    modules = surface_modules()
    assert len(modules) >= 15
    sizes = {str(p.relative_to(SRC)): len(p.read_text("utf-8").splitlines()) for p in modules}
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_storage_modules_stay_under_the_size_limit() -> None:
    modules = sorted((SRC / "storage").rglob("*.py"))
    names = {str(p.relative_to(SRC)) for p in modules}
    # Each backend's store, memory rows and operations log are modules of their own.
    for backend in ("sqlite", "postgres"):
        assert {f"storage/{backend}/{m}.py" for m in ("store", "memory_rows", "oplog")} <= names
    sizes = {str(p.relative_to(SRC)): len(p.read_text("utf-8").splitlines()) for p in modules}
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_surface_functions_stay_under_the_size_limit() -> None:
    long: list[str] = []
    for path in surface_modules():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({lines})")
    assert long == []


def test_the_generated_async_client_says_why_it_is_long() -> None:
    """The one surface module over the limit is written by .ci/gen_async_client.py, one
    coroutine per MemoryClient method; its docstring says so."""
    path = SRC / "async_client.py"
    docstring = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
    if len(path.read_text("utf-8").splitlines()) > MAX_MODULE_LINES:
        assert "gen_async_client.py" in docstring and "not split by hand" in docstring


def test_no_function_over_the_limit_without_saying_why() -> None:
    """Anywhere in prme, a function over about 80 lines says in its docstring why it is
    longer ("Over 80 lines because ...")."""
    long: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                reason = "Over 80 lines because" in (ast.get_docstring(node) or "")
                if lines > MAX_FUNCTION_LINES and not reason:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({lines})")
    assert long == []


def test_no_module_over_the_limit_but_the_generated_one() -> None:
    sizes = {
        str(p.relative_to(SRC)): len(p.read_text("utf-8").splitlines())
        for p in sorted(SRC.rglob("*.py"))
    }
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} in (
        {},
        {"async_client.py": sizes["async_client.py"]},
    )
