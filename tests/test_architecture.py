"""The layout rules of docs/architecture.md, checked on the source (issue 12).

Module-level imports between radspatial modules form no circle (a registry loads its built-in
modules lazily, inside a function); nothing below ``cli/`` imports the command line; modules
and functions stay small enough to read in one go (a soft size reported as a warning, a hard
size that fails).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "radspatial"
# sizes: a module or a function past the soft size is worth a look (reported as a warning, so
# nobody splits a module on length alone); past the hard size it fails (issue 51: caps by concept)
SOFT_MODULE_LINES, MAX_MODULE_LINES = 400, 600
SOFT_FUNCTION_LINES, MAX_FUNCTION_LINES = 60, 80


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _walk(node: ast.AST, *, top_level_only: bool, types: bool = False) -> Iterator[ast.AST]:
    """``node``'s descendants, leaving out ``if TYPE_CHECKING:`` blocks (annotations only)
    unless ``types`` and, with ``top_level_only``, function bodies (what runs only when
    called)."""
    for child in ast.iter_child_nodes(node):
        if _type_checking(child) and not types:
            continue
        if top_level_only and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        yield child
        yield from _walk(child, top_level_only=top_level_only, types=types)


def _imported(name: str, path: Path, *, top_level_only: bool, types: bool = False) -> set[str]:
    """radspatial modules that ``path`` imports (at module level, or anywhere: inside
    functions too). ``from pkg import sub`` is an import of ``pkg.sub`` (and of ``pkg`` only
    where ``sub`` is not a module)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in _walk(tree, top_level_only=top_level_only, types=types):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *filter(None, [base])])
            subs = {f"{base}.{alias.name}" for alias in node.names}
            found.update(subs)
            if not subs <= set(MODULES):
                found.add(base)
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


def test_no_import_circle_at_all():
    """Function-level imports included: a circle dodged by importing inside a function is
    still a circle (a registry importing its built-in modules by name is no import here)."""
    graph = {m: _imported(m, p, top_level_only=False) for m, p in MODULES.items()}
    assert _cycles(graph) == []


def test_no_import_circle_even_for_annotations():
    """``if TYPE_CHECKING:`` imports included: a module that needs another's type only to
    annotate still may not sit in a circle with it (a Protocol below both breaks one)."""
    graph = {m: _imported(m, p, top_level_only=False, types=True) for m, p in MODULES.items()}
    assert _cycles(graph) == []


def test_the_import_finder_sees_function_level_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import radspatial.agent.pipeline.agent\n"
        "def f():\n    from radspatial.questions import parsing\n"
    )
    assert _imported("x", path, top_level_only=True) == set()
    assert _imported("x", path, top_level_only=False) == {"radspatial.questions.parsing"}
    assert _imported("x", path, top_level_only=False, types=True) == {
        "radspatial.questions.parsing",
        "radspatial.agent.pipeline.agent",
    }


def _layer_offenders(package: str, banned: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules of ``package`` that import (function-level included) any of ``banned``."""
    offenders = {
        m: sorted(d for d in _imported(m, p, top_level_only=False) if d.startswith(banned))
        for m, p in MODULES.items()
        if m.startswith(package)
    }
    return {m: d for m, d in offenders.items() if d}


def test_the_kernel_imports_nothing_above_it():
    """``questions/`` is below the agent, the evaluator and grading."""
    above = ("radspatial.agent", "radspatial.eval", "radspatial.grading", "radspatial.cli")
    assert _layer_offenders("radspatial.questions", above) == {}


def test_the_runtime_agent_imports_no_training_phantoms_or_generator():
    """``agent/`` (what answers questions) runs without the training package, the phantoms
    and the benchmark generator; training code lives in ``training/`` (issue 22)."""
    banned = ("radspatial.training", "radspatial.phantoms", "radspatial.bench")
    assert _layer_offenders("radspatial.agent", banned) == {}


def test_the_networks_sit_below_the_agent_and_training():
    """``nets/`` (the U-Net, its config and loading) is imported by the agent's localizers and
    by ``training/``; it imports neither, so training reaches the network it trains downward
    (issue 51)."""
    assert {"radspatial.nets.unet", "radspatial.nets.unet_config"} <= set(MODULES)
    banned = ("radspatial.agent", "radspatial.training")
    assert _layer_offenders("radspatial.nets", banned) == {}


def test_the_agent_is_packages_that_show_its_pipeline():
    """``agent/``: ``pipeline/`` (parse, locate, check, verify, trace), one package per
    localizer under ``localizers/``, ``server/``; the pipeline never imports a server (issue
    51)."""
    agent = {m.split(".")[2] for m in MODULES if m.startswith("radspatial.agent.")}
    assert agent == {"job", "localizers", "overlay", "pipeline", "server"}
    localizers = {m.split(".")[3] for m in MODULES if m.startswith("radspatial.agent.localizers.")}
    assert localizers == {"markers", "mask", "organs", "totalsegmentator", "unet"}
    assert _layer_offenders("radspatial.agent.pipeline", ("radspatial.agent.server",)) == {}


def test_the_report_sits_above_the_evaluator():
    """``report/`` reads what runs wrote; the pipeline below it (eval, grading, models, the
    generator, the agent, the kernel, core) never imports it."""
    below = ("core", "questions", "imaging", "bench", "formats", "eval", "grading", "models")
    below += ("agent", "training", "phantoms")
    offenders = {}
    for package in below:
        offenders |= _layer_offenders(f"radspatial.{package}", ("radspatial.reports",))
    assert offenders == {}


def test_core_imports_nothing_above_it():
    """``core/`` (records, metrics record, I/O, hostile-input rules) is the bottom layer."""
    above = tuple(
        f"radspatial.{p}"
        for p in ("questions", "imaging", "bench", "formats", "eval", "grading", "models")
    ) + ("radspatial.agent", "radspatial.reports", "radspatial.cli")
    assert _layer_offenders("radspatial.core.metrics", above) == {}


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
    sizes = {str(p.relative_to(PKG)): len(p.read_text().splitlines()) for p in MODULES.values()}
    worth_a_look = {k: n for k, n in sizes.items() if n > SOFT_MODULE_LINES}
    if worth_a_look:
        warnings.warn(f"modules past {SOFT_MODULE_LINES} lines: {worth_a_look}", stacklevel=1)
    assert {k: n for k, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_functions_stay_under_the_size_limit():
    long = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > SOFT_FUNCTION_LINES:
                    long[f"{path.relative_to(PKG)}:{node.name}"] = n
    if long:
        warnings.warn(f"functions past {SOFT_FUNCTION_LINES} lines: {long}", stacklevel=1)
    assert {k: n for k, n in long.items() if n > MAX_FUNCTION_LINES} == {}


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


# The layers, bottom first, as docs/architecture.md draws the data flow (imaging -> questions ->
# bench -> eval, with core under everything and cli/api at the edge). A module may import its
# own layer or any below it, never one above (function-level imports included). Packages that
# share a layer are peers that do not import each other in a circle (the circle tests above).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("imaging",),
    ("questions",),
    ("nets",),  # the U-Net: run by agent/'s localizers, trained by training/ (issue 51)
    ("bench",),
    ("agent",),
    ("models",),
    ("grading",),
    ("eval",),
    ("formats", "reports"),
    ("phantoms", "probes"),
    ("training",),
    ("cli", "api"),
)
# arrows up that stay, each with its reason (module, module imported)
UPWARD_ALLOWED: set[tuple[str, str]] = set()  # none: every arrow points down


def _layer(module: str) -> int | None:
    """``module``'s layer; None for the package itself (its API names load on first use)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    for n, packages in enumerate(LAYERS):
        if parts[1] in packages:
            return n
    raise AssertionError(f"{module}: in no layer of LAYERS (add its package there)")


def _upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (m, d)
        for m, deps in graph.items()
        for d in deps
        if None not in (_layer(m), _layer(d)) and _layer(d) > _layer(m)
    )


def test_no_import_runs_up_a_layer():
    graph = {m: _imported(m, p, top_level_only=False) for m, p in MODULES.items()}
    assert set(_upward(graph)) - UPWARD_ALLOWED == set()


def test_every_allowed_upward_import_still_exists():
    """An exception that the code no longer needs is struck from the list (none is left)."""
    graph = {m: _imported(m, p, top_level_only=False) for m, p in MODULES.items()}
    assert set(_upward(graph)) >= UPWARD_ALLOWED
    assert not UPWARD_ALLOWED


def test_the_layer_check_sees_an_upward_import():
    graph = {
        "radspatial.grading.summary": {"radspatial.eval.metrics", "radspatial.core.stats"},
        "radspatial.eval.job": {"radspatial.bench.job"},
        "radspatial.api": {"radspatial.cli"},
    }
    assert _upward(graph) == [("radspatial.grading.summary", "radspatial.eval.metrics")]


# a plane or modality name spelled where its record's constant belongs: a default, a comparison,
# a fallback (``or "axial"``), a one-name tuple, a lookup (``.get("axial"``), a row's value
_NAME_USES = (
    r"[=!]=\s*{q}",  # a comparison, either side
    r"{q}\s*[=!]=",
    r"(?<![=!<>])=\s*{q}",  # a default or an assignment
    r"\bor\s+{q}",  # a fallback
    r"\(\s*{q}\s*,\s*\)",  # a one-name tuple
    r"\bin\s+\([^)]*{q}",  # a membership test
    r"\.get\(\s*{q}",  # a lookup
    r"[\"']\w+[\"']\s*:\s*{q}",  # a row's value
)
_NAME_HOMES = {
    "axial": "imaging/planes.py",  # DEFAULT_PLANE, AXIAL
    "CT": "core/modality.py",  # DEFAULT_MODALITY, MODALITIES
}


def _spelled_names(text: str, name: str) -> list[str]:
    quoted = f"[\"']{name}[\"']"
    return [
        line.strip()
        for line in text.splitlines()
        if not line.lstrip().startswith("#")
        and any(re.search(use.format(q=quoted), line) for use in _NAME_USES)
    ]


def test_plane_and_modality_names_come_from_their_records():
    """``"axial"`` and ``"CT"`` as values are spelled once, in their records' modules; every
    other module reads ``DEFAULT_PLANE`` / ``DEFAULT_MODALITY`` (issue 51; text in docstrings,
    help and messages is words, not values)."""
    found = {}
    for path in MODULES.values():
        text = path.read_text()
        for name, home in _NAME_HOMES.items():
            if path != PKG / home and (lines := _spelled_names(text, name)):
                found[f"{path.relative_to(PKG)} ({name})"] = lines
    assert found == {}


def test_the_name_finder_sees_a_spelled_name():
    text = (
        'def f(plane: str = "axial"):\n    return plane == "axial" or m.get("axial")\n'
        "x = row.plane or 'axial'\ny = {'modality': 'CT'}\n"
        'z = modality_sentence("CT")  # a call with the name: words\n'
    )
    assert len(_spelled_names(text, "axial")) == 3
    assert _spelled_names(text, "CT") == ["y = {'modality': 'CT'}"]
