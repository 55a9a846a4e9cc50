"""One exit-code enum: no module of agent/ or reports/ spells an exit status as a number.

Read from the source (an AST walk, like tests/test_layering.py): an exit status written as a
literal (``sys.exit(2)``, ``SystemExit(128 + signum)``, ``_die(msg, 130)``) is one the enum
(agent/base/errors.py ExitCode) no longer names, so a change of meaning would miss it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

# Calls whose argument (the last positional one for _die) is an exit status.
EXITS = {"exit", "_exit", "SystemExit", "_die"}
EXEMPT = {
    # A forked worker's own end: its parent reads the pipe, never the status.
    "agent/read/worker.py",
    # The Slurm entry points' last word when their own start failed: spare_the_node's
    # exit 0.
    "agent/slurm/trouble.py",
}


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _numeric(node: ast.expr) -> bool:
    """A literal number, or arithmetic that has one in it."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) or _numeric(node.right)
    if isinstance(node, ast.IfExp):
        return _numeric(node.body) or _numeric(node.orelse)
    return False


def literal_exits(source: str) -> list[int]:
    """The lines of ``source`` that exit with a number written out."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _name(node.func) in EXITS and node.args and \
                _numeric(node.args[-1]):
            lines.append(node.lineno)
    return lines


def test_the_walk_finds_every_spelling_of_a_numeric_exit() -> None:
    source = ("import sys, os\nsys.exit(2)\nraise SystemExit(128 + n)\nos._exit(0)\n"
              "_die('x', 130)\nsys.exit(1 if bad else 0)\nsys.exit(ExitCode.USAGE)\n"
              "sys.exit(emit(report))\n_die('x', code)\n")
    assert literal_exits(source) == [2, 3, 4, 5, 6]


def test_no_module_exits_with_a_number() -> None:
    found = []
    for folder in ("agent", "reports"):
        for path in sorted((REPO / folder).rglob("*.py")):
            where = path.relative_to(REPO).as_posix()
            if where not in EXEMPT:
                found += [f"{where}:{line}" for line in literal_exits(path.read_text())]
    assert not found, "exit with agent.base.errors.ExitCode, not a number:\n  " + "\n  ".join(found)


def test_every_exemption_is_still_needed() -> None:
    stale = [where for where in sorted(EXEMPT)
             if not literal_exits(Path(REPO / where).read_text())]
    assert not stale, f"exempt but exits with the enum now (drop from EXEMPT): {stale}"
