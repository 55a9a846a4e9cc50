"""The layering of docs/design.md §2 as tests, beside ruff and mypy: no import circles, no private
names taken across modules, and who may import whom. Read from the source by
tests/imports.py, function-level and TYPE_CHECKING imports included."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO
from tests.imports import circles, private_imports, project_graph, read_graph

P = "clusterdiag"
BASE, MODEL = f"{P}.agent.base", f"{P}.agent.model"
CHECKS = (f"{P}.checks.catalogs", f"{P}.checks.profiles", f"{P}.checks.core")
"""What every check stands on; a family is a sibling of the others, never their import."""
FAMILIES = tuple(f"{P}.checks.{f}" for f in
                 ("fabric", "gpu", "host", "ib", "nccl", "nvlink", "nvswitch", "qualify"))
READ = (f"{P}.agent.read", f"{P}.agent.collectors")
SIM = f"{P}.agent.sim"

# The layer map: each folder and the folders it may import (its own modules aside). Read
# from the bottom: the base and the snapshot model import nothing of ours; the checks stand
# on the model; the reports on the checks' findings; the node side reads (read,
# collectors), is configured (settings), simulated (sim), run once (run) or for ever
# (daemon), and is driven by Slurm, cluster runs, qualification and, on top, the CLI.
LAYERS: dict[str, tuple[str, ...]] = {
    BASE: (),
    MODEL: (),
    f"{P}.checks.catalogs": (MODEL,),
    f"{P}.checks.profiles": (BASE, MODEL, f"{P}.checks.catalogs"),
    f"{P}.checks.core": (BASE, MODEL, f"{P}.checks.catalogs", f"{P}.checks.profiles"),
    **{family: (BASE, MODEL, *CHECKS) for family in FAMILIES},
    f"{P}.checks": (f"{P}.checks.core",),
    f"{P}.reports": (),
    f"{P}.reports.schema": (),
    f"{P}.reports.model": (BASE, MODEL, *CHECKS, f"{P}.checks.qualify"),
    f"{P}.reports.cluster_checks": (BASE, MODEL, *CHECKS, f"{P}.reports.model"),
    f"{P}.reports.fleet": (BASE, MODEL, *CHECKS, f"{P}.reports.model",
                           f"{P}.reports.cluster_checks"),
    f"{P}.reports.render": (BASE, MODEL, *CHECKS, f"{P}.checks.qualify", f"{P}.reports.model",
                            f"{P}.reports.cluster_checks"),
    f"{P}.agent.read": (BASE, MODEL),
    f"{P}.agent.collectors": (BASE, MODEL, f"{P}.agent.read"),
    f"{P}.agent.settings": (BASE, MODEL, *CHECKS),
    f"{SIM}.state": (BASE, MODEL, *CHECKS),
    f"{SIM}.writers": (BASE, MODEL, f"{P}.agent.read", f"{SIM}.state"),
    f"{SIM}.faults": (BASE, MODEL, *CHECKS, f"{SIM}.state"),
    SIM: (BASE, MODEL, *CHECKS, f"{P}.agent.read", f"{P}.agent.settings", f"{SIM}.state",
          f"{SIM}.writers", f"{SIM}.faults"),
    f"{P}.agent.run": (BASE, MODEL, f"{P}.checks", *CHECKS, f"{P}.reports.model", *READ,
                       f"{P}.agent.settings", SIM),
    f"{P}.agent.capture": (BASE, MODEL, *CHECKS),
    f"{P}.agent.health": (BASE, MODEL, *CHECKS),
    f"{P}.agent.daemon": (BASE, MODEL, *CHECKS, f"{P}.reports.model", *READ,
                          f"{P}.agent.settings", f"{P}.agent.run", f"{P}.agent.health"),
    f"{P}.agent.slurm": (BASE, MODEL, *CHECKS, f"{P}.reports.model", f"{P}.agent.read",
                         f"{P}.agent.settings", f"{P}.agent.run", f"{P}.agent.health"),
    f"{P}.agent.cluster": (BASE, MODEL, *CHECKS, f"{P}.reports.model",
                           f"{P}.reports.cluster_checks", f"{P}.reports.fleet",
                           f"{P}.agent.settings", SIM, f"{SIM}.faults", f"{P}.agent.run",
                           f"{P}.agent.daemon", f"{P}.agent.health"),
    f"{P}.agent.qualify.parsers": (MODEL,),
    f"{P}.agent.qualify": (BASE, MODEL, *CHECKS, f"{P}.checks.qualify", f"{P}.reports.model",
                           f"{P}.agent.read", f"{P}.agent.settings", SIM, f"{P}.agent.run",
                           f"{P}.agent.slurm", f"{P}.agent.cluster",
                           f"{P}.agent.qualify.parsers", f"{P}.agent.health"),
    f"{P}.agent.cli": (BASE, MODEL, f"{P}.checks", *CHECKS, f"{P}.reports.model",
                       f"{P}.reports.cluster_checks", f"{P}.reports.render",
                       f"{P}.agent.settings", f"{P}.agent.run", f"{P}.agent.capture",
                       f"{P}.agent.daemon", f"{P}.agent.slurm", f"{P}.agent.cluster",
                       f"{P}.agent.qualify", f"{P}.agent.health"),
    f"{P}.agent": (BASE, MODEL, f"{P}.agent.slurm", f"{P}.agent.daemon", f"{P}.agent.cli"),
}
# What the top of each code folder may hold besides packages: the entry points.
ENTRY_MODULES = {"agent": {"__init__.py", "__main__.py", "launch.py"},
                 "checks": {"__init__.py"}, "reports": {"__init__.py"}}


def _under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_walk_sees_every_project_module_and_nested_imports() -> None:
    graph = project_graph()
    assert "clusterdiag.agent.cli" in graph.modules
    assert "clusterdiag.checks.core.registry" in graph.modules
    edges = graph.edges()
    # A function-level import (agent/cli/run.py imports the runner inside run()).
    assert "clusterdiag.agent.run.runner" in edges["clusterdiag.agent.cli.run"]
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
    graph = project_graph()
    edges = graph.edges()
    found = ["  " + " <-> ".join(group) for group in circles(edges)]
    assert not found, "import circles (move the shared piece into its own module):\n" + \
        "\n".join(found)


def test_no_private_name_is_imported_from_another_module() -> None:
    graph = project_graph()
    found = [f"{graph.where(i.source, i.target)}: {i.name} from {i.target}"
             for i in private_imports(graph)]
    assert not found, "private names imported across modules (make them public, or move " \
        "the code that needs them):\n" + "\n".join(found)


def test_the_top_of_each_code_folder_holds_only_entry_points_and_packages() -> None:
    for folder, allowed in ENTRY_MODULES.items():
        loose = sorted(p.name for p in (REPO / folder).glob("*.py") if p.name not in allowed)
        assert loose == [], f"{folder}/: move these into the folder of their layer: {loose}"


def test_every_folder_is_in_the_layer_map() -> None:
    graph = project_graph()
    folders = {graph.folder(m) for m in graph.modules}
    assert sorted(folders - set(LAYERS)) == [], "add the new folder to LAYERS"
    assert sorted(set(LAYERS) - folders) == [], "LAYERS names a folder that is gone"


def test_the_layer_map_has_no_circle() -> None:
    assert circles({f: set(allowed) for f, allowed in LAYERS.items()}) == []


def test_no_folder_circles() -> None:
    graph = project_graph()
    found = ["  " + " <-> ".join(group) for group in circles(graph.folder_edges())]
    assert not found, "folder-level import circles:\n" + "\n".join(found)


def test_each_folder_imports_only_the_layers_its_map_allows() -> None:
    """Families never import each other (each is judged from the snapshot alone), the
    collectors never import the checks, the simulator never imports the reports, and
    nothing below the CLI imports a layer above it."""
    graph = project_graph()
    breaks = sorted(
        f"{graph.where(i.source, i.target)}: {i.source} imports {i.target}"
        for i in graph.imports
        if graph.folder(i.source) != graph.folder(i.target)
        and graph.folder(i.target) not in LAYERS[graph.folder(i.source)])
    assert breaks == [], "imports the layer map does not allow:\n" + "\n".join(breaks)


def test_a_break_of_the_layer_map_is_found(tmp_path: Path) -> None:
    """A family that reaches into another family is named (the test above could fail)."""
    for folder in ("checks", "checks/gpu", "checks/ib"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "checks/ib/helpers.py").write_text("X = 1\n")
    (tmp_path / "checks/gpu/xid.py").write_text("from ..ib.helpers import X\n")
    graph = read_graph(tmp_path, ("checks",))
    edges = graph.folder_edges()
    assert edges[f"{P}.checks.gpu"] == {f"{P}.checks.ib"}
    assert f"{P}.checks.ib" not in LAYERS[f"{P}.checks.gpu"]


def test_nothing_outside_the_cli_imports_it() -> None:
    """The daemon, the Slurm entry points and the cluster runs share agent/run/session.py;
    the CLI sits on top and only its own modules and the entries that start it import it:
    the console script (agent/launch.py, which runs the Slurm entry points before click)
    and ``python -m``'s ``__main__``."""
    graph = project_graph()
    cli = "clusterdiag.agent.cli"
    entries = (cli, "clusterdiag.agent.launch", "clusterdiag.agent.__main__")
    assert sorted(f"{graph.where(i.source, i.target)}: {i.source}" for i in graph.imports
                  if _under(i.target, cli) and not _under(i.source, *entries)) == []
