"""The NCCL side of a simulated node's state: its host library, settings, driver flavour,
IOMMU, ACS bits and job limits (writers/nccl.py writes them as files under the root)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SimNccl:
    library_version: str | None = "2.23.4"  # None: NCCL only in the job containers
    conf: dict[str, str] = field(default_factory=dict)  # /etc/nccl.conf
    driver_open: bool = True
    iommu_translated: bool = False
    acs_gpus: list[int] = field(default_factory=list)  # GPUs whose switch port redirects
    memlock_conf_kib: int | None = None  # limits.conf memlock; None = unlimited
    remove_ipc: bool = False
    allreduce_busbw_gbps: float | None = None  # nccl-tests installed, and what it measures
