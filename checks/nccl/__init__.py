"""NCCL readiness: the library (``library``), its settings (``env``, validated by
``settings``), and (at ``--level full``) a real all-reduce (``allreduce``); the host facts
NCCL depends on: GPUDirect RDMA (``gpudirect``), PCIe ACS and the IOMMU (``pcie``), job
limits (``limits``) and GPU-NIC placement (``affinity``, NCCL's net_ib/gdr.cc and
graph/paths.cc). A module per concern; ``helpers`` holds what they share.
``MODULES`` lists the modules that register checks; the package imports none of them:
checks/core/index.py imports the module of each check a run plans, or all of them.
"""

from __future__ import annotations

MODULES = ("affinity", "allreduce", "env", "gpudirect", "library", "limits", "pcie")
