"""What the nvlink.* checks share (the fabric/ checks use some too): which GPUs an NVLink
check judges, the NVML part of the snapshot, and how links are named."""

from __future__ import annotations

from collections.abc import Iterable

from ...agent.model import Snapshot
from ...agent.model.gpu import Gpu, NvmlInfo
from ..common import NODE, gpu_component, nvml_down
from ..finding import Finding
from ..registry import CheckContext


def nvml_info(snapshot: Snapshot) -> NvmlInfo | Finding:
    """The NVML part of the snapshot, or the error finding saying why there is none."""
    nvml = snapshot.nvml
    if nvml is None:
        stats = snapshot.sources.get("nvml")
        return Finding.error(NODE, "NVML data was not collected",
                             stats.error or stats.status if stats else None)
    down = nvml_down(nvml)
    if down is not None:
        return Finding.error(NODE, "NVML unavailable", down)
    return nvml


def answering(gpu: Gpu) -> bool:
    return gpu.responsive and gpu.lost is None


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


def nvlink_gpus(ctx: CheckContext) -> tuple[list[Finding], list[Gpu]]:
    """The GPUs an NVLink check judges, and the skip/error findings for the rest.

    In order: a profile without NVLink skips the whole check; no NVML data is an error;
    then per GPU, one that did not answer (``gpu.responsive`` judges it), one whose NVML
    says NVLink is not supported, and one in MIG mode each skip.
    """
    if ctx.profile.nvlinks_per_gpu <= 0:
        return [Finding.skip(NODE, "no NVLink on this platform (profile expects none)")], []
    nvml = nvml_info(ctx.snapshot)
    if isinstance(nvml, Finding):
        return [nvml], []
    if not nvml.gpus:
        return [Finding.skip(NODE, "no GPUs seen by NVML")], []
    findings: list[Finding] = []
    judged: list[Gpu] = []
    for gpu in nvml.gpus:
        component = gpu_component(gpu)
        if not answering(gpu):
            findings.append(Finding.skip(component, "GPU did not answer NVML "
                                                    "(gpu.responsive reports it)"))
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
