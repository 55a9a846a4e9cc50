"""host.pcie_aer and the AER growth it judges by (checks/host/pcie.py)."""

from __future__ import annotations

from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.checks.host.pcie import aer_growth
from tests.checks.host.factory import NOW, judge, one


def aer_dev(bdf: str, cor: int = 0, nonfatal: int = 0, fatal: int = 0) -> PciDevice:
    return PciDevice(bdf, 0x10DE, 0x2330, 0x030200, aer={
        "correctable": {"RxErr": cor, "BadTLP": 0, "TOTAL_ERR_COR": cor},
        "nonfatal": {"CmpltTO": nonfatal, "TOTAL_ERR_NONFATAL": nonfatal},
        "fatal": {"SurpriseDown": fatal, "TOTAL_ERR_FATAL": fatal},
    })


def aer(before: list[PciDevice] | None, now: list[PciDevice], elapsed_s: float = 60.0,
        **params: Any) -> list[Finding]:
    previous = None if before is None else Snapshot("n1", NOW - elapsed_s, pci=before)
    return judge("host.pcie_aer", pci=now, previous=previous, **params)


def test_aer_skips_without_previous_or_aer() -> None:
    assert one(aer(None, [aer_dev("0000:1b:00.0")])).status is Status.SKIP
    bare = [PciDevice("0000:1b:00.0", 0x10DE, 0x2330, 0x030200)]
    assert one(aer(bare, bare)).message == "no PCI device exposes AER counters"


def test_aer_no_growth_passes() -> None:
    devices = [aer_dev("0000:1b:00.0", cor=5), aer_dev("0000:43:00.0")]
    finding = one(aer(devices, devices))
    assert (finding.status, finding.observed) == (Status.PASS, 2)


def test_aer_fatal_growth_fails_with_reboot() -> None:
    findings = aer([aer_dev("0000:1b:00.0"), aer_dev("0000:43:00.0")],
                   [aer_dev("0000:1b:00.0", fatal=1), aer_dev("0000:43:00.0")])
    finding = one(findings)
    assert (finding.status, finding.action, finding.component) == (
        Status.FAIL, Action.REBOOT, "0000:1b:00.0")
    assert finding.observed == {"SurpriseDown": 1, "TOTAL_ERR_FATAL": 1}


def test_aer_nonfatal_warns_or_fails_by_param() -> None:
    before, now = [aer_dev("0000:1b:00.0")], [aer_dev("0000:1b:00.0", nonfatal=2)]
    assert one(aer(before, now)).status is Status.WARN
    assert one(aer(before, now, nonfatal_fail=True)).status is Status.FAIL


def test_aer_correctable_rate_per_minute() -> None:
    before = [aer_dev("0000:1b:00.0", cor=100)]
    assert one(aer(before, [aer_dev("0000:1b:00.0", cor=110)])).status is Status.PASS
    finding = one(aer(before, [aer_dev("0000:1b:00.0", cor=106)], elapsed_s=30))
    assert finding.status is Status.WARN
    assert finding.observed["per_min"] == 12.0


def test_aer_counter_that_went_down_was_reset() -> None:
    assert aer_growth({"RxErr": 50, "BadTLP": 2}, {"RxErr": 3, "BadTLP": 2}) == {
        "RxErr": 3}
    finding = one(aer([aer_dev("0000:1b:00.0", fatal=5)], [aer_dev("0000:1b:00.0", fatal=1)]))
    assert finding.status is Status.FAIL
    assert finding.observed["TOTAL_ERR_FATAL"] == 1


def test_aer_device_without_total_is_summed() -> None:
    dev_before = PciDevice("0000:1b:00.0", 0x15B3, 0x1021, 0x020700,
                           aer={"nonfatal": {"CmpltTO": 0, "UnxCmplt": 0}})
    dev_now = PciDevice("0000:1b:00.0", 0x15B3, 0x1021, 0x020700,
                        aer={"nonfatal": {"CmpltTO": 1, "UnxCmplt": 1}})
    assert one(aer([dev_before], [dev_now])).status is Status.WARN
