"""What each NCCL-readiness fault does to a simulated node (the table is in catalog.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..state.hardware import SimNode
from .ib import hca_of

Apply = Callable[[SimNode, Mapping[str, Any]], None]


def peermem_missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    """No peer-memory module and proprietary kernel modules: no dma-buf either."""
    node.modules = [m for m in node.modules if m != "nvidia_peermem"]
    node.nccl.driver_open = False


def acs_enabled(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.nccl.acs_gpus.append(int(fault["gpu"]))


def iommu_translated(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.cmdline += " intel_iommu=on"
    node.nccl.iommu_translated = True


def nic_wrong_numa(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The NIC's numa_node names the other socket (a BIOS proximity-table error)."""
    hca = hca_of(node, fault)
    hca.numa = (hca.numa + 1) % len(node.layout.host.cpulists)


def memlock_low(node: SimNode, fault: Mapping[str, Any]) -> None:
    """A limits.conf cap of 64 MiB, and the 8 MiB systemd default for processes."""
    node.nccl.memlock_conf_kib = 65536
    node.memlock_kib = 8192


def nccl_missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.nccl.library_version = None


def allreduce_slow(node: SimNode, fault: Mapping[str, Any]) -> None:
    """nccl-tests installed, measuring half the profile's expected bus bandwidth."""
    node.nccl.allreduce_busbw_gbps = (node.profile.allreduce_busbw_gbps or 100.0) / 2


def conf(name: str, default: str) -> Apply:
    """An /etc/nccl.conf setting; the fault's ``value`` key overrides the default."""
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        node.nccl.conf[name] = str(fault.get("value", default))
    return apply
