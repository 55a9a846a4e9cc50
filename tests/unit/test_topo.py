"""The topology view: PCIe distance classes, and each simulated profile against the real
``nvidia-smi topo -m`` captures in shared/data/real/topo (parsed, class by class)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import assign_roles
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.layout import LAYOUTS
from clusterdiag.checks.core.topology import pci_distance
from clusterdiag.checks.profiles.profile import load_profile
from clusterdiag.reports.render.topo import TopoMatrix, build, render_text
from tests.real import real_file


def capture(name: str) -> str:
    """A real ``nvidia-smi topo -m`` capture (tests/real.py: copied, or shared, or a skip)."""
    return real_file("topo", "topo", name).read_text()


# Profile -> the real capture of that platform (SOURCES.md in the same folder).
CAPTURES = {
    "dgx-a100": "a100_sxm4_8gpu_3nic_4numa_fastdeploy.txt",
    "dgx-h100": "h100_8gpu_nv18_2numa_ml-engineering_PARTIAL_nolegend.txt",
    "gb200-nvl72": "gb200_4gpu_nv18_8nic_UNATTRIBUTED.txt",
}


@dataclass
class Parsed:
    labels: list[str]
    cells: dict[str, dict[str, str]]
    cpu: dict[str, str]
    numa: dict[str, str]
    nic_names: dict[str, str]


def parse_capture(text: str) -> Parsed:
    """Read nvidia-smi topo -m output, tabs or expanded spaces, ANSI escapes stripped."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    start = next(i for i, line in enumerate(lines) if re.search(r"\bGPU0\b", line)
                 and not line.startswith("GPU0"))
    labels = [w for w in lines[start].split() if re.fullmatch(r"(GPU|NIC)\d+", w)]
    parsed = Parsed(labels, {}, {}, {}, {})
    for line in lines[start + 1:]:
        words = line.split()
        if not words or words[0] not in labels:
            if line.strip().startswith("NIC") and ":" in line:
                label, name = line.strip().split(":", 1)
                parsed.nic_names[label] = name.strip()
            continue
        parsed.cells[words[0]] = dict(zip(labels, words[1:1 + len(labels)], strict=True))
        if words[0].startswith("GPU"):
            parsed.cpu[words[0]] = words[1 + len(labels)]
            parsed.numa[words[0]] = words[2 + len(labels)]
    return parsed


def _sim(profile: str) -> TopoMatrix:
    env = env_for(NodeSpec("n1", profile, rack="r1" if "nvl72" in profile else None))
    snap = collect_snapshot(env, ["pci", "nvml", "infiniband"], time.monotonic() + 20)
    assign_roles(snap, Config(), load_profile(profile))  # as clusterdiag topo does
    return build(snap)


def _sim_parsed(profile: str) -> Parsed:
    return parse_capture(render_text(_sim(profile)))


def _gpus(parsed: Parsed) -> list[str]:
    return [label for label in parsed.labels if label.startswith("GPU")]


def _nics(parsed: Parsed) -> list[str]:
    return [label for label in parsed.labels if label.startswith("NIC")]


def _groups(values: dict[str, str]) -> list[list[str]]:
    """Which GPUs share a value (CPU lists differ between CPU models; the grouping not)."""
    by_value: dict[str, list[str]] = {}
    for gpu, value in sorted(values.items()):
        by_value.setdefault(value, []).append(gpu)
    return sorted(by_value.values())


# -- distance classes --------------------------------------------------------------------


def _dev(bdf: str, path: list[str], numa: int = 0) -> PciDevice:
    return PciDevice(bdf, 0x10DE, 0x2330, 0x030200, numa_node=numa, path=[*path, bdf])


@pytest.mark.parametrize(("a", "b", "level"), [
    (_dev("0000:1b:00.0", ["0000:14:01.0", "0000:15:00.0", "0000:1a:00.0"]),
     _dev("0000:18:00.0", ["0000:14:01.0", "0000:15:00.0", "0000:17:00.0"]), "PIX"),
    (_dev("0000:1b:00.0", ["0000:14:01.0", "0000:15:00.0", "0000:19:00.0", "0000:1a:00.0"]),
     _dev("0000:18:00.0", ["0000:14:01.0", "0000:15:00.0", "0000:17:00.0"]), "PXB"),
    (_dev("0000:1b:00.0", ["0000:14:01.0"]), _dev("0000:20:00.0", ["0000:14:02.0"]), "PHB"),
    (_dev("0000:1b:00.0", ["0000:14:01.0"]), _dev("0000:40:00.0", ["0000:3c:01.0"]), "NODE"),
    (_dev("0000:1b:00.0", ["0000:14:01.0"]), _dev("0000:9a:00.0", ["0000:98:01.0"], 1), "SYS"),
    (_dev("0000:1b:00.0", ["0000:14:01.0"]), _dev("0000:9a:00.0", ["0000:98:01.0"], -1), "SYS"),
    (_dev("0008:01:00.0", ["0008:00:00.0"]), _dev("0000:03:00.0", ["0000:00:00.0"]), "SYS"),
    (_dev("0006:03:00.0", ["0006:00:00.0", "0006:01:00.0", "0006:02:00.0"]),
     _dev("0006:03:00.1", ["0006:00:00.0", "0006:01:00.0", "0006:02:00.0"]), "PIX"),
])
def test_pci_distance(a: PciDevice, b: PciDevice, level: str) -> None:
    assert pci_distance(a, b) == level
    assert pci_distance(b, a) == level


# -- the simulator against the real machines ---------------------------------------------


@pytest.mark.parametrize("profile", sorted(CAPTURES))
def test_gpu_to_gpu_matches_the_real_capture(profile: str) -> None:
    real = parse_capture(capture(CAPTURES[profile]))
    sim = _sim_parsed(profile)
    assert _gpus(sim) == _gpus(real)
    for row in _gpus(real):
        assert {c: sim.cells[row][c] for c in _gpus(real)} == \
               {c: real.cells[row][c] for c in _gpus(real)}, row


def test_h100_cpu_and_numa_affinity_match() -> None:
    """Same 2-socket split as the real 8x H100 (the A100 capture is a 4-socket Xeon host,
    not a DGX A100, so its CPU grouping is not compared)."""
    real = parse_capture(capture(CAPTURES["dgx-h100"]))
    sim = _sim_parsed("dgx-h100")
    assert _groups(sim.cpu) == _groups(real.cpu)
    assert sim.numa == real.numa


def test_gb200_whole_matrix_and_affinity_match() -> None:
    real = parse_capture(capture(CAPTURES["gb200-nvl72"]))
    sim = _sim_parsed("gb200-nvl72")
    assert sim.labels == real.labels
    assert sim.cells == real.cells  # GPU-NIC all SYS; the BlueField port pairs PIX
    assert sim.cpu == real.cpu  # 0-71 for GPU0/1, 72-143 for GPU2/3
    assert sim.nic_names == real.nic_names  # mlx5_0 .. mlx5_7


def test_a100_gpu_to_nic_classes_match() -> None:
    """The capture is a 3-NIC machine, the profile a DGX with one NIC per GPU: compare the
    class of each GPU's nearest NIC where the capture has one, and the classes seen."""
    real = parse_capture(capture(CAPTURES["dgx-a100"]))
    sim = _sim_parsed("dgx-a100")
    order = ["PIX", "PXB", "PHB", "NODE", "SYS"]
    for gpu in _gpus(real):
        nearest_real = min((real.cells[gpu][n] for n in _nics(real)), key=order.index)
        nearest_sim = min((sim.cells[gpu][n] for n in _nics(sim)), key=order.index)
        if nearest_real != "SYS":
            assert nearest_sim == nearest_real, gpu
    classes = {real.cells[g][n] for g in _gpus(real) for n in _nics(real)}
    assert {sim.cells[g][n] for g in _gpus(sim) for n in _nics(sim)} == classes


def test_profiles_without_a_real_capture_are_provisional() -> None:
    for name in LAYOUTS:
        if name not in CAPTURES:
            assert load_profile(name).provisional, name


# -- the text layout ---------------------------------------------------------------------


def test_text_layout_is_nvidia_smis() -> None:
    """Tabs as the driver-590 capture has them: a leading tab in the header, ' X ' for
    self, an empty field before GPU NUMA ID; the legend and NIC legend follow."""
    real = capture("single-gpu__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt")
    real_row = real.splitlines()[1]  # GPU0\t X \t0-19\t0\t\tN/A
    text = render_text(_sim("hgx-h100-pcie"))
    lines = text.splitlines()
    assert lines[0].startswith("\tGPU0\tGPU1")
    assert lines[0].endswith("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID")
    row = lines[1].split("\t")
    assert row[:2] == ["GPU0", " X "]
    assert row[-2:] == real_row.split("\t")[-2:] == ["", "N/A"]
    assert "Legend:" in lines
    assert "  X    = Self" in lines
    legend_real = [line for line in real.splitlines() if line.startswith("  ")]
    assert [line for line in lines if line.startswith("  ")] == legend_real  # no NICs here


def test_nic_legend_names_rdma_devices() -> None:
    text = render_text(_sim("dgx-h100"))
    legend = text.split("NIC Legend:\n\n", 1)[1].splitlines()
    assert legend[0] == "  NIC0: mlx5_0"
    assert "  NIC11: mlx5_11" in legend  # natural order: mlx5_2 before mlx5_10


def test_empty_snapshot_gives_an_empty_matrix() -> None:
    matrix = build(Snapshot(node="n", taken_at=0.0, pci=[]))
    assert matrix.gpus == []
    assert matrix.nics == []
    assert render_text(matrix).startswith("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n")


def test_terminal_table_shows_the_same_classes() -> None:
    from clusterdiag.reports.render.topo import nic_legend, render_wrapped

    matrix = _sim("dgx-h100")
    text = render_wrapped(matrix, 300)
    rows = [line.split() for line in text.splitlines()]
    gpu0 = next(row for row in rows if row[:1] == ["GPU0"] and "X" in row)
    assert gpu0[1:4] == ["X", "NV18", "NV18"]
    assert "PIX" in gpu0
    assert nic_legend(matrix).splitlines()[0] == ("  NIC0: mlx5_0 (compute: InfiniBand link "
                                                  "layer, the compute fabric's)")
    assert "mlx5_1 (storage: runs Ethernet, not the compute fabric's InfiniBand)" in \
        nic_legend(matrix)


@pytest.mark.parametrize("profile", ["dgx-h100", "gb200-nvl72", "hgx-h100-pcie"])
def test_terminal_table_wraps_whole_columns_at_80(profile: str) -> None:
    """Every cell of the matrix appears whole, in blocks that fit 80 columns."""
    from clusterdiag.reports.render.topo import render_wrapped

    matrix = _sim(profile)
    text = render_wrapped(matrix, 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    blocks = text.split("\nNIC Legend:")[0].split("\n\n")
    assert len(blocks) > 1  # 20 columns do not fit in 80
    seen: dict[tuple[str, str], str] = {}
    for block in blocks:
        header, *rows = block.splitlines()
        names = header.split()
        names = [n for n in names if n not in ("CPU", "Affinity", "NUMA")]
        for row in rows:
            label, *values = row.split()
            for name, value in zip(names, values, strict=False):  # affinity columns follow
                seen[(label, name)] = value
    for row, cols in matrix.cells.items():
        for col, value in cols.items():
            assert seen[(row, col)] == value, (row, col)
