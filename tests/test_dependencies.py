"""pyproject's runtime ``dependencies`` are exactly what the runtime code imports.

Every distribution an install pulls onto every node must be imported by agent/, checks/ or
reports/ (a test or bench tool belongs in the ``test`` extra), and every third-party module
that code imports must come from a declared distribution, found through the installed
distributions' own file lists (``importlib.metadata.packages_distributions``: PyYAML
installs ``yaml``, nvidia-ml-py ``pynvml``). Imports under ``if TYPE_CHECKING:`` are read
by mypy only and need nothing at run time.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.imports import FOLDERS

if sys.version_info >= (3, 11):
    import tomllib
else:
    tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml needs tomli on 3.10")

REPO = Path(__file__).resolve().parents[1]


def _normal(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    # PEP 508: the name is the leading run of letters, digits, '-', '_' and '.'.
    return {_normal(re.split(r"[^A-Za-z0-9._-]", spec, maxsplit=1)[0])
            for spec in project["dependencies"]}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(tree: ast.AST) -> set[str]:
    """Top-level names of the absolute imports run at some point (TYPE_CHECKING aside)."""
    found: set[str] = set()
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        pending.extend(ast.iter_child_nodes(node))
    return found


def _third_party() -> dict[str, str]:
    """Each third-party module the runtime code imports -> a file that imports it."""
    modules: dict[str, str] = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            for name in _imported(ast.parse(path.read_text(), str(path))):
                if name not in sys.stdlib_module_names and name != "clusterdiag":
                    modules.setdefault(name, path.relative_to(REPO).as_posix())
    return modules


def test_every_runtime_dependency_is_imported_by_runtime_code() -> None:
    installed = packages_distributions()
    used = {_normal(dist) for module in _third_party() for dist in installed.get(module, [])}
    assert sorted(_declared() - used) == []


def test_every_third_party_module_runtime_code_imports_is_declared() -> None:
    installed = packages_distributions()
    declared = _declared()
    undeclared = {module: where for module, where in _third_party().items()
                  if not declared & {_normal(d) for d in installed.get(module, [])}}
    assert undeclared == {}
