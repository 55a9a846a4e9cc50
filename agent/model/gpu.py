"""GPUs, NVLinks and the NVSwitch fabric as NVML reports them.

A value NVML does not support on this part is ``None`` with its name in ``unsupported``
(with the NVML error name as the reason); any other failure goes to ``errors``. Checks
tell "not supported here" (skip) from "broken" (fail) by that difference alone.

A reason is keyed by the name of the field it left empty (``temperature_c``); a value
inside a list or dict by its path (``nvlinks.3.active``, ``nvlinks.3.errors.crc``,
``clock_event_time_ns.sw_thermal``, ``c2c_links.0.errors.replay``); ``nvlinks`` in
``unsupported`` means no NVLink on this GPU. Only what fills no one field keeps its own
name: ``handle`` (the GPU could not be opened), ``fields``, ``nvlink_fields`` and
``c2c_fields`` (a whole field-value batch failed), ``reader`` and ``deadline`` (the reading
itself). Snapshots of schema v1 used NVML-ish names
(``temperature``); upgrade.py renames them when such a file is read.
"""

from __future__ import annotations

from .record import field, record


@record
class GpuProcess:
    """A process holding a GPU context: who is on the GPU a job is about to get."""

    pid: int
    name: str | None = None
    used_memory_bytes: int | None = None
    # The Slurm job whose cgroup holds it (/proc/<pid>/cgroup, "job_<id>" on cgroup v1 and
    # v2 alike); "" when it is in no job's; None when that could not be read.
    slurm_job: str | None = None


@record
class NvLink:
    """One NVLink of a GPU as NVML reports it: state, version, speed and error counters."""

    link: int
    active: bool | None = None
    version: int | None = None  # NVML enum: 4 = NVLink 3 (A100), 6 = NVLink 4 (H100), 7 = NVLink 5
    speed_mbps: int | None = None
    remote_type: str | None = None  # gpu | switch | ibmnpu | unknown
    remote_bdf: str | None = None
    errors: dict[str, int] = field(default_factory=dict)  # counter name -> value
    # NVLink5 (Blackwell) only, from the same field-value batch. ``state`` is
    # NVML_FI_DEV_NVLINK_GET_STATE as NVML answers it (nvml.h NVML_NVLINK_STATE_*: 0
    # inactive, 1 active, 2 sleep; pynvml 13.615 adds 3, active with traffic disabled):
    # ``active`` is state 1, and a sleeping link is idle, not down.
    state: int | None = None
    # NVML_FI_DEV_NVLINK_GET_POWER_STATE (167): nvml.h "0=HIGH_SPEED 1=LOW_SPEED".
    low_power: bool | None = None
    # Bit error rates (fields 220 and 222), decoded from NVML's packed mantissa and power
    # of ten (nvlink_ber.py); 1.5e-254 is NVML's way of saying zero.
    effective_ber: float | None = None
    symbol_ber: float | None = None
    # Corrected symbol errors per FEC history bin 0-15 (fields 235-250); read only when
    # nvlink.fec_history is planned (level full); a bin NVML did not answer is None.
    fec_history: list[int | None] | None = None


@record
class FabricClique:
    """One clique of fabric info v4 (nvml.h ``nvmlGpuFabricClique_v1_t``): the GPUs this one
    reaches by one kind of access. ``type`` is NVML_GPU_FABRIC_CLIQUE_TYPE_*: 0 unicast
    pointer (the clique id of versions 1-3), 1 multicast pointer, 2 unicast logical
    endpoint, 3 multicast logical endpoint."""

    type: int
    id: int


@record
class C2cLink:
    """One NVLink-C2C link between a GPU and its Grace CPU, as NVML's per-link fields give
    it (nvml.h: NVML_FI_DEV_C2C_LINK_GET_STATUS 171 "0=INACTIVE 1=ACTIVE",
    NVML_FI_DEV_C2C_LINK_GET_MAX_BW 172 "C2C Link Speed in MBps for active links")."""

    link: int
    active: bool | None = None
    max_bw_mbps: int | None = None
    # crc, replay, replay_b2b (fields 231-233, NVML 575+) -> value; only those answered
    errors: dict[str, int] = field(default_factory=dict)


@record
class FabricInfo:
    """A GPU's NVLink fabric registration (nvmlDeviceGetGpuFabricInfo): on NVSwitch
    systems a GPU is usable for NVLink traffic only once its state is completed."""

    # NVML_GPU_FABRIC_STATE_*: 0 not supported, 1 not started, 2 in progress, 3 completed
    state: int
    status: int  # an nvmlReturn_t; meaningful when state is completed
    cluster_uuid: str
    clique_id: int
    health_mask: int | None = None
    health_summary: int | None = None
    # The fabric-info version the driver answered: 4 (cliques), 3 (health summary), 2
    # (health mask) or 1 (neither); None in snapshots from before it was recorded.
    version: int | None = None
    cliques: list[FabricClique] = field(default_factory=list)  # version 4 only


@record
class Gpu:
    """One GPU as NVML answered for it; a field NVML could not give is None, with the
    reason in ``unsupported``."""

    index: int
    pci_bdf: str | None = None
    name: str | None = None
    uuid: str | None = None
    minor_number: int | None = None  # N of /dev/nvidiaN: what Slurm's gres File= names
    serial: str | None = None
    board_part_number: str | None = None
    vbios: str | None = None
    inforom_image: str | None = None
    inforom_valid: bool | None = None
    architecture: int | None = None
    memory_total_bytes: int | None = None
    # ECC and memory health
    ecc_enabled: bool | None = None
    ecc_pending: bool | None = None
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pending: bool | None = None
    remapped_corrected: int | None = None
    remapped_uncorrected: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    remap_histogram: dict[str, int] | None = None  # max, high, partial, low, none
    sram_threshold_exceeded: bool | None = None
    unrepairable_memory: bool | None = None
    recovery_action: int | None = None
    # thermal and power
    temperature_c: int | None = None
    memory_temperature_c: int | None = None
    slowdown_temperature_c: int | None = None
    clock_event_reasons: int | None = None
    sm_clock_mhz: int | None = None  # current SM clock (nvmlDeviceGetClockInfo, NVML_CLOCK_SM)
    sm_clock_max_mhz: int | None = None  # nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)
    # The SM clock applications run at (nvmlDeviceGetApplicationsClock, NVML_CLOCK_SM):
    # set by nvidia-smi -ac, it holds even while the GPU idles at a lower clock.
    sm_app_clock_mhz: int | None = None
    # Time spent in each slowdown since the driver loaded, ns (fields 269-271:
    # sw_thermal, hw_thermal, hw_power_brake); only the names the driver answered.
    clock_event_time_ns: dict[str, int] = field(default_factory=dict)
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    performance_state: int | None = None
    # PCIe
    pcie_gen_current: int | None = None
    pcie_width_current: int | None = None
    pcie_replay_count: int | None = None
    # modes and use
    persistence_mode: bool | None = None
    mig_enabled: bool | None = None
    mig_pending: bool | None = None
    processes: list[GpuProcess] | None = None
    # NVLink and fabric
    nvlink_count: int | None = None
    nvswitch_link_count: int | None = None
    nvlinks: list[NvLink] = field(default_factory=list)
    fabric: FabricInfo | None = None
    platform: dict[str, str | int] | None = None
    # NVLink-C2C to the Grace CPU (GH200, GB200, GB300); NotSupported on x86 hosts
    c2c_enabled: bool | None = None  # nvmlDeviceGetC2cModeInfoV: isC2cEnabled
    c2c_link_count: int | None = None  # field 170, NVML_FI_DEV_C2C_LINK_COUNT
    c2c_links: list[C2cLink] = field(default_factory=list)
    # how the reading went
    responsive: bool = True
    lost: str | None = None  # GpuIsLost | ResetRequired | timeout
    unsupported: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


@record
class NvmlEvent:
    """An event NVML delivered (an XID above all), kept with the GPU it names."""

    gpu_index: int | None
    event_type: int
    xid: int | None = None
    time: float | None = None


@record
class NvmlInfo:
    """What NVML answered for the node: the library's state, the driver, every GPU."""

    library_error: str | None = None  # LibraryNotFound, DriverNotLoaded, LibRmVersionMismatch, ...
    library_message: str | None = None
    driver_version: str | None = None
    cuda_driver_version: int | None = None  # 12040 = CUDA 12.4
    nvml_version: str | None = None
    device_count: int | None = None
    gpus: list[Gpu] = field(default_factory=list)
    p2p_nvlink: dict[str, str] = field(default_factory=dict)  # "0-1" -> ok | not_supported | ...
    # The NVLink bandwidth mode a site may set for the whole node
    # (nvmlSystemGetNvlinkBwMode; pynvml 13.615.71 NVML_GPU_NVLINK_BW_MODE_*: 0 FULL, 1 OFF,
    # 2 MIN, 3 HALF, 4 3QUARTER), read once per node where a GPU has NVLink5 links; None
    # where not read or not answered (a reason other than "not supported" in ``errors``).
    nvlink_bw_mode: int | None = None
    unanswered: list[int] = field(default_factory=list)  # GPU indices whose calls did not return
    events: list[NvmlEvent] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
