"""What the nccl.* checks share: the NCCL part of the snapshot, whether the node has
RDMA devices, and the findings for a host fact that could not be read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...agent.model.pci import MELLANOX_VENDOR
from ..core.finding import Action, Finding, Status
from ..core.topology import Endpoint, gpus, nics

if TYPE_CHECKING:
    from ...agent.model.nccl import NcclInfo
    from ...agent.model.snapshot import Snapshot

NODE = "node"


def nccl_info(snap: Snapshot) -> NcclInfo:
    assert snap.nccl is not None  # the runner judges only checks whose sources arrived
    return snap.nccl


def rdma_present(snap: Snapshot) -> bool:
    """An RDMA port NCCL would see, or at least a Mellanox network function on the bus."""
    if snap.nccl is not None and snap.nccl.ports:
        return True
    return any(d.vendor == MELLANOX_VENDOR and d.pci_class >> 16 == 0x02 for d in snap.pci or [])


def unread(message: str, unreadable: dict[str, str], observed: dict[str, Any]) -> Finding:
    """Our trouble, not the node's: a file that is there but could not be read (EACCES,
    EIO) leaves the fact unknown, so the check says which and why instead of judging
    without it (a failed read is never the absence of what it holds)."""
    return Finding(Status.ERROR, NODE, message, observed={**observed, "unreadable": unreadable},
                   action=Action.INVESTIGATE)


def gpus_and_nics(snap: Snapshot) -> list[Endpoint]:
    return [*gpus(snap), *nics(snap)]
