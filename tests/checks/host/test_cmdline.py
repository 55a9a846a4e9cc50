"""host.kernel_cmdline (checks/host/cmdline.py)."""

from __future__ import annotations

from clusterdiag.agent.model.host import HostInfo
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.host.factory import judge, one, statuses

CMDLINE = ["BOOT_IMAGE=/vmlinuz", "ro", "iommu=off", "iommu=pt", "nvidia-drm.modeset=1",
           "quiet", "--", "init_only=1"]


def test_kernel_cmdline_skips_when_nothing_configured() -> None:
    assert one(judge("host.kernel_cmdline", HostInfo("n1", cmdline=CMDLINE))).status is \
        Status.SKIP


def test_kernel_cmdline_passes() -> None:
    findings = judge("host.kernel_cmdline", HostInfo("n1", cmdline=CMDLINE),
                     required=["iommu=pt", "nvidia_drm.modeset=1", "quiet"],
                     forbidden=["iommu=off", "init_only", "nosmt"])
    assert statuses(findings) == [Status.PASS]


def test_kernel_cmdline_failures_name_the_entry() -> None:
    findings = judge("host.kernel_cmdline", HostInfo("n1", cmdline=CMDLINE),
                     required=["iommu=on", "intel_iommu"], forbidden=["iommu=pt", "quiet"])
    assert statuses(findings) == [Status.FAIL] * 4
    assert [f.message for f in findings] == [
        "required kernel parameter missing: iommu=on",
        "required kernel parameter missing: intel_iommu",
        "forbidden kernel parameter set: iommu=pt", "forbidden kernel parameter set: quiet"]
    assert [f.observed for f in findings] == ["iommu=pt", None, "iommu=pt", "quiet"]
    assert {f.action for f in findings} == {Action.FIX_CONFIG}


def test_kernel_cmdline_unreadable_is_error() -> None:
    info = HostInfo("n1", unknown={"cmdline": "/proc/cmdline: unbalanced quote"})
    assert one(judge("host.kernel_cmdline", info, required=["ro"])).status is Status.ERROR
