"""The layering of DESIGN §2 as tests, beside ruff and mypy: no import circles, no private
names taken across modules, and who may import whom. Read from the source by
tests/imports.py, function-level and TYPE_CHECKING imports included."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO
from tests.imports import Graph, circles, private_imports, read_graph

GRAPH = read_graph(REPO)

MODEL = "clusterdiag.agent.model"
# Collectors read the node; judging it is the checks' job, so they never import them.
COLLECTORS = ("clusterdiag.agent.collectors", "clusterdiag.agent.collect",
              "clusterdiag.agent.sources", "clusterdiag.agent.sysfs",
              "clusterdiag.agent.kernel_log")


def _under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _breaks(graph: Graph, sources: tuple[str, ...], allowed: tuple[str, ...],
            forbidden: tuple[str, ...] = ("clusterdiag",)) -> list[str]:
    return sorted(f"{graph.where(imp.source, imp.target)}: {imp.source} imports {imp.target}"
                  for imp in graph.imports
                  if _under(imp.source, *sources) and _under(imp.target, *forbidden)
                  and not _under(imp.target, *allowed))


def test_the_walk_sees_every_project_module_and_nested_imports() -> None:
    assert "clusterdiag.agent.cli" in GRAPH.modules
    assert "clusterdiag.checks.registry" in GRAPH.modules
    edges = GRAPH.edges()
    # A function-level import (agent/cli/run.py imports the runner inside run()).
    assert "clusterdiag.agent.runner" in edges["clusterdiag.agent.cli.run"]
    # A relative import three levels up (agent/cli/checks.py: from ... import checks).
    assert "clusterdiag.checks" in edges["clusterdiag.agent.cli.checks"]


def test_a_circle_through_a_type_checking_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent/__init__.py").write_text("")
    (tmp_path / "agent/a.py").write_text("from typing import TYPE_CHECKING\n"
                                         "if TYPE_CHECKING:\n    from .b import B\n")
    (tmp_path / "agent/b.py").write_text("def f():\n    from . import a\n"
                                         "    from .a import _hidden\n")
    graph = read_graph(tmp_path, ("agent",))
    assert circles(graph.edges()) == [["clusterdiag.agent.a", "clusterdiag.agent.b"]]
    assert [(i.source, i.name) for i in private_imports(graph)] == [
        ("clusterdiag.agent.b", "_hidden")]


def test_no_import_circles() -> None:
    edges = GRAPH.edges()
    found = ["  " + " <-> ".join(group) for group in circles(edges)]
    assert not found, "import circles (move the shared piece into its own module):\n" + \
        "\n".join(found)


def test_no_private_name_is_imported_from_another_module() -> None:
    found = [f"{GRAPH.where(i.source, i.target)}: {i.name} from {i.target}"
             for i in private_imports(GRAPH)]
    assert not found, "private names imported across modules (make them public, or move " \
        "the code that needs them):\n" + "\n".join(found)


def test_checks_import_only_the_model_from_agent() -> None:
    assert _breaks(GRAPH, ("clusterdiag.checks",), ("clusterdiag.checks", MODEL)) == []


def test_reports_import_only_the_model_and_errors_from_agent() -> None:
    assert _breaks(GRAPH, ("clusterdiag.reports",), (MODEL, "clusterdiag.agent.errors"),
                   ("clusterdiag.agent",)) == []


def test_collectors_never_import_checks() -> None:
    assert _breaks(GRAPH, COLLECTORS, (), ("clusterdiag.checks",)) == []


def test_the_simulator_never_imports_reports() -> None:
    assert _breaks(GRAPH, ("clusterdiag.agent.sim",), (), ("clusterdiag.reports",)) == []


SIM = "clusterdiag.agent.sim"
SIM_WINGS = {f"{SIM}.state": (f"{SIM}.state",),
             f"{SIM}.writers": (f"{SIM}.state", f"{SIM}.writers"),
             f"{SIM}.faults": (f"{SIM}.state", f"{SIM}.faults")}


def test_the_simulators_wings_import_one_way() -> None:
    """The state (what a node is) imports neither other wing; the writers (what it shows:
    its tree, NVML answers, commands) and the faults (what changes it) import the state,
    never each other; none imports the entry modules above them (agent/sim/node.py ...),
    which put the wings together."""
    for wing in SIM_WINGS:
        assert any(_under(m, wing) and m != wing for m in GRAPH.modules), wing
    breaks = [line for wing, allowed in SIM_WINGS.items()
              for line in _breaks(GRAPH, (wing,), allowed, (SIM,))]
    assert breaks == []


def test_nothing_outside_the_cli_imports_it() -> None:
    """The daemon, the Slurm entry points and the cluster runs share agent/session.py;
    the CLI sits on top and only its own modules and the entries that start it import it:
    the console script (agent/launch.py, which runs the Slurm entry points before click)
    and ``python -m``'s ``__main__``."""
    cli = "clusterdiag.agent.cli"
    entries = (cli, "clusterdiag.agent.launch", "clusterdiag.agent.__main__")
    assert sorted(f"{GRAPH.where(i.source, i.target)}: {i.source}" for i in GRAPH.imports
                  if _under(i.target, cli) and not _under(i.source, *entries)) == []
