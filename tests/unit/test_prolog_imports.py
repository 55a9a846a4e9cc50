"""What the Slurm prolog imports, in a fresh interpreter: its start is paid on every node for
every job, so the set may shrink but must not grow unnoticed.

The launcher (agent/launch.py) must reach the prolog without click or any other
command's module. With a fresh agent report (the common path) the prolog reads the
report and judges it: no check family, no snapshot model, no collector, no PyYAML or
pynvml, and none of ``dataclasses``, ``typing``, ``pathlib``, whose imports alone cost
as much as the interpreter's start. Run with no agent report on an empty tree (its
widest path: every quick check) it may import only the modules listed here. A change
that needs another module on either path adds it below, on purpose.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from clusterdiag.agent.read import nvml_library
from tests.conftest import REPO
from tests.imports import read_graph

GRAPH = read_graph(REPO)
RECORD = "clusterdiag.agent.model.record"

# Each probe prints the modules loaded as a Python literal: importing json to write them
# would count json as loaded.
_BARE = "import sys; print(sorted(sys.modules))"
_LAUNCHER = "import sys; import clusterdiag.agent.launch; print(sorted(sys.modules))"
_PROLOG = """
import sys
sys.argv = ["clusterdiag", "prolog", "--root", sys.argv[1], "--config", sys.argv[2],
            *sys.argv[3:]]
from clusterdiag.agent.launch import main
try:
    main()
except SystemExit:
    pass
print(sorted(sys.modules))
"""

LAUNCHER = frozenset({
    "clusterdiag", "clusterdiag.agent", "clusterdiag.agent.base", "clusterdiag.agent.base.errors",
    "clusterdiag.agent.launch", "clusterdiag.agent.slurm", "clusterdiag.agent.slurm.trouble",
})
# The folders (packages) of the layers both paths cross; their __init__ holds a docstring.
LAYERS = frozenset({f"clusterdiag.{name}" for name in (
    "agent.read", "agent.run", "agent.settings", "checks.catalogs", "checks.core")})

FRESH_REPORT = LAUNCHER | LAYERS | {f"clusterdiag.{name}" for name in (
    "agent.base.hostname", "agent.base.plain", "agent.base.safefile", "agent.read.nvml_library",
    "agent.run.session", "agent.settings.config", "agent.slurm.agent_report", "agent.slurm.entry",
    "agent.slurm.job", "agent.slurm.log", "agent.slurm.prolog", "agent.slurm.reason", "checks",
    "checks.catalogs.manifest", "checks.core.finding", "checks.core.index", "checks.core.levels")}
# What the fresh-report path must not load: each costs a sizeable part of an interpreter
# start, or stands for a whole layer it does not need.
NOT_ON_THE_FRESH_PATH = frozenset({
    "dataclasses", "typing", "pathlib", "inspect", "yaml", "pynvml", "click", "socket", "copy",
    "subprocess", "clusterdiag.agent.model", "clusterdiag.checks.core.registry",
    "clusterdiag.agent.run.collect", "clusterdiag.reports.model.node"})

PROLOG = LAUNCHER | LAYERS | {f"clusterdiag.{name}" for name in (
    "agent.base.hostname", "agent.base.lazy_re", "agent.base.plain", "agent.base.safefile",
    "agent.collectors", "agent.collectors.allreduce", "agent.collectors.host",
    "agent.collectors.ib", "agent.collectors.ib_port", "agent.collectors.kept",
    "agent.collectors.kernel", "agent.collectors.kernel_log", "agent.collectors.nccl",
    "agent.collectors.nccl_host", "agent.collectors.nvml", "agent.collectors.nvml_budget",
    "agent.collectors.nvml_read", "agent.collectors.pci", "agent.collectors.roce",
    "agent.collectors.vpd", "agent.model", "agent.model.gpu", "agent.model.host",
    "agent.model.ib", "agent.model.kernel", "agent.model.nccl", "agent.model.pci",
    "agent.model.record", "agent.model.serde", "agent.model.upgrade", "agent.model.version",
    "agent.read.nvml_library", "agent.read.sources", "agent.read.sysfs", "agent.read.worker",
    "agent.run.collect", "agent.run.nccl_cache", "agent.run.runner", "agent.run.session",
    "agent.settings.config", "agent.slurm.agent_report", "agent.slurm.entry", "agent.slurm.job",
    "agent.slurm.log", "agent.slurm.prolog", "agent.slurm.reason", "agent.slurm.scontrol",
    "checks", "checks.catalogs.manifest", "checks.catalogs.profile_data",
    "checks.catalogs.xid_catalog", "checks.core.common", "checks.core.finding",
    "checks.core.index", "checks.core.levels", "checks.core.params", "checks.core.rails",
    "checks.core.rates", "checks.core.registry", "checks.core.topology", "checks.core.window",
    "checks.fabric", "checks.fabric.clique", "checks.fabric.health", "checks.fabric.helpers",
    "checks.fabric.services", "checks.fabric.state", "checks.gpu", "checks.gpu.helpers",
    "checks.gpu.identity", "checks.gpu.memory", "checks.gpu.modes", "checks.gpu.pcie",
    "checks.gpu.presence", "checks.gpu.processes", "checks.gpu.recovery", "checks.gpu.thermal",
    "checks.gpu.xid", "checks.host", "checks.host.clock", "checks.host.cmdline",
    "checks.host.helpers", "checks.host.kernel_errors", "checks.host.pcie",
    "checks.host.processes", "checks.host.profile", "checks.host.resources",
    "checks.host.services", "checks.host.storage", "checks.host.versions", "checks.ib",
    "checks.ib.counters", "checks.ib.firmware", "checks.ib.helpers", "checks.ib.inventory",
    "checks.ib.kernel_errors", "checks.ib.pcie", "checks.ib.ports", "checks.ib.roce",
    "checks.ib.subnet_manager", "checks.nccl", "checks.nccl.affinity", "checks.nccl.allreduce",
    "checks.nccl.env", "checks.nccl.gpudirect", "checks.nccl.helpers", "checks.nccl.library",
    "checks.nccl.limits", "checks.nccl.pcie", "checks.nccl.settings", "checks.nvlink",
    "checks.nvlink.error_rate", "checks.nvlink.helpers", "checks.nvlink.links",
    "checks.nvlink.topology", "checks.nvswitch", "checks.nvswitch.switches", "checks.profiles",
    "checks.profiles.detect", "checks.profiles.profile", "reports", "reports.model",
    "reports.model.facts", "reports.model.node")}
# Third-party packages the prolog may load: NVML's bindings, where the library loads.
THIRD_PARTY = frozenset({"pynvml"})


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a probe that sees our code as a plain install does: ``-S`` keeps
    site's ``.pth`` files out (an editable install's finder alone loads pathlib, re, enum
    and some forty more before any of ours), and ``PYTHONPATH`` names a tree of links laid
    out as the package (agent/ is clusterdiag/agent) and the venv's site-packages."""
    tree = tmp_path_factory.mktemp("links")
    (tree / "clusterdiag").mkdir()
    for folder in ("agent", "checks", "reports"):
        (tree / "clusterdiag" / folder).symlink_to(REPO / folder)
    paths = sysconfig.get_paths()
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        dict.fromkeys([str(tree), paths["purelib"], paths["platlib"]]))}


def _modules(env: dict[str, str], code: str, *args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-S", "-c", code, *args], capture_output=True,
                          text=True, check=True, timeout=120, env=env)
    return set(ast.literal_eval(proc.stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory, isolated: dict[str, str]
          ) -> dict[str, set[str]]:
    """Every module (ours, the standard library's, third parties') each path has loaded when
    it ends, a bare interpreter's included: the launcher alone, the prolog with a fresh
    agent report (where NVML's library is missing: that is the path it pins) and without
    one (its widest path: every quick check on an empty tree)."""
    tmp = tmp_path_factory.mktemp("prolog")
    found = {"launcher": _modules(isolated, _LAUNCHER)}
    config = tmp / "config.yaml"
    if nvml_library.missing():
        _fresh_report(tmp / "state", "n1")
        config.write_text(json.dumps({"agent": {"state_dir": str(tmp / "state")},
                                      "prolog": {"drain": False}}))
        found["fresh"] = _modules(isolated, _PROLOG, str(tmp), str(config), "--node", "n1")
    config.write_text(json.dumps({"agent": {"state_dir": str(tmp / "nothing")},
                                  "prolog": {"drain": False}}))
    found["no report"] = _modules(isolated, _PROLOG, str(tmp), str(config))
    return found


@pytest.fixture(scope="module")
def bare(isolated: dict[str, str]) -> set[str]:
    """What a bare interpreter has loaded before any of ours."""
    return _modules(isolated, _BARE)


def test_the_launcher_imports_nothing_but_itself(paths: dict[str, set[str]]) -> None:
    got = paths["launcher"]
    assert {m for m in got if m.startswith("clusterdiag")} == LAUNCHER
    assert "click" not in got


def _fresh_report(state: Path, node: str) -> None:
    state.mkdir()
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    (state / "report.json").write_text(json.dumps({
        "node": node, "profile": {"name": "dgx-h100"}, "version": "0.1.0",
        "started_at": started, "duration_s": 1.0, "level": "quick", "mode": "agent",
        "findings": []}))


def test_with_a_fresh_report_the_prolog_reads_it_and_judges_nothing_more(
        paths: dict[str, set[str]], bare: set[str]) -> None:
    if "fresh" not in paths:
        pytest.skip("NVML's library loads here: gpu.processes needs pynvml and the "
                    "collectors (the path this test pins is the one without NVML)")
    got = paths["fresh"] - bare
    assert {m for m in got if m.startswith("clusterdiag")} == FRESH_REPORT
    assert got & NOT_ON_THE_FRESH_PATH == set()


def test_the_prolog_imports_only_the_allowed_modules(paths: dict[str, set[str]],
                                                     bare: set[str]) -> None:
    got = paths["no report"] - bare
    ours = {m for m in got if m.startswith("clusterdiag")}
    assert ours - PROLOG == set(), "new modules on the prolog's path"
    # Its records are read through agent/model/record.py: dataclasses would bring inspect,
    # ast, dis and tokenize, a tenth of the whole run; times are written and
    # plain data copied without datetime and copy (reports/model/node.py, agent/base/plain.py).
    assert got & {"dataclasses", "inspect", "datetime", "copy"} == set()
    stdlib = set(sys.stdlib_module_names)
    others = {m.split(".")[0] for m in got if not m.startswith("clusterdiag")}
    assert {m for m in others if m not in stdlib and not m.startswith("_")} <= THIRD_PARTY
    assert "click" not in got


def _is_module(name: str) -> bool:
    if name in GRAPH.modules:
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
    whether it is tried: an import whose failure the function handles)."""
    found = []
    for module, path in GRAPH.modules.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse("\n".join(lines))
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try)
                   for stmt in t.body for n in ast.walk(stmt)}
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
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
                              id(node) in guarded))
    return found


def test_records_and_the_typing_flag_stay_on_the_prolog_path() -> None:
    """``@record`` (agent/model/record.py) and ``TYPE_CHECKING = False`` are the prolog's
    speed: every other module uses ``@dataclass`` and ``typing.TYPE_CHECKING``."""
    record_users = {i.source for i in GRAPH.imports if i.target == RECORD}
    assert sorted(record_users - PROLOG - {RECORD}) == []
    flagged = {m for m, path in GRAPH.modules.items()
               if "\nTYPE_CHECKING = False" in path.read_text(encoding="utf-8")}
    assert sorted(flagged - FRESH_REPORT - LAUNCHER) == []


def test_every_import_inside_a_function_says_why_and_keeps_a_module_off_a_path(
        paths: dict[str, set[str]]) -> None:
    """An import inside a function is a speed trick: it says why, and where its module is on
    a pinned path (the launcher, the prolog), what it imports is off at least one of them
    (else it belongs at the top), unless the function handles its failure."""
    silent, needless = [], []
    for module, line, targets, said, tried in _lazy_imports():
        where = f"{GRAPH.modules[module].relative_to(REPO)}:{line}"
        if not said:
            silent.append(where)
        on = [name for name, loaded in paths.items() if module in loaded]
        if not tried and on and all(t in paths[name] for name in on for t in targets):
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
