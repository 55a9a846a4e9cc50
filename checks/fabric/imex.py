"""fabric.imex: IMEX on NVL72 trays, judged as the site runs it.

Who runs the IMEX daemon decides what a healthy tray shows (the profile's ``imex_mode``):

- ``host``: the ``nvidia-imex`` service (Slurm sites; the DRA driver with its
  HostManagedIMEXDaemon gate, kubernetes-sigs/dra-driver-nvidia-gpu#1236). The service, its
  nodes file, the channel devices and the domain's state are judged.
- ``dra``: the DRA driver's ComputeDomains start a daemon per domain, and a running host
  service holds the driver's one IMEX session, so the ComputeDomain daemon never gets ready
  ("Failed to allocate Imex session ... NV_ERR_IN_USE"; "Host static IMEX and DRA-managed
  ComputeDomains are mutually exclusive", NVIDIA/aicr#2520; the GPU Operator's DRA
  prerequisites: "The IMEX systemd service disabled", NVIDIA/cloud-native-docs#453). A
  running host service is then the fault.
- ``per_job``: started for each job, so outside a job only the channel devices are judged.
- ``auto``: ``dra`` where the DRA driver's kubelet plugin runs (its registration socket
  accepts a connection: agent/collectors/imex.py), else ``host``. The plugin's folder
  alone is no proof: nothing removes it when the driver is uninstalled, so a site that
  moved from the DRA driver to the host service keeps it. There the tray is judged as
  ``host`` and warns that the mode is ambiguous; only a live plugin, or an explicit
  ``imex_mode: dra``, fails a running host service.

Nothing here fails a tray for another tray's trouble: a domain DOWN or DEGRADED warns on
each tray and names the nodes that are not READY, so one missing tray never fails the
other seventeen. Outside ``dra`` every verdict is a warning, since an idle tray of a site
that starts IMEX itself may rightly have none (DCGM's IMEX health reports false positives on
idle trays: DCGM #308, aicr #2641); the check does not run in the prolog.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...agent.model.host import HostInfo, ImexState, ServiceState
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from ..profiles.profile import IMEX_MODES
from .helpers import NODE, host_info, service

CHANNEL = "channel0"
STALE_DRA = ("DRA plugin folder present but no live plugin: the host IMEX service may be "
             "intended; set imex_mode")
UNDER_DRA = ("host nvidia-imex service runs where the DRA driver manages IMEX: stop and "
             "disable the host nvidia-imex service; the DRA driver runs IMEX per "
             "ComputeDomain")


@parameters
class ImexParams(Params):
    unit: str = param("nvidia-imex.service", doc="the IMEX daemon's systemd unit")


@check("fabric.imex", needs=("host",), params=ImexParams,
       skip_in=("prolog",),
       remedy="Where the NVIDIA DRA driver manages IMEX (ComputeDomains): stop and disable "
              "the host nvidia-imex service (systemctl disable --now nvidia-imex); the DRA "
              "driver runs IMEX per ComputeDomain. If the driver runs with the "
              "HostManagedIMEXDaemon gate, set imex_mode: host in the site profile. Where "
              "the host runs IMEX: start it (systemctl start nvidia-imex), list the "
              "domain's trays in /etc/nvidia-imex/nodes_config.cfg, create "
              "/dev/nvidia-caps-imex-channels/channel0, and read nvidia-imex-ctl -N: a "
              "node that is not READY is the tray to look at. Where IMEX is started per job "
              "an idle tray without it is normal.",
       actions=(Action.FIX_CONFIG, Action.INVESTIGATE))
def imex(ctx: CheckContext) -> Iterator[Finding]:
    """IMEX as the site runs it: no host service under the DRA driver; where the host runs
    it, the service, nodes file, channel devices and domain state (warns only)."""
    profile = ctx.profile
    if not profile.imex:
        yield Finding.skip(NODE, "IMEX is not expected on this platform")
        return
    if profile.imex_mode not in IMEX_MODES:
        yield Finding.error(NODE, "profile's imex_mode is none of " + ", ".join(IMEX_MODES),
                            profile.imex_mode)
        return
    host = host_info(ctx)
    if isinstance(host, Finding):
        yield Finding.skip(NODE, "host facts were not collected")
        return
    state = host.imex
    mode = profile.imex_mode
    if mode == "auto":
        mode = "dra" if state is not None and state.dra_live else "host"
        if state is not None and state.dra_plugin and not state.dra_live:
            yield Finding.warn(NODE, STALE_DRA, state.unknown.get("dra_live"),
                               "imex_mode host or dra", Action.FIX_CONFIG)
    if mode == "per_job":
        yield from _channels(state, passing=True)
        return
    if not host.has_systemd:
        yield Finding.skip(NODE, "host does not run systemd")
        return
    svc = service(host, ImexParams.of(ctx).unit)
    if mode == "dra":
        yield from _under_dra(svc)
    else:
        yield from _host(host, svc, state)


def _running(svc: ServiceState) -> bool:
    return svc.active in ("active", "reloading")


def _under_dra(svc: ServiceState | None) -> Iterator[Finding]:
    if svc is None or svc.error is not None:
        yield Finding.skip(NODE, "IMEX service state was not collected",
                           svc.error if svc else None)
    elif _running(svc):
        yield Finding.fail(NODE, UNDER_DRA, f"{svc.active}/{svc.sub}", "inactive",
                           Action.FIX_CONFIG)
    else:
        yield Finding.passed(NODE, "IMEX left to the DRA driver (host service not running)",
                             f"{svc.active}/{svc.sub}", "inactive")


def _host(host: HostInfo, svc: ServiceState | None,
          state: ImexState | None) -> Iterator[Finding]:
    if svc is None:
        yield Finding.skip(NODE, "IMEX service state was not collected")
        return
    if svc.error is not None:
        yield Finding.warn(NODE, "IMEX service state unreadable", svc.error, "active",
                           Action.INVESTIGATE)
        return
    if svc.load == "not-found":
        yield Finding.warn(NODE, "IMEX service not installed", svc.load, "loaded",
                           Action.FIX_CONFIG)
        return
    if not _running(svc):
        yield Finding.warn(NODE, "IMEX service not running", f"{svc.active}/{svc.sub}",
                           "active", Action.FIX_CONFIG)
        return
    if state is None:  # a snapshot from before IMEX state was read: the unit is all we know
        yield Finding.passed(NODE, "IMEX service running", f"{svc.active}/{svc.sub}",
                             "active")
        return
    if state.nodes_config is None:
        yield Finding.warn(NODE, "IMEX nodes file missing or unreadable",
                           state.unknown.get("nodes_config"), "one address per line",
                           Action.FIX_CONFIG)
    yield from _channels(state, passing=False)
    yield from _domain(state)


def _channels(state: ImexState | None, passing: bool) -> Iterator[Finding]:
    if state is None:
        yield Finding.skip(NODE, "IMEX state was not collected")
    elif CHANNEL not in (state.channels or []):
        yield Finding.warn(NODE, "IMEX channel device missing",
                           state.unknown.get("channels") or state.channels,
                           f"/dev/nvidia-caps-imex-channels/{CHANNEL}", Action.FIX_CONFIG)
    elif passing:
        yield Finding.passed(NODE, "IMEX channel device present (IMEX starts per job)",
                             state.channels, CHANNEL)


def _domain(state: ImexState) -> Iterator[Finding]:
    domain = state.domain
    if domain is None:
        yield Finding.warn(NODE, "IMEX domain state unreadable", state.unknown.get("domain"),
                           "UP", Action.INVESTIGATE)
        return
    absent = [n for n in domain.nodes if n.status != "READY"]
    if domain.status == "UP" and not absent:
        yield Finding.passed(NODE, "IMEX service running, domain UP",
                             f"UP, {len(domain.nodes)} nodes READY", "UP")
        return
    named = ", ".join(f"node #{n.index} {n.host_name or n.host} {n.status}"
                      for n in absent[:8]) + (f" and {len(absent) - 8} more"
                                              if len(absent) > 8 else "")
    yield Finding.warn(NODE, f"IMEX domain {domain.status}: "
                       + ("trays not READY" if absent else "no tray named"),
                       f"{domain.status}: {named}" if absent else domain.status, "UP",
                       Action.INVESTIGATE)
