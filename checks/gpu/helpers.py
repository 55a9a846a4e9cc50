"""What the gpu.* checks share: which GPUs a per-GPU check can judge, and why a value
is missing (the component name, a GPU's earlier sample and whether NVML answers are
checks/core/common.py's)."""

from __future__ import annotations

from ...agent.model.gpu import Gpu
from ..core.common import NODE, gpu_component, nvml_down
from ..core.finding import Finding
from ..core.registry import CheckContext

FIELDS = "fields"  # the collector's key when the whole field-value batch failed


def answering_gpus(ctx: CheckContext) -> tuple[list[Gpu], list[Finding]]:
    """The GPUs a per-GPU check can judge, and the skips for everything else.

    No NVML, a library error, or a GPU that is lost: ``gpu.responsive`` judges those, so
    the other checks skip instead of failing the same fault again. The second list is
    never empty when the first is.
    """
    nvml = ctx.snapshot.nvml
    if nvml is None:
        return [], [Finding.skip(NODE, "NVML was not read (see gpu.responsive)")]
    if nvml_down(nvml) is not None:
        what = "unavailable" if nvml.library_error else "did not initialise"
        return [], [Finding.skip(NODE, f"NVML {what} (see gpu.responsive)",
                                 nvml.library_error or nvml.errors["init"])]
    gpus: list[Gpu] = []
    skips: list[Finding] = []
    for gpu in nvml.gpus:
        if gpu.lost or gpu.index in nvml.unanswered:
            skips.append(Finding.skip(gpu_component(gpu),
                                      "GPU not answering (see gpu.responsive)",
                                      gpu.lost or "timeout"))
        elif "handle" in gpu.errors or "handle" in gpu.unsupported:
            skips.append(Finding.skip(gpu_component(gpu), "GPU could not be opened "
                                      "(see gpu.responsive)",
                                      gpu.errors.get("handle") or gpu.unsupported.get("handle")))
        else:
            gpus.append(gpu)
    if not gpus and not skips:
        skips.append(Finding.skip(NODE, "NVML enumerates no GPU"))
    return gpus, skips


def missing(gpu: Gpu, what: str, *keys: str) -> Finding:
    """Why a value is None, as a skip: not supported here, an NVML error (which
    ``gpu.responsive`` fails, so it is not failed twice), or simply not reported."""
    comp = gpu_component(gpu)
    for key in keys:
        if key in gpu.unsupported:
            return Finding.skip(comp, f"{what} not supported on this GPU or driver",
                                gpu.unsupported[key])
    for key in keys:
        if key in gpu.errors:
            return Finding.skip(comp, f"{what} could not be read (see gpu.responsive)",
                                gpu.errors[key])
    return Finding.skip(comp, f"{what} not reported")
