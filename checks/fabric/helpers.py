"""What the fabric.* checks share: the GPUs with NVML fabric info (and the skip and
error findings for the others), NVML's return-code names, and the host's systemd units."""

from __future__ import annotations

from ...agent.model.gpu import FabricInfo, Gpu
from ...agent.model.host import HostInfo, ServiceState
from ..core.common import gpu_component, nvml_gpus, unanswered_skip
from ..core.finding import Action, Finding
from ..core.registry import CheckContext

NODE = "node"

# NVML_GPU_FABRIC_STATE_*
STATE_NOT_SUPPORTED, STATE_NOT_STARTED, STATE_IN_PROGRESS, STATE_COMPLETED = 0, 1, 2, 3

# nvmlReturn_t names for the fabric status (nvml.h).
NVML_RETURN_NAMES = {
    0: "SUCCESS", 1: "UNINITIALIZED", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED",
    4: "NO_PERMISSION", 5: "ALREADY_INITIALIZED", 6: "NOT_FOUND", 7: "INSUFFICIENT_SIZE",
    8: "INSUFFICIENT_POWER", 9: "DRIVER_NOT_LOADED", 10: "TIMEOUT", 11: "IRQ_ISSUE",
    12: "LIBRARY_NOT_FOUND", 13: "FUNCTION_NOT_FOUND", 14: "CORRUPTED_INFOROM",
    15: "GPU_IS_LOST", 16: "RESET_REQUIRED", 17: "OPERATING_SYSTEM",
    18: "LIB_RM_VERSION_MISMATCH", 19: "IN_USE", 20: "MEMORY", 21: "NO_DATA",
    22: "VGPU_ECC_NOT_SUPPORTED", 23: "INSUFFICIENT_RESOURCES", 24: "FREQ_NOT_SUPPORTED",
    25: "ARGUMENT_VERSION_MISMATCH", 26: "DEPRECATED", 27: "NOT_READY", 28: "GPU_NOT_FOUND",
    29: "INVALID_STATE", 999: "UNKNOWN",
}


_UNSUPPORTED = "GPU fabric info not supported on this GPU"


def status_name(status: int) -> str:
    return NVML_RETURN_NAMES.get(status, str(status))


def host_info(ctx: CheckContext) -> HostInfo | Finding:
    host = ctx.snapshot.host
    if host is None:
        stats = ctx.snapshot.sources.get("host")
        return Finding.error(NODE, "host facts were not collected",
                             stats.error or stats.status if stats else None)
    return host


def unit_id(name: str) -> str:
    return name if "." in name else f"{name}.service"


def service(host: HostInfo, unit: str) -> ServiceState | None:
    """The unit's state, whether the collector asked for ``nvidia-imex`` or
    ``nvidia-imex.service``."""
    for state in host.services:
        if state.name == unit or unit_id(state.name) == unit_id(unit):
            return state
    return None


def fabric_gpus(ctx: CheckContext, unsupported_warns: bool = False
                 ) -> tuple[list[Finding], list[tuple[Gpu, FabricInfo]]]:
    """GPUs with NVML fabric info, and skip/error findings for the others.

    A platform without NVLink (PCIe cards) skips as a whole, whatever NVML says: a fabric
    verdict on a PCIe GPU would be a false positive. NotSupported (A100, PCIe cards,
    standalone GH200), or a state of NOT_SUPPORTED, is a skip (a warning with
    ``unsupported_warns``); any other failure to read fabric info is an error.
    """
    profile = ctx.profile
    if profile.has_expectations and profile.nvlinks_per_gpu <= 0 and not profile.nvswitch \
            and not profile.nvl72:
        return [Finding.skip(NODE, "no NVLink fabric on this platform")], []
    gpus = nvml_gpus(ctx.snapshot)
    if isinstance(gpus, Finding):
        return [gpus], []
    findings: list[Finding] = []
    judged: list[tuple[Gpu, FabricInfo]] = []
    for gpu in gpus:
        component = gpu_component(gpu)
        fabric = gpu.fabric
        unanswered = unanswered_skip(gpu)
        if unanswered is not None:
            findings.append(unanswered)
        elif "fabric" in gpu.errors:
            findings.append(Finding.error(component, "NVML fabric info unreadable",
                                          gpu.errors["fabric"]))
        elif fabric is None or "fabric" in gpu.unsupported \
                or fabric.state == STATE_NOT_SUPPORTED:
            findings.append(
                Finding.warn(component, "GPU fabric info not reported on an NVL72 tray",
                             gpu.unsupported.get("fabric") or "not supported", "completed",
                             Action.INVESTIGATE)
                if unsupported_warns else
                Finding.skip(component, _UNSUPPORTED))
        else:
            judged.append((gpu, fabric))
    if not judged and findings and all(f.message == _UNSUPPORTED for f in findings):
        return [Finding.skip(NODE, _UNSUPPORTED)], []  # one line, not one per GPU
    return findings, judged
