"""Fabric info as each driver gives it: the newest version the driver answers, falling
back on a version mismatch or a missing function, the version kept in the snapshot, and a
tray on an older driver still judged."""

from __future__ import annotations

import time
from typing import Any

import pynvml
import pytest

from clusterdiag.agent.collectors.nvml_read import GpuReader
from clusterdiag.agent.model.gpu import FabricClique, FabricInfo
from clusterdiag.agent.model.serde import from_jsonable
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import build, env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.hardware import SimNode
from clusterdiag.agent.sim.writers.nvml import build_module
from clusterdiag.checks.core.finding import Status

FABRIC_CHECKS = ("fabric.state", "fabric.clique", "fabric.health_mask")
PRE_580 = {"node": "n1", "kind": "fabric_info_pre580"}


def tray(faults: list[dict[str, Any]] | None = None, profile: str = "gb200-nvl72") -> SimNode:
    return build(NodeSpec("n1", profile, rack="rack1", faults=faults or []))


class Calls:
    """The simulated pynvml, remembering each fabric-info call and the error it raised."""

    def __init__(self, module: Any) -> None:
        self._module, self.calls = module, []  # type: list[tuple[str, str]]

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not name.startswith("nvmlDeviceGetGpuFabricInfo"):
            return value

        def call(*args: Any) -> Any:
            try:
                result = value(*args)
            except pynvml.NVMLError as exc:
                self.calls.append((name, type(exc).__name__))
                raise
            self.calls.append((name, "ok"))
            return result
        return call


def read_gpu(node: SimNode, index: int = 0) -> tuple[Any, list[tuple[str, str]]]:
    module = Calls(build_module(node))
    module.nvmlInit()
    return GpuReader(module, index).read(), module.calls  # type: ignore[arg-type]


def test_the_simulated_590_driver_answers_v3_after_v4_is_not_found() -> None:
    gpu, calls = read_gpu(tray())
    assert gpu.fabric is not None
    assert gpu.fabric.version == 3
    assert calls == [("nvmlDeviceGetGpuFabricInfo_v4", "NVMLError_FunctionNotFound"),
                     ("nvmlDeviceGetGpuFabricInfoV", "ok")]
    assert gpu.fabric.health_summary == 1
    assert gpu.fabric.cliques == []


def test_a_driver_before_580_falls_back_on_the_mismatch_to_v2() -> None:
    gpu, calls = read_gpu(tray([PRE_580]))
    assert calls == [("nvmlDeviceGetGpuFabricInfo_v4", "NVMLError_FunctionNotFound"),
                     ("nvmlDeviceGetGpuFabricInfoV", "NVMLError_ArgumentVersionMismatch"),
                     ("nvmlDeviceGetGpuFabricInfoV", "ok")]
    assert "fabric" not in gpu.unsupported
    assert "fabric" not in gpu.errors
    assert gpu.fabric is not None
    assert (gpu.fabric.version, gpu.fabric.state, gpu.fabric.clique_id) == (2, 3, 32766)
    assert gpu.fabric.health_mask
    assert gpu.fabric.health_summary is None


def test_a_driver_with_only_v1_is_read_without_a_health_mask() -> None:
    node = tray()
    node.fabric_info_versions = frozenset({1})
    gpu, calls = read_gpu(node)
    assert [c[0] for c in calls][-1] == "nvmlDeviceGetGpuFabricInfo"
    assert gpu.fabric is not None
    assert (gpu.fabric.version, gpu.fabric.health_mask, gpu.fabric.clique_id) == (1, None, 32766)


def test_nvml_615_answers_v4_with_every_clique() -> None:
    node = tray()
    node.fabric_info_versions = frozenset({1, 2, 3, 4})
    gpu, calls = read_gpu(node)
    assert calls == [("nvmlDeviceGetGpuFabricInfo_v4", "ok")]
    assert gpu.fabric is not None
    assert gpu.fabric.version == 4
    assert gpu.fabric.cliques == [FabricClique(type=t, id=32766) for t in range(4)]
    assert gpu.fabric.clique_id == 32766
    assert gpu.fabric.health_summary == 1


def test_a_mismatch_on_every_version_is_an_error_never_unsupported() -> None:
    node = tray()
    node.fabric_info_versions = frozenset()
    gpu, _ = read_gpu(node)
    assert gpu.fabric is None
    assert "fabric" not in gpu.unsupported
    assert gpu.errors["fabric"].startswith("ArgumentVersionMismatch")


def test_not_supported_stops_the_fallback() -> None:
    """An A100 on the simulated 590 driver: v4 is not found, v3 is not supported: no
    older version is asked, and fabric info is unsupported there."""
    gpu, calls = read_gpu(build(NodeSpec("n1", "dgx-a100")))
    assert [c[1] for c in calls] == ["NVMLError_FunctionNotFound", "NVMLError_NotSupported"]
    assert gpu.unsupported["fabric"] == "NotSupported"


class Answers64:
    """A binding whose driver claims more cliques than the v4 array holds."""

    c_nvmlGpuFabricInfo_v4_t = pynvml.c_nvmlGpuFabricInfo_v4_t

    def nvmlDeviceGetGpuFabricInfo_v4(self, handle: Any, ref: Any) -> int:
        info = ref._obj
        info.state, info.numCliques = 3, 1000
        for i in range(len(info.cliques)):
            info.cliques[i].type, info.cliques[i].id = 1 + i % 3, i
        return 0


def test_v4_keeps_no_more_cliques_than_its_array_and_no_unicast_means_clique_0() -> None:
    reader = GpuReader(Answers64(), 0)  # type: ignore[arg-type]
    reader._fabric()
    fabric = reader.gpu.fabric
    assert fabric is not None
    assert len(fabric.cliques) == pynvml.NVML_GPU_FABRIC_CLIQUE_MAX
    assert fabric.clique_id == 0


def test_a_snapshot_from_before_the_version_loads() -> None:
    old = {"state": 3, "status": 0, "cluster_uuid": "00000001-0000-0000-0000-000000000001",
           "clique_id": 2, "health_mask": 170, "health_summary": 1}
    fabric = from_jsonable(FabricInfo, old, "$.fabric")
    assert (fabric.version, fabric.cliques, fabric.clique_id) == (None, [], 2)


@pytest.mark.parametrize("profile", ["gb200-nvl72", "gb300-nvl72"])
def test_a_tray_on_a_pre_580_driver_is_judged_and_passes(profile: str) -> None:
    """Every fabric check judges the tray (a pass per GPU, never a skip) on v2 answers."""
    spec = NodeSpec("n1", profile, rack="rack1", faults=[PRE_580])
    snap = collect_snapshot(env_for(spec), ["nvml", "pci", "host"], time.monotonic() + 20)
    assert snap.nvml is not None
    assert {g.fabric.version for g in snap.nvml.gpus if g.fabric} == {2}
    report = evaluate(snap, Config(), RunOptions(profile=profile))
    for check in FABRIC_CHECKS:
        found = [f for f in report.findings if f.check == check]
        assert found, check
        assert {f.status for f in found} == {Status.PASS}, found


def test_a_tray_on_a_v1_only_driver_keeps_state_and_clique_judged() -> None:
    """v1 has no health fields: the health check says so; state and clique still pass."""
    spec = NodeSpec("n1", "gb200-nvl72", rack="rack1")
    snap = collect_snapshot(env_for(spec), ["nvml", "pci", "host"], time.monotonic() + 20)
    assert snap.nvml is not None
    v1 = tray()
    v1.fabric_info_versions = frozenset({1})
    for gpu in snap.nvml.gpus:
        gpu.fabric = read_gpu(v1, gpu.index)[0].fabric
        assert gpu.fabric is not None
        assert gpu.fabric.version == 1
    report = evaluate(snap, Config(), RunOptions(profile="gb200-nvl72"))
    statuses = {c: {f.status for f in report.findings if f.check == c} for c in FABRIC_CHECKS}
    assert statuses == {"fabric.state": {Status.PASS}, "fabric.clique": {Status.PASS},
                        "fabric.health_mask": {Status.SKIP}}
