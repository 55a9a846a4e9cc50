"""The host.* catalog as a whole, and a collected fixture tree through the collector
and every host check (checks/host/)."""

from __future__ import annotations

import time

import pytest

from clusterdiag.agent.collectors import host as host_collector
from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.host import HostInfo
from clusterdiag.agent.model.kernel import KernelLog
from clusterdiag.agent.read.sources import CommandResult, SourceEnv
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.core.finding import Status
from tests.checks.host.factory import FIXTURES, HOST_CHECKS, NOW, judge, one, statuses


def test_the_catalog_has_every_host_check() -> None:
    assert sorted(f"host.{n}" for n in (
        "cpu_count", "memory", "disk", "mounts", "services", "clock_sync", "kernel_cmdline",
        "kernel_errors", "cper", "dstate_processes", "pcie_aer")) == HOST_CHECKS
    assert REGISTRY["host.dstate_processes"].rate
    assert REGISTRY["host.pcie_aer"].rate
    assert not REGISTRY["host.disk"].rate


@pytest.mark.parametrize("check_id", HOST_CHECKS)
def test_every_check_yields_a_finding_on_an_empty_host(check_id: str) -> None:
    findings = judge(check_id, HostInfo("n1"), pci=[], kernel_log=KernelLog("file:x"),
                     previous=Snapshot("n1", NOW - 10, host=HostInfo("n1"), pci=[]))
    assert findings
    assert all(f.status is not Status.FAIL for f in findings)


@pytest.mark.parametrize("check_id", HOST_CHECKS)
def test_every_check_errors_without_its_source(check_id: str) -> None:
    findings = judge(check_id, previous=Snapshot("n1", NOW - 10))
    assert statuses(findings) == [Status.ERROR]


def test_fixture_tree_through_collector_and_checks() -> None:
    def runner(argv: list[str], timeout_s: float) -> CommandResult:
        if argv[0] == "systemctl":
            return CommandResult(argv, 0, "Id=slurmd.service\nActiveState=inactive\n"
                                          "SubState=dead\nLoadState=loaded\n")
        return CommandResult(argv, None, error=f"{argv[0]}: not found")

    params = {"host.services": {"required": ["slurmd"]}}
    env = SourceEnv(node="n1", root=FIXTURES / "healthy", runner=runner, params=params)
    info = host_collector.collect(env, SourceStats(), time.monotonic() + 5)
    assert statuses(judge("host.services", info, required=["slurmd"])) == [Status.FAIL]
    assert statuses(judge("host.cpu_count", info, min=8)) == [Status.PASS]
    assert statuses(judge("host.memory", info, min_gib=1900)) == [Status.PASS] * 3
    assert statuses(judge("host.mounts", info, required=[
        {"path": "/home", "fstype": "nfs4"}, "/mnt/my data"])) == [Status.PASS] * 2
    assert statuses(judge("host.kernel_cmdline", info, required=["iommu=pt"],
                          forbidden=["single"])) == [Status.PASS]
    assert statuses(judge("host.clock_sync", info)) == [Status.SKIP]
    space = judge("host.disk", info, paths=["/"])[0]
    assert space.message.endswith("space")
    assert 0 <= space.observed <= 100
    previous = Snapshot("n1", NOW - 5, host=info)
    findings = judge("host.dstate_processes", info, previous=previous)
    assert one(findings).status is Status.FAIL  # the same three D-state processes
