"""nvswitch.count and nvswitch.sxid (checks/nvswitch/switches.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.ib import IbDevice
from clusterdiag.agent.model.kernel import KernelLog, SxidEvent
from clusterdiag.agent.model.pci import NVIDIA_VENDOR, PciDevice
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.nvswitch import switches as nvswitch_checks
from tests.checks.nvlink.factory import NOW, judge, make_snapshot, nvswitch, one


def test_catalog_declares_the_contract() -> None:
    ids = sorted(i for i in REGISTRY
                 if REGISTRY[i].func.__module__ == nvswitch_checks.__name__)
    assert ids == ["nvswitch.count", "nvswitch.management", "nvswitch.sxid"]
    assert REGISTRY["nvswitch.management"].needs == ("infiniband",)
    assert REGISTRY["nvswitch.sxid"].params["window_s"] == 7200
    assert REGISTRY["nvswitch.sxid"].needs == ("kernel_log",)
    assert REGISTRY["nvswitch.count"].needs == ("pci",)


# --- nvswitch.count -------------------------------------------------------------------

def test_nvswitch_count_pass_and_missing_switch() -> None:
    switches = [nvswitch(f"0000:{0x05 + i:02x}:00.0") for i in range(4)]
    finding = one(judge("nvswitch.count", make_snapshot(pci=switches)))
    assert (finding.status, finding.observed, finding.expected) == (Status.PASS, 4, 4)
    finding = one(judge("nvswitch.count", make_snapshot(pci=switches[:3])))
    assert (finding.status, finding.action, finding.observed) == (Status.FAIL, Action.REBOOT, 3)


def test_nvswitch_count_ignores_nvidia_bridges_and_gpus() -> None:
    pci = [nvswitch(f"0000:{i:02x}:00.0") for i in range(6)]
    pci.append(PciDevice(bdf="0000:40:00.0", vendor=NVIDIA_VENDOR, device=0x22B1,
                         pci_class=0x060400))
    pci.append(PciDevice(bdf="0000:41:00.0", vendor=NVIDIA_VENDOR, device=0x20B2,
                         pci_class=0x030200))
    assert one(judge("nvswitch.count", make_snapshot("dgx-a100", pci=pci),
                     "dgx-a100")).status is Status.PASS


@pytest.mark.parametrize("platform", ["gb200-nvl72", "hgx-h100-pcie"])
def test_nvswitch_checks_skip_without_nvswitch(platform: str) -> None:
    snap = make_snapshot(platform, pci=[], kernel_log=KernelLog("file:x"))
    for check_id in ("nvswitch.count", "nvswitch.sxid"):
        assert one(judge(check_id, snap, platform)).status is Status.SKIP


def test_nvswitch_count_without_pci_is_an_error() -> None:
    assert one(judge("nvswitch.count", make_snapshot())).status is Status.ERROR


# --- nvswitch.sxid --------------------------------------------------------------------

def sxid_event(sxid: int, switch: int, message: str, time: float | None = NOW - 60,
               ) -> SxidEvent:
    return SxidEvent(sxid=sxid, pci_bdf=f"0000:{0x05 + switch:02x}:00.0", message=message,
                     raw=f"nvidia-nvswitch{switch}: SXid: {sxid}, {message}", time=time,
                     switch_device=f"nvidia-nvswitch{switch}")


def test_sxid_real_burst_fails_per_switch_without_counting_continuations() -> None:
    # The real gpud burst: two faults on nvswitch0, one each on 1 and 2, plus the driver's
    # Severity/Data continuation lines.
    log = KernelLog("file:x", sxids=[
        sxid_event(20034, 1, "Fatal, Link 48 LTSSM Fault Up"),
        sxid_event(20034, 0, "Fatal, Link 63 LTSSM Fault Up"),
        sxid_event(20034, 2, "Severity 1 Engine instance 60 Sub-engine instance 00"),
        sxid_event(20034, 0, "Data {0x10000000, 0x10000000, 0x00000000}"),
        sxid_event(20034, 2, "Fatal, Link 37 LTSSM Fault Up"),
        sxid_event(20034, 0, "Fatal, Link 62 LTSSM Fault Up"),
        sxid_event(20034, 2, "Severity 1 Engine instance 37 Sub-engine instance 00"),
        sxid_event(20034, 0, "Severity 1 Engine instance 62 Sub-engine instance 00"),
    ], lines_read=8)
    findings = judge("nvswitch.sxid", make_snapshot(kernel_log=log))
    assert [f.component for f in findings] == ["nvswitch0", "nvswitch1", "nvswitch2"]
    assert {f.status for f in findings} == {Status.FAIL}
    assert findings[0].observed["count"] == 2
    assert findings[2].observed["count"] == 1
    assert findings[0].message == "NVSwitch SXid 20034 (LTSSM_FAULT_UP)"
    assert findings[0].action is Action.RESET_GPU


def test_sxid_window_and_unknown_codes() -> None:
    log = KernelLog("file:x", sxids=[
        sxid_event(20034, 0, "Fatal, Link 48 LTSSM Fault Up", time=NOW - 8000),
        sxid_event(20009, 1, "Non-fatal, Link 3 RX Short Error Rate"),
        sxid_event(11004, 2, "Non-fatal, Link 5 something new"),
        sxid_event(19999, 3, "Fatal, Link 6 something worse"),
    ], lines_read=4)
    findings = {f.component: f for f in judge("nvswitch.sxid", make_snapshot(kernel_log=log))}
    assert "nvswitch0" not in findings  # outside the 2-hour window
    assert findings["nvswitch1"].status is Status.WARN
    assert findings["nvswitch2"].status is Status.WARN
    assert findings["nvswitch3"].status is Status.FAIL
    wider = judge("nvswitch.sxid", make_snapshot(kernel_log=log), window_s=10_000)
    assert "nvswitch0" in {f.component for f in wider}


def test_sxid_clean_log_passes_and_missing_log_errors() -> None:
    finding = one(judge("nvswitch.sxid", make_snapshot(kernel_log=KernelLog("kmsg",
                                                                            lines_read=900))))
    assert finding.status is Status.PASS
    assert one(judge("nvswitch.sxid", make_snapshot())).status is Status.ERROR
    unreadable = KernelLog("kmsg", unknown={"kmsg": "PermissionError"})
    assert one(judge("nvswitch.sxid", make_snapshot(kernel_log=unreadable))).status \
        is Status.ERROR


def test_sxid_uses_uptime_and_boot_time_when_no_wall_time() -> None:
    event = sxid_event(20034, 0, "Fatal, Link 1 LTSSM Fault Up", time=None)
    event.uptime_s = 100.0
    log = KernelLog("kmsg", sxids=[event], lines_read=1, boot_time=NOW - 100_000)
    assert one(judge("nvswitch.sxid", make_snapshot(kernel_log=log))).status is Status.PASS
    log.boot_time = NOW - 200
    assert one(judge("nvswitch.sxid", make_snapshot(kernel_log=log))).status is Status.FAIL


# --- nvswitch.management -----------------------------------------------------------------

MANAGER_VA = {"VA": "MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:SMDL=SW_MNG:MODL=C7010Z"}
RAIL_VA = {"VA": "MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX75310A"}


def _b200_devices(managers: int, unread: int = 0) -> list[IbDevice]:
    devs = [IbDevice(f"mlx5_{i}", vpd=dict(RAIL_VA)) for i in range(8)]
    devs += [IbDevice(f"mlx5_{12 + i}", vpd=dict(MANAGER_VA)) for i in range(managers)]
    for dev in devs[:unread]:
        dev.vpd, dev.unknown["vpd"] = {}, "Permission denied (EACCES)"
    return devs


def test_nvswitch_management_counts_the_vpd_marked_functions() -> None:
    finding = one(judge("nvswitch.management", make_snapshot(infiniband=_b200_devices(4)),
                        "dgx-b200"))
    assert (finding.status, finding.observed["count"], finding.expected) == (Status.PASS, 4, 4)
    finding = one(judge("nvswitch.management", make_snapshot(infiniband=_b200_devices(3)),
                        "dgx-b200"))
    assert (finding.status, finding.action) == (Status.FAIL, Action.REBOOT)
    assert finding.observed["found"] == ["mlx5_12", "mlx5_13", "mlx5_14"]


def test_nvswitch_management_short_with_vpd_unread_is_an_error_not_a_fail() -> None:
    snap = make_snapshot(infiniband=_b200_devices(4, unread=9))
    finding = one(judge("nvswitch.management", snap, "dgx-b200"))
    assert finding.status is Status.ERROR
    assert finding.observed["mlx5_12"] == "Permission denied (EACCES)"


def test_nvswitch_management_skips_where_switches_are_on_pci() -> None:
    assert one(judge("nvswitch.management", make_snapshot(infiniband=[]))).status is Status.SKIP
    # ... and nvswitch.count skips on B200, saying where the switches are counted instead.
    count = one(judge("nvswitch.count", make_snapshot(pci=[]), "hgx-b200-8gpu"))
    assert count.status is Status.SKIP
    assert "nvswitch.management" in count.message
