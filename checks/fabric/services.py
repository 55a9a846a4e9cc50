"""The Fabric Manager daemon: fabric.manager (nvidia-fabricmanager on NVSwitch boards).
IMEX, the NVL72 trays' daemon, is judged in imex.py."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, host_info, service

# -- fabric.manager --------------------------------------------------------------------


@parameters
class ManagerParams(Params):
    unit: str = param("nvidia-fabricmanager.service", doc="the Fabric Manager's systemd unit")


@check("fabric.manager", needs=("host",), params=ManagerParams,
       remedy="Start Fabric Manager (systemctl start nvidia-fabricmanager) and read why it "
              "stopped: journalctl -u nvidia-fabricmanager and /var/log/fabricmanager.log. "
              "Its package version must match the driver exactly; \"NVSwitches don't "
              "match\" in the log means a switch is missing (nvswitch.count). Without it, "
              "CUDA fails with cudaErrorSystemNotReady on NVSwitch boards.",
       actions=(Action.FIX_CONFIG, Action.INVESTIGATE))
def manager(ctx: CheckContext) -> Iterator[Finding]:
    """Fabric Manager is running on NVSwitch boards (HGX/DGX A100, H100, H200, B200).

    Without ``nvidia-fabricmanager`` the GPUs of an NVSwitch board cannot register with
    the fabric: CUDA fails with "system not yet initialized" and NVLink P2P is lost.
    GB200/GB300 NVL72 compute trays do not run it (the fabric is managed on the switch
    trays; starting it there fails with NV_WARN_NOTHING_TO_DO), nor do PCIe boards: both
    skip. The unit name is the ``unit`` parameter.
    """
    profile = ctx.profile
    if profile.nvl72 or not profile.fabric_manager:
        yield Finding.skip(NODE, "no Fabric Manager on this platform")
        return
    host = host_info(ctx)
    if isinstance(host, Finding):
        yield host
        return
    if not host.has_systemd:
        yield Finding.skip(NODE, "host does not run systemd")
        return
    unit = ManagerParams.of(ctx).unit
    state = service(host, unit)
    observed = state and f"{state.active}/{state.sub}"
    if state is None:
        yield Finding.error(NODE, "Fabric Manager service state was not collected", unit)
    elif state.error is not None:
        yield Finding.error(NODE, "systemctl did not answer about Fabric Manager",
                            state.error)
    elif state.load == "not-found":
        yield Finding.fail(NODE, "Fabric Manager not installed", state.load, "loaded",
                           Action.FIX_CONFIG)
    elif state.active in ("active", "reloading"):
        yield Finding.passed(NODE, "Fabric Manager running", observed, "active")
    elif state.active == "activating":
        yield Finding.warn(NODE, "Fabric Manager still starting", observed, "active",
                           Action.INVESTIGATE)
    else:
        yield Finding.fail(NODE, "Fabric Manager not running", observed, "active",
                           Action.FIX_CONFIG)
