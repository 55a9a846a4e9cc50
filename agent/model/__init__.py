"""The Snapshot: everything a node run read, as plain data with no judgement in it.

Checks import this package and nothing else from ``agent``. A snapshot survives a JSON
round trip unchanged, so it can be saved, shipped and re-evaluated offline.
"""

from __future__ import annotations

from typing import Any

from .gpu import NvmlInfo
from .host import HostInfo
from .ib import IbDevice
from .kernel import KernelLog
from .nccl import AllreduceRun, NcclInfo
from .pci import PciDevice
from .record import field, record
from .serde import from_jsonable, to_jsonable
from .upgrade import SNAPSHOT_SCHEMA_V1, SNAPSHOT_SCHEMA_V2, upgrade

# v2: a GPU's unsupported/errors reasons are keyed by the model's field names (upgrade.py).
SNAPSHOT_SCHEMA = SNAPSHOT_SCHEMA_V2
# What a saved snapshot may be tagged: the current schema, and those upgrade() brings to it.
READABLE_SCHEMAS = (SNAPSHOT_SCHEMA_V1, SNAPSHOT_SCHEMA_V2)
# The Snapshot fields that one source each fills (agent/run/collect.py SOURCES, one entry per
# name): what a check's ``needs`` may name, checked when the check registers.
SOURCE_FIELDS = frozenset({"host", "pci", "nvml", "kernel_log", "infiniband", "nccl",
                           "allreduce"})


@record
class SourceStats:
    """What collecting one source cost, and how it ended."""
    calls: int = 0
    seconds: float = 0.0
    status: str = "ok"  # ok | timeout | error | not_collected
    error: str | None = None
    files_read: int = 0


@record
class Snapshot:
    """``taken_at`` is wall-clock time, for people and for matching log lines; the
    interval between two samples is measured on ``boot_clock_s`` (CLOCK_BOOTTIME: seconds
    since boot, suspend included, never stepped by NTP) when both carry the same
    ``boot_id`` (the kernel's /proc/sys/kernel/random/boot_id of the machine that took
    them). A snapshot saved before these fields existed has them as None."""
    node: str
    taken_at: float
    simulated: bool = False
    level: str = "quick"
    sources: dict[str, SourceStats] = field(default_factory=dict)
    host: HostInfo | None = None
    pci: list[PciDevice] | None = None
    nvml: NvmlInfo | None = None
    kernel_log: KernelLog | None = None
    infiniband: list[IbDevice] | None = None
    nccl: NcclInfo | None = None
    allreduce: AllreduceRun | None = None  # nccl-tests run, only when nccl.allreduce runs
    boot_id: str | None = None
    boot_clock_s: float | None = None
    schema: str = SNAPSHOT_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = to_jsonable(self)
        return result

    def boot_time(self) -> float | None:
        """When this node's current boot began, epoch seconds: /proc/stat's ``btime``
        (``host``), else the kernel-log reader's; None where neither was read. One place,
        so the daemon and the checks never disagree on which boot a record belongs to."""
        return next((b for b in ((self.host.boot_time if self.host else None),
                                 (self.kernel_log.boot_time if self.kernel_log else None))
                     if b is not None), None)

    @classmethod
    def from_dict(cls, data: Any) -> Snapshot:
        """The snapshot ``data`` describes, in the current schema whatever it was saved in."""
        snap: Snapshot = from_jsonable(cls, upgrade(data))
        return snap


__all__ = ["READABLE_SCHEMAS", "SNAPSHOT_SCHEMA", "SOURCE_FIELDS", "Snapshot", "SourceStats"]
