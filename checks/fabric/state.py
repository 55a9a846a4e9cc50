"""fabric.state: each GPU's registration with the NVLink fabric completed."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.common import gpu_component
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from .helpers import STATE_COMPLETED, fabric_gpus, status_name

STATE_NAMES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}


# -- fabric.state ----------------------------------------------------------------------


@check("fabric.state", needs=("nvml",),
       remedy="A GPU whose fabric registration has not completed cannot use NVLink. On "
              "NVSwitch boards check Fabric Manager (fabric.manager, its log); on NVL72 "
              "trays check the switch trays' NVLink fabric (NMX) and the tray's NVLink "
              "connections. A completed registration with an error status (for example "
              "INSUFFICIENT_RESOURCES) needs the fabric side looked at before a reboot.",
       actions=(Action.INVESTIGATE,))
def state(ctx: CheckContext) -> Iterator[Finding]:
    """Each GPU finished registering with the NVLink fabric (NVML fabric info, Hopper+).

    Healthy is state COMPLETED with status SUCCESS (nvml.h nvmlGpuFabricInfo). NOT_STARTED and
    IN_PROGRESS mean Fabric Manager (HGX) or the rack's fabric (NVL72) has not finished
    with the GPU: it has no NVLink yet, so the node is not ready. COMPLETED with another
    status (a real GB200: "Insufficient Resources" with clique 0) fails. GPUs where NVML
    has no fabric info (A100, PCIe) skip; on an NVL72 tray, where this is the only view
    of the fabric, that warns.
    """
    findings, judged = fabric_gpus(ctx, unsupported_warns=ctx.profile.nvl72)
    yield from findings
    for gpu, fabric in judged:
        component = gpu_component(gpu)
        name = STATE_NAMES.get(fabric.state, str(fabric.state))
        if fabric.state != STATE_COMPLETED:
            yield Finding.fail(component, "GPU fabric registration not completed", name,
                               "completed", Action.INVESTIGATE)
        elif fabric.status != 0:
            yield Finding.fail(component, "GPU fabric registration completed with an error",
                               status_name(fabric.status), "SUCCESS", Action.INVESTIGATE)
        else:
            yield Finding.passed(component, "GPU registered with the NVLink fabric",
                                 "completed/SUCCESS", "completed/SUCCESS")
