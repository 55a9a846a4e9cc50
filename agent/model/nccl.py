"""What NCCL would find on this node: the library, its settings, and the host facts that
decide whether it can run at full speed (GPUDirect RDMA, IOMMU, limits, interfaces)."""

from __future__ import annotations

from .record import field, record


@record
class NcclLibrary:
    """One copy of libnccl found on the node, and how a job would find it."""

    path: str
    found_by: str  # LD_LIBRARY_PATH | linker path | ldconfig cache | python wheel
    version: str | None = None  # 2.21.5
    error: str | None = None  # why the version could not be read


@record
class HcaPort:
    """An RDMA port as NCCL enumerates it (state and link layer are all it filters on)."""

    state: str | None = None  # ACTIVE, DOWN, ...
    link_layer: str | None = None  # InfiniBand | Ethernet
    gid: str | None = None  # gids/<NCCL_IB_GID_INDEX>, read only when that is set
    gid_type: str | None = None  # gid_attrs/types/<index>: "RoCE v2", "IB/RoCE v1"


@record
class Gpudirect:
    """What GPUDirect RDMA needs from the host: a peer-memory module or dma-buf with
    the open kernel modules."""

    peermem: str | None = None  # the peer-memory file NCCL would find, when one exists
    kernel_release: str | None = None
    driver_line: str | None = None  # first line of /proc/driver/nvidia/version
    driver_open: bool | None = None  # open kernel modules (needed for dma-buf)
    unreadable: dict[str, str] = field(default_factory=dict)  # path -> errno: there, unread


@record
class Iommu:
    """The IOMMU's setup: translated DMA between a NIC and a GPU slows or breaks
    GPUDirect RDMA."""

    cmdline: list[str] = field(default_factory=list)  # iommu-related kernel parameters
    units: list[str] = field(default_factory=list)  # /sys/class/iommu entries (dmar0, ...)
    group_types: dict[str, str] = field(default_factory=dict)  # group -> identity | DMA | DMA-FQ
    device_groups: dict[str, str] = field(default_factory=dict)  # pci bdf -> group
    unreadable: dict[str, str] = field(default_factory=dict)  # path -> errno: there, unread


@record
class MemlockSource:
    """One place a locked-memory limit comes from: RDMA registration fails when
    it is low."""

    where: str  # /proc/self/limits, /proc/<pid>/limits (slurmd), /etc/security/limits.conf:3
    limit_bytes: int | None  # -1 = unlimited
    detail: str | None = None  # the line as read, for config entries


@record
class HostLimits:
    """The host limits a multi-GPU job runs into: locked memory, /dev/shm, RemoveIPC."""

    memlock: list[MemlockSource] = field(default_factory=list)
    shm_bytes: int | None = None
    shm_source: str | None = None  # statvfs | /proc/mounts size= | tmpfs default (half of RAM)
    remove_ipc: bool | None = None  # effective logind RemoveIPC (systemd default: yes)
    remove_ipc_source: str | None = None
    propagate_limits: str | None = None  # slurm.conf PropagateResourceLimits(+Except)
    unreadable: dict[str, str] = field(default_factory=dict)  # path -> errno: there, unread


@record
class AllreduceRun:
    """One run of all_reduce_perf (nccl-tests) and what its output said."""

    argv: list[str] = field(default_factory=list)
    returncode: int | None = None
    error: str | None = None  # not found, timed out, ...
    busbw_gbps: float | None = None  # best bus bandwidth at the largest size
    avg_busbw_gbps: float | None = None  # the tool's "Avg bus bandwidth" line
    wrong: int | None = None  # sum of #wrong over all rows: data corruption when > 0
    size_bytes: int | None = None
    output_tail: str = ""


@record
class NcclInfo:
    """NCCL's readiness on the node: the library a job would load, the settings it
    would run with, and what it needs from the host."""

    library_path: str | None = None  # the copy a job's dynamic linker would load first
    version: str | None = None  # 2.21.5
    error: str | None = None
    libraries: list[NcclLibrary] = field(default_factory=list)  # every copy found
    # Effective settings for a job launched from this process (environment over files).
    env: dict[str, str] = field(default_factory=dict)
    env_sources: dict[str, str] = field(default_factory=dict)  # variable -> where it was read
    environ: dict[str, str] = field(default_factory=dict)  # NCCL_* in the process environment
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # path -> NCCL_* settings
    file_errors: dict[str, str] = field(default_factory=dict)  # path -> why it was not read
    ports: dict[str, HcaPort] = field(default_factory=dict)  # "mlx5_0/1" -> its state
    netdevs: dict[str, str] = field(default_factory=dict)  # interface -> operstate
    topo_files: dict[str, str | None] = field(default_factory=dict)  # path -> parse error
    gpudirect: Gpudirect | None = None
    iommu: Iommu | None = None
    limits: HostLimits | None = None
