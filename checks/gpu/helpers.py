"""What the gpu.* checks share: which GPUs a per-GPU check can judge, why a value
is missing, the previous sample of a GPU, and the component name."""

from __future__ import annotations

from typing import Any

from ...agent.model.gpu import Gpu, NvmlInfo
from ..finding import Action, Finding, Status
from ..registry import CheckContext

NODE = "node"
FIELDS = "fields"  # the collector's key when the whole field-value batch failed


def component(gpu: Gpu) -> str:
    return f"gpu{gpu.index}"


def error_finding(comp: str, message: str, reason: Any) -> Finding:
    """The check could not tell: NVML failed in a way that is not "not supported"."""
    return Finding(Status.ERROR, comp, message, observed=reason, action=Action.INVESTIGATE)


def skip_finding(comp: str, message: str, observed: Any = None) -> Finding:
    return Finding(Status.SKIP, comp, message, observed=observed)


def answering_gpus(ctx: CheckContext) -> tuple[list[Gpu], list[Finding]]:
    """The GPUs a per-GPU check can judge, and the skips for everything else.

    No NVML, a library error, or a GPU that is lost: ``gpu.responsive`` judges those, so
    the other checks skip instead of failing the same fault again. The second list is
    never empty when the first is.
    """
    nvml = ctx.snapshot.nvml
    if nvml is None:
        return [], [skip_finding(NODE, "NVML was not read (see gpu.responsive)")]
    if nvml.library_error:
        return [], [skip_finding(NODE, "NVML unavailable (see gpu.responsive)",
                                 nvml.library_error)]
    if "init" in nvml.errors:
        return [], [skip_finding(NODE, "NVML did not initialise (see gpu.responsive)",
                                 nvml.errors["init"])]
    gpus: list[Gpu] = []
    skips: list[Finding] = []
    for gpu in nvml.gpus:
        if gpu.lost or gpu.index in nvml.unanswered:
            skips.append(skip_finding(component(gpu), "GPU not answering (see gpu.responsive)",
                                      gpu.lost or "timeout"))
        elif "handle" in gpu.errors or "handle" in gpu.unsupported:
            skips.append(skip_finding(component(gpu), "GPU could not be opened "
                                      "(see gpu.responsive)",
                                      gpu.errors.get("handle") or gpu.unsupported.get("handle")))
        else:
            gpus.append(gpu)
    if not gpus and not skips:
        skips.append(skip_finding(NODE, "NVML enumerates no GPU"))
    return gpus, skips


def missing(gpu: Gpu, what: str, *keys: str) -> Finding:
    """Why a value is None, as a skip: not supported here, an NVML error (which
    ``gpu.responsive`` fails, so it is not failed twice), or simply not reported."""
    comp = component(gpu)
    for key in keys:
        if key in gpu.unsupported:
            return skip_finding(comp, f"{what} not supported on this GPU or driver",
                                gpu.unsupported[key])
    for key in keys:
        if key in gpu.errors:
            return skip_finding(comp, f"{what} could not be read (see gpu.responsive)",
                                gpu.errors[key])
    return skip_finding(comp, f"{what} not reported")


def norm_bdf(bdf: str | None) -> str | None:
    """``00000000:3B:00.0``, ``0000:3b:00`` or ``3b:00.0`` -> ``0000:3b:00``.

    Domain, bus and device only: GPUs are function 0, Xid lines omit the function, and
    NVML prints an 8-digit upper-case domain where sysfs has 4 lower-case digits
    (hardware.md §1.3, §5.1).
    """
    if not bdf:
        return None
    parts = bdf.strip().split(".")[0].split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3:
        return None
    try:
        domain, bus, dev = (int(p, 16) for p in parts)
    except ValueError:
        return None
    return f"{domain:04x}:{bus:02x}:{dev:02x}"


def previous_gpu(ctx: CheckContext, gpu: Gpu) -> Gpu | None:
    """The same GPU in ``ctx.previous``: by UUID (indices may change), else by index."""
    prev = ctx.previous.nvml if ctx.previous is not None else None
    if prev is None:
        return None
    for old in prev.gpus:
        if gpu.uuid and old.uuid == gpu.uuid:
            return old
    for old in prev.gpus:
        if not gpu.uuid and old.index == gpu.index:
            return old
    return None


def nvml_usable(nvml: NvmlInfo | None) -> bool:
    return nvml is not None and not nvml.library_error and "init" not in nvml.errors
