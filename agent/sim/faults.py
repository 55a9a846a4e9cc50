"""The one table of simulated fault kinds: what each does to the hardware, which check
must catch it, with which status and action, on which component, and the keys it takes.

A test keeps this table and the check catalog in step: every kind is caught by its
check and by nothing else, and every check that can fail has a kind that trips it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .hardware import Counter, SimGpu, SimNode

Apply = Callable[[SimNode, Mapping[str, Any]], None]


@dataclass(frozen=True)
class FaultKind:
    kind: str
    check: str
    status: str  # fail | warn
    action: str
    component: str  # format string over the fault's keys: "gpu{gpu}", "node"
    keys: tuple[str, ...]  # location keys it requires
    apply: Apply
    level: str = "quick"  # full: needs two samples (rate checks)
    options: tuple[str, ...] = ()  # optional keys
    profiles: tuple[str, ...] = ()  # platforms it makes sense on (empty: any with GPUs)


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


def _counter(fid: int, rate: float) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        _gpu(node, fault).counters[fid] = Counter(0, rate)
    return apply


def _driver_not_loaded(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.driver_error = 9  # NVML_ERROR_DRIVER_NOT_LOADED


def _xid(node: SimNode, fault: Mapping[str, Any]) -> None:
    gpu = _gpu(node, fault)
    code = int(fault.get("code", 79))
    pci = gpu.bdf[:-2]
    age = float(fault.get("age_s", 60))
    text = {79: "GPU has fallen off the bus.",
            48: "An uncorrectable double bit error (DBE) has been detected on GPU in the "
                "framebuffer at physAddr 0x12bac1c3e0 partition 2, subpartition 1."}
    message = text.get(code, "Unspecified error.")
    node.kernel_lines.append(
        (age, f"NVRM: Xid (PCI:{pci}): {code}, pid=4242, name=python3, {message}"))


def _nvlink_down(node: SimNode, fault: Mapping[str, Any]) -> None:
    gpu = _gpu(node, fault)
    gpu.links[int(fault["link"])].state = 0
    gpu.fields[147] = int(gpu.fields.get(147) or 1) - 1


def _nvlink_crc(node: SimNode, fault: Mapping[str, Any]) -> None:
    link = _gpu(node, fault).links[int(fault["link"])]
    fid = 163 if 163 in link.errors else 208
    link.errors[fid] = Counter(0, 500.0)


def _nvlink_remote(node: SimNode, fault: Mapping[str, Any]) -> None:
    gpu = _gpu(node, fault)
    gpu.links[int(fault["link"])].remote_type = 0  # a GPU where an NVSwitch belongs
    gpu.fields[147] = int(gpu.fields.get(147) or 1) - 1


def _nvswitch_missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.nvswitch_bdfs.pop()


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


def _clique_mismatch(node: SimNode, fault: Mapping[str, Any]) -> None:
    fabric = _gpu(node, fault).fabric
    if fabric is not None:
        fabric.clique_id += 1


def _service_down(unit: str) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        node.services[unit] = "failed"
    return apply


def _leftover(node: SimNode, fault: Mapping[str, Any]) -> None:
    _gpu(node, fault).processes.append((4242, 2 << 30))
    node.proc_names[4242] = "python3"


def _missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    _gpu(node, fault).in_nvml = False


def _p2p_broken(node: SimNode, fault: Mapping[str, Any]) -> None:
    index = int(fault["gpu"])
    for pair in node.p2p:
        if index in pair:
            node.p2p[pair] = 5  # NVML_P2P_STATUS_NOT_SUPPORTED


def _nvlink_version(node: SimNode, fault: Mapping[str, Any]) -> None:
    for link in _gpu(node, fault).links:
        link.version -= 1


def _sxid(node: SimNode, fault: Mapping[str, Any]) -> None:
    bdf = node.nvswitch_bdfs[0]
    node.kernel_lines.append(
        (120.0, f"nvidia-nvswitch0: SXid (PCI:{bdf}): 12028, Non-fatal, Link 32 egress "
                "non-posted PRIV error (First)"))


def _retired(node: SimNode, fault: Mapping[str, Any]) -> None:
    gpu = _gpu(node, fault)
    gpu.fields.update({29: 40, 30: 30, 31: 0})


def _call_error(node: SimNode, fault: Mapping[str, Any]) -> None:
    _gpu(node, fault).call_errors[str(fault["function"])] = int(fault["error"])


_HGX = ("dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200")
_NVL = ("gb200-nvl72", "gb300-nvl72")
_NVLINK = (*_HGX, *_NVL)

FAULTS: dict[str, FaultKind] = {f.kind: f for f in (
    FaultKind("gpu_missing", "gpu.count", "fail", "reboot", "node", ("gpu",), _missing),
    FaultKind("driver_not_loaded", "gpu.responsive", "fail", "reboot", "node", (),
              _driver_not_loaded),
    FaultKind("gpu_hang", "gpu.responsive", "fail", "reboot", "gpu{gpu}", ("gpu",),
              _set("hang", True)),
    FaultKind("gpu_lost", "gpu.responsive", "fail", "reboot", "gpu{gpu}", ("gpu",),
              _set("lost", 15)),
    FaultKind("ecc_dbe", "gpu.ecc_uncorrected", "fail", "reset_gpu", "gpu{gpu}", ("gpu",),
              _field(4, 2)),
    FaultKind("ecc_sbe_storm", "gpu.ecc_corrected_rate", "warn", "investigate", "gpu{gpu}",
              ("gpu",), _counter(3, 200.0), level="full"),
    FaultKind("row_remap_pending", "gpu.row_remap", "fail", "reset_gpu", "gpu{gpu}", ("gpu",),
              _field(144, 1)),
    FaultKind("row_remap_failure", "gpu.row_remap", "fail", "rma", "gpu{gpu}", ("gpu",),
              _field(145, 1)),
    FaultKind("sram_threshold", "gpu.row_remap", "fail", "rma", "gpu{gpu}", ("gpu",),
              _set("sram_exceeded", 1), profiles=("dgx-h100", "dgx-h200", "dgx-b200", *_NVL)),
    FaultKind("recovery_action_pending", "gpu.recovery_action", "fail", "reset_gpu", "gpu{gpu}",
              ("gpu",), _field(230, 1)),
    FaultKind("xid", "gpu.xid", "fail", "reboot", "gpu{gpu}", ("gpu",), _xid,
              options=("code", "age_s")),
    FaultKind("thermal_slowdown", "gpu.clock_events", "fail", "investigate", "gpu{gpu}",
              ("gpu",), _set("clock_reasons", 0x40)),
    FaultKind("power_brake", "gpu.clock_events", "fail", "investigate", "gpu{gpu}", ("gpu",),
              _set("clock_reasons", 0x80)),
    FaultKind("power_capped", "gpu.power_limit", "warn", "fix_config", "gpu{gpu}", ("gpu",),
              _field(190, 400_000)),
    FaultKind("pcie_width_degraded", "gpu.pcie_link", "fail", "investigate", "gpu{gpu}",
              ("gpu",), _set("pcie_width", 8)),
    FaultKind("pcie_gen_degraded", "gpu.pcie_link", "fail", "investigate", "gpu{gpu}",
              ("gpu",), _set("pcie_gen", 3)),
    FaultKind("pcie_replay_storm", "gpu.pcie_replay_rate", "warn", "investigate", "gpu{gpu}",
              ("gpu",), _counter(94, 100.0), level="full"),
    FaultKind("persistence_off", "gpu.persistence_mode", "warn", "fix_config", "gpu{gpu}",
              ("gpu",), _set("persistence", 0)),
    FaultKind("mig_enabled", "gpu.mig_mode", "fail", "fix_config", "gpu{gpu}", ("gpu",),
              _set("mig", (1, 1))),
    FaultKind("leftover_process", "gpu.processes", "fail", "drain", "gpu{gpu}", ("gpu",),
              _leftover),
    FaultKind("nvml_call_error", "gpu.responsive", "fail", "reboot", "gpu{gpu}",
              ("gpu", "function", "error"), _call_error),
    FaultKind("nvlink_down", "nvlink.links_up", "fail", "reset_gpu", "gpu{gpu}",
              ("gpu", "link"), _nvlink_down, profiles=_NVLINK),
    FaultKind("nvlink_crc_storm", "nvlink.error_rate", "fail", "reset_gpu", "gpu{gpu}.link{link}",
              ("gpu", "link"), _nvlink_crc, level="full", profiles=_NVLINK),
    FaultKind("nvlink_remote_mismatch", "nvlink.remote", "fail", "investigate",
              "gpu{gpu}.link{link}", ("gpu", "link"), _nvlink_remote, profiles=_HGX),
    FaultKind("nvswitch_missing", "nvswitch.count", "fail", "reboot", "node", (),
              _nvswitch_missing, profiles=_HGX),
    FaultKind("fabric_not_registered", "fabric.state", "fail", "investigate", "gpu0", (),
              _all_fabric(2), profiles=("dgx-h100", "dgx-h200", "dgx-b200", *_NVL)),
    FaultKind("fabric_degraded", "fabric.health_mask", "warn", "investigate", "gpu{gpu}",
              ("gpu",), _fabric_degraded, profiles=_NVL),
    FaultKind("clique_mismatch", "fabric.clique", "fail", "investigate", "gpu{gpu}", ("gpu",),
              _clique_mismatch, profiles=_NVL),
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
              _p2p_broken, profiles=_NVLINK),
    FaultKind("nvlink_version_mismatch", "nvlink.version", "fail", "investigate", "gpu{gpu}",
              ("gpu",), _nvlink_version, profiles=_NVLINK),
    FaultKind("sxid", "nvswitch.sxid", "fail", "reboot", "nvswitch0", (), _sxid,
              profiles=_HGX),
    FaultKind("imex_down", "fabric.imex", "warn", "fix_config", "node", (),
              _service_down("nvidia-imex.service"), profiles=_NVL),
    FaultKind("fabric_manager_down", "fabric.manager", "fail", "fix_config", "node", (),
              _service_down("nvidia-fabricmanager.service"), profiles=_HGX),
)}
