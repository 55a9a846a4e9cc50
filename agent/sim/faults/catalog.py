"""The one table of simulated fault kinds: what each does to the hardware, which check
must catch it, with which status and action, on which component, and the keys it takes.

A test keeps this table and the check catalog in step: every kind is caught by its
check and by nothing else, and every check that can fail has a kind that trips it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ....checks.core.levels import Level
from ...model import nvlink_ber
from ..state.counter import Counter
from ..state.hardware import SimGpu, SimNode
from ..state.platforms import Capability, platforms_with
from .ib import (
    counter_saturated,
    firmware_mixed,
    hca_missing,
    link_downed,
    link_flapping,
    link_layer_ethernet,
    mlx5_health,
    netdev_down,
    pcie_degraded,
    port_armed,
    port_down,
    port_init,
    port_polling,
    rate_degraded,
    rcv_errors,
    rnr_retry_exceeded,
    roce_ecn_off,
    roce_mtu_small,
    roce_nccl_tc_wrong,
    roce_no_v2_gid,
    roce_pfc_off,
    roce_trust_pcp,
    sm_missing,
    symbol_errors,
    width_degraded,
    xmit_wait,
)
from .nccl import (
    acs_enabled,
    allreduce_slow,
    conf,
    iommu_translated,
    memlock_low,
    nccl_missing,
    nic_wrong_numa,
    peermem_missing,
)
from .qualify import (
    dcgm_plugin_fail,
    imex_channel_missing,
    mndiag_gpu_error,
    nccl_library_unloadable,
    nccl_tests_no_mpi,
    perftest_no_cuda,
    perftest_slow_start,
    slow,
    socket_fallback,
    tool_hang,
)

Apply = Callable[[SimNode, Mapping[str, Any]], None]


@dataclass(frozen=True)
class FaultKind:
    kind: str
    check: str
    # fail | warn, or error where the test cannot be judged (the tool, not the node, is
    # wrong: a build without CUDA or MPI, a library the loader misses): what a correct
    # qualification says; pass (with ``silent``) where it must say nothing.
    status: str
    action: str
    component: str  # format string over the fault's keys: "gpu{gpu}", "node"
    keys: tuple[str, ...]  # location keys it requires
    apply: Apply
    level: Level = Level.QUICK  # full: needs two samples (rate checks)
    options: tuple[str, ...] = ()  # optional keys
    # What it needs of the platform (state/platforms.py; empty: any simulated platform).
    needs: frozenset[Capability] = frozenset()
    cluster: bool = False  # caught across nodes by a cluster.* check; the node alone passes
    absent: bool = False  # left out of the cluster altogether (sim/cluster.py present)
    # Check parameters the catching check needs (e.g. nccl.library require_host): a node
    # without host NCCL is only a failure where config says NCCL must be on the host.
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Other checks that must trip too, with the same status, component and action, because
    # the one fault is two facts each check owns (a port no subnet manager configured is
    # both not ACTIVE and without a LID). Nothing outside check + also may trip.
    also: tuple[str, ...] = ()
    active: bool = False  # only traffic shows it: caught by clusterdiag qualify, not run
    # Only traffic between nodes shows it: caught by qualify's pairs, rails, scaling or
    # rack tests; the node tests pass (tests/integration/test_qualify_cross.py).
    cross: bool = False
    # Trips nothing: a correct caller copes (waits for the ib_write_bw server, retries its
    # client); ``check`` names the test that must still pass.
    silent: bool = False
    # A trickle only the agent's long window sees (checks/core/window.py): one event every few
    # minutes, never enough in one interval. Tests drive agent cycles over simulated time.
    trend: bool = False
    # Only the agent's start sees it: the previous boot's journal, read once when the
    # agent starts (agent/daemon/boot_records.py); a one-shot run never reads it.
    agent_start: bool = False
    # roce: applies to a node whose compute rails are RoCE (NodeSpec fabric), judged with a
    # RoCE site profile (tests/fixtures/profiles/roce-h100.yaml).
    fabric: str = "infiniband"
    # oem: applies to an OEM server's layout (NodeSpec layout), judged with the OEM site
    # profile (tests/fixtures/profiles/oem-h100.yaml).
    layout: str = "reference"

    @property
    def profiles(self) -> tuple[str, ...]:
        """The simulated platforms it applies to, derived from what it needs."""
        return platforms_with(self.needs)


def _gpu(node: SimNode, fault: Mapping[str, Any]) -> SimGpu:
    return node.gpus[int(fault["gpu"])]


def _set(attr: str, value: Any) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        setattr(_gpu(node, fault), attr, value)
    return apply


def _field(fid: int, value: Any) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        _gpu(node, fault).fields[fid] = value
    return apply


def _power_capped(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The enforced limit (field 190) at 4/7 of the default (189): 400 W on a 700 W H100
    SXM, 200 W on a 350 W H100 PCIe card: a cap on every platform."""
    gpu = _gpu(node, fault)
    gpu.fields[190] = int(gpu.fields[189] or 0) * 4 // 7


def _counter(fid: int, rate: float) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        _gpu(node, fault).counters[fid] = Counter(0, rate)
    return apply


def _locked_clocks(node: SimNode, fault: Mapping[str, Any]) -> None:
    """`nvidia-smi -lgc 1410`: the clock held there busy or idle, the setting reason on."""
    gpu = _gpu(node, fault)
    gpu.clock_reasons, gpu.sm_clock = 0x2, 1410


def _driver_not_loaded(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.driver_error = 9  # NVML_ERROR_DRIVER_NOT_LOADED


def _device_denied(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The agent may not open the GPU device files (a unit's DeviceAllow= without the
    loaded driver's group name, or their mode): nvmlInit answers NO_PERMISSION."""
    node.driver_error = 4  # NVML_ERROR_NO_PERMISSION


# What the driver prints after the pid/name fields, for the codes the fault kinds plant
# (79, 48, 149, 154 as in real logs: gpud's xid kmsg tests and GB200 kmsg fixtures).
_XID_TEXT = {
    79: "GPU has fallen off the bus.",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the "
        "framebuffer at physAddr 0x12bac1c3e0 partition 2, subpartition 1.",
    149: "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 "
         "0x00000000 0x00000000 0x00000000)",
    154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
}


def _xid(node: SimNode, fault: Mapping[str, Any]) -> None:
    gpu = _gpu(node, fault)
    code = int(fault.get("code", 79))
    pci = gpu.bdf[:-2]
    age = float(fault.get("age_s", 60))
    message = _XID_TEXT.get(code, "Unspecified error.")
    if "at_s" in fault:  # a live event: NVML delivers it at that time, the log is not rewritten
        node.xid_schedule.append((float(fault["at_s"]), gpu.index, code))
        return
    node.kernel_lines.append(
        (age, f"NVRM: Xid (PCI:{pci}): {code}, pid=4242, name=python3, {message}"))


def _xid_code(code: int) -> Apply:
    """One logged line of ``code`` (the kinds below, one per class of the catalog)."""
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        _xid(node, {**fault, "code": code})
    return apply


def _nvlink_down(node: SimNode, fault: Mapping[str, Any]) -> None:
    gpu = _gpu(node, fault)
    gpu.links[int(fault["link"])].state = 0
    gpu.fields[147] = int(gpu.fields.get(147) or 1) - 1


def _nvlink_crc(node: SimNode, fault: Mapping[str, Any]) -> None:
    link = _gpu(node, fault).links[int(fault["link"])]
    fid = 163 if 163 in link.errors else 208
    link.errors[fid] = Counter(0, 500.0)


def _nvlink_trickle(node: SimNode, fault: Mapping[str, Any]) -> None:
    """A link that recovers once every two minutes (legacy field 162, NVLink5 215)."""
    link = _gpu(node, fault).links[int(fault["link"])]
    fid = 162 if 162 in link.errors else 215
    link.errors[fid] = Counter(0, 1 / 120)


def _nvlink_remote(node: SimNode, fault: Mapping[str, Any]) -> None:
    gpu = _gpu(node, fault)
    gpu.links[int(fault["link"])].remote_type = 0  # a GPU where an NVSwitch belongs
    gpu.fields[147] = int(gpu.fields.get(147) or 1) - 1


def _c2c_link_down(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The GPU's first C2C link inactive (field 171 answers 0)."""
    _gpu(node, fault).c2c_links[0].status = 0


def _c2c_errors(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The GPU's first C2C link replaying 50 times a second (field 232)."""
    _gpu(node, fault).c2c_links[0].errors[232] = Counter(0, 50.0)


def _nvswitch_missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.nvswitch_bdfs.pop()


def _nvswitch_manager_missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The last NVSwitch management function's RDMA device gone (its PCI function too)."""
    node.hcas.remove(next(h for h in reversed(node.hcas) if h.role == "management"))


def _all_fabric(state: int) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        for gpu in node.gpus:
            if gpu.fabric is not None:
                gpu.fabric.state = state
    return apply


def _fabric_degraded(node: SimNode, fault: Mapping[str, Any]) -> None:
    fabric = _gpu(node, fault).fabric
    if fabric is not None:
        fabric.health_mask = (fabric.health_mask & ~0x3) | 0x1  # DEGRADED_BW = TRUE
        fabric.health_summary = 3  # LIMITED_CAPACITY


def _fabric_info_pre580(node: SimNode, fault: Mapping[str, Any]) -> None:
    """A driver before 580 (the 570.172 a real 18-tray GB200 rack's nvidia-imex-ctl -N
    reports; CUDA 12.8 is the 570 branch's): fabric info only as versions 1 and 2, a
    version mismatch for v3 and no v4 function. A correct reader falls back and judges
    the tray as before."""
    node.fabric_info_versions = frozenset({1, 2})
    node.driver_version, node.cuda_version = "570.172.08", 12080


def _clique_mismatch(node: SimNode, fault: Mapping[str, Any]) -> None:
    fabric = _gpu(node, fault).fabric
    if fabric is not None:
        fabric.clique_id += 1


def _service_down(unit: str) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        node.services[unit] = "failed"
    return apply


def _imex_under_dra(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The DRA driver's ComputeDomain plugin installed while the host IMEX service runs."""
    node.dra_plugin = True
    node.services["nvidia-imex.service"] = "active"


IMEX_TRAYS = 18  # the nodes of one NVL72 IMEX domain (sim/writers/imex.py)


def _imex_domain_degraded(node: SimNode, fault: Mapping[str, Any]) -> None:
    """One tray of the domain gone: ``peer``, its index in the nodes file (default the
    last, #17)."""
    peer = int(fault.get("peer", IMEX_TRAYS - 1))
    if not 0 <= peer < IMEX_TRAYS:
        raise KeyError(f"{node.name}'s IMEX domain has no node #{peer}")
    node.imex_missing.add(peer)


def _leftover(node: SimNode, fault: Mapping[str, Any]) -> None:
    """A compute process on the GPU; ``job`` puts it in that Slurm job's cgroup (another
    job's process on a shared node), else it is in none (a leftover); ``pid`` tells two
    apart."""
    pid = int(fault.get("pid", 4242))
    _gpu(node, fault).processes.append((pid, 2 << 30))
    node.proc_names[pid] = "python3"
    job = fault.get("job")
    node.proc_cgroups[pid] = (f"0::/system.slice/slurmstepd.scope/job_{int(job)}/step_0/user/"
                              "task_0" if job is not None else "0::/user.slice/user-1000.slice")


def _missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    _gpu(node, fault).in_nvml = False


def _p2p_broken(node: SimNode, fault: Mapping[str, Any]) -> None:
    index = int(fault["gpu"])
    for pair in node.p2p:
        if index in pair:
            node.p2p[pair] = 5  # NVML_P2P_STATUS_NOT_SUPPORTED


def _nvlink_speed_reduced(node: SimNode, fault: Mapping[str, Any]) -> None:
    """One link up at half its speed, in its high-speed power state: trained down."""
    link = _gpu(node, fault).links[int(fault["link"])]
    link.speed_mbps //= 2


def _nvlink_low_power(node: SimNode, fault: Mapping[str, Any]) -> None:
    """Two idle links in their low-power state, as NVLink5 sends links to sleep after an
    idle period (nvml.h NVML_FI_DEV_NVLINK_GET_POWER_THRESHOLD): link 3 asleep
    (NVML_NVLINK_STATE_SLEEP), link 4 up with its traffic disabled
    (NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED). Each answers power state 1 (field 167,
    "1=LOW_SPEED")."""
    gpu = _gpu(node, fault)
    for number, state in ((3, 2), (4, 3)):
        gpu.links[number].state = state
        gpu.links[number].nvlink5[167] = 1


def _nvlink_bw_mode_reduced(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The site set the node's NVLink bandwidth mode to HALF (nvmlSystemSetNvlinkBwMode,
    NVML_GPU_NVLINK_BW_MODE_HALF = 3): every link answers half its speed."""
    node.nvlink_bw_mode = 3
    for gpu in node.gpus:
        for link in gpu.links:
            link.speed_mbps //= 2


def _nvlink_bw_mode_unreadable(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The site set HALF and the agent, not root, may not read it: nvml.h answers
    nvmlSystemGetNvlinkBwMode NO_PERMISSION to a user other than root. Every link answers
    half its speed."""
    _nvlink_bw_mode_reduced(node, fault)
    node.nvlink_bw_mode_error = 4  # NVML_ERROR_NO_PERMISSION


def _nvlink_ber_high(node: SimNode, fault: Mapping[str, Any]) -> None:
    """One NVLink5 link's effective BER at 3 x 10^-11, above DCGM's 1e-12 (field 220)."""
    link = _gpu(node, fault).links[int(fault["link"])]
    link.nvlink5[220] = nvlink_ber.encode(3, 11)


def _nvlink_version(node: SimNode, fault: Mapping[str, Any]) -> None:
    for link in _gpu(node, fault).links:
        link.version -= 1


def _sxid(node: SimNode, fault: Mapping[str, Any]) -> None:
    bdf = node.nvswitch_bdfs[0]
    node.kernel_lines.append(
        (120.0, f"nvidia-nvswitch0: SXid (PCI:{bdf}): 12028, Non-fatal, Link 32 egress "
                "non-posted PRIV error (First)"))


# An APEI/GHES record as drivers/acpi/apei/ghes.c __ghes_print_estatus() and
# drivers/firmware/efi/cper.c cper_estatus_print()/cper_print_mem() print it: each line
# "{seq}[Hardware Error]: " and the text, sections indented one space per level.
def _cper_memory(seq: int, severity: str, module: int) -> list[str]:
    fatal = severity == "fatal"
    head = [f"Hardware error from APEI Generic Hardware Error Source: {2 if fatal else 1}"]
    if not fatal:
        head.append("It has been corrected by h/w and requires no further action")
    body = [f"event severity: {severity}", f" Error 0, type: {severity}",
            "  section_type: memory error",
            "   error_status: Storage error in DRAM memory (0x0000000000000400)",
            f"  physical_address: 0x{0x8000000000 + module * 0x1000000:016x}",
            f"  node:0 card:0 module:{module} rank:0 bank:3 device:2 row:4660 column:88 ",
            "  error_type: 3, multi-bit ECC" if fatal else "  error_type: 2, single-bit ECC"]
    return [f"{{{seq}}}[Hardware Error]: {text}" for text in (*head, *body)]


def _cper_fatal(node: SimNode, fault: Mapping[str, Any]) -> None:
    """A fatal memory error record on module 3 (the kind that takes a Grace tray down)."""
    age = float(fault.get("age_s", 300))
    node.kernel_lines.extend((age, line) for line in _cper_memory(1, "fatal", 3))


def _cper_fatal_previous_boot(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The same fatal record, logged just before it took the tray down: only the
    previous boot's journal holds it, and the tray booted again ten minutes ago with a
    clean kernel log."""
    node.uptime_s = 600.0
    node.previous_boot_lines = [
        *((2.0, line) for line in _cper_memory(1, "fatal", 3)),
        # ghes.c __ghes_panic(): panic(GHES_PFX "Fatal hardware error!"), GHES_PFX "GHES: "
        (1.0, "Kernel panic - not syncing: GHES: Fatal hardware error!")]


def _cper_fatal_bert(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The same fatal record, which the panic kept out of every log: the firmware hands it
    to the next boot (ACPI BERT), whose kernel prints it two seconds in, three hours ago,
    before the look-back window (drivers/acpi/apei/bert.c bert_print_all())."""
    node.uptime_s = 3 * 3600.0
    age = node.uptime_s - 2.0
    block = ["BERT: Error records from previous boot:",
             *(line.split("}", 1)[1] for line in _cper_memory(0, "fatal", 3)[1:]),
             "BERT: Total records found: 1"]
    node.kernel_lines.extend((age, line) for line in block)


def _cper_corrected_storm(node: SimNode, fault: Mapping[str, Any]) -> None:
    """Corrected memory error records on module 5, one a minute for the last half hour:
    ~1,440 a day, far past host.cper's 50."""
    for seq in range(1, 31):
        node.kernel_lines.extend(
            (60.0 * (31 - seq), line) for line in _cper_memory(seq, "corrected", 5))


def _retired(node: SimNode, fault: Mapping[str, Any]) -> None:
    gpu = _gpu(node, fault)
    gpu.fields.update({29: 40, 30: 30, 31: 0})


def _call_error(node: SimNode, fault: Mapping[str, Any]) -> None:
    _gpu(node, fault).call_errors[str(fault["function"])] = int(fault["error"])


def _call_library_error(node: SimNode, fault: Mapping[str, Any]) -> None:
    """One call fails with an error that blames the call, the library or the host
    (NVML_ERROR_INVALID_ARGUMENT unless ``error`` names another code), not the GPU."""
    _gpu(node, fault).call_errors[str(fault["function"])] = int(fault.get("error", 2))


def _driver_version(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.driver_version = str(fault["version"])


def _hca_firmware(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The whole node flashed to another release: consistent within it, odd among peers."""
    for hca in node.hcas:
        hca.fw_ver = str(fault.get("version", "28.42.1000"))


def _rack_clique(node: SimNode, fault: Mapping[str, Any]) -> None:
    for gpu in node.gpus:
        if gpu.fabric is not None:
            gpu.fabric.clique_id += 1


def _listed_in_block(node: SimNode, fault: Mapping[str, Any]) -> None:
    """Nothing to change on the tray: Slurm's block topology (sim/cluster.py blocks) lists
    it in ``block``, another rack's block, whose trays are in another NVLink partition."""


def _serve(mode: str) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        node.serve = mode
    return apply


def _left_out(node: SimNode, fault: Mapping[str, Any]) -> None:
    """Nothing to change: an absent tray is dropped from the cluster (sim/cluster.py
    present), so no agent answers for it and its rack comes up one short."""


# What a kind needs of the platform (state/platforms.py); the platforms follow from it.
_NVLINK = frozenset({Capability.NVLINK})
_NVLINK5 = frozenset({Capability.NVLINK5})
_NVLINK_SPEED = frozenset({Capability.NVLINK_SPEED})
_HGX = frozenset({Capability.NVSWITCH})
_NVL = frozenset({Capability.NVL72})
_IB = frozenset({Capability.IB})  # InfiniBand compute NICs (run as RoCE for fabric: roce)
_RAILS = frozenset({Capability.IB, Capability.RAIL_PER_GPU})
_OEM = frozenset({Capability.IB, Capability.OEM_LAYOUT})
_C2C = frozenset({Capability.C2C})

FAULTS: dict[str, FaultKind] = {f.kind: f for f in (
    FaultKind("gpu_missing", "gpu.count", "fail", "reboot", "node", ("gpu",), _missing),
    FaultKind("driver_not_loaded", "gpu.responsive", "fail", "reboot", "node", (),
              _driver_not_loaded),
    FaultKind("device_denied", "gpu.responsive", "error", "investigate", "node", (),
              _device_denied),
    FaultKind("gpu_hang", "gpu.responsive", "fail", "reboot", "gpu{gpu}", ("gpu",),
              _set("hang", True)),
    FaultKind("gpu_lost", "gpu.responsive", "fail", "reboot", "gpu{gpu}", ("gpu",),
              _set("lost", 15)),
    FaultKind("ecc_dbe", "gpu.ecc_uncorrected", "fail", "reset_gpu", "gpu{gpu}", ("gpu",),
              _field(4, 2)),
    FaultKind("ecc_sbe_storm", "gpu.ecc_corrected_rate", "warn", "investigate", "gpu{gpu}",
              ("gpu",), _counter(3, 200.0), level=Level.FULL),
    FaultKind("row_remap_pending", "gpu.row_remap", "fail", "reset_gpu", "gpu{gpu}", ("gpu",),
              _field(144, 1)),
    FaultKind("row_remap_failure", "gpu.row_remap", "fail", "rma", "gpu{gpu}", ("gpu",),
              _field(145, 1)),
    FaultKind("sram_threshold", "gpu.row_remap", "fail", "rma", "gpu{gpu}", ("gpu",),
              _set("sram_exceeded", 1), needs=frozenset({Capability.SRAM_ECC})),
    FaultKind("recovery_action_pending", "gpu.recovery_action", "fail", "reset_gpu", "gpu{gpu}",
              ("gpu",), _field(230, 1)),
    FaultKind("xid", "gpu.xid", "fail", "reboot", "gpu{gpu}", ("gpu",), _xid,
              options=("code", "age_s", "at_s")),
    # One kind per class of NVIDIA's immediate action that fails (xid_catalog.py).
    FaultKind("xid_reset_gpu", "gpu.xid", "fail", "reset_gpu", "gpu{gpu}", ("gpu",),
              _xid_code(46), options=("age_s",)),  # RESET_GPU: GPU stopped processing
    FaultKind("xid_restart_vm", "gpu.xid", "fail", "reboot", "gpu{gpu}", ("gpu",),
              _xid_code(151), options=("age_s",)),  # RESTART_VM: key rotation error
    FaultKind("xid_aux_power", "gpu.xid", "fail", "reseat_cable", "gpu{gpu}", ("gpu",),
              _xid_code(54), options=("age_s",)),  # CHECK_MECHANICALS
    FaultKind("xid_pcie_fatal_timeout", "gpu.xid", "fail", "reboot", "gpu{gpu}", ("gpu",),
              _xid_code(167), options=("age_s",)),  # no bucket, fatal: as 79
    FaultKind("xid_memory_capacity", "gpu.xid", "fail", "rma", "gpu{gpu}", ("gpu",),
              _xid_code(168), options=("age_s",)),  # no bucket, fatal: capacity lost
    FaultKind("xid_nvlink5_fatal", "gpu.xid", "fail", "reset_gpu", "gpu{gpu}", ("gpu",),
              _xid_code(149), options=("age_s",), needs=_NVL),
    FaultKind("xid_recovery_changed", "gpu.xid", "fail", "reset_gpu", "gpu{gpu}", ("gpu",),
              _xid_code(154), options=("age_s",), needs=_NVL),
    FaultKind("thermal_slowdown", "gpu.clock_events", "fail", "investigate", "gpu{gpu}",
              ("gpu",), _set("clock_reasons", 0x40)),
    FaultKind("power_brake", "gpu.clock_events", "fail", "investigate", "gpu{gpu}", ("gpu",),
              _set("clock_reasons", 0x80)),
    FaultKind("clocks_locked", "gpu.clocks", "warn", "fix_config", "gpu{gpu}", ("gpu",),
              _locked_clocks),
    FaultKind("slowdown_time", "gpu.clocks", "warn", "investigate", "gpu{gpu}", ("gpu",),
              _counter(270, 0.5e9), level=Level.FULL),  # half of each second in HW thermal
    FaultKind("power_capped", "gpu.power_limit", "warn", "fix_config", "gpu{gpu}", ("gpu",),
              _power_capped),
    FaultKind("pcie_width_degraded", "gpu.pcie_link", "fail", "investigate", "gpu{gpu}",
              ("gpu",), _set("pcie_width", 8)),
    FaultKind("pcie_gen_degraded", "gpu.pcie_link", "fail", "investigate", "gpu{gpu}",
              ("gpu",), _set("pcie_gen", 3)),
    FaultKind("pcie_replay_storm", "gpu.pcie_replay_rate", "warn", "investigate", "gpu{gpu}",
              ("gpu",), _counter(94, 100.0), level=Level.FULL),
    FaultKind("persistence_off", "gpu.persistence_mode", "warn", "fix_config", "gpu{gpu}",
              ("gpu",), _set("persistence", 0)),
    FaultKind("mig_enabled", "gpu.mig_mode", "fail", "fix_config", "gpu{gpu}", ("gpu",),
              _set("mig", (1, 1))),
    FaultKind("leftover_process", "gpu.processes", "fail", "drain", "gpu{gpu}", ("gpu",),
              _leftover, options=("job", "pid")),
    FaultKind("nvml_call_error", "gpu.responsive", "fail", "reboot", "gpu{gpu}",
              ("gpu", "function", "error"), _call_error),
    # InvalidArgument, Memory, ...: the GPU answered; an error, never a reboot.
    FaultKind("nvml_call_library_error", "gpu.responsive", "error", "investigate", "gpu{gpu}",
              ("gpu", "function"), _call_library_error, options=("error",)),
    FaultKind("nvlink_down", "nvlink.links_up", "fail", "reset_gpu", "gpu{gpu}",
              ("gpu", "link"), _nvlink_down, needs=_NVLINK),
    FaultKind("nvlink_crc_storm", "nvlink.error_rate", "fail", "reset_gpu", "gpu{gpu}.link{link}",
              ("gpu", "link"), _nvlink_crc, level=Level.FULL, needs=_NVLINK),
    FaultKind("nvlink_recovery_trickle", "nvlink.error_rate", "fail", "reset_gpu",
              "gpu{gpu}.link{link}", ("gpu", "link"), _nvlink_trickle, level=Level.FULL,
              needs=_NVLINK, trend=True),
    FaultKind("nvlink_speed_reduced", "nvlink.speed", "fail", "reset_gpu",
              "gpu{gpu}.link{link}", ("gpu", "link"), _nvlink_speed_reduced,
              needs=_NVLINK_SPEED),
    # Links asleep when idle are up: nothing trips, nvlink.links_up passes naming them.
    FaultKind("nvlink_low_power", "nvlink.links_up", "pass", "none", "gpu{gpu}", ("gpu",),
              _nvlink_low_power, needs=_NVLINK5, silent=True),
    FaultKind("nvlink_bw_mode_reduced", "nvlink.speed", "warn", "investigate", "gpu0", (),
              _nvlink_bw_mode_reduced, needs=_NVLINK_SPEED),
    FaultKind("nvlink_bw_mode_unreadable", "nvlink.speed", "warn", "investigate", "gpu0", (),
              _nvlink_bw_mode_unreadable, needs=_NVLINK_SPEED),
    FaultKind("nvlink_ber_high", "nvlink.ber", "fail", "reset_gpu", "gpu{gpu}.link{link}",
              ("gpu", "link"), _nvlink_ber_high, needs=_NVLINK5),
    FaultKind("nvlink_remote_mismatch", "nvlink.remote", "fail", "investigate",
              "gpu{gpu}.link{link}", ("gpu", "link"), _nvlink_remote, needs=_HGX),
    FaultKind("c2c_link_down", "c2c.links", "fail", "reboot", "gpu{gpu}", ("gpu",),
              _c2c_link_down, needs=_C2C),
    FaultKind("c2c_errors", "c2c.error_rate", "warn", "investigate", "gpu{gpu}.c2c0",
              ("gpu",), _c2c_errors, level=Level.FULL, needs=_C2C),
    FaultKind("nvswitch_missing", "nvswitch.count", "fail", "reboot", "node", (),
              _nvswitch_missing, needs=frozenset({Capability.NVSWITCH_PCI})),
    # HGX B200: its NVSwitches are no PCI functions; one of the ConnectX-7 functions they
    # are managed through gone.
    FaultKind("nvswitch_manager_missing", "nvswitch.management", "fail", "reboot", "node",
              (), _nvswitch_manager_missing, needs=frozenset({Capability.NVSWITCH_MGMT})),
    FaultKind("fabric_not_registered", "fabric.state", "fail", "investigate", "gpu0", (),
              _all_fabric(2), needs=frozenset({Capability.FABRIC_INFO})),
    FaultKind("fabric_degraded", "fabric.health_mask", "warn", "investigate", "gpu{gpu}",
              ("gpu",), _fabric_degraded, needs=_NVL),
    FaultKind("clique_mismatch", "fabric.clique", "fail", "investigate", "gpu{gpu}", ("gpu",),
              _clique_mismatch, needs=_NVL),
    # An older driver's fabric info is still fabric info: nothing trips, the state passes.
    FaultKind("fabric_info_pre580", "fabric.state", "pass", "none", "gpu0", (),
              _fabric_info_pre580, needs=_NVL, silent=True),
    FaultKind("ecc_disabled", "gpu.ecc_mode", "fail", "reboot", "gpu{gpu}", ("gpu",),
              _field(1, 0)),
    FaultKind("gpu_hot", "gpu.temperature", "fail", "investigate", "gpu{gpu}", ("gpu",),
              _set("temperature", 90)),
    FaultKind("inforom_corrupt", "gpu.inforom", "fail", "rma", "gpu{gpu}", ("gpu",),
              _set("inforom_valid", False)),
    FaultKind("wrong_model", "gpu.model", "fail", "fix_config", "gpu{gpu}", ("gpu",),
              _set("name", "NVIDIA H800")),
    FaultKind("memory_short", "gpu.memory_size", "fail", "rma", "gpu{gpu}", ("gpu",),
              _set("memory_bytes", 40 << 30)),
    FaultKind("retired_pages", "gpu.retired_pages", "fail", "rma", "gpu{gpu}", ("gpu",),
              _retired),
    FaultKind("nvlink_p2p_broken", "nvlink.topology", "fail", "investigate", "node", ("gpu",),
              _p2p_broken, needs=_NVLINK),
    FaultKind("nvlink_version_mismatch", "nvlink.version", "fail", "investigate", "gpu{gpu}",
              ("gpu",), _nvlink_version, needs=_NVLINK),
    FaultKind("sxid", "nvswitch.sxid", "fail", "reboot", "nvswitch0", (), _sxid,
              needs=frozenset({Capability.NVSWITCH_PCI})),  # the host's nvswitch driver logs
    # Grace's firmware-first CPU and memory errors (APEI/GHES records in the kernel log).
    FaultKind("cper_fatal", "host.cper", "fail", "investigate", "memory.node0.card0.module3",
              (), _cper_fatal, options=("age_s",), needs=_NVL),
    FaultKind("cper_fatal_previous_boot", "host.cper", "fail", "investigate",
              "memory.node0.card0.module3", (), _cper_fatal_previous_boot, needs=_NVL,
              agent_start=True),
    FaultKind("cper_fatal_bert", "host.cper", "fail", "investigate",
              "memory.node0.card0.module3", (), _cper_fatal_bert, needs=_NVL),
    FaultKind("cper_corrected_storm", "host.cper", "warn", "investigate", "node", (),
              _cper_corrected_storm, needs=_NVL),
    FaultKind("imex_down", "fabric.imex", "warn", "fix_config", "node", (),
              _service_down("nvidia-imex.service"), needs=_NVL),
    FaultKind("imex_host_under_dra", "fabric.imex", "fail", "fix_config", "node", (),
              _imex_under_dra, needs=_NVL),
    FaultKind("imex_domain_degraded", "fabric.imex", "warn", "investigate", "node", (),
              _imex_domain_degraded, options=("peer",), needs=_NVL),
    FaultKind("fabric_manager_down", "fabric.manager", "fail", "fix_config", "node", (),
              _service_down("nvidia-fabricmanager.service"), needs=_HGX),
    # InfiniBand/RoCE (faults/ib.py): ``hca`` names the device, ``port`` defaults to 1.
    FaultKind("hca_missing", "ib.hca_count", "fail", "reboot", "node", ("hca",), hca_missing,
              needs=_IB),
    FaultKind("ib_port_down", "ib.port_state", "fail", "investigate", "{hca}/{port}",
              ("hca",), port_down, options=("port",), needs=_IB),
    FaultKind("ib_port_polling", "ib.port_state", "fail", "reseat_cable", "{hca}/{port}",
              ("hca",), port_polling, options=("port",), needs=_IB),
    FaultKind("ib_rate_degraded", "ib.rate", "fail", "reseat_cable", "{hca}/{port}",
              ("hca",), rate_degraded, options=("port",), needs=_IB),
    FaultKind("ib_width_degraded", "ib.rate", "fail", "reseat_cable", "{hca}/{port}",
              ("hca",), width_degraded, options=("port",), needs=_IB),
    # A rail whose port was set to Ethernet is not the compute fabric: it loses its role,
    # and ib.hca_count names it where the rail is missing (checks/core/rails.py).
    FaultKind("ib_link_layer_ethernet", "ib.hca_count", "fail", "fix_config", "node",
              ("hca",), link_layer_ethernet, options=("port",), needs=_RAILS),
    # The same port where config names the compute rails: it stays a rail, on the wrong
    # link layer.
    FaultKind("ib_named_rail_ethernet", "ib.link_layer", "fail", "fix_config", "{hca}/{port}",
              ("hca",), link_layer_ethernet, options=("port",), needs=_RAILS,
              config={"ib.hca_count": {"compute_hcas": [
                  "mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10",
                  "mlx5_11"]}}),
    # On an OEM board (storage NICs under GPU0's and GPU4's switches): a rail gone names
    # the GPU left without one; a rail set to Ethernet lost its role and is named, the
    # storage ConnectX-6 Dx beside the GPUs is not.
    FaultKind("oem_nic_missing", "ib.hca_count", "fail", "reboot", "node", ("hca",),
              hca_missing, needs=_OEM, layout="oem"),
    FaultKind("oem_rail_lost_role", "ib.hca_count", "fail", "fix_config", "node", ("hca",),
              link_layer_ethernet, needs=_OEM, layout="oem"),
    FaultKind("oem_gpu_missing", "gpu.count", "fail", "reboot", "node", ("gpu",), _missing,
              needs=_OEM, layout="oem"),
    FaultKind("sm_missing", "ib.subnet_manager", "fail", "investigate", "{hca}/{port}",
              ("hca",), sm_missing, options=("port",), needs=_IB,
              also=("ib.port_state",)),
    FaultKind("ib_port_init", "ib.port_state", "fail", "investigate", "{hca}/{port}",
              ("hca",), port_init, options=("port",), needs=_IB),
    FaultKind("ib_port_armed", "ib.port_state", "fail", "investigate", "{hca}/{port}",
              ("hca",), port_armed, options=("port",), needs=_IB),
    FaultKind("ib_transport_errors", "ib.transport_errors", "fail", "investigate",
              "{hca}/{port}", ("hca",), rnr_retry_exceeded, level=Level.FULL, options=("port",),
              needs=_IB),
    FaultKind("roce_netdev_down", "ib.port_state", "warn", "investigate", "{hca}/{port}",
              ("hca",), netdev_down, options=("port",), needs=_IB),
    FaultKind("roce_pfc_off", "roce.pfc", "fail", "fix_config", "{hca}/{port}", ("hca",),
              roce_pfc_off, options=("port",), needs=_IB, fabric="roce"),
    FaultKind("roce_trust_pcp", "roce.pfc", "fail", "fix_config", "{hca}/{port}", ("hca",),
              roce_trust_pcp, options=("port",), needs=_IB, fabric="roce",
              also=("roce.nccl",)),
    FaultKind("roce_ecn_off", "roce.ecn", "fail", "fix_config", "{hca}/{port}", ("hca",),
              roce_ecn_off, options=("port",), needs=_IB, fabric="roce"),
    FaultKind("roce_no_v2_gid", "roce.gid", "fail", "fix_config", "{hca}/{port}", ("hca",),
              roce_no_v2_gid, options=("port",), needs=_IB, fabric="roce"),
    FaultKind("roce_mtu_small", "roce.mtu", "fail", "fix_config", "{hca}/{port}", ("hca",),
              roce_mtu_small, options=("port",), needs=_IB, fabric="roce"),
    # Every RoCE compute port fails; the first compute port of the HGX layouts stands for
    # them in the matrix.
    FaultKind("roce_nccl_tc_wrong", "roce.nccl", "fail", "fix_config", "mlx5_0/1", (),
              roce_nccl_tc_wrong, options=("tc",), needs=_IB, fabric="roce"),
    FaultKind("ib_symbol_errors", "ib.error_rate", "fail", "reseat_cable", "{hca}/{port}",
              ("hca",), symbol_errors, level=Level.FULL, options=("port",), needs=_IB),
    FaultKind("ib_link_downed", "ib.error_rate", "fail", "reseat_cable", "{hca}/{port}",
              ("hca",), link_downed, level=Level.FULL, options=("port",), needs=_IB),
    FaultKind("ib_link_flapping", "ib.error_rate", "fail", "reseat_cable", "{hca}/{port}",
              ("hca",), link_flapping, level=Level.FULL, options=("port",), needs=_IB,
              trend=True),
    FaultKind("ib_rcv_errors", "ib.error_rate", "fail", "reseat_cable", "{hca}/{port}",
              ("hca",), rcv_errors, level=Level.FULL, options=("port",), needs=_IB),
    FaultKind("ib_counter_saturated", "ib.error_rate", "warn", "investigate", "{hca}/{port}",
              ("hca",), counter_saturated, level=Level.FULL, options=("port",), needs=_IB),
    FaultKind("ib_xmit_wait", "ib.congestion", "warn", "investigate", "{hca}/{port}",
              ("hca",), xmit_wait, level=Level.FULL, options=("port",), needs=_IB),
    FaultKind("nic_pcie_degraded", "ib.pcie_link", "fail", "investigate", "{hca}", ("hca",),
              pcie_degraded, needs=_IB),
    FaultKind("mlx5_health_error", "ib.kernel_errors", "fail", "reboot", "{hca}", ("hca",),
              mlx5_health, needs=_IB),
    FaultKind("peermem_missing", "nccl.gpudirect_rdma", "fail", "fix_config", "node", (),
              peermem_missing, needs=_IB),
    FaultKind("acs_enabled", "nccl.acs", "fail", "fix_config", "gpu{gpu}", ("gpu",),
              acs_enabled),
    FaultKind("iommu_translated", "nccl.iommu", "fail", "fix_config", "node", (),
              iommu_translated, needs=_IB),
    FaultKind("nic_wrong_numa", "nccl.gpu_nic_affinity", "warn", "investigate", "{hca}",
              ("hca",), nic_wrong_numa, needs=_RAILS),
    FaultKind("memlock_low", "nccl.host_limits", "fail", "fix_config", "node", (), memlock_low,
              needs=_IB),
    FaultKind("nccl_missing", "nccl.library", "fail", "fix_config", "node", (), nccl_missing,
              config={"nccl.library": {"require_host": True}}),
    FaultKind("nccl_env_bad_hca", "nccl.env", "fail", "fix_config", "node", (),
              conf("NCCL_IB_HCA", "=mlx5_0,mlx5_99"), options=("value",), needs=_IB),
    FaultKind("nccl_env_bad_ifname", "nccl.env", "fail", "fix_config", "node", (),
              conf("NCCL_SOCKET_IFNAME", "eth0"), options=("value",)),
    FaultKind("allreduce_slow", "nccl.allreduce", "fail", "investigate", "node", (),
              allreduce_slow, level=Level.FULL, needs=_NVLINK),
    FaultKind("nccl_ib_disabled", "nccl.env", "fail", "fix_config", "node", (),
              conf("NCCL_IB_DISABLE", "1"), needs=_IB),
    FaultKind("hca_firmware_mixed", "ib.firmware", "warn", "fix_config", "{hca}", ("hca",),
              firmware_mixed, options=("version",), needs=_IB),
    # Active kinds: every passive check passes; clusterdiag qualify names the part.
    FaultKind("gpu_slow", "qualify.gpu_compute", "fail", "drain", "gpu{gpu}", ("gpu",),
              slow("compute"), options=("factor",), active=True),
    FaultKind("hbm_slow", "qualify.hbm", "fail", "drain", "gpu{gpu}", ("gpu",), slow("hbm"),
              options=("factor",), active=True),
    FaultKind("pcie_slow", "qualify.h2d", "fail", "drain", "gpu{gpu}", ("gpu",), slow("pcie"),
              options=("factor",), also=("qualify.d2h",), active=True),
    FaultKind("nvlink_slow", "qualify.d2d", "fail", "drain", "gpu{gpu}", ("gpu",),
              slow("nvlink"), options=("factor",), needs=_NVLINK, active=True),
    FaultKind("rail_slow", "qualify.nic", "fail", "reseat_cable", "{hca}/1", ("hca",),
              slow("rail"), options=("factor",), needs=_IB, active=True),
    FaultKind("nccl_socket_fallback", "qualify.allreduce_net", "fail", "fix_config", "node",
              (), socket_fallback, needs=_IB, active=True),
    # Every tool of the node hangs: each node test is a hang, found at its deadline.
    FaultKind("tool_hang", "qualify.allreduce", "fail", "drain", "node", (), tool_hang,
              also=("qualify.allreduce_ring",), active=True),
    FaultKind("dcgm_plugin_fail", "qualify.dcgm", "fail", "drain", "gpu{gpu}", ("gpu",),
              dcgm_plugin_fail, active=True),
    # How the node's tools were built or installed (faults/qualify.py): the tool, not the
    # node, is at fault, so the test is an error to fix, never a drain. A slow server start
    # is nothing a correct caller reports, and a perftest without CUDA still tests the NIC
    # through host memory (the inventory's note says GPUDirect went untested).
    FaultKind("perftest_no_cuda", "qualify.nic", "pass", "none", "node", (),
              perftest_no_cuda, needs=_IB, active=True, silent=True),
    FaultKind("perftest_slow_start", "qualify.nic", "pass", "none", "node", (),
              perftest_slow_start, options=("delay_s",), needs=_IB, active=True,
              silent=True),
    FaultKind("nccl_library_unloadable", "qualify.allreduce", "error", "fix_config", "node",
              (), nccl_library_unloadable, active=True),
    # Cross-node active kinds: every node test passes; pairs, rails, scaling or rack name it.
    FaultKind("cable_slow", "qualify.rails", "fail", "reseat_cable", "{hca}/1", ("hca",),
              slow("cable"), options=("factor",), needs=_IB, active=True, cross=True),
    FaultKind("uplink_slow", "qualify.scaling", "warn", "investigate", "cluster", (),
              slow("uplink"), options=("factor",), needs=_IB, active=True, cross=True),
    FaultKind("mnnvl_slow", "qualify.rack", "fail", "drain", "node", (), slow("mnnvl"),
              options=("factor",), needs=_NVL, active=True, cross=True),
    FaultKind("imex_channel_missing", "qualify.rack", "fail", "fix_config", "node", (),
              imex_channel_missing, needs=_NVL, active=True, cross=True),
    FaultKind("mndiag_gpu_error", "qualify.rack", "fail", "drain", "gpu{gpu}", ("gpu",),
              mndiag_gpu_error, needs=_NVL, active=True, cross=True),
    # One GPU's copies to and from the other trays slow: only nvbandwidth's multinode
    # stand-in reads ``mnnvl_gpu`` (sim/nvbandwidth.py multinode).
    FaultKind("nvbw_multinode_slow_gpu", "qualify.rack", "fail", "drain", "gpu{gpu}",
              ("gpu",), slow("mnnvl_gpu"), options=("factor",), needs=_NVL, active=True,
              cross=True),
    FaultKind("node_uplink_slow", "qualify.pairs", "fail", "drain", "node", (),
              slow("network"), options=("factor",), needs=_IB, active=True, cross=True),
    FaultKind("nccl_tests_no_mpi", "qualify.pairs", "error", "fix_config", "node", (),
              nccl_tests_no_mpi, active=True, cross=True),
    # Cluster-level kinds: each node passes alone; the cross-node view catches them.
    FaultKind("driver_mismatch", "cluster.versions", "warn", "fix_config", "driver",
              ("version",), _driver_version, cluster=True),
    FaultKind("hca_firmware_mismatch", "cluster.versions", "warn", "fix_config",
              "hca_firmware", (), _hca_firmware, options=("version",), cluster=True,
              needs=_IB),
    FaultKind("rack_clique_mismatch", "cluster.nvl_domain", "fail", "investigate",
              "rack {rack}", (), _rack_clique, cluster=True, needs=_NVL),
    FaultKind("tray_outside_block", "cluster.nvl_blocks", "fail", "fix_config",
              "block {block}", ("block",), _listed_in_block, cluster=True, needs=_NVL),
    FaultKind("tray_missing", "cluster.nvl_domain", "warn", "investigate", "rack {rack}", (),
              _left_out, cluster=True, absent=True, needs=_NVL),
    FaultKind("node_unreachable", "cluster.reachability", "fail", "investigate", "node", (),
              _serve("unreachable"), cluster=True),
    FaultKind("node_garbage", "cluster.reachability", "fail", "investigate", "node", (),
              _serve("garbage"), cluster=True),
)}
