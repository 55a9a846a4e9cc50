"""What one NVML read of a node costs in calls, per simulated profile, and that folding the
calls lost no value: every GPU reads as it did when each batch and each fabric-info
version had its own call on every GPU."""

from __future__ import annotations

import collections
import gzip
import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.collectors import nvml_read
from clusterdiag.agent.collectors.nvml import read_all
from clusterdiag.agent.collectors.nvml_read import NodeFacts
from clusterdiag.agent.sim.node import build, make_root
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.hardware import SimNode
from clusterdiag.agent.sim.state.layout import LAYOUTS
from clusterdiag.agent.sim.writers.nvml import build_module
from tests.conftest import REPO

# Each profile's NVML calls per GPU for one read (bench/nvml_calls.py prints the same
# figure): a change that makes a call more on every GPU fails here.
CALLS_PER_GPU = {
    "dgx-a100": 26.125, "dgx-b200": 29.25, "dgx-h100": 28.125, "dgx-h200": 28.125,
    "gb200-nvl72": 30.0, "gb300-nvl72": 30.0, "h100-nvl": 52.125, "hgx-b300-8gpu": 29.25,
    "hgx-h100-pcie": 28.125,
}
# Every simulated profile read by the reader as it was before the fabric-info versions and
# the field batches were shared (tests/fixtures/nvml_read/), since joined by the node's
# NVLink bandwidth mode (its one new value): per profile, at the quick level and with the
# NVLink5 FEC bins, the system line, every GPU and the P2P matrix. A change that reads a
# value differently fails here; one that reads a new value rewrites the fixture with it.
BEFORE = REPO / "tests/fixtures/nvml_read/simulated_profiles.json.gz"


class Tally:
    """The simulated pynvml, counting each nvml* function called through it."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not (name.startswith("nvml") and callable(value)):
            return value

        def counted(*args: Any) -> Any:
            with self._lock:
                self.calls[name] += 1
            return value(*args)
        return counted


def read(profile: str, fec_history: bool = False, root: Path | None = None,
         node: SimNode | None = None) -> tuple[dict[str, Any], Tally]:
    """``read_all`` of a simulated ``profile`` (the node the fixture was read from), with
    the node's files under ``root`` as the agent reads them (its own tree by default):
    what it emitted, and the calls it made."""
    node = node or build(NodeSpec(f"{profile}-bench", profile))
    module = Tally(build_module(node))
    lines: list[dict[str, Any]] = []
    tree = make_root(node) if root is None else None
    try:
        read_all(module, lines.append, root=root or tree,  # type: ignore[arg-type]
                 fec_history=fec_history)
    finally:
        if tree is not None:
            shutil.rmtree(tree)
    assert lines[-1] == {"t": "end", "calls": sum(module.calls.values())}
    gpus = sorted((line["data"] for line in lines if line["t"] == "gpu"),
                  key=lambda gpu: gpu["index"])
    (system,) = (line["data"] for line in lines if line["t"] == "system")
    (p2p,) = (line["data"] for line in lines if line["t"] == "p2p")
    return {"system": system, "gpus": gpus, "p2p": p2p}, module


def differences(before: Any, after: Any, path: str = "$") -> list[str]:
    """Each path where ``after`` differs from ``before``, field by field."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [d for key in sorted(set(before) | set(after))
                for d in differences(before.get(key, "<absent>"), after.get(key, "<absent>"),
                                     f"{path}.{key}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after, strict=True))
                for d in differences(b, a, f"{path}[{i}]")]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"]


def test_every_profile_has_a_call_limit() -> None:
    assert set(CALLS_PER_GPU) == set(LAYOUTS)


@pytest.mark.parametrize("profile", sorted(LAYOUTS))
def test_calls_per_gpu_stay_within_the_profile_limit(profile: str) -> None:
    got, module = read(profile)
    per_gpu = sum(module.calls.values()) / len(got["gpus"])
    assert per_gpu <= CALLS_PER_GPU[profile], dict(module.calls)


@pytest.mark.parametrize("profile", sorted(LAYOUTS))
@pytest.mark.parametrize("fec_history", [False, True], ids=["quick", "fec_history"])
def test_every_value_reads_as_before_the_calls_were_folded(profile: str,
                                                           fec_history: bool) -> None:
    before = fixture(f"{profile}{' fec_history' if fec_history else ''}")
    got, _ = read(profile, fec_history)
    assert differences(before, got) == []


# What the node's files answer in NVML's place (agent/collectors/gpu_files.py).
ANSWERED_BY_FILES = ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMinorNumber",
                     "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth")


def fixture(profile: str) -> dict[str, Any]:
    with gzip.open(BEFORE, "rt") as file:
        return dict(json.load(file)[profile])


@pytest.mark.parametrize("profile", sorted(LAYOUTS))
def test_identity_and_current_link_are_read_from_the_nodes_files(profile: str) -> None:
    _, module = read(profile)
    assert {name: module.calls[name] for name in ANSWERED_BY_FILES if module.calls[name]} == {}


def test_where_the_files_do_not_answer_nvml_is_asked_and_reads_the_same() -> None:
    node = build(NodeSpec("dgx-h100-bench", "dgx-h100"))
    _, planned = read("dgx-h100", node=node)
    root = make_root(node)
    try:
        shutil.rmtree(root / "proc/driver/nvidia/gpus")
        for gpu in node.gpus:
            (root / "sys/bus/pci/devices" / gpu.bdf / "current_link_speed").write_text(
                "Unknown\n")
            (root / "sys/bus/pci/devices" / gpu.bdf / "current_link_width").write_text("0\n")
        got, module = read("dgx-h100", root=root, node=node)
    finally:
        shutil.rmtree(root)
    assert differences(fixture("dgx-h100"), got) == []
    assert {name: module.calls[name] for name in ANSWERED_BY_FILES} == dict.fromkeys(
        ANSWERED_BY_FILES, len(node.gpus))
    assert sum(module.calls.values()) == sum(planned.calls.values()) + 5 * len(node.gpus)


def test_one_batch_per_gpu_holds_counters_slowdown_times_and_links() -> None:
    got, module = read("dgx-h100")
    assert module.calls["nvmlDeviceGetFieldValues"] == len(got["gpus"])
    gpu = got["gpus"][0]
    assert len(gpu["nvlinks"]) == 18
    assert set(gpu["clock_event_time_ns"]) == {"sw_thermal", "hw_thermal", "hw_power_brake"}


def test_a_gpu_with_more_links_than_planned_reads_the_rest_in_one_more_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    before, planned = read("dgx-h100")
    monkeypatch.setattr(nvml_read, "LINKS_BY_ARCH", {nvml_read.ARCH_HOPPER: 5})
    got, module = read("dgx-h100")
    assert differences(before, got) == []
    assert module.calls["nvmlDeviceGetFieldValues"] == 2 * len(got["gpus"])
    assert sum(module.calls.values()) == sum(planned.calls.values()) + len(got["gpus"])


@pytest.mark.parametrize(("profile", "versions", "expected"), [
    ("dgx-h100", frozenset({1, 2, 3}), {"nvmlDeviceGetGpuFabricInfo_v4": 1,
                                        "nvmlDeviceGetGpuFabricInfoV": 8}),
    ("gb200-nvl72", frozenset({1, 2}), {"nvmlDeviceGetGpuFabricInfo_v4": 1,
                                        "nvmlDeviceGetGpuFabricInfoV": 1 + 4}),
])
def test_a_fabric_version_the_driver_refuses_is_asked_once_per_node(
        profile: str, versions: frozenset[int], expected: dict[str, int]) -> None:
    node = build(NodeSpec("n1", profile))
    node.fabric_info_versions = versions
    module = Tally(build_module(node))
    for _ in range(3):  # whatever order the GPUs' threads run in
        module.calls.clear()
        lines: list[dict[str, Any]] = []
        read_all(module, lines.append)  # type: ignore[arg-type]
        fabric = {k: v for k, v in module.calls.items() if "FabricInfo" in k}
        assert fabric == expected
        assert all(line["data"]["fabric"] for line in lines if line["t"] == "gpu")


def test_a_reader_hung_while_asking_holds_the_others_no_longer_than_the_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    facts, asking, hung = NodeFacts(), threading.Event(), threading.Event()

    def stuck() -> None:
        with facts.learning("fabric"):
            asking.set()
            hung.wait(30)

    def ask() -> None:
        with facts.learning("fabric"):
            done.append(hung.is_set())

    threading.Thread(target=stuck, daemon=True).start()
    asking.wait(5)
    for wait_s in (0.05, 60.0):  # the bounded wait, then none once the topic is settled
        monkeypatch.setattr(nvml_read, "WAIT_S", wait_s)
        done: list[bool] = []
        other = threading.Thread(target=ask, daemon=True)
        other.start()
        other.join(10)
        assert done == [False]  # it went on while the hung reader still held the topic
        facts.settle("fabric")
    hung.set()
