"""Profile auto-detection: the chassis identity outranks the number of GPUs that answer."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.profiles import profile as profile_module
from clusterdiag.checks.profiles.detect import detect_profile
from clusterdiag.checks.profiles.profile import add_site_profiles, load_builtin


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


@pytest.fixture(scope="module", params=["dgx-h100", "dgx-h200", "dgx-a100"])
def oem(request: pytest.FixtureRequest) -> tuple[str, Snapshot]:
    """An OEM server on NVIDIA's baseboard: the DGX's hardware, no DGX chassis name."""
    env = env_for(NodeSpec("n1", request.param))
    snap = collect_snapshot(env, ["pci", "nvml", "host"], time.monotonic() + 20)
    assert snap.host is not None
    snap.host.dmi_product_name = "ProLiant XD670 Gen11"
    return request.param.replace("dgx-", "hgx-") + "-8gpu", snap


def test_an_oem_board_is_detected_as_its_baseboard(oem: tuple[str, Snapshot]) -> None:
    board, snap = oem
    found = detect_profile(snap)
    assert (found.name, found.confident) == (board, True)
    assert "NVSwitches on PCI" in found.reason


def test_an_oem_board_with_a_gpu_off_the_bus_is_its_baseboard_and_fails_gpu_count(
        oem: tuple[str, Snapshot]) -> None:
    """A bug seen: an OEM HGX H100 with GPU7 gone from PCI and NVML was judged as
    generic and passed."""
    board, snap = oem
    snap = _without_gpu(snap, 7)
    found = detect_profile(snap)
    assert (found.name, found.confident) == (board, True)
    assert "7 of 8" in found.reason
    report = evaluate(snap, Config(), RunOptions(patterns=("gpu.count",)))
    assert report.profile["name"] == board
    assert [f.status for f in report.findings] == [Status.FAIL]


def test_a_gpu_on_pci_but_not_in_nvml_keeps_the_board(oem: tuple[str, Snapshot]) -> None:
    board, snap = oem
    copy = Snapshot.from_dict(snap.to_dict())
    assert copy.nvml is not None
    copy.nvml.gpus = copy.nvml.gpus[:-1]
    copy.nvml.device_count = len(copy.nvml.gpus)
    assert detect_profile(copy).name == board
    report = evaluate(copy, Config(), RunOptions(patterns=("gpu.count",)))
    assert [f.status for f in report.findings] == [Status.FAIL]


def test_without_nvswitches_a_subset_of_a_board_matches_no_profile(h100: Snapshot) -> None:
    """A VM holding seven of a board's GPUs and none of its NVSwitches is not the board."""
    snap = _without_gpu(h100, 3)
    assert snap.host is not None
    assert snap.pci is not None
    snap.host.dmi_product_name = None
    snap.pci = [d for d in snap.pci if not d.is_nvswitch]
    found = detect_profile(snap)
    assert (found.name, found.confident) == ("generic", False)
    assert "7 x NVIDIA H100 80GB HBM3 matches none" in found.reason


def test_a_site_profile_of_the_baseboard_outranks_the_builtin(
        oem: tuple[str, Snapshot], monkeypatch: pytest.MonkeyPatch) -> None:
    board, snap = oem
    monkeypatch.setattr(profile_module, "_SITE", {})
    site = replace(load_builtin(board), name="our-oem", extends=board, compute_hcas=4)
    add_site_profiles({"our-oem": site})
    try:
        found = detect_profile(snap)
        assert (found.name, found.tied) == ("our-oem", ("our-oem",))
    finally:
        profile_module.profile_names.cache_clear()


def test_without_nvml_the_pci_device_id_names_the_model(oem: tuple[str, Snapshot]) -> None:
    """NVML unusable (no driver): the GPUs' PCI device ids (0x2330 H100 SXM5, 0x2335 H200,
    0x20b2 A100 80GB, as the simulator now writes per platform) and the NVSwitches still
    name the baseboard; a board short of a GPU too."""
    board, snap = oem
    broken = Snapshot.from_dict(snap.to_dict())
    assert broken.nvml is not None
    broken.nvml.gpus = []
    found = detect_profile(broken)
    assert (found.name, found.confident) == (board, True)
    assert "PCI device 0x" in found.reason
    assert detect_profile(_without_gpu_on_pci(broken, 5)).name == board


def _without_gpu_on_pci(snap: Snapshot, index: int) -> Snapshot:
    copy = Snapshot.from_dict(snap.to_dict())
    assert copy.pci is not None
    gpus = sorted(d.bdf for d in copy.pci if d.is_nvidia_gpu)
    copy.pci = [d for d in copy.pci if d.bdf != gpus[index]]
    return copy


def test_each_simulated_platform_writes_its_own_gpu_pci_id() -> None:
    ids = {}
    for platform in ("dgx-h100", "dgx-h200", "dgx-a100", "dgx-b200"):
        env = env_for(NodeSpec("n1", platform))
        snap = collect_snapshot(env, ["pci"], time.monotonic() + 20)
        ids[platform] = {f"0x{d.device:04x}" for d in snap.pci or [] if d.is_nvidia_gpu}
    assert ids == {"dgx-h100": {"0x2330"}, "dgx-h200": {"0x2335"}, "dgx-a100": {"0x20b2"},
                   "dgx-b200": {"0x2901"}}
