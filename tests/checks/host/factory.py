"""Host facts judged by one host.* check, and the small helpers the host tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.host import HostInfo
from clusterdiag.agent.model.kernel import KernelLog
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.checks import REGISTRY
from clusterdiag.checks import host as host_checks
from clusterdiag.checks.core.finding import Finding, Status
from tests.checks.harness import run_check

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "host"
NOW = 1_700_000_000.0
# The checks of the host's own facts: host.profile and host.versions judge the profile the
# node was judged against and the versions it expects (tests/checks/host/test_versions.py).
HOST_CHECKS = sorted(i for i in REGISTRY if i.startswith("host.") and
                     REGISTRY[i].func.__module__.startswith(f"{host_checks.__name__}.") and
                     i not in ("host.profile", "host.versions"))


def judge(check_id: str, host: HostInfo | None = None, *, previous: Snapshot | None = None,
          pci: list[PciDevice] | None = None, kernel_log: KernelLog | None = None,
          taken_at: float = NOW, **params: Any) -> list[Finding]:
    """``run_check`` on a generic node at --level full, parameters as keywords."""
    snap = Snapshot(node="n1", taken_at=taken_at, host=host, pci=pci, kernel_log=kernel_log)
    return run_check(check_id, snap, params=params, level="full", previous=previous)


def statuses(findings: list[Finding]) -> list[Status]:
    return [f.status for f in findings]


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]
