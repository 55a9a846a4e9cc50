"""The prolog's fast path: the agent's findings stand; privileged skips and job-dependent
checks are run here."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import pci
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.agent.run.lean import run_checks
from clusterdiag.agent.run.runner import RunOptions, plan, run_node, sources_for
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for, simulated_env
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.slurm.entry import Inputs, Run
from clusterdiag.agent.slurm.job import JobEnv
from clusterdiag.agent.slurm.log import Log, format_line
from clusterdiag.agent.slurm.prolog import JOB_DEPENDENT, check_node, from_agent, rerun_profile
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.core.index import ENTRIES
from clusterdiag.reports.model.node import NodeReport, iso

PRIVILEGED = "gpu.pcie_link"  # stands in for a check that reads PCI config space


@pytest.fixture
def privileged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, PRIVILEGED, replace(REGISTRY[PRIVILEGED], privileged=True))
    monkeypatch.setattr(ENTRIES[PRIVILEGED], "privileged", True)  # what the prolog plans by


def _agent_report(findings: list[Finding], node: str = "n1") -> NodeReport:
    return NodeReport(node=node, profile={"name": "dgx-h100"}, version="0.1.0",
                      started_at=iso(time.time() - 2), duration_s=1.0, level="quick",
                      mode="agent", findings=findings)


def _f(check: str, status: Status, component: str = "node") -> Finding:
    return Finding(status, component, f"{check} said {status.value}", check=check)


def test_privileged_skips_are_rerun_and_everything_else_is_taken_as_is(
        privileged: None) -> None:
    report = _agent_report([
        _f(PRIVILEGED, Status.SKIP), _f("gpu.temperature", Status.FAIL, "gpu1"),
        _f("gpu.persistence_mode", Status.SKIP), _f("fabric.imex", Status.WARN),
    ])
    findings, rerun = from_agent(Config(), report)
    assert rerun == {PRIVILEGED, "gpu.processes"}
    checks = {f.check: f.status for f in findings}
    assert checks["gpu.temperature"] is Status.FAIL
    assert checks["gpu.persistence_mode"] is Status.SKIP  # not privileged: the agent's word
    assert PRIVILEGED not in checks
    # fabric.imex does not apply in the prolog: its skip comes from the plan, not the agent
    assert checks["fabric.imex"] is Status.SKIP


def test_without_the_privileged_flag_only_job_dependent_checks_are_rerun() -> None:
    _, rerun = from_agent(Config(), _agent_report([_f(PRIVILEGED, Status.SKIP)]))
    assert rerun == JOB_DEPENDENT == {"gpu.processes"}


def test_the_agents_gpu_processes_verdict_is_never_kept() -> None:
    """In agent mode leftover processes are only noted, so its pass means nothing here."""
    findings, rerun = from_agent(Config(), _agent_report([_f("gpu.processes", Status.PASS)]))
    assert "gpu.processes" in rerun
    assert all(f.check != "gpu.processes" for f in findings)


def test_a_disabled_gpu_processes_is_not_rerun() -> None:
    config = Config()
    config.data["checks"]["gpu.processes"] = {"enabled": False}
    findings, rerun = from_agent(config, _agent_report([]))
    assert rerun == set()
    assert [f.status for f in findings if f.check == "gpu.processes"] == [Status.SKIP]


@pytest.mark.parametrize(("profile", "sources"), [
    ("dgx-h100", {"nvml"}),  # the agent's profile: no detection, NVML alone
    # unknown: detected again, from all detection's evidence (a B200's NVSwitch managers
    # are RDMA devices)
    ("no-such-profile", {"nvml", "pci", "host", "infiniband"}),
])
def test_the_rerun_collects_nvml_alone_with_the_agents_profile(
        profile: str, sources: set[str]) -> None:
    config = Config()
    run = Run("prolog", config, simulated_env("dgx-h100", None, config),
              JobEnv(None, None, None, None, None), Log("prolog"), time.monotonic() + 8,
              Inputs())
    report = replace(_agent_report([]), profile={"name": profile})
    opts = RunOptions(patterns=tuple(JOB_DEPENDENT), profile=rerun_profile(run, report))
    assert sources_for(plan(config, opts)[0], opts.profile) == sources


def test_the_prolog_runs_the_skipped_check_on_the_node_itself(
        privileged: None, tmp_path: Path) -> None:
    config = Config()
    config.data["agent"]["state_dir"] = str(tmp_path)
    env = simulated_env("dgx-h100", None, config)
    agent = run_node(env, config, RunOptions(mode="agent"))
    findings = [f for f in agent.findings if f.check != PRIVILEGED]
    findings += [_f(PRIVILEGED, Status.SKIP), _f("host.disk", Status.FAIL)]
    cached = replace(agent, started_at=iso(time.time() - 1), findings=findings)
    (tmp_path / "report.json").write_text(json.dumps(cached.to_dict()))
    # the prolog's budget: 20 s as the integration tests give it, so a loaded machine
    # still leaves the rerun's NVML readers time to answer (8 s may not)
    run = Run("prolog", config, env, JobEnv(None, None, None, None, None), Log("prolog"),
              time.monotonic() + 20, Inputs())
    outcome = check_node(run)
    assert outcome.source.startswith("agent report")
    assert outcome.extra["reran"] == f"{PRIVILEGED},gpu.processes"
    own = [f for f in outcome.findings if f.check == PRIVILEGED]
    assert {f.component for f in own} == {f"gpu{i}" for i in range(8)}
    assert {f.status for f in own} == {Status.PASS}
    assert any(f.check == "host.disk" and f.status is Status.FAIL for f in outcome.findings)


# A process left on GPU 3 by no job, and ACS redirection on GPU 5's switch: each fails
# the check it stands for (agent/sim/faults/catalog.py).
FAULTS = [{"node": "n1", "kind": "leftover_process", "gpu": 3},
          {"node": "n1", "kind": "acs_enabled", "gpu": 5}]


@pytest.mark.parametrize(("job_gpus", "faults"), [
    (None, []), (["0", "3"], []), (["0", "3"], FAULTS), (None, FAULTS), (["0", "1"], FAULTS)])
def test_the_lean_rerun_judges_as_the_runner_does(job_gpus: list[str] | None,
                                                  faults: list[dict[str, object]]) -> None:
    """nccl.acs (the unprivileged agent's skip) and gpu.processes, judged by the lean path
    (their checks' modules and their sources' collectors only) and by the whole runner,
    on a healthy node and on one where both fail."""
    config = Config()
    config.data["checks"]["gpu.processes"] = {"job_gpus": job_gpus, "job_id": "7"}
    checks = ["gpu.processes", "nccl.acs"]
    lean = run_checks(env_for(NodeSpec("n1", "dgx-h100", faults=faults)), config, checks,
                      "dgx-h100", "prolog", 8.0)
    full = run_node(env_for(NodeSpec("n1", "dgx-h100", faults=faults)), config,
                    RunOptions(mode="prolog", patterns=tuple(checks), profile="dgx-h100"))

    def seen(findings: list[Finding]) -> list[tuple[str, ...]]:
        return sorted((f.check, f.component, f.status.value, f.message,
                       json.dumps([f.observed, f.expected], sort_keys=True, default=str))
                      for f in findings)

    assert seen(lean) == seen(full.findings)
    assert {f.check for f in lean} == set(checks)
    failed = {f.check for f in lean if f.status is Status.FAIL}
    on_job = faults and (job_gpus is None or "3" in job_gpus)
    assert failed == ({"nccl.acs"} if faults else set()) | ({"gpu.processes"} if on_job else set())


@pytest.mark.parametrize("faults", [[], FAULTS])
def test_the_lean_rerun_reads_of_pci_only_what_nccl_acs_judges(
        faults: list[dict[str, object]]) -> None:
    """Re-running nccl.acs, the PCI source reads each function's vendor, class and the
    bridges above it, and each bridge's ACS control: the same for nccl.acs as the whole
    read (the test above), from a third of the files."""
    env = env_for(NodeSpec("n1", "dgx-h100", faults=faults))
    full_stats, topology_stats = SourceStats(), SourceStats()
    full = pci.collect(env, full_stats, time.monotonic() + 8)
    env.pci_topology_only = True
    topology = pci.collect(env, topology_stats, time.monotonic() + 8)

    def judged(devices: list[PciDevice]) -> list[tuple[object, ...]]:
        bridges = {b for d in devices for b in d.path[:-1]}
        return [(d.bdf, d.vendor, d.acs_ctrl, sorted(d.unknown)) if d.bdf in bridges
                else (d.bdf, d.vendor, d.pci_class, d.path) for d in devices]

    assert judged(topology) == judged(full)
    assert any(d.acs_ctrl for d in topology) == bool(faults)
    assert topology_stats.files_read * 3 <= full_stats.files_read
    lean_env = env_for(NodeSpec("n1", "dgx-h100", faults=faults))
    run_checks(lean_env, Config(), ["nccl.acs"], "dgx-h100", "prolog", 8.0)
    assert lean_env.pci_topology_only
    both = env_for(NodeSpec("n1", "dgx-h100"))
    run_checks(both, Config(), ["nccl.acs", "gpu.pcie_link"], "dgx-h100", "prolog", 8.0)
    assert not both.pci_topology_only


def test_a_pci_listing_cut_by_the_deadline_is_a_timeout_never_a_smaller_bus() -> None:
    """Part of the bus judged as the whole would read as GPUs gone: the deadline is ours."""
    stats = SourceStats()
    assert pci.collect(env_for(NodeSpec("n1", "dgx-h100")), stats, time.monotonic() - 1) == []
    assert stats.status == "timeout"
    assert "deadline" in (stats.error or "")


def test_log_lines_are_key_value_and_quote_what_needs_it() -> None:
    line = format_line("prolog", "FAIL", {"job": "7", "user": None,
                                          "reason": 'clusterdiag: a "b" c=d'})
    assert line == 'clusterdiag prolog: FAIL job=7 reason="clusterdiag: a \\"b\\" c=d"'
