"""HGX/DGX B200: NVSwitches that are no PCI functions, detected from the
ConnectX-7 functions they are managed through (VPD SMDL=SW_MNG), which are neither rails
nor storage — through the real command, on saved snapshots of the simulated board."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

MANAGERS = ["mlx5_12", "mlx5_13", "mlx5_14", "mlx5_15"]


def _snapshot(tmp_path: Path, dmi: str, drop_gpu: int | None = None,
              nvml_only: bool = False, vpd_unread: bool = False) -> Path:
    proc = run_cli("snapshot", "--simulate", "dgx-b200")
    assert proc.returncode == 0, proc.stderr
    snap: dict[str, Any] = json.loads(proc.stdout)
    snap["host"]["dmi_product_name"] = dmi
    if drop_gpu is not None:
        gone = next(g for g in snap["nvml"]["gpus"] if g["index"] == drop_gpu)
        snap["nvml"]["gpus"].remove(gone)
        snap["nvml"]["device_count"] = len(snap["nvml"]["gpus"])
        if not nvml_only:
            snap["pci"] = [d for d in snap["pci"] if d["bdf"] != gone["pci_bdf"]]
    if vpd_unread:  # an agent that is not root: the sysfs vpd file is root's only
        for dev in snap["infiniband"]:
            dev["vpd"] = {}
            dev["unknown"]["vpd"] = "Permission denied (EACCES)"
    path = tmp_path / "b200.json"
    path.write_text(json.dumps(snap))
    return path


def _judge(path: Path) -> tuple[int, dict[str, Any]]:
    proc = run_cli("run", "--from-snapshot", str(path), "--format", "json")
    return proc.returncode, json.loads(proc.stdout)


def _bad(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["check"], f["component"], f["status"]) for f in report["findings"]
            if f["status"] in ("warn", "fail", "error")]


@pytest.mark.parametrize(("dmi", "profile"), [("DGXB200", "dgx-b200"),
                                              ("PowerEdge XE9680", "hgx-b200-8gpu")])
def test_a_healthy_b200_passes_with_its_managers_out_of_the_rails(
        tmp_path: Path, dmi: str, profile: str) -> None:
    rc, report = _judge(_snapshot(tmp_path, dmi))
    assert (rc, report["profile"]["name"], _bad(report)) == (0, profile, [])
    assert report["profile"]["auto_detected"] is True
    roles = {h["name"]: (h["role"], h["role_reason"]) for h in report["inventory"]["hcas"]}
    assert sorted(n for n, (r, _) in roles.items() if r == "management") == MANAGERS
    assert all("SMDL=SW_MNG" in roles[n][1] for n in MANAGERS)
    assert sum(1 for r, _ in roles.values() if r == "compute") == 8
    managers = [f for f in report["findings"] if f["check"] == "nvswitch.management"]
    assert [(f["status"], f["observed"]["count"]) for f in managers] == [("pass", 4)]
    if profile == "dgx-b200":  # the chassis says 8 rails: the 4 managers are not counted
        count = next(f for f in report["findings"] if f["check"] == "ib.hca_count")
        assert count["status"] == "pass"
        assert not set(MANAGERS) & set(str(count["observed"]))


def test_an_oem_b200_with_a_gpu_gone_is_judged_as_its_board(tmp_path: Path) -> None:
    """No DMI name, GPU7 off PCI and NVML: the managers still say HGX B200."""
    rc, report = _judge(_snapshot(tmp_path, "PowerEdge XE9680", drop_gpu=7))
    assert report["profile"]["name"] == "hgx-b200-8gpu"
    assert "NVSwitch management functions (VPD SMDL=SW_MNG)" in report["profile"]["reason"]
    assert rc == 1
    assert _bad(report) == [("gpu.count", "node", "fail")]


def test_a_b200_gpu_gone_from_nvml_only_is_named(tmp_path: Path) -> None:
    path = _snapshot(tmp_path, "PowerEdge XE9680", drop_gpu=3, nvml_only=True)
    rc, report = _judge(path)
    snap = json.loads(path.read_text())
    gone = sorted({d["bdf"] for d in snap["pci"] if d["vendor"] == 0x10DE
                   and d["pci_class"] >> 8 == 0x0302}
                  - {g["pci_bdf"].lower()[-12:] for g in snap["nvml"]["gpus"]})
    assert len(gone) == 1
    assert (rc, report["profile"]["name"]) == (1, "hgx-b200-8gpu")
    fails = [f for f in report["findings"] if f["check"] == "gpu.count" and f["status"] == "fail"]
    assert fails
    assert gone[0] in json.dumps(fails)


@pytest.mark.parametrize("dmi", ["DGXB200", "PowerEdge XE9680"])
def test_an_unread_vpd_is_an_error_never_a_drain(tmp_path: Path, dmi: str) -> None:
    """Unprivileged, the managers cannot be told from rails: nothing fails, the managers'
    check says why it cannot judge, and no device is called a manager."""
    rc, report = _judge(_snapshot(tmp_path, dmi, vpd_unread=True))
    assert report["profile"]["name"] == ("dgx-b200" if dmi == "DGXB200" else "hgx-b200-8gpu")
    # No fail: an error is clusterdiag's own trouble, which the prolog never drains for.
    assert [b for b in _bad(report) if b[2] != "error"] == [], rc
    assert ("nvswitch.management", "node", "error") in _bad(report)
    roles = {h["name"]: (h["role"], h["role_reason"]) for h in report["inventory"]["hcas"]}
    assert not [n for n, (r, _) in roles.items() if r == "management"]
    assert all("VPD unread (Permission denied (EACCES))" in why for _, why in roles.values())
    assert sum(1 for r, _ in roles.values() if r == "compute") == 8


def test_the_simulated_oem_b200_is_its_board_and_passes(tmp_path: Path) -> None:
    """The simulator's OEM HGX B200 (layout: oem): storage NICs under GPU0's and GPU4's
    switches, the board's four managers; detected as hgx-b200-8gpu, all pass."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - names: n1\n    profile: dgx-b200\n    layout: oem\n")
    proc = run_cli("run", "--simulate", str(spec), "--format", "json")
    report = json.loads(proc.stdout)
    assert (proc.returncode, report["profile"]["name"], _bad(report)) == (0, "hgx-b200-8gpu",
                                                                         [])
    roles = {h["name"]: h["role"] for h in report["inventory"]["hcas"]}
    assert sorted(n for n, r in roles.items() if r == "management") == MANAGERS
    assert (roles["mlx5_7"], roles["mlx5_8"]) == ("storage", "storage")


def test_a_b200_capture_records_its_managers_not_nvswitches_on_pci(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - names: n1\n    profile: dgx-b200\n    layout: oem\n")
    proc = run_cli("profiles", "capture", "--simulate", str(spec))
    assert proc.returncode == 0, proc.stderr
    assert "extends: hgx-b200-8gpu" in proc.stdout
    assert "nvswitch_mgmt_functions: 4  # RDMA functions whose VPD says SMDL=SW_MNG" in proc.stdout
    assert "nvswitch_count" not in proc.stdout
