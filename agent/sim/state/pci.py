"""The simulated node's PCIe hierarchy: the bridges above each device, root port first.

Bus numbers are derived from the device's own, so every platform's layout needs only its
devices' addresses. A GPU sits below a PCIe switch (downstream port, upstream port, root
port); its compute NIC shares that switch (PIX), or with two switch levels a second switch
sits between them (PXB). A NIC with no GPU beside it has a root port of its own.
"""

from __future__ import annotations

from .hardware import SimGpu, SimNode
from .ib import SimHca


def _bus(bdf: str, delta: int) -> str:
    domain, bus, _ = bdf.split(":")
    return f"{domain}:{(int(bus, 16) + delta) % 256:02x}"


def gpu_bridges(node: SimNode, gpu: SimGpu) -> list[str]:
    """Root port, switch upstream port, downstream port above one of the node's GPUs (PIX
    to its NIC); with two switch levels, a second switch between them (PXB to its NIC)."""
    slot = node.layout.gpus[gpu.index]
    first = gpu.bdf if slot.nic_bdf is None else min(gpu.bdf, slot.nic_bdf)
    leaf = [f"{_bus(gpu.bdf, -2)}:00.0"] if node.layout.gpu_switch_levels > 1 else []
    return [f"{_bus(first, -4)}:01.0", f"{_bus(first, -3)}:00.0", *leaf,
            f"{_bus(gpu.bdf, -1)}:00.0"]


def nvswitch_bridges(bdf: str) -> list[str]:
    """A root port and one downstream port above an NVSwitch."""
    return [f"{_bus(bdf, -2)}:01.0", f"{_bus(bdf, -1)}:00.0"]


def hca_bridges(node: SimNode, hca: SimHca) -> list[str]:
    """The bridges above an RDMA device's function. Beside a GPU: root port, switch upstream
    port and the NIC's downstream port of that GPU's switch, whose buses start below the
    lower of the GPU's and its compute NIC's (so a second NIC there, an OEM storage port,
    joins the switch the GPU's chain built). Else a root port of its own."""
    if hca.gpu_bdf is None:
        return [f"{_bus(hca.pci_bdf, -1)}:01.0"]
    anchors = {s.bdf: min(s.bdf, s.nic_bdf) for s in node.layout.gpus if s.nic_bdf}
    first = anchors.get(hca.gpu_bdf) or min(hca.gpu_bdf, hca.pci_bdf)
    return [f"{_bus(first, -4)}:01.0", f"{_bus(first, -3)}:00.0",
            f"{_bus(hca.pci_bdf, -1)}:00.0"]
