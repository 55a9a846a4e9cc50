"""agent/slurm/reason.py is the only writer of drain reasons: no other module spells the
``clusterdiag:`` marker for text that can reach ``scontrol ... Reason=``, or builds that
argument itself, so a second grammar cannot appear unnoticed.

Our stderr lines start ``clusterdiag:`` too (the program's error lines, a different
convention): a literal is one of those when it is an argument of ``print(...,
file=sys.stderr)`` or ``click.echo(..., err=True)``, the two ways the code writes to
stderr, and is allowed; a docstring is allowed. Anything else that starts with the marker
is a reason in the making.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from clusterdiag.agent.slurm.reason import PREFIX
from tests.conftest import REPO

ROOTS = ("agent", "checks", "reports")
WRITER = Path("agent/slurm/reason.py")
ARGV = Path("agent/slurm/scontrol.py")  # the one place ``Reason=`` is put on argv


def _to_stderr(call: ast.Call) -> bool:
    for keyword in call.keywords:
        value = keyword.value
        if keyword.arg == "err" and isinstance(value, ast.Constant) and value.value is True:
            return True
        if keyword.arg == "file" and isinstance(value, ast.Attribute) \
                and value.attr == "stderr":
            return True
    return False


def writers(source: str, path: Path) -> list[str]:
    """Where ``source`` spells a reason itself: ``path:line what``."""
    tree = ast.parse(source)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _to_stderr(node):
            allowed.update(id(n) for arg in node.args for n in ast.walk(arg))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            allowed.add(id(node.value))  # a docstring
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("reason") \
                and any(alias.name == "PREFIX" for alias in node.names):
            found.append(f"{path}:{node.lineno} imports the marker")
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) \
                or id(node) in allowed:
            continue
        if node.value.startswith(PREFIX):
            found.append(f"{path}:{node.lineno} spells {node.value[:40]!r}")
        if "Reason=" in node.value and path != ARGV:
            found.append(f"{path}:{node.lineno} builds {node.value[:40]!r}")
    return found


def test_no_module_but_reason_py_writes_a_reason() -> None:
    found = [hit for root in ROOTS for file in sorted((REPO / root).rglob("*.py"))
             if (path := file.relative_to(REPO)) != WRITER
             for hit in writers(file.read_text(), path)]
    assert found == [], "write reasons with agent/slurm/reason.py's write():\n" + \
        "\n".join(found)


def test_the_slurm_wrappers_set_no_reason() -> None:
    """The wrappers run the program, which drains: a reason set in shell would be a second
    writer (comments may quote one)."""
    lines = [f"{path.name}:{number}: {line.strip()}"
             for path in sorted((REPO / "systemd").glob("clusterdiag-*.sh"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if not line.lstrip().startswith("#")
             and ("Reason=" in line or "scontrol" in line
                  or (PREFIX in line and ">&2" not in line))]
    assert lines == []


@pytest.mark.parametrize(("source", "hits"), [
    ('scontrol.drain(node, f"clusterdiag: {check} {component}")', 1),
    ('text = "clusterdiag: error " + str(exc)', 1),
    ('from ..slurm.reason import PREFIX, owned', 1),
    ('run(["scontrol", "update", f"NodeName={n}", f"Reason={text}"])', 1),
    ('print(f"clusterdiag: {program}: ERROR {trouble}", file=sys.stderr)', 0),
    ('click.echo(f"clusterdiag: {message}", err=True)', 0),
    ('def f():\n    """clusterdiag: nvlink.links_up gpu3, as sinfo shows it."""', 0),
    ('log("drained", reason=text)', 0),
])
def test_the_scan_tells_a_reason_from_a_stderr_line(source: str, hits: int) -> None:
    assert len(writers(source, Path("agent/x.py"))) == hits
