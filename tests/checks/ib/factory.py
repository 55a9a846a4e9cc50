"""RDMA devices and snapshots built from the model for the ib.* and roce.* checks, ``run``,
which runs one check, and ``command_runner``, a stand-in for the tools the RoCE collector asks."""

from __future__ import annotations

from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.ib import IbDevice, IbPort
from clusterdiag.agent.model.kernel import KernelLog
from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.checks.core.finding import Finding, Status
from tests.checks.harness import run_check


def make_port(**kw: Any) -> IbPort:
    base: dict[str, Any] = {"port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
                            "rate_gbps": 400.0, "width": "4X", "speed": "NDR",
                            "link_layer": "InfiniBand", "lid": 5, "sm_lid": 1,
                            "counters": {"symbol_error": 0, "link_downed": 0,
                                         "link_error_recovery": 0, "port_rcv_errors": 0,
                                         "port_xmit_wait": 0, "port_xmit_discards": 0}}
    base.update(kw)
    return IbPort(**base)


def make_dev(name: str, role: str = "compute", **kw: Any) -> IbDevice:
    base: dict[str, Any] = {"fw_ver": "28.41.1000", "hca_type": "MT4129",
                            "pci_bdf": "0000:aa:00.0", "role": role,
                            "excluded": role != "compute", "pcie_speed_gts": 32.0,
                            "pcie_width": 16, "ports": [make_port()]}
    base.update(kw)
    return IbDevice(name=name, **base)


def make_snap(devs: list[IbDevice], at: float = 1000.0, log: KernelLog | None = None) -> Snapshot:
    return Snapshot(node="n1", taken_at=at, infiniband=devs, kernel_log=log)


def run(check_id: str, snap: Snapshot, profile: str = "dgx-h100",
         previous: Snapshot | None = None, **params: Any) -> list[Finding]:
    """``run_check`` at --level full, parameters as keywords."""
    return run_check(check_id, snap, profile=profile, params=params, level="full",
                     previous=previous)


def statuses(findings: list[Finding]) -> set[Status]:
    return {f.status for f in findings}


def eight_hcas(**port_kw: Any) -> list[IbDevice]:
    devs = [make_dev(f"mlx5_{i}", pci_bdf=f"0000:{0x18 + i:02x}:00.0") for i in range(8)]
    if port_kw:
        devs[3].ports = [make_port(**port_kw)]
    return devs


def command_runner(answers: dict[str, CommandResult]) -> Any:
    def run(argv: list[str], timeout_s: float) -> CommandResult:
        assert 0 < timeout_s <= 2.0  # every tool under its own deadline
        return answers.get(argv[0], CommandResult(argv, None, error=f"{argv[0]}: not found"))
    return run
