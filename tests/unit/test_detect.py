"""Profile auto-detection: the chassis identity outranks the number of GPUs that answer."""

from __future__ import annotations

import time

import pytest

from clusterdiag.agent.collect import collect_snapshot
from clusterdiag.agent.config import Config
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.runner import RunOptions, evaluate
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.detect import detect_profile
from clusterdiag.checks.finding import Status


@pytest.fixture(scope="module")
def h100() -> Snapshot:
    env = env_for(NodeSpec("n1", "dgx-h100"))
    return collect_snapshot(env, ["pci", "nvml", "host"], time.monotonic() + 20)


def _without_gpu(snap: Snapshot, index: int) -> Snapshot:
    """The GPU gone from the bus entirely: neither PCI nor NVML lists it any more."""
    copy = Snapshot.from_dict(snap.to_dict())
    assert copy.nvml is not None
    assert copy.pci is not None
    gone = copy.nvml.gpus[index]
    copy.nvml.gpus = [g for g in copy.nvml.gpus if g.index != index]
    copy.pci = [d for d in copy.pci if d.bdf != gone.pci_bdf]
    return copy


def test_a_healthy_dgx_is_detected(h100: Snapshot) -> None:
    found = detect_profile(h100)
    assert (found.name, found.confident) == ("dgx-h100", True)


def test_a_dgx_with_a_gpu_off_the_bus_is_still_a_dgx_and_fails_gpu_count(
        h100: Snapshot) -> None:
    snap = _without_gpu(h100, 3)
    found = detect_profile(snap)
    assert (found.name, found.confident) == ("dgx-h100", True)
    assert "DGXH100" in found.reason
    report = evaluate(snap, Config(), RunOptions(patterns=("gpu.count",)))
    assert report.profile["name"] == "dgx-h100"
    assert [f.status for f in report.findings] == [Status.FAIL]


def test_without_a_chassis_name_seven_gpus_match_no_profile(h100: Snapshot) -> None:
    snap = _without_gpu(h100, 3)
    assert snap.host is not None
    snap.host.dmi_product_name = None
    found = detect_profile(snap)
    assert (found.name, found.confident) == ("generic", False)
    assert "7 x NVIDIA H100 80GB HBM3 matches none" in found.reason
