"""nccl.gpudirect_rdma: GPUDirect RDMA is available (the peer-memory or dma-buf path)."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from .helpers import NODE, nccl_info, rdma_present, unread

DMABUF_KERNEL = (5, 12)  # RDMA dma-buf import (drivers/infiniband/core/umem_dmabuf.c)


def _kernel(release: str | None) -> tuple[int, int] | None:
    parts = (release or "").split("-")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


@check("nccl.gpudirect_rdma", needs=("nccl", "pci"),
       remedy="Load the peer-memory module (modprobe nvidia-peermem, and list it in "
              "/etc/modules-load.d) or use dma-buf: the open NVIDIA kernel modules with a "
              "kernel >= 5.12.",
       actions=(Action.FIX_CONFIG,))
def gpudirect_rdma(ctx: CheckContext) -> Iterator[Finding]:
    """GPUDirect RDMA is possible: nvidia_peermem loaded, or dma-buf (kernel and driver)."""
    if not rdma_present(ctx.snapshot):
        yield Finding.skip(NODE, "no RDMA NIC on this node")
        return
    gdr = nccl_info(ctx.snapshot).gpudirect
    if gdr is None:
        yield Finding.error(NODE, "GPUDirect facts were not collected")
        return
    observed = {"peermem": gdr.peermem, "kernel": gdr.kernel_release, "driver": gdr.driver_line}
    if gdr.peermem:
        yield Finding.passed(NODE, "peer-memory module loaded", observed)
        return
    kernel = _kernel(gdr.kernel_release)
    if kernel is not None and kernel >= DMABUF_KERNEL and gdr.driver_open:
        yield Finding.passed(NODE, "dma-buf: open NVIDIA kernel modules on a kernel >= 5.12",
                             observed)
        return
    if gdr.unreadable:
        yield unread("GPUDirect RDMA unknown: files that decide it could not be read",
                      gdr.unreadable, observed)
        return
    why = ("proprietary NVIDIA kernel modules (dma-buf needs the open ones)"
           if gdr.driver_open is False else "NVIDIA driver flavour unknown"
           if gdr.driver_open is None else "kernel older than 5.12")
    yield Finding.fail(NODE, f"no GPUDirect RDMA: no nvidia_peermem and no dma-buf ({why})",
                       observed, "nvidia_peermem, or dma-buf", Action.FIX_CONFIG)
