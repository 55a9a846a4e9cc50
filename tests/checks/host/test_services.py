"""host.services (checks/host/services.py)."""

from __future__ import annotations

from clusterdiag.agent.model.host import HostInfo, ServiceState
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.host.factory import judge, one


def test_services_skip_without_config_or_systemd() -> None:
    assert one(judge("host.services", HostInfo("n1", has_systemd=True))).status is Status.SKIP
    finding = one(judge("host.services", HostInfo("n1"), required=["slurmd"]))
    assert finding.status is Status.SKIP
    assert "systemd" in finding.message


def test_services_states() -> None:
    info = HostInfo("n1", has_systemd=True, services=[
        ServiceState("slurmd", "active", "running", "loaded"),
        ServiceState("munge", "failed", "failed", "loaded"),
        ServiceState("nvidia-fabricmanager", "inactive", "dead", "not-found"),
        ServiceState("dcgm", "activating", "start", "loaded"),
        ServiceState("sshd", error="systemctl: no answer within 3 s"),
    ])
    required = ["slurmd", "munge", "nvidia-fabricmanager", "dcgm", "sshd", "chronyd"]
    findings = judge("host.services", info, required=required)
    assert [(f.component, f.status) for f in findings] == [
        ("slurmd", Status.PASS), ("munge", Status.FAIL), ("nvidia-fabricmanager", Status.FAIL),
        ("dcgm", Status.WARN), ("sshd", Status.ERROR), ("chronyd", Status.ERROR)]
    assert findings[1].action is Action.FIX_CONFIG
    assert findings[1].observed == "failed/failed"
    assert findings[2].message == "required service not installed"
    assert findings[4].message == "systemctl did not answer"
