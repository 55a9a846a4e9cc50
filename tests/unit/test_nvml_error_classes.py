"""What one NVML error blames: the GPU (gpu.responsive fails and reboots), the driver
(the node cannot run CUDA: fail), or the call, library or host (an error naming the call,
never a reboot). The simulator raises pynvml's own errors; the collector reads them as on
a real node; gpu.responsive judges what it read."""

from __future__ import annotations

import pynvml
import pytest

from clusterdiag.agent.collectors.nvml_read import GpuReader
from clusterdiag.agent.model.gpu import Gpu
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.nvml import build_module
from clusterdiag.checks.core.finding import Action, Finding, Status
from tests.checks.gpu.factory import make_gpu, make_snap, pci_gpu, run

GPU = 2


def _read(function: str, code: int) -> Gpu:
    """GPU 2 of a simulated DGX H100 whose ``function`` raises NVML error ``code``."""
    fault = {"node": "n1", "kind": "nvml_call_error", "gpu": GPU, "function": function,
             "error": code}
    nv = build_module(build(NodeSpec("n1", "dgx-h100", faults=[fault])))
    nv.nvmlInit()
    return GpuReader(nv, GPU).read()


def _judge(gpu: Gpu) -> Finding:
    gpus = [gpu if i == GPU else make_gpu(i) for i in range(4)]
    (finding,) = [f for f in run("gpu.responsive", make_snap(gpus)) if f.component == "gpu2"]
    return finding


@pytest.mark.parametrize(("code", "name"), [
    (pynvml.NVML_ERROR_INVALID_ARGUMENT, "InvalidArgument"),
    (pynvml.NVML_ERROR_MEMORY, "Memory"),
    (pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, "InsufficientResources"),
    (pynvml.NVML_ERROR_IN_USE, "InUse"),
    (pynvml.NVML_ERROR_UNINITIALIZED, "Uninitialized"),
])
def test_a_library_or_host_error_of_one_call_is_an_error_naming_it(code: int,
                                                                   name: str) -> None:
    finding = _judge(_read("nvmlDeviceGetTemperature", code))
    assert (finding.status, finding.action) == (Status.ERROR, Action.INVESTIGATE)
    assert "nvmlDeviceGetTemperature returned " + name in finding.message
    assert finding.observed["temperature_c"].startswith(f"{name}: nvmlDeviceGetTemperature")


def test_a_library_error_opening_the_gpu_is_an_error_not_a_reboot() -> None:
    finding = _judge(_read("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_MEMORY))
    assert (finding.status, finding.action) == (Status.ERROR, Action.INVESTIGATE)
    assert "nvmlDeviceGetHandleByIndex returned Memory" in finding.message


@pytest.mark.parametrize("code", [pynvml.NVML_ERROR_UNKNOWN, pynvml.NVML_ERROR_TIMEOUT,
                                  pynvml.NVML_ERROR_IRQ_ISSUE, 12345])
def test_an_error_that_blames_the_gpu_still_fails_and_reboots(code: int) -> None:
    finding = _judge(_read("nvmlDeviceGetTemperature", code))
    assert (finding.status, finding.action) == (Status.FAIL, Action.REBOOT)


def test_a_lost_gpu_still_fails_and_reboots() -> None:
    finding = _judge(_read("nvmlDeviceGetTemperature", pynvml.NVML_ERROR_GPU_IS_LOST))
    assert (finding.status, finding.action) == (Status.FAIL, Action.REBOOT)
    assert finding.message == "GPU has fallen off the bus (GpuIsLost)"


def test_a_gpu_error_beside_a_library_error_fails() -> None:
    gpu = make_gpu(GPU, errors={"temperature_c": "InvalidArgument: nvmlDeviceGetTemperature: x",
                                "pcie_width_current": "Unknown: nvmlDeviceGetCurrPcieLinkWidth: y"})
    finding = _judge(gpu)
    assert (finding.status, finding.action) == (Status.FAIL, Action.REBOOT)


def test_a_field_value_with_a_host_error_is_an_error() -> None:
    """A field's own return code (no message, no function): named by the value."""
    finding = _judge(make_gpu(GPU, errors={"pcie_replay_count": "Memory"}))
    assert finding.status is Status.ERROR
    assert "pcie_replay_count returned Memory" in finding.message


def test_the_gpu_count_failing_for_host_memory_is_an_error() -> None:
    snap = make_snap([], device_count=None, errors={"device_count": "Memory"})
    findings = run("gpu.responsive", snap)
    assert [(f.status, f.component) for f in findings if f.status is not Status.SKIP] == [
        (Status.ERROR, "node")]


@pytest.mark.parametrize(("error", "action"), [("DriverNotLoaded", Action.REBOOT),
                                               ("LibRmVersionMismatch", Action.REBOOT),
                                               ("LibraryNotFound", Action.FIX_CONFIG)])
def test_gpus_on_pci_without_a_usable_driver_still_fail(error: str, action: Action) -> None:
    """Such a node cannot run CUDA: it must not take jobs."""
    snap = make_snap([], device_count=None, library_error=error, pci=[pci_gpu(0)])
    (finding,) = run("gpu.responsive", snap)
    assert (finding.status, finding.action) == (Status.FAIL, action)


@pytest.mark.parametrize("error", ["DriverNotLoaded", "LibRmVersionMismatch"])
def test_a_driver_error_from_one_call_still_fails(error: str) -> None:
    """The driver went away after nvmlInit: no CUDA on this node either."""
    finding = _judge(make_gpu(GPU, errors={"temperature_c": f"{error}: x: y"}))
    assert (finding.status, finding.action) == (Status.FAIL, Action.REBOOT)


def test_our_readers_own_exception_is_an_error_not_a_gpu_fault() -> None:
    """The reader thread keeps its own exception under ``reader`` (agent/collectors/nvml.py):
    a TypeError in our code says nothing of the GPU."""
    gpu = make_gpu(GPU)
    gpu.errors["reader"] = "TypeError: unsupported operand type(s) for +: 'int' and 'str'"
    finding = _judge(gpu)
    assert (finding.status, finding.action) == (Status.ERROR, Action.INVESTIGATE), finding
    assert "our bug" in finding.message


def test_a_code_pynvml_has_no_class_for_is_named_from_nvml_h() -> None:
    """An older pynvml raises a bare NVMLError for a code it does not know (26, Deprecated,
    answered for the applications clocks by drivers from 590): named, then judged."""
    from clusterdiag.agent.collectors.nvml_read import error_name

    class NVMLError(Exception):  # an older pynvml's base class, as it raises an unknown code
        def __init__(self, value: int) -> None:
            super().__init__(value)
            self.value = value

    assert error_name(NVMLError(26)) == "Deprecated"
    assert error_name(NVMLError(9999)) == "NVMLError"
    assert error_name(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)) == "GpuIsLost"
