"""The modes a GPU is set to: gpu.persistence_mode and gpu.mig_mode."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.common import NODE, gpu_component
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import answering_gpus, missing


@parameters
class PersistenceParams(Params):
    required: bool = param(True, doc="persistence mode off warns (false: it is noted)")


@check("gpu.persistence_mode", needs=("nvml",), params=PersistenceParams,
       remedy="Enable persistence: run nvidia-persistenced (systemctl enable --now "
              "nvidia-persistenced) or `nvidia-smi -pm 1`. Without it the driver tears "
              "each GPU down between clients and the next job pays seconds of init.",
       actions=(Action.FIX_CONFIG,))
def persistence_mode(ctx: CheckContext) -> Iterator[Finding]:
    """Persistence mode is enabled (gpud: supported-but-off is unhealthy; DCGM r1 warns)."""
    gpus, skips = answering_gpus(ctx)
    yield from skips
    required = PersistenceParams.of(ctx).required
    for gpu in gpus:
        comp = gpu_component(gpu)
        if gpu.persistence_mode is None:
            yield missing(gpu, "persistence mode", "persistence_mode")
        elif gpu.persistence_mode:
            yield Finding.passed(comp, "persistence mode enabled", True, True)
        elif required:
            yield Finding.warn(comp, "persistence mode disabled", False, True,
                               Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, "persistence mode disabled (not required)", False)


@parameters
class MigModeParams(Params):
    mig: str = param("disabled", doc="the MIG mode the partition expects: disabled, "
                     "enabled or any (any case)")


@check("gpu.mig_mode", needs=("nvml",), params=MigModeParams,
       remedy="Set MIG as the partition expects (`nvidia-smi -i N -mig 0|1`) and reset the "
              "GPU (or reboot) to apply a pending change; or set checks.gpu.mig_mode.mig.",
       actions=(Action.FIX_CONFIG, Action.RESET_GPU))
def mig_mode(ctx: CheckContext) -> Iterator[Finding]:
    """MIG mode is what the config wants: ``disabled`` (default), ``enabled`` or ``any``."""
    want = MigModeParams.of(ctx).mig.lower()
    if want not in ("disabled", "enabled", "any"):
        yield Finding.error(NODE, "checks.gpu.mig_mode.mig must be disabled, enabled or any",
                            want)
        return
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        comp, cur, pending = gpu_component(gpu), gpu.mig_enabled, gpu.mig_pending
        if cur is None:
            if want == "enabled" and "mig_enabled" in gpu.unsupported:
                yield Finding.fail(comp, "MIG required but not supported on this GPU",
                                   gpu.unsupported["mig_enabled"], "enabled", Action.FIX_CONFIG)
            else:
                yield missing(gpu, "MIG mode", "mig_enabled")
            continue
        observed = {"current": _mig(cur), "pending": _mig(pending)}
        ok = want == "any" or _mig(cur) == want
        if not ok and pending is not None and _mig(pending) == want:
            yield Finding.fail(comp, "MIG mode change pending: reset the GPU to apply",
                               observed, want, Action.RESET_GPU)
        elif not ok:
            yield Finding.fail(comp, f"MIG {_mig(cur)} but the config wants it {want}",
                               observed, want, Action.FIX_CONFIG)
        elif pending is not None and pending != cur:
            yield Finding.warn(comp, "MIG mode change pending (applies at the next GPU reset)",
                               observed, _mig(cur), Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, f"MIG {_mig(cur)}", observed, want)


def _mig(flag: bool | None) -> str | None:
    return None if flag is None else ("enabled" if flag else "disabled")
