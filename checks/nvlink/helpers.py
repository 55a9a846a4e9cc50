"""What the nvlink.* checks share: which GPUs an NVLink check judges and how links are
named (the GPUs NVML answered for are checks/core/common.py's)."""

from __future__ import annotations

from collections.abc import Iterable

from ...agent.model.gpu import Gpu
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
