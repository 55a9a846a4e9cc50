"""The Snapshot record and what a saved one may be tagged: the package's public names
(``clusterdiag.agent.model``), in a module of their own so that a run that fills two
sources does not import the model of every other.

A Snapshot's fields name the models of every source (HostInfo, IbDevice, KernelLog...),
but building one needs none of them: ``@record`` reads the annotations as text
(agent/model/record.py). Only reading a Snapshot's types does (``serde`` resolves the
annotations in this module's namespace with ``typing.get_type_hints``), so the field
types are imported then (``field_types``); the package imports them with ``Snapshot``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .gpu import NvmlInfo
from .pci import PciDevice
from .record import field, record
from .serde import from_jsonable, to_jsonable
from .upgrade import SNAPSHOT_SCHEMA_V1, SNAPSHOT_SCHEMA_V2, upgrade

if TYPE_CHECKING:
    from typing import Any

    from .host import HostInfo
    from .ib import IbDevice
    from .kernel import KernelLog
    from .nccl import AllreduceRun, NcclInfo

# v2: a GPU's unsupported/errors reasons are keyed by the model's field names (upgrade.py).
SNAPSHOT_SCHEMA = SNAPSHOT_SCHEMA_V2
# What a saved snapshot may be tagged: the current schema, and those upgrade() brings to it.
READABLE_SCHEMAS = (SNAPSHOT_SCHEMA_V1, SNAPSHOT_SCHEMA_V2)
# The Snapshot fields that one source each fills (agent/run/collect.py SOURCES, one entry per
# name): what a check's ``needs`` may name, checked when the check registers.
SOURCE_FIELDS = frozenset({"host", "pci", "nvml", "kernel_log", "infiniband", "nccl",
                           "allreduce"})


def field_types() -> None:
    """Import the models a Snapshot's fields name into this module's namespace, where
    ``typing.get_type_hints`` resolves them; idempotent."""
    # Imported here: a run of the GPU and PCI sources alone builds a Snapshot without them.
    from .host import HostInfo
    from .ib import IbDevice
    from .kernel import KernelLog
    from .nccl import AllreduceRun, NcclInfo

    globals().update(HostInfo=HostInfo, IbDevice=IbDevice, KernelLog=KernelLog,
                     AllreduceRun=AllreduceRun, NcclInfo=NcclInfo)


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
        field_types()
        snap: Snapshot = from_jsonable(cls, upgrade(data))
        return snap
