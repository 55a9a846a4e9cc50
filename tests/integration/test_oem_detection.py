"""OEM servers on NVIDIA's HGX baseboards, through the real command: a
saved snapshot of a simulated board under an OEM's DMI name is judged as its baseboard
profile — healthy, all pass; with a GPU gone from PCI and NVML, gpu.count fails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli


def _oem_snapshot(tmp_path: Path, profile: str, drop_gpu: int | None) -> Path:
    proc = run_cli("snapshot", "--simulate", profile)
    assert proc.returncode == 0, proc.stderr
    snap: dict[str, Any] = json.loads(proc.stdout)
    snap["host"]["dmi_product_name"] = "PowerEdge XE9680"
    if drop_gpu is not None:
        gone = next(g for g in snap["nvml"]["gpus"] if g["index"] == drop_gpu)
        snap["nvml"]["gpus"].remove(gone)
        snap["nvml"]["device_count"] = len(snap["nvml"]["gpus"])
        snap["pci"] = [d for d in snap["pci"] if d["bdf"] != gone["pci_bdf"]]
    path = tmp_path / "oem.json"
    path.write_text(json.dumps(snap))
    return path


@pytest.mark.parametrize("profile", ["dgx-h100", "dgx-h200", "dgx-a100"])
def test_a_healthy_oem_board_is_its_baseboard_and_passes(tmp_path: Path, profile: str) -> None:
    saved = _oem_snapshot(tmp_path, profile, None)
    proc = run_cli("run", "--from-snapshot", str(saved), "--format", "json")
    assert proc.returncode == 0, proc.stdout
    report = json.loads(proc.stdout)
    assert report["profile"]["name"] == profile.replace("dgx-", "hgx-") + "-8gpu"
    assert report["profile"]["auto_detected"] is True
    bad = [f for f in report["findings"] if f["status"] in ("warn", "fail", "error")]
    assert not bad, bad


def test_an_oem_h100_with_gpu7_gone_fails_gpu_count_alone(tmp_path: Path) -> None:
    saved = _oem_snapshot(tmp_path, "dgx-h100", 7)
    proc = run_cli("run", "--from-snapshot", str(saved), "--format", "json")
    assert proc.returncode == 1, proc.stdout
    report = json.loads(proc.stdout)
    assert report["profile"]["name"] == "hgx-h100-8gpu"
    fails = [(f["check"], f["component"]) for f in report["findings"]
             if f["status"] in ("fail", "error")]
    assert fails == [("gpu.count", "node")]
