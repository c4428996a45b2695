"""The import structure of ``pipelines/`` and ``stages/``: no import circles, no import from a lower
layer to a higher one, and no import inside a function except of an optional heavy dependency.

Every module is parsed with ``ast`` (nothing is imported), and each ``import`` names the project module
it loads (``from pipelines.agents import parsing`` -> ``pipelines.agents.parsing``; ``from
pipelines.agents import ParseError`` -> ``pipelines.agents``). The layer order is :data:`LAYERS`,
lowest first (docs/development.md describes it): a module may import its own layer and those below.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipelines", "stages")

LAYERS: tuple[tuple[str, ...], ...] = (
    # the ground floor: imports nothing of the project above it
    ("pipelines", "pipelines.strict", "pipelines.errors", "pipelines.redaction", "pipelines.io",
     "pipelines.tracking", "pipelines.workspace",
     # the parameter reference: imports io only; its page generator names the section models as strings
     "pipelines.params_doc"),
    ("pipelines.models.*",),  # local model files, chat encoding, remote-code loading
    ("pipelines.llm.*",),  # chat interface, backends, request cache, call limit
    ("pipelines.config", "pipelines.stage"),  # params sections (the shared llm merged in), the stage runner
    ("pipelines.agents.*",),  # agents, parsers, runner, generation harness, sandbox
    # what the teams share with training and evaluation: tables and plots, statistics, the SFT row format
    ("pipelines.reporting.*", "pipelines.stats.*", "pipelines.training.rows"),
    ("pipelines.retrieval.*",),
    ("pipelines.tagging.*", "pipelines.kgc.*", "pipelines.ram2c.*"),  # the teams
    ("pipelines.teams",),  # the registry of teams (name -> team interface)
    ("pipelines.training.*",),
    ("pipelines.evaluation.*",),
    ("pipelines.profiles", "stages.*"),  # entry points
)
"""The layers, lowest first: ``name`` is that module, ``name.*`` that package and every module under
it; a module belongs to the most specific entry naming it."""

HEAVY_OPTIONAL = frozenset({
    "torch", "transformers", "peft", "trl", "datasets", "accelerate", "deepspeed", "bitsandbytes", "vllm",
    "xgrammar", "matplotlib", "chromadb", "FlagEmbedding", "sentence_transformers", "onnxruntime", "wandb",
})
"""Top-level packages a function may import: each costs seconds (or a GPU stack) to import and only
some runs use it, so it is imported where it is used."""


@dataclass
class Import:
    source: str  # the importing module
    target: str  # the project module imported, or the top-level package of a third-party one
    line: int
    in_function: bool


@dataclass
class Graph:
    modules: dict[str, Path]
    imports: list[Import] = field(default_factory=list)


def module_names(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``packages`` (a package is its ``__init__``)."""
    names = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def _project_module(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, path: Path, graph: Graph, packages: tuple[str, ...]) -> None:
        self.module, self.graph, self.packages, self.depth = module, graph, packages, 0
        self.package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):  # annotations only
            self.generic_visit(node)

    def _add(self, name: str, node: ast.stmt) -> None:
        if name.split(".")[0] in self.packages:
            target = _project_module(name, self.graph.modules)
            if target is None or target == self.module:
                return
        else:
            target = name.split(".")[0]
        self.graph.imports.append(Import(self.module, target, node.lineno, self.depth > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")[: len(self.package.split(".")) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._add(full if full in self.graph.modules else module, node)


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> Graph:
    graph = Graph(module_names(root, packages))
    for module, path in graph.modules.items():
        _Imports(module, path, graph, packages).visit(ast.parse(path.read_text("utf-8"), str(path)))
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    edges: dict[str, set[str]] = {m: set() for m in graph.modules}
    for imp in graph.imports:
        if imp.target in graph.modules:
            edges[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int:
    best, level = -1, -1
    for number, names in enumerate(layers):
        for name in names:
            package = name.removesuffix(".*")
            matches = module == package or (name.endswith(".*") and module.startswith(package + "."))
            if matches and len(package) > best:
                best, level = len(package), number
    if level < 0:
        raise AssertionError(f"{module} is in no layer; add it to LAYERS in tests/test_architecture.py")
    return level


def upward_imports(graph: Graph, layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    return [
        f"{imp.source}:{imp.line} imports {imp.target} (layer {layer_of(imp.target, layers)} above "
        f"{layer_of(imp.source, layers)})"
        for imp in graph.imports
        if imp.target in graph.modules and layer_of(imp.target, layers) > layer_of(imp.source, layers)
    ]


def function_imports(graph: Graph, allowed: frozenset[str] = HEAVY_OPTIONAL) -> list[str]:
    return [
        f"{imp.source}:{imp.line} imports {imp.target} inside a function"
        for imp in graph.imports
        if imp.in_function and imp.target not in allowed
    ]


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(ROOT)


def test_no_import_circles(graph):
    assert len(graph.modules) > 100  # the checker found the project
    found = circles(graph)
    assert not found, "import circles (modules importing each other, directly or through others):\n" + "\n".join(
        " <-> ".join(circle) for circle in found
    )


def test_no_import_from_a_lower_layer_to_a_higher_one(graph):
    found = upward_imports(graph)
    assert not found, "imports from a lower layer to a higher one (see LAYERS):\n" + "\n".join(found)


def test_no_function_level_imports_but_heavy_optional_ones(graph):
    found = function_imports(graph)
    assert not found, "imports inside functions (move them to the top, or see HEAVY_OPTIONAL):\n" + "\n".join(found)
    assert any(imp.in_function and imp.target == "torch" for imp in graph.imports)  # the allow-list is used


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")


def test_checker_finds_a_planted_circle_an_upward_import_and_a_function_import(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "from pkg.low import b\n",
        "pkg/low/b.py": "import pkg.low.c\n",
        "pkg/low/c.py": "from . import a\n\ndef f():\n    from pkg.high import d\n    import torch\n",
        "pkg/high/__init__.py": "",
        "pkg/high/d.py": "import json\n",
        "pkg/high/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import d\n",
    })
    planted = import_graph(tmp_path, ("pkg",))
    layers = (("pkg", "pkg.low.*"), ("pkg.high.*",))
    assert circles(planted) == [["pkg.low.a", "pkg.low.b", "pkg.low.c"]]
    assert upward_imports(planted, layers) == ["pkg.low.c:4 imports pkg.high.d (layer 1 above 0)"]
    assert function_imports(planted) == ["pkg.low.c:4 imports pkg.high.d inside a function"]
    assert [imp.target for imp in planted.imports if imp.source == "pkg.high.e"] == ["typing"]  # no TYPE_CHECKING block


def test_checker_sees_a_circle_through_a_package_init(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.x import X\n",
        "pkg/x.py": "from pkg import Y\nX = 1\n",
    })
    assert circles(import_graph(tmp_path, ("pkg",))) == [["pkg", "pkg.x"]]
