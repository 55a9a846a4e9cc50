"""The project's import graph, read from the source (no module is imported): every
``import`` and ``from ... import`` anywhere in a file — at the top, inside functions, under
``TYPE_CHECKING`` — resolved to the project module it names, relative imports included.

``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``
(whose ``name`` it reads). The parent packages an import runs implicitly are not edges:
every module would then sit in a circle with its package's ``__init__``.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "clusterdiag"
FOLDERS = ("agent", "checks", "reports")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the project module imported
    line: int
    name: str | None = None  # the name taken from ``target`` by ``from target import name``


@dataclass
class Graph:
    root: Path
    modules: dict[str, Path] = field(default_factory=dict)
    imports: list[Import] = field(default_factory=list)

    def edges(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {m: set() for m in self.modules}
        for imp in self.imports:
            if imp.target != imp.source:
                out[imp.source].add(imp.target)
        return out

    def folder(self, module: str) -> str:
        """The folder a module's file sits in, as a dotted name (``clusterdiag.agent.run``
        for agent/run/runner.py and for agent/run/__init__.py)."""
        path = self.modules[module]
        return ".".join([PACKAGE, *path.relative_to(self.root).parent.parts])

    def folder_edges(self) -> dict[str, set[str]]:
        """Which folders import which: a module's imports, counted for its folder."""
        out: dict[str, set[str]] = {self.folder(m): set() for m in self.modules}
        for imp in self.imports:
            source, target = self.folder(imp.source), self.folder(imp.target)
            if source != target:
                out[source].add(target)
        return out

    def where(self, source: str, target: str) -> str:
        line = next(i.line for i in self.imports if i.source == source and i.target == target)
        return f"{self.modules[source].relative_to(self.root).as_posix()}:{line}"


def module_name(root: Path, path: Path) -> str:
    parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_graph(root: Path, folders: tuple[str, ...] = FOLDERS) -> Graph:
    graph = Graph(root)
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            graph.modules[module_name(root, path)] = path
    for name, path in graph.modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            graph.imports.extend(_resolve(graph, name, package, node))
    return graph


@functools.cache
def project_graph() -> Graph:
    """This checkout's graph, read once per process and only when a test first asks: read
    at a test module's import it would cost every collection (each xdist worker collects
    the whole suite) a second and more of parsing."""
    return read_graph(Path(__file__).resolve().parents[1])


def _resolve(graph: Graph, name: str, package: str, node: ast.AST) -> list[Import]:
    if isinstance(node, ast.Import):
        return [Import(name, a.name, node.lineno) for a in node.names if a.name in graph.modules]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        parts = package.split(".")
        base = parts[:len(parts) - node.level + 1]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    found = []
    for alias in node.names:
        full = f"{source}.{alias.name}"
        if full in graph.modules:
            found.append(Import(name, full, node.lineno))
        elif source in graph.modules:
            found.append(Import(name, source, node.lineno, alias.name))
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def private_imports(graph: Graph) -> list[Import]:
    """``from module import _name`` across modules (dunder names are not private)."""
    return [i for i in graph.imports
            if i.name is not None and i.name.startswith("_") and not i.name.startswith("__")
            and i.target != i.source]
