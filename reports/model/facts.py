"""What a node report carries for the cross-node checks, beyond its own findings.

The cluster checks see node reports only (the JSON the agents serve), never snapshots, so
the facts they compare across nodes travel in the report's inventory: each GPU's NVLink
domain and partition (``fabric``), the InfiniBand port that serves each GPU (``rails``),
a few counters and readings that outlier detection ranks (``telemetry``), and an NVL72
tray's view of its IMEX domain (``imex``: the domain's state, each peer's index, address,
host name and status, and the nodes-file entries that are the tray itself).
"""

from __future__ import annotations

from typing import Any

from ...agent.model import Snapshot
from ...agent.model.ib import IbDevice, IbPort
from ...agent.model.pci import PciDevice

# Counters summed over a node's IB ports for outlier ranking (kernel file names).
IB_ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors")


def cluster_facts(snap: Snapshot) -> dict[str, Any]:
    return {"fabric": _fabric(snap), "rails": rails(snap), "telemetry": _telemetry(snap),
            "imex": _imex(snap)}


def _imex(snap: Snapshot) -> dict[str, Any] | None:
    """What cluster.imex_domain compares: None where the tray shows no domain and no
    nodes-file entry of its own (not a tray, or fabric.imex did not run)."""
    state = snap.host.imex if snap.host is not None else None
    if state is None or (state.domain is None and not state.own):
        return None
    domain = state.domain
    return {"status": domain.status if domain is not None else None,
            "peers": [{"index": p.index, "host": p.host, "host_name": p.host_name,
                       "status": p.status} for p in (domain.nodes if domain else [])],
            "own": list(state.own)}


def _fabric(snap: Snapshot) -> list[dict[str, Any]]:
    if snap.nvml is None:
        return []
    return [{"gpu": g.index, "state": g.fabric.state, "status": g.fabric.status,
             "cluster_uuid": g.fabric.cluster_uuid, "clique_id": g.fabric.clique_id}
            for g in snap.nvml.gpus if g.fabric is not None and g.fabric.state != 0]


def _common_depth(a: list[str], b: list[str]) -> int:
    depth = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        depth += 1
    return depth


def _compute_devices(snap: Snapshot) -> list[IbDevice]:
    return sorted((d for d in snap.infiniband or [] if d.role == "compute" and d.ports
                   and d.ports[0].link_layer in (None, "InfiniBand")),
                  key=lambda d: d.pci_bdf or d.name)


def _port(device: IbDevice) -> IbPort:
    return device.ports[0]


def rails(snap: Snapshot) -> list[dict[str, Any]]:
    """GPU index -> the compute port that serves it.

    NCCL pairs each GPU with the NIC behind the same PCIe switch, so that is the rail on
    boards that have one (DGX/HGX). Where no NIC shares a switch with any GPU (NVL72 trays
    reach their NICs over the CPU: SYS), GPUs and NICs pair in bus order, one each.
    """
    devices = _compute_devices(snap)
    if snap.nvml is None or not devices:
        return []
    paths: dict[str, PciDevice] = {d.bdf: d for d in snap.pci or []}
    gpus = sorted((g for g in snap.nvml.gpus if g.pci_bdf), key=lambda g: g.index)
    pairs: dict[int, IbDevice] = {}
    for gpu in gpus:
        gpu_path = paths[gpu.pci_bdf].path if gpu.pci_bdf in paths else []
        best, depth = None, 1  # sharing only a root complex is not a rail
        for device in devices:
            nic = paths.get(device.pci_bdf or "")
            shared = _common_depth(gpu_path, nic.path) if nic is not None else 0
            if shared > depth:
                best, depth = device, shared
        if best is not None:
            pairs[gpu.index] = best
    if not pairs and len(gpus) == len(devices):
        pairs = {gpu.index: device for gpu, device in zip(gpus, devices, strict=True)}
    return [{"gpu": index, "hca": device.name, "port": _port(device).port,
             "rate_gbps": _port(device).rate_gbps, "subnet": _port(device).gid_prefix,
             "state": _port(device).state}
            for index, device in sorted(pairs.items())]


def _telemetry(snap: Snapshot) -> dict[str, float]:
    """The values cluster.outliers ranks nodes by. Error counters are rates per hour since
    boot (they count from driver load, about boot): as totals, uptime would rank the nodes,
    not their health. At least one hour is assumed, so a fresh boot's few errors do not
    become a huge rate."""
    values: dict[str, float] = {}
    gpus = snap.nvml.gpus if snap.nvml is not None else []
    temps = [g.temperature_c for g in gpus if g.temperature_c is not None]
    if temps:
        values["gpu_temperature_c"] = float(max(temps))
    boot = snap.host.boot_time if snap.host is not None else None
    if boot is None or snap.taken_at <= boot:
        return values
    hours = max(1.0, (snap.taken_at - boot) / 3600)
    corrected = [g.ecc_volatile_corrected for g in gpus if g.ecc_volatile_corrected is not None]
    if corrected:
        values["ecc_corrected_per_h"] = round(sum(corrected) / hours, 3)
    replays = [g.pcie_replay_count for g in gpus if g.pcie_replay_count is not None]
    if replays:
        values["pcie_replays_per_h"] = round(sum(replays) / hours, 3)
    ports = [p for d in _compute_devices(snap) for p in d.ports]
    if ports:
        errors = sum(p.counters.get(name) or 0 for p in ports for name in IB_ERROR_COUNTERS)
        values["ib_errors_per_h"] = round(errors / hours, 3)
    return values
