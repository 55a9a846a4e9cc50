"""The host itself: CPUs, memory, disks, mounts, services, clock, kernel, processes."""

from __future__ import annotations

from .record import field, record


@record
class Mount:
    """One line of /proc/mounts: what the filesystem checks judge."""

    mountpoint: str
    fstype: str
    device: str
    options: list[str] = field(default_factory=list)


@record
class DiskUsage:
    """Space and inodes left on a path a job writes to (statvfs)."""

    path: str
    total_bytes: int | None = None
    free_bytes: int | None = None
    inodes_total: int | None = None
    inodes_free: int | None = None
    error: str | None = None


@record
class EdacController:
    """A memory controller's EDAC error counts: host DRAM, not GPU memory."""

    name: str  # mc0
    corrected: int | None = None
    uncorrected: int | None = None


@record
class StuckProcess:
    """A process in uninterruptible sleep (state D): one that outlives its job
    holds the GPU or filesystem it waits on."""

    pid: int
    name: str
    start_ticks: int  # /proc/<pid>/stat field 22: identifies the process across samples
    wchan: str | None = None


@record
class ServiceState:
    """A systemd unit's state as systemctl reported it, or why it could not."""

    name: str
    active: str | None = None  # ActiveState: active, inactive, failed, ...
    sub: str | None = None
    load: str | None = None  # LoadState: loaded, not-found, ...
    error: str | None = None


# What an IMEX peer's fields may hold, as the collector reads them and the cluster view
# re-checks them in another node's report: an IP address or a host name (RFC 1123
# labels), and a status token (READY, UNAVAILABLE, ...).
IMEX_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.:\-]{0,252}[A-Za-z0-9])?"
IMEX_STATUS = r"[A-Z][A-Z_]{0,39}"
IMEX_DOMAIN_STATES = ("UP", "DOWN", "DEGRADED")


@record
class ImexPeer:
    """One node of the IMEX domain as ``nvidia-imex-ctl -N`` lists it: its index in the
    nodes file, its address (and host name where the tool gives one), the daemon's status
    (READY, UNAVAILABLE, ...) and version."""

    index: int
    host: str
    status: str
    host_name: str | None = None
    version: str | None = None


@record
class ImexDomain:
    """The IMEX domain's state from this tray's daemon: UP, DOWN or DEGRADED, every node of
    its nodes file, and which form of the output was read (json or text)."""

    status: str
    nodes: list[ImexPeer] = field(default_factory=list)
    form: str = "json"


@record
class ImexState:
    """What the tray shows of IMEX: whether the NVIDIA DRA driver's ComputeDomain kubelet
    plugin was installed (its folder, which outlives it) and runs (its registration socket
    accepts a connection: then the driver runs IMEX), the nodes file's entries, the IMEX
    channel devices, and the domain's state; each None with its reason in ``unknown``
    where it could not be read."""

    dra_plugin: bool = False
    dra_live: bool = False
    nodes_config: list[str] | None = None
    channels: list[str] | None = None
    domain: ImexDomain | None = None
    # The nodes-file entries that are this tray (one of its own addresses, or its name):
    # what lets the cluster view map a peer the other trays list back to its node.
    own: list[str] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)


@record
class ClockSync:
    """Whether the clock is synchronized and which tool said so: skewed clocks break
    munge credentials (so Slurm) and the ordering of logs across nodes."""

    method: str | None = None  # timedatectl, chronyc, ntpq, adjtimex
    synchronized: bool | None = None
    detail: str | None = None


@record
class HostInfo:
    """The host around the GPUs: kernel, OS, CPUs and memory, kernel modules, services,
    mounts and disks, host memory errors, stuck processes, the clock."""

    hostname: str
    kernel_release: str | None = None
    dmi_product_name: str | None = None
    os_release: str | None = None
    cpu_count: int | None = None
    memory_total_bytes: int | None = None
    boot_time: float | None = None
    cmdline: list[str] = field(default_factory=list)
    mounts: list[Mount] = field(default_factory=list)
    disks: list[DiskUsage] = field(default_factory=list)
    edac: list[EdacController] = field(default_factory=list)
    dstate: list[StuckProcess] = field(default_factory=list)
    services: list[ServiceState] = field(default_factory=list)
    has_systemd: bool = False
    imex: ImexState | None = None  # NVL72 trays where fabric.imex runs
    clock: ClockSync | None = None
    modules: list[str] = field(default_factory=list)  # loaded kernel modules (/sys/module)
    memlock_limit_bytes: int | None = None  # -1 = unlimited
    unknown: dict[str, str] = field(default_factory=dict)
