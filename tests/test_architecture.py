"""The layout rules of docs/architecture.md, checked on the source (issue 12).

Module-level imports between radspatial modules form no circle (a registry loads its built-in
modules lazily, inside a function); nothing below ``cli/`` imports the command line; modules
and functions stay small enough to read in one go.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "radspatial"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imported(name: str, path: Path, *, top_level_only: bool) -> set[str]:
    """radspatial modules that ``path`` imports (at module level, or anywhere)."""
    tree = ast.parse(path.read_text())
    nodes: list[ast.AST] = []
    for node in tree.body if top_level_only else [tree]:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue  # annotations only
        if top_level_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if top_level_only and isinstance(node, ast.ClassDef):
            nodes.extend(n for n in node.body if not isinstance(n, ast.FunctionDef))
            continue
        nodes.extend(ast.walk(node))
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [base])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in MODULES and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            if comp:
                cycles.append(sorted([v, *comp]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_module_level_imports_form_no_circle():
    graph = {m: _imported(m, p, top_level_only=True) for m, p in MODULES.items()}
    assert _cycles(graph) == []


def test_the_circle_finder_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_nothing_outside_the_cli_imports_it():
    offenders = {
        m: sorted(d for d in deps if d.startswith("radspatial.cli"))
        for m, p in MODULES.items()
        if not m.startswith("radspatial.cli")
        for deps in [_imported(m, p, top_level_only=False)]
        if any(d.startswith("radspatial.cli") for d in deps)
    }
    assert offenders == {}


def test_modules_stay_under_the_size_limit():
    long = {
        str(p.relative_to(PKG)): n
        for p in MODULES.values()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_functions_stay_under_the_size_limit():
    long = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PKG)}:{node.name}"] = n
    assert long == {}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_has_a_docstring(module):
    tree = ast.parse(MODULES[module].read_text())
    assert ast.get_docstring(tree), f"{MODULES[module]} says nothing about what it is for"


def test_the_command_line_starts_without_numpy():
    """``radspatial --help`` and argument errors stay fast: heavy imports happen in handlers."""
    import subprocess
    import sys

    code = "import sys, radspatial.cli; print(sorted({'numpy', 'torch'} & set(sys.modules)))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"
