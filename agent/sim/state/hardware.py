"""The simulated node's hardware state: what each NVML call and sysfs file will answer.

Built from a platform profile and its layout, then changed by faults. Counters that a
fault makes move are (base, rate per second) pairs read against a fixed epoch, so two
samples a few seconds apart see them grow, whichever process reads them.
"""

from __future__ import annotations

import hashlib
import uuid as uuidlib
from dataclasses import dataclass, field

from ....checks.profiles.profile import Profile
from ...model import nvlink_ber
from . import counter
from .counter import Counter
from .ib import SimHca, build_hcas
from .layout import LAYOUTS, Layout
from .nccl import SimNccl

# NVML constants used by the state (values from nvml.h).
REMOTE_GPU = 0  # NVML_NVLINK_DEVICE_TYPE_GPU
REMOTE_SWITCH = 2
FABRIC_COMPLETED = 3
# A healthy tray's fabric health mask (nvml.h NVML_GPU_FABRIC_HEALTH_MASK_*), as the real
# nvidia-smi -q -x of a 4x GB200 and a 4x GB300 tray (driver 580.173.02, NVIDIA/
# k8s-test-infra tests/e2e/go/assertions/nvidiasmi/testdata/hardware/qx-gb{200,300}.xml)
# show it: bandwidth full, no route recovery, route healthy, no access-timeout recovery
# (each FALSE, 2); the incorrect configuration N/A (0) on GB200 and None (1) on GB300;
# partition assigned N/A (0) on both. nvidia-smi shows no global fabric manager state: 0.
NVL72_HEALTH_MASK = {"gb200-nvl72": 0x2 | 0x2 << 2 | 0x2 << 4 | 0x2 << 6,
                     "gb300-nvl72": 0x2 | 0x2 << 2 | 0x2 << 4 | 0x2 << 6 | 0x1 << 8}
# Per-link error counters each generation has (field ids; Blackwell dropped 161-163).
LINK_COUNTERS = (161, 162, 163)
LINK_COUNTERS_NVLINK5 = (214, 215, 208, 211, 221)
# A healthy NVLink5 link's packed bit error rates (fields 220, 222; model/nvlink_ber.py):
# NVML's "no errors", mantissa 15 and exponent 255 (DCGM 4.6.0 nvvs/src/DcgmRecorder.cpp).
# No real capture shows a per-link value.
HEALTHY_BER = nvlink_ber.encode(*nvlink_ber.ZERO)
# FEC history (fields 235-250): corrected symbol errors per bin; a healthy PAM4 link
# corrects some. Illustrative counts, no capture shows them.
HEALTHY_FEC_HISTORY = (1200, 40, 2) + (0,) * 13


@dataclass
class SimLink:
    state: int = 1
    version: int = 6
    speed_mbps: int = 26562
    remote_type: int = REMOTE_SWITCH
    remote_bdf: str = ""
    errors: dict[int, Counter] = field(default_factory=dict)  # field id -> counter
    # NVLink5 only (field id -> value): power state (167), packed BERs (220, 222), FEC
    # history (235-250). An older link answers NotSupported for them.
    nvlink5: dict[int, int] = field(default_factory=dict)


# NVLink-C2C (Grace <-> GPU) on the NVL72 trays. No capture shows a GB200/GB300 tray's
# per-link values (the real `nvidia-smi -q -x` of both, shared/data/real/gb200, show only
# <c2c_mode>Enabled</c2c_mode>), so: each link at the GH200's 44.712 GB/s (`nvidia-smi c2c
# -s` on a GH200: ten links at 44.712 GB/s, dmlc/xgboost
# tests/cpp/common/test_cuda_dr_utils.cc), and five of them per GPU, the share of each of
# a superchip's two GPUs in its "NVLink-C2C 900 GB/s bidirectional" (NVIDIA GB200 NVL72
# product page, nvidia.com/en-us/data-center/gb200-nvl72/): 5 x 44.7 GB/s a direction.
# No check judges either figure absolutely: only GPUs of one tray disagreeing.
C2C_LINKS_PER_GPU = 5
C2C_LINK_MAX_BW_MBPS = 44_712
C2C_LINK_COUNTERS = (231, 232, 233)  # CRC, replay, back-to-back replay (NVML 575+)


@dataclass
class SimC2cLink:
    status: int = 1  # NVML_FI_DEV_C2C_LINK_GET_STATUS: 1 = ACTIVE
    max_bw_mbps: int = C2C_LINK_MAX_BW_MBPS
    errors: dict[int, Counter] = field(default_factory=dict)  # field id -> counter


@dataclass
class SimFabric:
    state: int = FABRIC_COMPLETED
    status: int = 0
    cluster_uuid: bytes = bytes(16)
    clique_id: int = 0
    health_mask: int = 0
    health_summary: int = 0


@dataclass
class SimGpu:
    index: int
    bdf: str
    numa: int
    name: str
    uuid: str
    serial: str
    architecture: int
    memory_bytes: int
    vbios: str
    board_part: str
    inforom: str
    inforom_valid: bool = True
    temperature: int = 41
    slowdown_temp: int = 87
    shutdown_temp: int = 92
    clock_reasons: int = 0x1  # GpuIdle
    # SM clocks in MHz: idle, well below the maximum (the real H100 SXM capture,
    # nvidia-smi -q at idle: 345 MHz; "Max Clocks" SM: 1980 MHz).
    sm_clock: int = 345
    sm_clock_max: int = 1980
    app_clock: int = 1980  # nvidia-smi -q (535): Applications Clocks Graphics 1980 MHz
    pstate: int = 0
    pcie_gen: int = 5
    pcie_width: int = 16
    persistence: int = 1
    mig: tuple[int, int] = (0, 0)
    processes: list[tuple[int, int]] = field(default_factory=list)  # (pid, used bytes)
    histogram: dict[str, int] = field(default_factory=lambda: {
        "max": 2560, "high": 0, "partial": 0, "low": 0, "none": 0})
    fabric: SimFabric | None = None
    sram_exceeded: int = 0
    unrepairable: int = 0
    fields: dict[int, float | int | None] = field(default_factory=dict)  # None: NotSupported
    counters: dict[int, Counter] = field(default_factory=dict)
    links: list[SimLink] = field(default_factory=list)
    c2c_links: list[SimC2cLink] = field(default_factory=list)
    c2c_enabled: int | None = None  # nvmlDeviceGetC2cModeInfoV; None: NotSupported
    hang: bool = False
    lost: int | None = None  # an NVML error code every device call raises
    call_errors: dict[str, int] = field(default_factory=dict)  # function -> NVML error code
    in_nvml: bool = True


@dataclass
class SimNode:
    name: str
    profile: Profile
    layout: Layout
    gpus: list[SimGpu]
    # on the simulated hardware's clock, which counters read it against; a wall-clock
    # epoch would freeze every counter after the wall clock steps forward
    epoch: float = field(default_factory=lambda: counter.now())
    driver_error: int | None = None  # NVML error code nvmlInit raises
    driver_version: str = ""
    cuda_version: int = 0
    # The fabric-info versions the driver answers (agent/collectors/nvml_read.py
    # FABRIC_VERSIONS): 1 and 2 before 580, 3 from 580, 4 from NVML 615. The simulated
    # 590 driver answers 1 to 3.
    fabric_info_versions: frozenset[int] = frozenset({1, 2, 3})
    # The NVLink bandwidth mode the site set (nvmlSystemGetNvlinkBwMode,
    # NVML_GPU_NVLINK_BW_MODE_*): FULL (0) unless a site reduced it.
    nvlink_bw_mode: int = 0
    nvlink_bw_mode_error: int | None = None  # NVML error code the mode's getter raises
    services: dict[str, str] = field(default_factory=dict)  # unit -> ActiveState
    kernel_lines: list[tuple[float, str]] = field(default_factory=list)  # (age s, message)
    cmdline: str = "BOOT_IMAGE=/vmlinuz ro quiet"
    modules: list[str] = field(default_factory=list)
    memlock_kib: int | None = None  # None = unlimited
    proc_names: dict[int, str] = field(default_factory=dict)
    proc_cgroups: dict[int, str] = field(default_factory=dict)  # pid -> /proc/<pid>/cgroup
    p2p: dict[tuple[int, int], int] = field(default_factory=dict)
    rack: str | None = None
    nvswitch_bdfs: list[str] = field(default_factory=list)
    hcas: list[SimHca] = field(default_factory=list)  # RDMA devices (state/ib.py)
    nccl: SimNccl = field(default_factory=SimNccl)  # NCCL host facts (state/nccl.py)
    # How the node's agent answers in a Fleet: ok | unreachable | garbage (non-JSON 200).
    serve: str = "ok"
    # NVML XID events nvmlEventSetWait delivers: (seconds after epoch, GPU index, code).
    xid_schedule: list[tuple[float, int, int]] = field(default_factory=list)
    # What the active tests see (sim/bandwidth.py): "part:index" -> speed factor
    # (compute:3, hbm:3, pcie:3, nvlink:3, rail:mlx5_4), NCCL on sockets, tools that hang.
    slow: dict[str, float] = field(default_factory=dict)
    socket_fallback: bool = False
    tools_hang: bool = False
    # dcgmi diag results that fail: (test, GPU index) -> (DCGM error id, its warning text).
    dcgm_failing: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)
    # GPU -> the message of mnubergemm's MNUB [E] line for it under dcgmi mndiag
    mndiag_errors: dict[int, str] = field(default_factory=dict)
    imex_channel: bool = True  # /dev/nvidia-caps-imex-channels/channel0 (NVL72 trays)
    # IMEX as fabric.imex reads it (writers/imex.py): the DRA driver's ComputeDomain
    # kubelet plugin running, and the indexes of the domain's trays whose daemon is gone.
    dra_plugin: bool = False
    imex_missing: set[int] = field(default_factory=set)
    # How long ago the node booted (/proc/stat btime, kmsg times).
    uptime_s: float = 86_400.0
    # The journal of the boot before this one, as ``journalctl -k -b -1`` reads it
    # (writers/journal.py): persistent (its lines below), first_boot (persistent, no
    # earlier boot), volatile (no /var/log/journal), missing (no journalctl), hang (it
    # never answers). Lines: (seconds before that boot ended, kernel message).
    journal: str = "persistent"
    previous_boot_lines: list[tuple[float, str]] = field(default_factory=lambda: [
        (60.0, "Command line: BOOT_IMAGE=/vmlinuz ro quiet"),
        (0.5, "reboot: Restarting system")])
    # How the node's active-test tools were built and what their loader finds
    # (agent/sim/toolkit.py, perftest.py, nccl_tests.py): a perftest with CUDA support
    # (MLNX_OFED/DOCA's; Debian's 4.5 has none), the seconds an ib_write_bw server takes
    # to open its device before it listens, nccl-tests built with MPI=1, and the shared
    # libraries the loader cannot find.
    perftest_cuda: bool = True
    perftest_open_s: float = 0.05
    nccl_tests_mpi: bool = True
    missing_libraries: set[str] = field(default_factory=set)

    @property
    def nvml_gpus(self) -> list[SimGpu]:
        return [g for g in self.gpus if g.in_nvml]

    @property
    def cpu_arch(self) -> str:
        """The host's machine name: the Grace trays of an NVL72 rack are Arm."""
        return "aarch64" if self.profile.nvl72 else "x86_64"


def _stable_uuid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return str(uuidlib.UUID(bytes=digest[:16]))


def _stable_serial(name: str, index: int) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()
    return f"1652023{int(digest[:8], 16) % 10**5:05d}{index}"


def _device_fields(profile: Profile, arch: int) -> dict[int, float | int | None]:
    nvswitch_links = profile.nvlinks_per_gpu if (profile.nvswitch or profile.nvl72) else 0
    return {
        1: 1, 2: 1, 3: 0, 4: 0, 5: 0, 6: 0,
        # Retired pages are a pre-Ampere mechanism: N/A on every profile we model
        # (real H100 nvidia-smi -q: "Retired Pages ... N/A").
        29: None, 30: None, 31: None,
        142: 0, 143: 0, 144: 0, 145: 0,
        82: 48 if arch >= 8 else None,
        230: 0, 94: 0,
        269: 0, 270: 0, 271: 0,  # ns spent in thermal / power-brake slowdown
        91: profile.nvlinks_per_gpu if profile.nvlinks_per_gpu else None,
        147: nvswitch_links if profile.nvlinks_per_gpu else None,
        185: 72_000, 190: (profile.gpu_power_limit_w or 350) * 1000,
        189: (profile.gpu_power_limit_w or 350) * 1000,
    }


def _group(profile: Profile, index: int) -> int:
    """The NVLink group of GPU ``index``: on cards bridged in groups of
    ``nvlink_peers + 1`` (H100 NVL pairs) the neighbouring cards, else the whole node."""
    return index // (profile.nvlink_peers + 1) if profile.nvlink_peers else 0


def _same_group(profile: Profile, a: int, b: int) -> bool:
    return _group(profile, a) == _group(profile, b)


def _links(profile: Profile, layout: Layout, index: int) -> list[SimLink]:
    """GPU ``index``'s NVLinks: to the board's NVSwitches, or on bridged cards to the other
    GPUs of its group in turn (a pair's 12 links all to the partner)."""
    version = profile.nvlink_version or 6
    speed = 53125 if version >= 7 else 26562
    counters = LINK_COUNTERS_NVLINK5 if layout.architecture >= 10 else LINK_COUNTERS
    peers = [slot.bdf for i, slot in enumerate(layout.gpus)
             if i != index and _same_group(profile, i, index)] if profile.nvlink_peers else []
    links = []
    for link in range(profile.nvlinks_per_gpu):
        if peers:
            remote_type, remote = REMOTE_GPU, peers[link % len(peers)]
        else:
            remote_type = REMOTE_SWITCH
            remote = (layout.nvswitch_bdfs[link % len(layout.nvswitch_bdfs)]
                      if layout.nvswitch_bdfs else "")
        links.append(SimLink(version=version, speed_mbps=speed, remote_type=remote_type,
                             remote_bdf=remote, errors={fid: Counter() for fid in counters},
                             nvlink5=_nvlink5_values() if layout.architecture >= 10 else {}))
    return links


def _nvlink5_values() -> dict[int, int]:
    """A healthy NVLink5 link: high-speed power state, no bit errors after FEC."""
    return {167: 0, 220: HEALTHY_BER, 222: HEALTHY_BER,
            **{235 + i: n for i, n in enumerate(HEALTHY_FEC_HISTORY)}}


def _c2c(gpu: SimGpu) -> None:
    """C2C mode enabled, as both real trays' `nvidia-smi -q -x` show (<c2c_mode>), and
    the links above; on other platforms field 170 and the mode answer NotSupported."""
    gpu.c2c_enabled = 1
    gpu.fields[170] = C2C_LINKS_PER_GPU
    gpu.c2c_links = [SimC2cLink(errors={fid: Counter() for fid in C2C_LINK_COUNTERS})
                     for _ in range(C2C_LINKS_PER_GPU)]


def build_node(name: str, profile: Profile, rack: str | None = None,
               cluster_uuid: bytes | None = None, clique_id: int = 0) -> SimNode:
    """A healthy node of ``profile``: every answer what the real parts give."""
    layout = LAYOUTS[profile.name]
    gpus: list[SimGpu] = []
    for i, slot in enumerate(layout.gpus):
        gpu = SimGpu(
            index=i, bdf=slot.bdf, numa=slot.numa, name=layout.gpu_name,
            uuid="GPU-" + _stable_uuid(name, slot.bdf), serial=_stable_serial(name, i),
            architecture=layout.architecture, memory_bytes=layout.memory_bytes,
            vbios=layout.vbios, board_part=layout.board_part, inforom=layout.inforom,
            pcie_gen=profile.gpu_pcie_gen or 4, pcie_width=profile.gpu_pcie_width or 16,
            fields=_device_fields(profile, layout.architecture),
            # Hopper and later report 89 °C slowdown (real H200); A100 parts 85 °C.
            slowdown_temp=89 if layout.architecture >= 9 else 85,
        )
        if profile.nvlinks_per_gpu:
            gpu.links = _links(profile, layout, i)
        if layout.architecture >= 9:  # Hopper+: fabric info exists (zeros off NVL72)
            gpu.fabric = SimFabric()
            if profile.nvl72:
                gpu.fabric.cluster_uuid = cluster_uuid or uuidlib.UUID(
                    _stable_uuid("rack", rack or name)).bytes
                gpu.fabric.clique_id = clique_id or 32766
                gpu.fabric.health_mask = NVL72_HEALTH_MASK[profile.name]
                gpu.fabric.health_summary = 1
        if profile.nvl72:  # a Grace tray: its GPUs reach their CPU over NVLink-C2C
            _c2c(gpu)
        gpus.append(gpu)
    services = {"nvidia-persistenced.service": "active"}
    if profile.fabric_manager:
        services["nvidia-fabricmanager.service"] = "active"
    if profile.imex:
        services["nvidia-imex.service"] = "active"
    modules = ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_peermem", "mlx5_core", "mlx5_ib",
               "ib_core"]
    node = SimNode(name=name, profile=profile, layout=layout, gpus=gpus,
                   driver_version=layout.host.driver, cuda_version=layout.host.cuda,
                   services=services, modules=modules, rack=rack,
                   nvswitch_bdfs=list(layout.nvswitch_bdfs))
    if profile.nvlinks_per_gpu:
        node.p2p = {(a.index, b.index): 0 for a in gpus for b in gpus
                    if a.index < b.index and _same_group(profile, a.index, b.index)}
    node.hcas = build_hcas(name, profile.name, profile.nic_pcie_gen, profile.nic_pcie_width)
    return node
