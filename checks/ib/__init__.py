"""InfiniBand and RoCE checks: the compute rails (``inventory``), each port's link
(``ports``), the subnet manager (``subnet_manager``), the NIC's PCIe link (``pcie``),
firmware (``firmware``), mlx5 kernel-log errors (``kernel_errors``), error and congestion
counters as rates (``counters``) and what a lossless RoCE rail needs (``roce``), a module
per concern; ``helpers`` holds what they share; which devices are compute rails is
decided in ``checks/core/rails.py``.

RoCE lives here because a RoCE port is an RDMA device like an InfiniBand one: the same
collector reports it (``needs=("infiniband",)``), the same rules decide which ports are
compute rails, and its checks judge those ports with the same helpers; only the link layer
differs. Its check ids stay ``roce.*``.

Only compute devices (``IbDevice.role``, decided when judging by ``core/rails`` from the
snapshot's facts, the profile and config) are judged as NCCL rails. Storage and
management ports are never counted as failed compute rails; ``ib.port_state`` still warns
when one is down, because storage that cannot be reached hurts jobs too.
``MODULES`` lists the modules that register checks; the package imports none of them:
checks/core/index.py imports the module of each check a run plans, or all of them.
"""

from __future__ import annotations

MODULES = ("counters", "firmware", "inventory", "kernel_errors", "pcie", "ports", "roce",
           "subnet_manager")
