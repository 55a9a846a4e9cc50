"""What the nvlink.* checks share: which GPUs an NVLink check judges and how links are
named (the GPUs NVML answered for are checks/core/common.py's)."""

from __future__ import annotations

from collections.abc import Iterable

from ...agent.model.gpu import Gpu, NvLink
from ..core.common import NODE, gpu_component, nvml_gpus, unanswered_skip
from ..core.finding import Finding
from ..core.registry import CheckContext


def links_text(links: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 7]`` -> ``"0-3, 7"``."""
    ordered = sorted(set(links))
    parts: list[str] = []
    start = prev = None
    for link in [*ordered, None]:
        if start is not None and prev is not None and link == prev + 1:
            prev = link
            continue
        if start is not None and prev is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = link
    return ", ".join(parts)

_NO_NVLINK = "NVLink not supported on this GPU"
# NVML_GPU_NVLINK_BW_MODE_* (pynvml 13.615.71, nvml.h): the NVLink bandwidth modes a site
# may set for the node with nvmlSystemSetNvlinkBwMode; FULL is the links' own speed.
BW_MODE_NAMES = {0: "FULL", 1: "OFF", 2: "MIN", 3: "HALF", 4: "3QUARTER"}


def reduced_bw_mode(ctx: CheckContext) -> str | None:
    """The name of the reduced NVLink bandwidth mode the site set for the node; None at
    FULL or where the mode was not read. A mode number NVML may add later is named by its
    number: reduced, since it is not FULL."""
    nvml = ctx.snapshot.nvml
    mode = nvml.nvlink_bw_mode if nvml is not None else None
    if mode is None or mode == 0:
        return None
    return BW_MODE_NAMES.get(mode, f"mode {mode}")


# NVML_NVLINK_STATE_* (nvml-py 13.615.71 pynvml.py:897-900, nvml.h): 2 SLEEP, the state of a
# link asleep ("NvLink is in sleep state"), and 3 ACTIVE_TRAFFIC_DISABLED, a link up with
# its traffic turned off. Both are links that are up and carry nothing by design.
IDLE_STATES = {2: "asleep", 3: "traffic disabled"}


def idle_reason(link: NvLink) -> str | None:
    """Why a link that is up is not judged on its traffic or speed, or None: asleep or
    with its traffic disabled (its NVML state), or active in the low-speed power state
    (NVML_FI_DEV_NVLINK_GET_POWER_STATE, nvml.h "0=HIGH_SPEED 1=LOW_SPEED"), which runs
    slower by design. nvlink.links_up and nvlink.speed share this rule, so a link is idle
    to both or to neither. An inactive link is not idle whatever its power state: nothing
    NVIDIA publishes says an inactive link in the low-speed power state is healthy."""
    if link.state in IDLE_STATES:
        return IDLE_STATES[link.state]
    if link.active and link.low_power:
        return "low power"
    return None


def nvlink_gpus(ctx: CheckContext, by_profile: bool = True
                ) -> tuple[list[Finding], list[Gpu]]:
    """The GPUs an NVLink check judges, and the skip/error findings for the rest.

    In order: a profile without NVLink skips the whole check, unless ``by_profile`` is
    False (error counters are judged against their own earlier values, so they need no
    profile: a storm on a machine detected ``generic`` is still a storm); no NVML data is
    an error; then per GPU, one that did not answer (``gpu.responsive`` judges it), one
    whose NVML says NVLink is not supported, and one in MIG mode each skip.
    """
    if by_profile and ctx.profile.nvlinks_per_gpu <= 0:
        return [Finding.skip(NODE, "no NVLink on this platform (profile expects none)")], []
    gpus = nvml_gpus(ctx.snapshot)
    if isinstance(gpus, Finding):
        return [gpus], []
    findings: list[Finding] = []
    judged: list[Gpu] = []
    for gpu in gpus:
        component = gpu_component(gpu)
        unanswered = unanswered_skip(gpu)
        if unanswered is not None:
            findings.append(unanswered)
        elif "nvlinks" in gpu.unsupported:
            findings.append(Finding.skip(component, _NO_NVLINK))
        elif gpu.mig_enabled:
            findings.append(Finding.skip(component, "MIG mode is enabled: GPU peer-to-peer "
                                                    "over NVLink is off"))
        else:
            judged.append(gpu)
    if not judged and findings and all(f.message == _NO_NVLINK for f in findings):
        return [Finding.skip(NODE, _NO_NVLINK)], []  # one line, not one per GPU
    return findings, judged


def link_errors(gpu: Gpu) -> dict[str, str]:
    return {k: v for k, v in gpu.errors.items()
            if k.startswith("nvlink") or k in ("fields", "nvlink_fields", "nvlink_count")}
