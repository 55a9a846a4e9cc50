"""``clusterdiag topo`` as users and scripts run it: text when piped, JSON on request, one
clear line for bad input."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli


def test_piped_output_is_nvidia_smi_text() -> None:
    proc = run_cli("topo", "--simulate", "dgx-h100")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("\tGPU0\tGPU1")
    gpu0 = lines[1].split("\t")
    assert gpu0[:3] == ["GPU0", " X ", "NV18"]
    assert gpu0[9] == "PIX"  # NIC0 = mlx5_0, under GPU0's PCIe switch
    assert "  NIC0: mlx5_0" in lines


def test_json_format() -> None:
    proc = run_cli("topo", "--simulate", "gb200-nvl72", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["simulated"] is True
    assert [g["cpu_affinity"] for g in data["gpus"]] == ["0-71", "0-71", "72-143", "72-143"]
    assert {n["role"] for n in data["nics"]} == {"compute", "storage"}
    assert data["matrix"]["GPU0"]["GPU3"] == "NV18"
    assert data["matrix"]["GPU0"]["NIC0"] == "SYS"


def test_a_node_without_gpus_or_nics_says_so(tmp_path: Path) -> None:
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    proc = run_cli("topo", "--root", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1
    assert "no NVIDIA GPU and no RDMA NIC found on the PCI bus" in proc.stdout
    as_json = run_cli("topo", "--root", str(tmp_path), "--format", "json")
    assert '"gpus": []' in as_json.stdout  # scripts still get the (empty) matrix


def test_bad_input_is_one_line_exit_2() -> None:
    proc = run_cli("topo", "--simulate", "no-such-profile")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
    proc = run_cli("topo", "--format", "xml", "--simulate", "dgx-h100")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
