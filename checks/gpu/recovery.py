"""The driver's GPU recovery action (NVML field 230): its values, and gpu.recovery_action.

gpu.xid reads the same values from Xid 154 lines, so the table lives here beside the
check that judges the field."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.common import gpu_component
from ..core.finding import Action, Finding, Status
from ..core.registry import CheckContext, check
from ..core.validation import XID_RESET
from .helpers import FIELDS, answering_gpus, missing

# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (230) values (nvml.h; 6 and 7 from pynvml
# 13.615): status, message, action. Shared with gpu.xid, which reads Xid 154's new value.
RECOVERY_ACTIONS: dict[int, tuple[Status, str, Action]] = {
    0: (Status.PASS, "no recovery action required", Action.NONE),
    1: (Status.FAIL, "driver requires a GPU reset", Action.RESET_GPU),
    2: (Status.FAIL, "driver requires a node reboot", Action.REBOOT),
    3: (Status.FAIL, "driver requires draining peer-to-peer traffic", Action.DRAIN),
    4: (Status.FAIL, "driver requires draining, then a GPU reset", Action.RESET_GPU),
    5: (Status.FAIL, "driver requires recovering the IMEX domain", Action.INVESTIGATE),
    6: (Status.FAIL, "driver requires a PCIe bus reset", Action.REBOOT),
    7: (Status.FAIL, "driver requires a system reboot", Action.REBOOT),
}
RECOVERY_NAMES = {0: "NONE", 1: "GPU_RESET", 2: "NODE_REBOOT", 3: "DRAIN_P2P",
                  4: "DRAIN_AND_RESET", 5: "RECOVER_IMEX_DOMAIN", 6: "BUS_RESET",
                  7: "SYSTEM_REBOOT"}


def recovery_finding(comp: str, value: int, source: str) -> Finding:
    status, message, action = RECOVERY_ACTIONS.get(
        value, (Status.WARN, "unknown recovery action requested", Action.INVESTIGATE))
    observed = {"recovery_action": value, "name": RECOVERY_NAMES.get(value), "from": source}
    return Finding(status, comp, message, observed, "NONE", action)


@check("gpu.recovery_action", validation=XID_RESET, needs=("nvml",),
       remedy="Do what the driver asks: reset the GPU, reboot the node, stop the processes "
              "doing peer-to-peer traffic and query again (drain P2P), or recover the IMEX "
              "domain (GB200/GB300); then re-run the check.",
       actions=(Action.RESET_GPU, Action.REBOOT, Action.DRAIN, Action.INVESTIGATE))
def recovery_action(ctx: CheckContext) -> Iterator[Finding]:
    """The driver asks for no recovery action (NVML field 230, newer drivers).

    1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset, 5 recover the IMEX
    domain, 6 bus reset, 7 system reboot (nvml.h; DCGM watches the same field).
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        if gpu.recovery_action is None:
            yield missing(gpu, "GPU recovery action", "recovery_action", FIELDS)
        else:
            yield recovery_finding(gpu_component(gpu), gpu.recovery_action, "NVML field 230")
