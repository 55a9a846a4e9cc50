"""What the Slurm prolog imports, in a fresh interpreter: its start is paid on every node for
every job, so the set may shrink but must not grow unnoticed.

The launcher (agent/launch.py) must reach the prolog without click or any other
command's module. With a fresh agent report (the common path) the prolog reads the
report and judges it: no check family, no snapshot model, no collector, no PyYAML or
pynvml, and none of ``dataclasses``, ``typing``, ``pathlib``, whose imports alone cost
as much as the interpreter's start. Run with no agent report on an empty tree (its
widest path: every quick check) it may import only the modules pinned. The sets are pinned
in tests/fixtures/prolog_imports.json (tests/prolog_paths.py measures them): a change that
loads another module on a path regenerates it, on purpose, and the diff shows in review.
"""

from __future__ import annotations

import ast
import importlib.util
import sys

import pytest

from tests.conftest import REPO
from tests.imports import project_graph
from tests.prolog_paths import measure, ours, pinned

RECORD = "clusterdiag.agent.model.record"
REGENERATE = "python -m dev.regenerate"

# What the fresh-report path must not load: each costs a sizeable part of an interpreter
# start, or stands for a whole layer it does not need.
NOT_ON_THE_FRESH_PATH = frozenset({
    "dataclasses", "typing", "pathlib", "inspect", "yaml", "pynvml", "click", "socket", "copy",
    "subprocess", "clusterdiag.agent.model", "clusterdiag.checks.core.registry",
    "clusterdiag.agent.run.collect", "clusterdiag.reports.model.node"})
# Third-party packages the prolog may load: NVML's bindings, where the library loads.
THIRD_PARTY = frozenset({"pynvml"})


@pytest.fixture(scope="module")
def paths() -> dict[str, set[str]]:
    """Every module each path has loaded when it ends (tests/prolog_paths.py)."""
    return measure()


def _pinned_message(path: str, got: frozenset[str], want: frozenset[str]) -> str:
    return (f"the {path} path's modules changed (added {sorted(got - want)}, gone "
            f"{sorted(want - got)}): if meant, run {REGENERATE} and review the diff")


def test_the_launcher_imports_nothing_but_itself(paths: dict[str, set[str]]) -> None:
    got, want = ours(paths, "launcher"), pinned()["launcher"]
    assert got == want, _pinned_message("launcher", got, want)
    assert want >= {"clusterdiag.agent.launch", "clusterdiag.agent.slurm.trouble"}
    assert {m for m in want if m.startswith("clusterdiag.agent.cli")} == set()
    assert "click" not in paths["launcher"]


def test_with_a_fresh_report_the_prolog_reads_it_and_judges_nothing_more(
        paths: dict[str, set[str]]) -> None:
    if "fresh" not in paths:
        pytest.skip("NVML's library loads here: gpu.processes needs pynvml and the "
                    "collectors (the path this test pins is the one without NVML)")
    got, want = ours(paths, "fresh"), pinned()["fresh"]
    assert got == want, _pinned_message("fresh-report", got, want)
    assert (paths["fresh"] - paths["bare"]) & NOT_ON_THE_FRESH_PATH == set()


def test_a_yaml_config_already_validated_is_read_without_pyyaml(
        paths: dict[str, set[str]]) -> None:
    """The prolog's validated copy of a YAML config (agent/settings/config_cache.py) stands
    in for PyYAML, whose import alone costs as much as the interpreter's start."""
    if "yaml cached" not in paths:
        pytest.skip("NVML's library loads here (see the fresh-report test)")
    assert "yaml" not in paths["yaml cached"]
    assert ours(paths, "yaml cached") == ours(paths, "fresh")


# What the lean re-run of nccl.acs may load of the check families: the check's module and
# the helpers it imports, no other check's module.
LEAN_FAMILY_MODULES = frozenset({
    "clusterdiag.checks.nccl", "clusterdiag.checks.nccl.helpers",
    "clusterdiag.checks.nccl.pcie"})
FAMILY_PACKAGES = tuple(f"clusterdiag.checks.{family}" for family in
                        ("fabric", "gpu", "host", "ib", "nccl", "nvlink", "nvswitch"))


def test_the_lean_rerun_imports_its_checks_modules_and_runs_no_tool(
        paths: dict[str, set[str]]) -> None:
    """The unprivileged agent's report skips nccl.acs: the prolog re-runs it
    (agent/run/lean.py) where its record does not stand, importing that check's module, not
    its family, and no module for running tools: the PCI source runs none. gpu.processes,
    re-run too, skips for NVML's missing library without the NVML source."""
    if "lean" not in paths:
        pytest.skip("NVML's library loads here (see the fresh-report test)")
    got, want = ours(paths, "lean"), pinned()["lean"]
    assert got == want, _pinned_message("lean re-run", got, want)
    families = {m for m in got if m.startswith(FAMILY_PACKAGES)}
    assert families == LEAN_FAMILY_MODULES
    assert {m for m in got if m.startswith("clusterdiag.agent.collectors.")} <= {
        "clusterdiag.agent.collectors.pci", "clusterdiag.agent.collectors.kept"}
    assert (paths["lean"] - paths["bare"]) & {
        "subprocess", "socket", "selectors", "yaml", "pynvml", "click"} == set()


# What the re-run's record costs the prolog beyond the fresh-report path: itself, the boot
# id's reader and the ACS reader it shares with the PCI source, and the built-in profiles'
# names.
RECORD_MODULES = frozenset({
    "clusterdiag.agent.slurm.rerun_record", "clusterdiag.agent.base.boot",
    "clusterdiag.agent.read.pci_config", "clusterdiag.checks.catalogs.profile_data"})


def test_a_standing_record_spares_the_next_job_the_lean_rerun(
        paths: dict[str, set[str]]) -> None:
    """The next job's prolog finds nccl.acs's record standing (slurm/rerun_record.py): it
    loads the fresh-report path and the record's few modules, none of the lean path's
    (no collector, no check family, no snapshot model, no typing or pathlib)."""
    if "recorded" not in paths:
        pytest.skip("NVML's library loads here (see the fresh-report test)")
    got, want = ours(paths, "recorded"), pinned()["recorded"]
    assert got == want, _pinned_message("recorded re-run", got, want)
    assert got == ours(paths, "fresh") | RECORD_MODULES
    assert (paths["recorded"] - paths["bare"]) & NOT_ON_THE_FRESH_PATH == set()


def test_the_prolog_imports_only_the_allowed_modules(paths: dict[str, set[str]]) -> None:
    got = paths["no report"] - paths["bare"]
    added = ours(paths, "no report") - pinned()["no report"]
    assert added == set(), _pinned_message("no-report", ours(paths, "no report"),
                                           pinned()["no report"])
    # Its records are read through agent/model/record.py: dataclasses would bring inspect,
    # ast, dis and tokenize, a tenth of the whole run; times are written and
    # plain data copied without datetime and copy (reports/model/node.py, agent/base/plain.py).
    assert got & {"dataclasses", "inspect", "datetime", "copy"} == set()
    stdlib = set(sys.stdlib_module_names)
    others = {m.split(".")[0] for m in got if not m.startswith("clusterdiag")}
    assert {m for m in others if m not in stdlib and not m.startswith("_")} <= THIRD_PARTY
    assert "click" not in got


def _is_module(name: str) -> bool:
    if name in project_graph().modules:
        return True
    if name.startswith("clusterdiag."):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _lazy_imports() -> list[tuple[str, int, list[str], bool, bool]]:
    """Every import inside a function of ours: (module, line, the modules it imports,
    whether a comment says why — on its line, or above the run of imports it begins —, and
    whether it is exempt from belonging at the top: tried (its failure handled by the
    function) or in a package's module-level ``__getattr__`` (PEP 562), whose imports are
    lazy by design: they load what the package's own import must not)."""
    found = []
    for module, path in project_graph().modules.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse("\n".join(lines))
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try)
                   for stmt in t.body for n in ast.walk(stmt)}
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lazy_attribute = func.name == "__getattr__" and func in tree.body
            for node in ast.walk(func):
                if isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        parts = package.split(".")
                        base = ".".join([*parts[:len(parts) - node.level + 1],
                                         *([base] if base else [])])
                    targets = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base
                               for a in node.names]
                else:
                    continue
                above = node.lineno - 2  # up the run of imports (blank lines between groups)
                while above >= 0 and (not lines[above].strip() or lines[above].strip()
                                      .startswith(("from ", "import "))):
                    above -= 1
                run = range(above + 1, node.end_lineno or node.lineno)
                said = any("#" in lines[i] for i in run) or (
                    above >= 0 and lines[above].strip().startswith("#"))
                found.append((module, node.lineno, sorted(set(targets)), said,
                              id(node) in guarded or lazy_attribute))
    return found


def test_records_and_the_typing_flag_stay_on_the_prolog_path() -> None:
    """``@record`` (agent/model/record.py) and ``TYPE_CHECKING = False`` are the prolog's
    speed (its fresh-report path and its re-run's record): every other module uses
    ``@dataclass`` and ``typing.TYPE_CHECKING``."""
    on_path = pinned()
    record_users = {i.source for i in project_graph().imports if i.target == RECORD}
    assert sorted(record_users - on_path["no report"] - {RECORD}) == []
    flagged = {m for m, path in project_graph().modules.items()
               if "\nTYPE_CHECKING = False" in path.read_text(encoding="utf-8")}
    assert sorted(flagged - on_path["fresh"] - on_path["recorded"] - on_path["launcher"]) == []


def test_every_import_inside_a_function_says_why_and_keeps_a_module_off_a_path(
        paths: dict[str, set[str]]) -> None:
    """An import inside a function is a speed trick: it says why, and where its module is on
    a pinned path (the launcher, the prolog), what it imports is off at least one of them
    (else it belongs at the top), unless the function handles its failure or is a package's
    lazy ``__getattr__``."""
    silent, needless = [], []
    for module, line, targets, said, exempt in _lazy_imports():
        where = f"{project_graph().modules[module].relative_to(REPO)}:{line}"
        if not said:
            silent.append(where)
        on = [name for name, loaded in paths.items() if name != "bare" and module in loaded]
        if not exempt and on and all(t in paths[name] for name in on for t in targets):
            needless.append(f"{where} ({', '.join(targets)}: loaded on {', '.join(on)})")
    assert silent == [], "say why each is imported inside its function:\n" + "\n".join(silent)
    assert needless == [], "already loaded wherever its module is: import at the top:\n" + \
        "\n".join(needless)


def test_the_launcher_parses_the_source_flags_and_leaves_the_rest_to_click() -> None:
    from clusterdiag.agent.launch import slurm_flags

    assert slurm_flags(["--root", "/r", "--level=full", "--node", "n1"]) == {
        "root": "/r", "level": "full", "node": "n1"}
    assert slurm_flags([]) == {}
    for args in (["--help"], ["--root"], ["--level", "slow"], ["--bogus", "x"], ["--root="]):
        assert slurm_flags(args) is None, args
