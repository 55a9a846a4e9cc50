"""The NVML protocol (agent/collectors/nvml_api.py) holds the reader, real pynvml and the
simulator together: what the reader calls is a member, and both answer every member."""

from __future__ import annotations

import ast
import inspect

import pynvml
import pytest

from clusterdiag.agent.collectors import nvml_read
from clusterdiag.agent.collectors.nvml_api import NvmlApi
from clusterdiag.agent.daemon import xid
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.nvml import SimNvml

FUNCTIONS = sorted(n for n in vars(NvmlApi) if n.startswith("nvml"))
ATTRIBUTES = sorted(NvmlApi.__annotations__)


def dispatched(module: object) -> set[str]:
    """The NVML names a module uses: ``nv.nvmlX`` attributes and ``"nvmlX"`` strings (the
    reader's ``call(key, "nvmlX", ...)`` dispatch)."""
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    names = {node.attr for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr.startswith("nvml")
             and isinstance(node.value, ast.Attribute | ast.Name)
             and getattr(node.value, "attr", getattr(node.value, "id", "")) in ("nv", "self")}
    names |= {node.value for node in ast.walk(tree)
              if isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value.startswith("nvml") and node.value[4:5].isupper()}
    return names


def test_every_call_the_collector_makes_is_in_the_protocol() -> None:
    used = dispatched(nvml_read) | dispatched(xid)
    # nvmlEccSramErrorStatus_v1 is a struct version constant, read with a default.
    assert used - {"nvmlEccSramErrorStatus_v1"} <= set(FUNCTIONS), sorted(
        used - set(FUNCTIONS))
    assert {"nvmlDeviceGetTemperature", "nvmlDeviceGetFieldValues", "nvmlInit",
            "nvmlEventSetWait_v2"} <= used


def test_the_simulator_defines_every_member_itself() -> None:
    """Defined on the class (the fallback to pynvml's attributes gives only constants)."""
    missing = [n for n in FUNCTIONS if not callable(vars(SimNvml).get(n))]
    assert missing == []


def test_real_pynvml_has_every_member() -> None:
    assert [n for n in FUNCTIONS + ATTRIBUTES if not hasattr(pynvml, n)] == []


def test_the_simulator_answers_with_pynvml_types_and_lacks_what_it_does_not_answer() -> None:
    nv = SimNvml(build(NodeSpec("n1", "dgx-h100")))
    assert nv.NVMLError is pynvml.NVMLError
    assert nv.c_nvmlPlatformInfo_v2_t is pynvml.c_nvmlPlatformInfo_v2_t
    assert not hasattr(nv, "nvmlDeviceGetBAR1MemoryInfo")
    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(3)
    assert nv.nvmlDeviceGetIndex(handle) == 3
    assert nv.nvmlDeviceGetName(handle) == "NVIDIA H100 80GB HBM3"
    nv.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError) as after:
        nv.nvmlDeviceGetName(handle)
    assert after.value.value == pynvml.NVML_ERROR_UNINITIALIZED
