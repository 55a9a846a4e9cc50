"""The simulated GB200 and GB300 trays answer NVML fabric info with the values real trays
show in `nvidia-smi -q -x` (tests/fixtures/real/gb200-fabric, excerpts of the shared
set's full captures, which are compared too where present)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clusterdiag.agent.collectors.nvml_read import GpuReader
from clusterdiag.agent.model.gpu import FabricInfo
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.nvml import build_module
from clusterdiag.checks.fabric.health import decode_health_mask
from tests.real import FIXTURES, real_file

# platform -> (fixture excerpt, the shared set's full capture)
CAPTURES = {
    "gb200-nvl72": ("qx-gb200.fabric.xml",
                    "nvidia-smi-q-x__GB200-4gpu-p6e-gb200.36xlarge__k8s-test-infra.txt"),
    "gb300-nvl72": ("qx-gb300.fabric.xml", "nvidia-smi-q-x__GB300-4gpu__k8s-test-infra.txt"),
}
# nvidia-smi's words for NVML's values (nvml.h NVML_GPU_FABRIC_STATE_*,
# NVML_GPU_FABRIC_HEALTH_SUMMARY_*, NVML_GPU_FABRIC_HEALTH_MASK_*), as far as the
# captures show them: a word not here fails the test rather than being guessed.
STATE = {"Not Supported": 0, "Not Started": 1, "In Progress": 2, "Completed": 3}
STATUS = {"Success": 0}
SUMMARY = {"N/A": 0, "Healthy": 1, "Unhealthy": 2, "Limited Capacity": 3}
TRUE_FALSE = {"N/A": 0, "True": 1, "False": 2}
BANDWIDTH = {"N/A": 0, "Full": 2}  # DEGRADED_BW_FALSE: not degraded
INCORRECT_CONFIGURATION = {"N/A": 0, "None": 1}
# health element -> (healthMask field, words)
HEALTH = {
    "bandwidth": ("degraded_bw", BANDWIDTH),
    "route_recovery_in_progress": ("route_recovery", TRUE_FALSE),
    "route_unhealthy": ("route_unhealthy", TRUE_FALSE),
    "access_timeout_recovery": ("access_timeout_recovery", TRUE_FALSE),
    "incorrect_configuration": ("incorrect_configuration", INCORRECT_CONFIGURATION),
    "partition_assigned": ("partition_assigned", TRUE_FALSE),
}
ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def captured(path: Path) -> list[tuple[str, ET.Element]]:
    """Each GPU's product name and fabric element; the shared set's header lines (``# ``)
    are not XML."""
    text = "\n".join(line for line in path.read_text().splitlines()
                     if not line.startswith("# "))
    root = ET.fromstring(text)
    return [(gpu.findtext("product_name") or "", gpu.find("fabric"))  # type: ignore[misc]
            for gpu in root.findall("gpu")]


def simulated(platform: str) -> list[tuple[str, FabricInfo]]:
    module = build_module(build(NodeSpec("n1", platform, rack="rack1")))
    module.nvmlInit()
    gpus = [GpuReader(module, i).read() for i in range(module.nvmlDeviceGetCount())]
    assert all(g.fabric is not None for g in gpus), [g.unsupported for g in gpus]
    return [(g.name or "", g.fabric) for g in gpus]  # type: ignore[misc]


def assert_same(platform: str, path: Path) -> None:
    real, sim = captured(path), simulated(platform)
    assert len(real) == len(sim)
    for (real_name, fabric), (sim_name, info) in zip(real, sim, strict=True):
        assert sim_name == real_name
        assert info.state == STATE[fabric.findtext("state") or ""]
        assert info.status == STATUS[fabric.findtext("status") or ""]
        health = fabric.find("health")
        assert health is not None
        assert (info.health_summary or 0) == SUMMARY[health.findtext("summary") or ""]
        mask = decode_health_mask(info.health_mask or 0)
        for element, (field, words) in HEALTH.items():
            assert mask[field] == words[health.findtext(element) or ""], (element, mask)
        # The cluster UUID is masked upstream and the clique id is the site's partition:
        # both are set (a multi-node NVLink domain), the same on every GPU of the tray.
        assert (info.cluster_uuid != ZERO_UUID) == (fabric.findtext("clusterUuid") != ZERO_UUID)
        assert (info.clique_id != 0) == (fabric.findtext("cliqueId") != "0")
    assert len({(f.cluster_uuid, f.clique_id) for _, f in sim}) == 1
    assert len({(f.findtext("clusterUuid"), f.findtext("cliqueId")) for _, f in real}) == 1


@pytest.mark.parametrize("platform", sorted(CAPTURES))
def test_the_simulated_tray_answers_as_the_copied_capture(platform: str) -> None:
    assert_same(platform, FIXTURES / "real/gb200-fabric" / CAPTURES[platform][0])


@pytest.mark.parametrize("platform", sorted(CAPTURES))
def test_the_simulated_tray_answers_as_the_whole_capture(platform: str) -> None:
    assert_same(platform, real_file("real/gb200-fabric", "gb200", CAPTURES[platform][1]))
