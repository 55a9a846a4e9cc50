"""ib.pcie_link (checks/ib/pcie.py) and ib.firmware (checks/ib/firmware.py)."""

from __future__ import annotations

from clusterdiag.checks.core.finding import Status
from tests.checks.ib.factory import eight_hcas, make_snap, run


def test_pcie_link_and_firmware() -> None:
    devs = eight_hcas()
    devs[2].pcie_width = 8
    found = run("ib.pcie_link", make_snap(devs))
    assert [f.component for f in found if f.status is Status.FAIL] == ["mlx5_2"]
    devs[5].fw_ver = "28.39.1002"
    fw = run("ib.firmware", make_snap(devs))
    assert [(f.component, f.status) for f in fw if f.status is not Status.PASS] == [
        ("mlx5_5", Status.WARN)]
    pinned = run("ib.firmware", make_snap(devs), expected={"MT4129": "28.39.1002"})
    assert len([f for f in pinned if f.status is Status.FAIL]) == 7
