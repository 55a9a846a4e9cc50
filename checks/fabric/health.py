"""fabric.health_mask: NVML's fabric health mask and summary per GPU."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.common import gpu_component
from ..core.finding import Action, Finding, Status
from ..core.registry import CheckContext, check
from .helpers import NODE, fabric_gpus

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
_NO_HEALTH = "fabric health not reported by this driver"


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
    findings, judged = fabric_gpus(ctx)
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


__all__ = ["decode_health_mask"]
