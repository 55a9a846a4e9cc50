"""The fabric daemons: fabric.manager (nvidia-fabricmanager on NVSwitch boards) and
fabric.imex (nvidia-imex on NVL72 trays)."""

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


# -- fabric.imex -----------------------------------------------------------------------


@parameters
class ImexParams(Params):
    unit: str = param("nvidia-imex.service", doc="the IMEX daemon's systemd unit")


@check("fabric.imex", needs=("host",), params=ImexParams,
       skip_in=("prolog",),
       remedy="Start IMEX (systemctl start nvidia-imex) and check its peers with "
              "nvidia-imex-ctl -N; its nodes file (/etc/nvidia-imex/nodes_config.cfg) must "
              "list the trays of the domain. Where IMEX is started per job (Slurm, "
              "Kubernetes ComputeDomains) an idle tray without it is normal.",
       actions=(Action.FIX_CONFIG, Action.INVESTIGATE))
def imex(ctx: CheckContext) -> Iterator[Finding]:
    """The IMEX service runs on NVL72 trays (warns only; not in the prolog).

    Multi-node NVLink (NCCL MNNVL, CUDA fabric memory) needs ``nvidia-imex`` on every
    tray of the domain. Sites often start IMEX per job, so an idle tray without it is
    normal: this check only ever warns and does not run in the prolog (DCGM's IMEX
    health reports false positives on idle GB200/GB300 trays: DCGM #308, aicr #2641).
    Platforms where IMEX is not expected skip.
    """
    if not ctx.profile.imex:
        yield Finding.skip(NODE, "IMEX is not expected on this platform")
        return
    host = host_info(ctx)
    if isinstance(host, Finding):
        yield Finding.skip(NODE, "host facts were not collected")
        return
    if not host.has_systemd:
        yield Finding.skip(NODE, "host does not run systemd")
        return
    unit = ImexParams.of(ctx).unit
    svc = service(host, unit)
    if svc is None:
        yield Finding.skip(NODE, "IMEX service state was not collected")
    elif svc.error is not None:
        yield Finding.warn(NODE, "IMEX service state unreadable", svc.error, "active",
                           Action.INVESTIGATE)
    elif svc.load == "not-found":
        yield Finding.warn(NODE, "IMEX service not installed", svc.load, "loaded",
                           Action.FIX_CONFIG)
    elif svc.active in ("active", "reloading"):
        yield Finding.passed(NODE, "IMEX service running", f"{svc.active}/{svc.sub}",
                             "active")
    else:
        yield Finding.warn(NODE, "IMEX service not running", f"{svc.active}/{svc.sub}",
                           "active", Action.FIX_CONFIG)
