"""NCCL readiness: the library (``library``), its settings (``env``, validated by
``settings``), and (at ``--level full``) a real all-reduce (``allreduce``); the host facts
NCCL depends on: GPUDirect RDMA (``gpudirect``), PCIe ACS and the IOMMU (``pcie``), job
limits (``limits``) and GPU-NIC placement (``affinity``, NCCL's net_ib/gdr.cc and
graph/paths.cc). A module per concern; ``helpers`` holds what they share.
Importing the package registers every nccl.* check.
"""

from __future__ import annotations

from . import affinity, allreduce, env, gpudirect, library, limits, pcie

__all__ = ["affinity", "allreduce", "env", "gpudirect", "library", "limits", "pcie"]
