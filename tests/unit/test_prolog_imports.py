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

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterdiag.agent.read import nvml_library

_PROLOG = """
import json, sys
sys.argv = ["clusterdiag", "prolog", "--root", sys.argv[1], "--config", sys.argv[2],
            *sys.argv[3:]]
from clusterdiag.agent.launch import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
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


def _modules(code: str, *args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, check=True, timeout=120)
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_the_launcher_imports_nothing_but_itself() -> None:
    got = _modules("import json, sys; import clusterdiag.agent.launch; "
                   "print(json.dumps(sorted(sys.modules)))")
    ours = {m for m in got if m.startswith("clusterdiag")}
    assert ours == LAUNCHER
    assert "click" not in got


def _fresh_report(state: Path, node: str) -> None:
    state.mkdir()
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    (state / "report.json").write_text(json.dumps({
        "node": node, "profile": {"name": "dgx-h100"}, "version": "0.1.0",
        "started_at": started, "duration_s": 1.0, "level": "quick", "mode": "agent",
        "findings": []}))


def test_with_a_fresh_report_the_prolog_reads_it_and_judges_nothing_more(
        tmp_path: Path) -> None:
    if not nvml_library.missing():
        pytest.skip("NVML's library loads here: gpu.processes needs pynvml and the "
                    "collectors (the path this test pins is the one without NVML)")
    _fresh_report(tmp_path / "state", "n1")
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"agent": {"state_dir": str(tmp_path / "state")},
                                  "prolog": {"drain": False}}))
    baseline = _modules("import json, sys; print(json.dumps(sorted(sys.modules)))")
    got = _modules(_PROLOG, str(tmp_path), str(config), "--node", "n1") - baseline
    ours = {m for m in got if m.startswith("clusterdiag")}
    assert ours == FRESH_REPORT
    assert got & NOT_ON_THE_FRESH_PATH == set()


def test_the_prolog_imports_only_the_allowed_modules(tmp_path: Path) -> None:
    baseline = _modules("import json, sys; print(json.dumps(sorted(sys.modules)))")
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"agent": {"state_dir": str(tmp_path / "state")},
                                  "prolog": {"drain": False}}))
    got = _modules(_PROLOG, str(tmp_path), str(config)) - baseline
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


def test_the_launcher_parses_the_source_flags_and_leaves_the_rest_to_click() -> None:
    from clusterdiag.agent.launch import slurm_flags

    assert slurm_flags(["--root", "/r", "--level=full", "--node", "n1"]) == {
        "root": "/r", "level": "full", "node": "n1"}
    assert slurm_flags([]) == {}
    for args in (["--help"], ["--root"], ["--level", "slow"], ["--bogus", "x"], ["--root="]):
        assert slurm_flags(args) is None, args
