"""What check families share: the node's component name, a GPU's name and its earlier
sample, whether NVML can be asked at all, and the GPUs it answered for.

A family's own helpers live in its package (``gpu/helpers.py``, ``nvlink/helpers.py``);
what more than one family (or the runner) needs lives here. Errors and skips are
``Finding.error`` and ``Finding.skip``, with what was read as ``observed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .finding import Finding
from .rates import sample_interval

if TYPE_CHECKING:
    from ...agent.model.gpu import Gpu, NvmlInfo
    from ...agent.model.kernel import KernelLog
    from ...agent.model.snapshot import Snapshot

NODE = "node"


def gpu_component(gpu: Gpu) -> str:
    """``gpu3``: the component of a finding about one GPU, by its NVML index."""
    return f"gpu{gpu.index}"


def nvml_down(nvml: NvmlInfo | None) -> str | None:
    """Why NVML cannot be asked anything on this node (its library did not load, or
    nvmlInit did not answer), or None when it can or was not read. gpu.responsive and
    gpu.count judge that; every other NVML check skips, pointing at them."""
    if nvml is None:
        return None
    if nvml.library_error:
        return nvml.library_error
    return "no answer from nvmlInit" if "init" in nvml.errors else None


def nvml_usable(nvml: NvmlInfo | None) -> bool:
    """NVML was read and answers: its per-GPU values mean something."""
    return nvml is not None and nvml_down(nvml) is None


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


def nvml_gpus(snapshot: Snapshot) -> list[Gpu] | Finding:
    """The GPUs NVML listed, or the one finding that stands for all of them: the error
    when NVML was not read or is unusable, the skip when it saw no GPU."""
    nvml = nvml_info(snapshot)
    if isinstance(nvml, Finding):
        return nvml
    if not nvml.gpus:
        return Finding.skip(NODE, "no GPUs seen by NVML")
    return nvml.gpus


def unanswered_skip(gpu: Gpu) -> Finding | None:
    """The skip for a GPU that did not answer NVML (``gpu.responsive`` judges it), or None
    when it answered: a per-GPU check judges only the GPUs that did."""
    if gpu.responsive and gpu.lost is None:
        return None
    return Finding.skip(gpu_component(gpu), "GPU did not answer NVML "
                                            "(gpu.responsive reports it)")


def previous_gpu(previous: Snapshot | None, gpu: Gpu) -> Gpu | None:
    """The same GPU in an earlier snapshot: by UUID (NVML indices may change across a
    reboot), else by index where either sample has no UUID."""
    gpus = previous.nvml.gpus if previous is not None and previous.nvml is not None else []
    if gpu.uuid:
        for old in gpus:
            if old.uuid == gpu.uuid:
                return old
    for old in gpus:
        if old.index == gpu.index and (not gpu.uuid or not old.uuid):
            return old
    return None


def kernel_log_of(snapshot: Snapshot) -> KernelLog | Finding:
    """The kernel log the checks read, or the error saying why there is none: not
    collected, or not one line of it could be read (never "no errors in it")."""
    log = snapshot.kernel_log
    if log is None:
        return Finding.error(NODE, "kernel log was not collected",
                             snapshot.sources.get("kernel_log"))
    if log.unknown and not log.lines_read:
        return Finding.error(NODE, "kernel log unreadable", log.unknown)
    return log


def rate_interval(previous: Snapshot | None, current: Snapshot, counters: str
                  ) -> float | Finding:
    """Seconds between the two samples a rate of ``counters`` is read over, or the finding
    that says why there is none: a skip without an earlier sample, an error when the two
    cannot be placed in order (a rate from them would be a guess)."""
    if previous is None:
        return Finding.skip(NODE, f"no earlier sample to compare {counters} with")
    dt = sample_interval(previous, current)
    if dt is None:
        return Finding.error(NODE, "samples out of order: cannot compute rates",
                             {"previous": previous.taken_at, "current": current.taken_at})
    return dt
