"""NVLink-C2C as the NVML collector reads it (agent/collectors/nvml_read.py) from the
simulated trays (agent/sim/writers/nvml.py), and the simulated values against the real
GB200/GB300 `nvidia-smi -q -x` captures."""

from __future__ import annotations

import re
from typing import Any

import pynvml
import pytest

from clusterdiag.agent.collectors.nvml_read import CountingNvml, GpuReader
from clusterdiag.agent.model.gpu import Gpu
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.nvml import SimNvml, build_module
from clusterdiag.checks.core.finding import Status
from tests.checks.gpu.factory import make_gpu, make_snap, run
from tests.real import real_file

CAPTURES = {"gb200-nvl72": "nvidia-smi-q-x__GB200-4gpu-p6e-gb200.36xlarge__k8s-test-infra.txt",
            "gb300-nvl72": "nvidia-smi-q-x__GB300-4gpu__k8s-test-infra.txt"}


def _read(profile: str, index: int = 0, nv: Any = None) -> Gpu:
    """GPU ``index`` of a simulated ``profile`` node as the collector reads it."""
    module = CountingNvml(nv or build_module(build(NodeSpec("n1", profile))))
    module.nvmlInit()
    return GpuReader(module, index).read()


@pytest.mark.parametrize("profile", sorted(CAPTURES))
def test_a_grace_tray_reads_every_c2c_link(profile: str) -> None:
    gpu = _read(profile, 2)
    assert (gpu.c2c_enabled, gpu.c2c_link_count) == (True, 5)
    assert [(link.link, link.active, link.max_bw_mbps) for link in gpu.c2c_links] == [
        (i, True, 44_712) for i in range(5)]
    assert gpu.c2c_links[0].errors == {"crc": 0, "replay": 0, "replay_b2b": 0}
    assert not [k for k in {**gpu.errors, **gpu.unsupported} if k.startswith("c2c")]


class _Recording(SimNvml):
    """The simulator, noting the C2C calls the collector makes."""

    c2c_calls: list[str]

    def nvmlDeviceGetC2cModeInfoV(self, handle: Any) -> Any:
        self.c2c_calls.append("mode")
        return super().nvmlDeviceGetC2cModeInfoV(handle)

    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list[Any]) -> Any:
        if any(isinstance(f, tuple) and f[0] == 171 for f in field_ids):
            self.c2c_calls.append("links")
        return super().nvmlDeviceGetFieldValues(handle, field_ids)


@pytest.mark.parametrize(("profile", "calls"), [("dgx-h100", []),
                                                ("gb200-nvl72", ["mode", "links"])])
def test_only_a_grace_host_pays_for_c2c_calls(profile: str, calls: list[str]) -> None:
    """Field 170 rides in the one device batch; on an x86 host it answers NotSupported
    and neither the mode nor the links are asked for."""
    nv = _Recording(build(NodeSpec("n1", profile)))
    nv.c2c_calls = []
    gpu = _read(profile, 0, nv)
    assert nv.c2c_calls == calls
    if not calls:
        assert gpu.c2c_link_count is None
        assert gpu.c2c_links == []
        assert gpu.unsupported["c2c_link_count"] == "NotSupported"


class _OldDriver(SimNvml):
    """A driver older than the C2C fields: InvalidArgument for each, as for any field id
    it does not know."""

    def _field(self, gpu: Any, fid: int, scope: int | None = None) -> Any:
        if fid in (170, 171, 172, 231, 232, 233):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return super()._field(gpu, fid, scope)


def test_a_driver_older_than_the_fields_is_unsupported_not_broken() -> None:
    gpu = _read("gb200-nvl72", 1, _OldDriver(build(NodeSpec("n1", "gb200-nvl72"))))
    assert gpu.unsupported["c2c_link_count"] == "InvalidArgument"
    assert not [k for k in gpu.errors if k.startswith("c2c")]
    (finding,) = [f for f in run("gpu.responsive", make_snap([gpu, make_gpu(0)]))
                  if f.component == "gpu1"]
    assert finding.status is Status.PASS


@pytest.mark.parametrize("profile", sorted(CAPTURES))
def test_the_simulated_c2c_mode_is_the_real_trays(profile: str) -> None:
    """Both real trays report <c2c_mode>Enabled</c2c_mode> on every GPU."""
    text = real_file("nvsmi", "gb200", CAPTURES[profile]).read_text()
    modes = re.findall(r"<c2c_mode>(\w+)</c2c_mode>", text)
    assert modes == ["Enabled"] * 4
    node = build(NodeSpec("n1", profile))
    assert [bool(g.c2c_enabled) for g in node.gpus] == [m == "Enabled" for m in modes]
