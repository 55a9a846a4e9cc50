"""Host facts judged by one host.* check, and the small helpers the host tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.host import HostInfo
from clusterdiag.agent.model.kernel import KernelLog
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.checks import host as host_checks
from clusterdiag.checks.finding import Finding, Status
from clusterdiag.checks.profile import load_profile
from clusterdiag.checks.registry import REGISTRY, CheckContext

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "host"
NOW = 1_700_000_000.0
HOST_CHECKS = sorted(i for i in REGISTRY if i.startswith("host.") and
                     REGISTRY[i].func.__module__.startswith(f"{host_checks.__name__}."))


def judge(check_id: str, host: HostInfo | None = None, *, previous: Snapshot | None = None,
          pci: list[PciDevice] | None = None, kernel_log: KernelLog | None = None,
          taken_at: float = NOW, **params: Any) -> list[Finding]:
    snap = Snapshot(node="n1", taken_at=taken_at, host=host, pci=pci, kernel_log=kernel_log)
    ctx = CheckContext(snapshot=snap, profile=load_profile("generic"),
                       params={**REGISTRY[check_id].params, **params}, level="full",
                       now=taken_at, previous=previous)
    return list(REGISTRY[check_id].func(ctx))


def statuses(findings: list[Finding]) -> list[Status]:
    return [f.status for f in findings]


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]
