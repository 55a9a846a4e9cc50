"""``clusterdiag profiles capture`` through the real command (the node form): a profile captured
from a healthy node judges that node with no fail and no warn, carries no per-node identifier,
inherits what could not be read, and still catches a fault planted after the capture."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

# (node entry of the spec, --extends)
LAYOUTS = {
    "dgx-h100": ("profile: dgx-h100", "hgx-h100-8gpu"),
    "oem-h100": ("profile: dgx-h100\n    layout: oem", "hgx-h100-8gpu"),
    "roce-h100": ("profile: dgx-h100\n    fabric: roce", "hgx-h100-8gpu"),
    "dgx-a100": ("profile: dgx-a100", "hgx-a100-8gpu"),
    "dgx-b200": ("profile: dgx-b200", "hgx-b200-8gpu"),
    "oem-b200": ("profile: dgx-b200\n    layout: oem", "hgx-b200-8gpu"),
    "gb200": ("profile: gb200-nvl72\n    rack: r1", "gb200-nvl72"),
}


def _spec(tmp_path: Path, entry: str, faults: str = "") -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"nodes:\n  - names: n1\n    {entry}\n{faults}")
    return spec


def _capture(tmp_path: Path, spec: Path, extends: str) -> Path:
    out = tmp_path / "captured.yaml"
    proc = run_cli("profiles", "capture", "--simulate", str(spec), "--extends", extends,
                   "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def _problems(spec: Path, profile: Path, level: str = "quick") -> list[tuple[str, str, str]]:
    proc = run_cli("run", "--simulate", str(spec), "--profile", str(profile), "--level", level,
                   "--format", "json")
    report = json.loads(proc.stdout)
    return [(f["check"], f["component"], f["status"]) for f in report["findings"]
            if f["status"] in ("fail", "warn", "error")]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_profile_captured_from_a_healthy_node_passes_it(tmp_path: Path, layout: str) -> None:
    entry, extends = LAYOUTS[layout]
    spec = _spec(tmp_path, entry)
    captured = _capture(tmp_path, spec, extends)
    assert _problems(spec, captured) == []
    text = captured.read_text()
    assert f"extends: {extends}" in text
    assert re.search(r"^gpu_count: \d+  # ", text, re.M)  # each value says its source
    # No per-node identifier: GUIDs, PCI addresses, GPU UUIDs, serials.
    assert not re.search(r"[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}", text)
    assert not re.search(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d", text)
    assert "GPU-" not in text
    assert "1652023" not in text  # the simulated serials' prefix


def test_a_roce_capture_records_the_fabric(tmp_path: Path) -> None:
    spec = _spec(tmp_path, LAYOUTS["roce-h100"][0])
    text = _capture(tmp_path, spec, "hgx-h100-8gpu").read_text()
    assert 'hca_link_layer: "Ethernet"' in text
    assert "compute_hcas: 8" in text
    for line in ("roce_mtu: 9000", "roce_priority: 3", 'roce_trust: "dscp"'):
        assert line in text  # so the RoCE checks judge the node as it was captured


@pytest.mark.parametrize("extends", [(), ("--extends", "dgx-h100")])
def test_a_roce_node_passes_the_profile_captured_under_an_infiniband_base(
        tmp_path: Path, extends: tuple[str, ...]) -> None:
    """The detected profile (dgx-h100) names InfiniBand: the RoCE rails are still the
    node's rails, so the capture records them and their link layer, and passes the node."""
    spec = _spec(tmp_path, LAYOUTS["roce-h100"][0])
    out = tmp_path / "captured.yaml"
    proc = run_cli("profiles", "capture", "--simulate", str(spec), *extends,
                   "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert 'hca_link_layer: "Ethernet"' in text
    assert "compute_hcas: 8" in text
    assert _problems(spec, out) == []


def test_the_captured_profile_still_catches_a_fault(tmp_path: Path) -> None:
    healthy = _spec(tmp_path, LAYOUTS["oem-h100"][0])
    captured = _capture(tmp_path, healthy, "hgx-h100-8gpu")
    broken = _spec(tmp_path, LAYOUTS["oem-h100"][0],
                   "faults:\n  - {node: n1, kind: oem_nic_missing, hca: mlx5_4}\n")
    assert ("ib.hca_count", "node", "fail") in _problems(broken, captured)


def test_what_could_not_be_read_is_inherited_and_capture_exits_0(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "profile: dgx-h100",
                 "faults:\n  - {node: n1, kind: driver_not_loaded}\n")
    proc = run_cli("profiles", "capture", "--simulate", str(spec), "--extends",
                   "hgx-h100-8gpu")
    assert proc.returncode == 0, proc.stderr
    assert "# GPU values inherited from hgx-h100-8gpu: NVML unreadable" in proc.stdout
    assert "gpu_count" not in proc.stdout
    assert "driver_versions" not in proc.stdout  # not read: no expectation, the base's
    assert "compute_hcas: 8" in proc.stdout  # the NICs were read
    assert 'nic_firmware: ["28.41.1000"]' in proc.stdout


def _findings(proc_stdout: str, check: str) -> list[tuple[str, str, str]]:
    return [(f["component"], f["status"], f["message"])
            for f in json.loads(proc_stdout)["findings"] if f["check"] == check]


def test_versions_another_than_captured_warn_naming_both_never_fail(tmp_path: Path) -> None:
    """Captured versions are warn-level expectations (host.versions)."""
    healthy = _spec(tmp_path, "profile: dgx-h100")
    captured = _capture(tmp_path, healthy, "hgx-h100-8gpu")
    assert 'driver_versions: ["590.48.01"]' in captured.read_text()
    proc = run_cli("run", "--simulate", str(healthy), "--profile", str(captured),
                   "--format", "json")
    assert {status for _, status, _ in _findings(proc.stdout, "host.versions")} == {"pass"}
    # One NIC on other firmware, and the node's driver another one (a saved snapshot).
    odd = _spec(tmp_path, "profile: dgx-h100",
                "faults:\n  - {node: n1, kind: hca_firmware_mixed, hca: mlx5_4, "
                "version: 28.39.1002}\n")
    snap = json.loads(run_cli("snapshot", "--simulate", str(odd)).stdout)
    snap["nvml"]["driver_version"] = "580.65.06"
    saved = tmp_path / "odd.json"
    saved.write_text(json.dumps(snap))
    proc = run_cli("run", "--from-snapshot", str(saved), "--profile", str(captured),
                   "--format", "json")
    bad = [f for f in _findings(proc.stdout, "host.versions") if f[1] != "pass"]
    assert sorted(bad) == [
        ("mlx5_4", "warn", "NIC firmware 28.39.1002, the profile expects 28.41.1000"),
        ("node", "warn", "NVIDIA driver 580.65.06, the profile expects 590.48.01")]
    assert not [f for f in json.loads(proc.stdout)["findings"] if f["status"] == "fail"]


def test_an_unknown_base_is_one_line_and_exit_2(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "profile: dgx-h100")
    proc = run_cli("profiles", "capture", "--simulate", str(spec), "--extends", "hgx-h101")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "hgx-h101" in proc.stderr


def test_a_base_read_from_a_file_outside_profile_dir_is_noted(tmp_path: Path) -> None:
    """``--extends FILE``: the capture names its base by name, found only in
    profile_dir; a base elsewhere is said on standard error (the capture still exits 0),
    and one inside profile_dir loads with the capture beside it."""
    spec = _spec(tmp_path, "profile: dgx-h100")
    first = _capture(tmp_path, spec, "hgx-h100-8gpu")
    site = tmp_path / "site.yaml"
    first.rename(site)
    second = tmp_path / "second.yaml"
    proc = run_cli("profiles", "capture", "--simulate", str(spec), "--extends", str(site),
                   "--output", str(second))
    assert proc.returncode == 0, proc.stderr
    assert "extends: site\n" in second.read_text()
    assert f"copy {site} there" in proc.stderr
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    site.rename(profiles / "site.yaml")
    config = tmp_path / "config.yaml"
    config.write_text(f"profile_dir: {profiles}\n")
    proc = run_cli("profiles", "capture", "--simulate", str(spec), "--config", str(config),
                   "--extends", str(profiles / "site.yaml"), "--output",
                   str(profiles / "second.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert "note:" not in proc.stderr
    proc = run_cli("run", "--simulate", str(spec), "--config", str(config), "--profile",
                   "second", "--format", "json")
    assert proc.returncode == 0, proc.stderr
