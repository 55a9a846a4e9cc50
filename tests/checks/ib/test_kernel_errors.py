"""ib.kernel_errors (checks/ib/kernel_errors.py)."""

from __future__ import annotations

from clusterdiag.agent.model.kernel import KernelEvent, KernelLog
from clusterdiag.checks.core.finding import Status
from tests.checks.ib.factory import eight_hcas, make_snap, run, statuses


def test_kernel_errors_names_the_hca() -> None:
    devs = eight_hcas()
    line = f"mlx5_core {devs[1].pci_bdf}: poll_health:813:(pid 0): Fatal error 1 detected"
    log = KernelLog("file:x", events=[
        KernelEvent("mlx5_health", line, line, device=devs[1].pci_bdf, time=990.0),
        KernelEvent("module_temperature", "High temperature on sensors", "t", time=990.0),
        KernelEvent("mlx5_health", "old", "old", device=devs[1].pci_bdf, time=1.0)],
        lines_read=3)
    found = run("ib.kernel_errors", make_snap(devs, log=log), window_s=100)
    assert {(f.component, f.status, f.action.value) for f in found} == {
        ("mlx5_1", Status.FAIL, "reboot"), ("node", Status.WARN, "investigate")}
    assert [f.observed["count"] for f in found if f.component == "mlx5_1"] == [1]
    clean = run("ib.kernel_errors", make_snap(devs, log=KernelLog("file:x", lines_read=5)))
    assert statuses(clean) == {Status.PASS}
