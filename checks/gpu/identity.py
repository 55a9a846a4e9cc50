"""What the GPUs are: gpu.model (the profile's model) and gpu.inforom (the board's
InfoROM, which keeps its error records, is intact)."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.common import NODE, gpu_component
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from .helpers import answering_gpus, missing


@check("gpu.model", needs=("nvml",),
       remedy="The node has GPUs of another model than its profile: fix the profile or "
              "the node's partition/config, or have the node checked if a board was swapped.",
       actions=(Action.FIX_CONFIG,))
def model(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU is one of the profile's models (exact NVML names)."""
    wanted = ctx.profile.gpu_models
    if not wanted:
        yield Finding.skip(NODE, "profile names no GPU model")
        return
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        if gpu.name is None:
            yield missing(gpu, "GPU name", "name")
        elif gpu.name in wanted:
            yield Finding.passed(gpu_component(gpu), "GPU model as expected", gpu.name,
                                 list(wanted))
        else:
            yield Finding.fail(gpu_component(gpu), "GPU model not in the profile", gpu.name,
                               list(wanted), Action.FIX_CONFIG)


@check("gpu.inforom", needs=("nvml",),
       remedy="A corrupted InfoROM loses the GPU's error records (ECC, retired pages, "
              "remapped rows): collect nvidia-bug-report.sh and open an RMA case.",
       actions=(Action.RMA,))
def inforom(ctx: CheckContext) -> Iterator[Finding]:
    """The InfoROM checksum is valid (nvmlDeviceValidateInforom; CorruptedInforom fails)."""
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        if gpu.inforom_valid is None:
            yield missing(gpu, "InfoROM validity", "inforom_valid")
        elif gpu.inforom_valid:
            yield Finding.passed(gpu_component(gpu), "InfoROM valid", gpu.inforom_image)
        else:
            yield Finding.fail(gpu_component(gpu), "InfoROM corrupted", gpu.inforom_image,
                               "valid", Action.RMA)
