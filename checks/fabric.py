"""Fabric checks: Fabric Manager, NVML fabric registration, NVL72 cliques, fabric health,
and IMEX.

Which fabric software a node runs depends on the platform (Fabric Manager user guide): HGX/DGX
boards with NVSwitch chips (A100, H100, H200, B200) need ``nvidia-fabricmanager``; GB200
and GB300 NVL72 compute trays do not run it (the fabric is managed on the switch trays)
and instead register each GPU with the rack's NVLink domain, reported per GPU by NVML's
fabric info, and run ``nvidia-imex`` for cross-tray memory sharing. NVML fabric info is
Hopper+: on A100 and PCIe cards it is NotSupported, which is a skip, never a failure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ..agent.model.gpu import FabricInfo, Gpu
from ..agent.model.host import HostInfo, ServiceState
from .common import gpu_component
from .finding import Action, Finding, Status
from .nvlink.helpers import answering, nvml_info
from .registry import CheckContext, check

NODE = "node"
ZERO_UUID = "00000000-0000-0000-0000-000000000000"

# NVML_GPU_FABRIC_STATE_*
STATE_NOT_SUPPORTED, STATE_NOT_STARTED, STATE_IN_PROGRESS, STATE_COMPLETED = 0, 1, 2, 3
STATE_NAMES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}

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

# healthMask fields (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*): name -> (shift, width).
MASK_FIELDS = {
    "degraded_bw": (0, 0x3),
    "route_recovery": (2, 0x3),
    "route_unhealthy": (4, 0x3),
    "access_timeout_recovery": (6, 0x3),
    "incorrect_configuration": (8, 0xF),
    "partition_assigned": (12, 0x3),
    "gfm_state": (14, 0x3),
}
MASK_TRUE = 1  # DEGRADED_BW_TRUE, ROUTE_*_TRUE, ACCESS_TIMEOUT_RECOVERY_TRUE
GFM_DISCONNECTED = 2
INCORRECT_CONFIGURATION = {
    0: "not supported", 1: "none", 2: "incorrect system GUID", 3: "incorrect chassis serial",
    4: "no partition", 5: "insufficient NVLinks", 6: "incompatible GPU firmware",
    7: "invalid location", 8: "GPU state invalid",
}
# What an operator does for each incorrect-configuration value.
INCORRECT_CONFIGURATION_ACTION = {
    2: Action.FIX_CONFIG, 3: Action.FIX_CONFIG, 4: Action.FIX_CONFIG, 5: Action.RESEAT_CABLE,
    6: Action.FIX_CONFIG, 7: Action.FIX_CONFIG, 8: Action.RESET_GPU,
}
# NVML_GPU_FABRIC_HEALTH_SUMMARY_*
SUMMARY_NAMES = {0: "not supported", 1: "healthy", 2: "unhealthy", 3: "limited capacity"}
SUMMARY_UNHEALTHY, SUMMARY_LIMITED = 2, 3


_UNSUPPORTED = "GPU fabric info not supported on this GPU"
_NO_HEALTH = "fabric health not reported by this driver"


def _status_name(status: int) -> str:
    return NVML_RETURN_NAMES.get(status, str(status))


def _host(ctx: CheckContext) -> HostInfo | Finding:
    host = ctx.snapshot.host
    if host is None:
        stats = ctx.snapshot.sources.get("host")
        return Finding.error(NODE, "host facts were not collected",
                             stats.error or stats.status if stats else None)
    return host


def _unit_id(name: str) -> str:
    return name if "." in name else f"{name}.service"


def _service(host: HostInfo, unit: str) -> ServiceState | None:
    """The unit's state, whether the collector asked for ``nvidia-imex`` or
    ``nvidia-imex.service``."""
    for state in host.services:
        if state.name == unit or _unit_id(state.name) == _unit_id(unit):
            return state
    return None


def _fabric_gpus(ctx: CheckContext, unsupported_warns: bool = False
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
    nvml = nvml_info(ctx.snapshot)
    if isinstance(nvml, Finding):
        return [nvml], []
    if not nvml.gpus:
        return [Finding.skip(NODE, "no GPUs seen by NVML")], []
    findings: list[Finding] = []
    judged: list[tuple[Gpu, FabricInfo]] = []
    for gpu in nvml.gpus:
        component = gpu_component(gpu)
        fabric = gpu.fabric
        if not answering(gpu):
            findings.append(Finding.skip(component, "GPU did not answer NVML "
                                                    "(gpu.responsive reports it)"))
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


# -- fabric.manager --------------------------------------------------------------------


@check("fabric.manager", needs=("host",),
       params={"unit": "nvidia-fabricmanager.service"},
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
    host = _host(ctx)
    if isinstance(host, Finding):
        yield host
        return
    if not host.has_systemd:
        yield Finding.skip(NODE, "host does not run systemd")
        return
    unit = str(ctx.params["unit"])
    state = _service(host, unit)
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
    findings, judged = _fabric_gpus(ctx, unsupported_warns=ctx.profile.nvl72)
    yield from findings
    for gpu, fabric in judged:
        component = gpu_component(gpu)
        name = STATE_NAMES.get(fabric.state, str(fabric.state))
        if fabric.state != STATE_COMPLETED:
            yield Finding.fail(component, "GPU fabric registration not completed", name,
                               "completed", Action.INVESTIGATE)
        elif fabric.status != 0:
            yield Finding.fail(component, "GPU fabric registration completed with an error",
                               _status_name(fabric.status), "SUCCESS", Action.INVESTIGATE)
        else:
            yield Finding.passed(component, "GPU registered with the NVLink fabric",
                                 "completed/SUCCESS", "completed/SUCCESS")


# -- fabric.clique ---------------------------------------------------------------------


def _clique(fabric: FabricInfo) -> str:
    return f"{fabric.cluster_uuid}/{fabric.clique_id}"


def _zero_uuid(value: str) -> bool:
    return not value or value.strip("0-") == ""


@check("fabric.clique", needs=("nvml",),
       remedy="Every GPU of an NVL72 tray must be in the rack's NVLink domain (cluster UUID) "
              "and partition (clique id). A GPU with zeros was not placed in a partition; "
              "a GPU in another clique than its tray mates was partitioned apart. Check the "
              "partition in NMX / NVOS on the switch trays, then the tray's NVLink "
              "connections.",
       actions=(Action.INVESTIGATE,))
def clique(ctx: CheckContext) -> Iterator[Finding]:
    """The GPUs of an NVL72 tray share one non-zero cluster UUID and clique id.

    NVML fabric info names each GPU's NVLink domain (cluster UUID) and partition (clique
    id); GPUs with the same pair talk over NVLink across trays (Mission Control admin guide). On a
    tray every GPU must have a non-zero pair, and all of them the same one; the odd GPU
    is named. Only NVL72 trays: a healthy H100/H200 HGX board reports zeros.
    ``cluster.nvl_domain`` compares the trays of one rack.
    """
    if not ctx.profile.nvl72:
        yield Finding.skip(NODE, "clique applies to NVL72 trays")
        return
    findings, judged = _fabric_gpus(ctx)
    yield from findings
    members: list[tuple[Gpu, FabricInfo]] = []
    for gpu, fabric in judged:
        component = gpu_component(gpu)
        if fabric.state != STATE_COMPLETED:
            yield Finding.skip(component, "fabric registration not completed "
                                          "(fabric.state reports it)")
        elif _zero_uuid(fabric.cluster_uuid) or fabric.clique_id == 0:
            yield Finding.fail(component, "GPU not in an NVLink clique", _clique(fabric),
                               "non-zero cluster UUID and clique id", Action.INVESTIGATE)
        else:
            members.append((gpu, fabric))
    if not members:
        return
    counts = Counter(_clique(fabric) for _, fabric in members)
    (majority, top), *rest = counts.most_common()
    if not rest:
        yield Finding.passed(NODE, "GPUs of the tray share one NVLink clique", majority)
        return
    if rest[0][1] == top:
        yield Finding.fail(NODE, "GPUs of the tray disagree on their NVLink clique",
                           {gpu_component(g): _clique(f) for g, f in members},
                           "one cluster UUID and clique id", Action.INVESTIGATE)
        return
    for gpu, fabric in members:
        if _clique(fabric) != majority:
            yield Finding.fail(gpu_component(gpu), "GPU in another NVLink clique than the "
                                                   "rest of the tray",
                               _clique(fabric), majority, Action.INVESTIGATE)


# -- fabric.health_mask ----------------------------------------------------------------


def decode_health_mask(mask: int) -> dict[str, int]:
    """The healthMask's fields by name (``(mask >> shift) & width``)."""
    return {name: (mask >> shift) & width for name, (shift, width) in MASK_FIELDS.items()}


@check("fabric.health_mask", needs=("nvml",),
       remedy="Degraded bandwidth or an unhealthy route means NVLinks of this GPU to the "
              "fabric are down or misrouted: check nvidia-smi -q (Fabric section) and the "
              "switch trays; reseat the tray's NVLink connections if links are missing. "
              "An incorrect configuration names what to fix (system GUID, chassis serial, "
              "partition, firmware). Recovery in progress usually clears by itself: look "
              "again in a few minutes.",
       actions=(Action.INVESTIGATE, Action.FIX_CONFIG, Action.RESET_GPU,
                Action.RESEAT_CABLE))
def health_mask(ctx: CheckContext) -> Iterator[Finding]:
    """Each GPU's NVML fabric health (healthMask, healthSummary) is clean.

    Decoded per nvml.h's healthMask layout, the fields DCGM's NVL fabric health watch reads. An
    unhealthy route or an incorrect configuration (anything but NONE) fails: traffic
    cannot get through, or the GPU is not placed in the fabric. Degraded bandwidth warns:
    the GPU still works over fewer links, the state NVIDIA's own summary calls
    LIMITED_CAPACITY. Route or access-timeout recovery in progress, and a disconnected
    global fabric manager, warn. The health summary decides too: UNHEALTHY fails,
    LIMITED_CAPACITY warns. Drivers that report no health fields (mask 0, no summary)
    skip.
    """
    findings, judged = _fabric_gpus(ctx)
    yield from findings
    reported = [(gpu, fabric) for gpu, fabric in judged
                if fabric.health_mask or fabric.health_summary]
    if judged and not reported:
        yield Finding.skip(NODE, _NO_HEALTH)  # HGX, and NVL72 drivers without the fields
        return
    for gpu, fabric in judged:
        component = gpu_component(gpu)
        mask, summary = fabric.health_mask, fabric.health_summary
        if not mask and not summary:
            yield Finding.skip(component, _NO_HEALTH)
            continue
        fields = decode_health_mask(mask or 0)
        observed = {"health_mask": hex(mask) if mask is not None else None,
                    "health_summary": SUMMARY_NAMES.get(summary or 0, str(summary))}
        problems = 0
        rules: list[tuple[bool, Status, str, str]] = [
            (fields["degraded_bw"] == MASK_TRUE, Status.WARN,
             "NVLink fabric bandwidth degraded", "full bandwidth"),
            (fields["route_unhealthy"] == MASK_TRUE, Status.FAIL,
             "NVLink fabric route unhealthy", "routes healthy"),
            (fields["route_recovery"] == MASK_TRUE, Status.WARN,
             "NVLink fabric route recovery in progress", "no recovery"),
            (fields["access_timeout_recovery"] == MASK_TRUE, Status.WARN,
             "NVLink fabric access-timeout recovery in progress", "no recovery"),
            (fields["gfm_state"] == GFM_DISCONNECTED, Status.WARN,
             "global fabric manager disconnected", "connected"),
            (summary == SUMMARY_UNHEALTHY, Status.FAIL,
             "NVLink fabric health unhealthy", "healthy"),
            (summary == SUMMARY_LIMITED, Status.WARN,
             "NVLink fabric at limited capacity", "healthy"),
        ]
        for hit, status, message, expected in rules:
            if hit:
                problems += 1
                yield Finding(status, component, message, observed, expected,
                              Action.INVESTIGATE)
        config = fields["incorrect_configuration"]
        if config not in (0, 1):
            problems += 1
            yield Finding.fail(component, "NVLink fabric configuration incorrect",
                               INCORRECT_CONFIGURATION.get(config, str(config)), "none",
                               INCORRECT_CONFIGURATION_ACTION.get(config, Action.INVESTIGATE))
        if not problems:
            yield Finding.passed(component, "NVLink fabric health clean", observed)


# -- fabric.imex -----------------------------------------------------------------------


@check("fabric.imex", needs=("host",), params={"unit": "nvidia-imex.service"},
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
    host = _host(ctx)
    if isinstance(host, Finding):
        yield Finding.skip(NODE, "host facts were not collected")
        return
    if not host.has_systemd:
        yield Finding.skip(NODE, "host does not run systemd")
        return
    unit = str(ctx.params["unit"])
    svc = _service(host, unit)
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


__all__ = ["decode_health_mask"]
