"""InfiniBand/RoCE checks on one sample: HCA count, port state, rate, link layer, subnet
manager, NIC PCIe link, firmware, and mlx5 kernel-log errors (rates: ib_rates.py).

Only compute devices (``IbDevice.role``, decided when judging by checks/ib_roles.py from
the snapshot's facts, the profile and config) are judged as NCCL rails. Storage and
management ports are never counted as failed compute rails; ``ib.port_state`` still warns
when one is down, because storage that cannot be reached hurts jobs too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from ..agent.model.ib import DPU_TYPES, IbDevice, IbPort
from ..agent.model.pci import MELLANOX_VENDOR
from .finding import Action, Finding, Status
from .registry import CheckContext, check

NODE = "node"
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
CONNECTX8 = "MT4131"
_LINKED = ("ACTIVE", "INIT", "ARMED", "ACTIVE_DEFER")
# Logical states of a port whose physical link is up but that the subnet manager has not
# activated (IBA PortInfo PortState 2 INIT, 3 ARMED).
_NOT_ACTIVATED = ("INIT", "ARMED")


def port_component(dev: IbDevice, port: IbPort) -> str:
    return f"{dev.name}/{port.port}"


def unknown_finding(component: str, what: str, reason: str | None) -> Finding:
    """The check could not tell: the value was unreadable or garbage."""
    return Finding.error(component, f"{what} unknown", reason)


def devices(ctx: CheckContext) -> list[IbDevice]:
    return list(ctx.snapshot.infiniband or [])


def compute_ports(ctx: CheckContext) -> Iterator[tuple[IbDevice, IbPort]]:
    for dev in devices(ctx):
        if dev.role == "compute":
            for port in dev.ports:
                yield dev, port


def no_compute(ctx: CheckContext) -> Finding:
    if not devices(ctx):
        return Finding.skip(NODE, "no RDMA devices on this node")
    return Finding.skip(NODE, "no compute HCA on this node (see ib.hca_count)")


# -- ib.hca_count -----------------------------------------------------------------------


def _pci_without_rdma(ctx: CheckContext) -> list[str]:
    """Mellanox network functions on PCI that no RDMA device belongs to."""
    known = {d.pci_bdf for d in devices(ctx)}
    return sorted(d.bdf for d in ctx.snapshot.pci or []
                  if d.vendor == MELLANOX_VENDOR and (d.pci_class >> 16) == 0x02
                  and d.bdf not in known)


def _wrong_mode_rails(ctx: CheckContext, compute: list[IbDevice]) -> list[IbDevice]:
    """Devices that are not compute but sit beside a GPU, of the rails' model, on another
    link layer than the fabric's: a rail whose port was set to the wrong mode (mlxconfig
    LINK_TYPE), as opposed to a storage card of another model under the same switch (with no
    rail left to compare models with, any such device)."""
    layer = ctx.profile.hca_link_layer
    models = {d.hca_type for d in compute if d.hca_type}
    return [d for d in devices(ctx) if d.role == "storage" and d.gpu_hops and layer
            and (not models or d.hca_type in models) and d.hca_type not in DPU_TYPES
            and layer not in {p.link_layer for p in d.ports}]


def _gpus_without_a_rail(ctx: CheckContext, compute: list[IbDevice]) -> list[str]:
    """GPUs on PCI that no compute NIC shares a PCIe bridge with, on boards where the
    rails sit beside their GPUs (some compute NIC does): where the missing NIC belonged."""
    if not any(d.gpu_hops for d in compute):
        return []
    near = {g for d in compute for g in d.gpu_hops}
    return sorted(d.bdf for d in ctx.snapshot.pci or [] if d.is_nvidia_gpu and d.bdf not in near)


@check("ib.hca_count", needs=("infiniband",),
       params={"compute_hcas": [], "storage_hcas": [], "management_hcas": []},
       remedy="A compute HCA without an RDMA device: check `dmesg | grep mlx5` for a "
              "firmware or driver failure, `lspci -d 15b3:` for the card, and reboot; a card "
              "that stays missing needs reseating or an RMA. A rail on the wrong link layer "
              "(its port set to Ethernet on an InfiniBand fabric, or back): `mlxconfig -d "
              "DEV set LINK_TYPE_P1=1` (InfiniBand) or 2 (Ethernet) and reboot. When the "
              "count is right but the roles are not, recognise the compute NICs in the site "
              "profile (compute_ibdevs, compute_netdevs, compute_pci, compute_models) or "
              "name them in config: checks: {ib.hca_count: {compute_hcas: [...]}}.",
       actions=(Action.REBOOT, Action.FIX_CONFIG, Action.INVESTIGATE))
def hca_count(ctx: CheckContext) -> Iterator[Finding]:
    """The node has as many compute HCAs as its platform (8 on DGX H100, 4 on GB200);
    roles come from checks/ib_roles.py, each with its reason in the inventory."""
    expected = ctx.profile.compute_hcas
    if expected is None:
        yield Finding.skip(NODE, "profile expects no compute HCAs")
        return
    devs = devices(ctx)
    compute_devs = [d for d in devs if d.role == "compute"]
    compute = sorted(d.name for d in compute_devs)
    observed: dict[str, Any] = {"compute": compute, "count": len(compute)}
    unknown = sorted(d.name for d in devs if d.role == "unknown")
    if unknown:
        observed["role_unknown"] = unknown
    orphans = _pci_without_rdma(ctx)
    if orphans:
        observed["pci_without_rdma_device"] = orphans
    if len(compute) < expected <= len(compute) + len(unknown):
        # The devices whose role could not be read would make up the count: clusterdiag
        # could not tell, so this is its trouble, never a missing HCA.
        reasons = "; ".join(f"{d.name}: {d.role_reason or 'role unknown'}"
                            for d in devs if d.role == "unknown")
        yield Finding.error(NODE, f"could not tell the compute HCAs: {reasons}")
    elif len(compute) < expected:
        yield _too_few(ctx, compute_devs, observed, expected)
    elif len(compute) > expected:
        yield Finding.warn(NODE, "more compute HCAs than the platform has: recognise them in "
                                 "the site profile (compute_*) or set compute_hcas in config",
                           observed, expected)
    else:
        yield Finding.passed(NODE, "compute HCA count as expected", observed, expected)


def _too_few(ctx: CheckContext, compute: list[IbDevice], observed: dict[str, Any],
             expected: int) -> Finding:
    """The fail, naming where the missing rails belong and what is there instead."""
    wrong = _wrong_mode_rails(ctx, compute)
    lonely = _gpus_without_a_rail(ctx, compute)
    if lonely:
        observed["gpus_without_a_compute_nic"] = lonely
    if wrong:
        observed["wrong_link_layer"] = {d.name: d.role_reason for d in wrong}
        names = ", ".join(f"{d.name} ({d.role_reason})" for d in wrong)
        return Finding.fail(NODE, f"fewer compute HCAs than the platform has: {names}",
                            observed, expected, Action.FIX_CONFIG)
    where = f": no compute NIC beside GPU {', '.join(lonely)}" if lonely else ""
    return Finding.fail(NODE, f"fewer compute HCAs than the platform has{where}", observed,
                        expected, Action.REBOOT)


# -- ib.port_state ----------------------------------------------------------------------


def _compute_state(dev: IbDevice, port: IbPort) -> Finding:
    comp = port_component(dev, port)
    if port.state is None or port.phys_state is None:
        what = "port state" if port.state is None else "physical port state"
        return unknown_finding(comp, what, port.unknown.get("state")
                               or port.unknown.get("phys_state"))
    observed = f"{port.state}/{port.phys_state}"
    if port.link_layer == "Ethernet" and port.netdev_operstate not in (None, "up"):
        return Finding.fail(comp, "RoCE compute port's netdev is not up",
                            {"netdev": port.netdev, "operstate": port.netdev_operstate},
                            "up", Action.INVESTIGATE)
    if port.state == "ACTIVE" and port.phys_state == "LinkUp":
        return Finding.passed(comp, "port active, link up", observed)
    if port.phys_state == "LinkUp" and port.state in _NOT_ACTIVATED:
        # The cable and the switch port are fine; the subnet manager never took the port
        # to ACTIVE. NCCL opens only ACTIVE ports, so the rail is unusable whatever its LID.
        observed_sm = {"state": port.state, "phys_state": port.phys_state, "lid": port.lid,
                       "sm_lid": port.sm_lid}
        why = "no subnet manager has configured it" if not port.lid or not port.sm_lid \
            else "the subnet manager assigned a LID but did not activate it"
        return Finding.fail(comp, f"port {port.state} with link up: {why}", observed_sm,
                            "ACTIVE/LinkUp", Action.INVESTIGATE)
    if port.phys_state == "LinkUp" and port.state in _LINKED:
        return Finding.skip(comp, "link up, activation deferred (see ib.subnet_manager)")
    if port.phys_state == "Polling":
        return Finding.fail(comp, "no link partner (Polling): cable or switch port",
                            observed, "ACTIVE/LinkUp", Action.RESEAT_CABLE)
    return Finding.fail(comp, f"port {port.state}, physical {port.phys_state}", observed,
                        "ACTIVE/LinkUp", Action.INVESTIGATE)


def _other_state(dev: IbDevice, port: IbPort) -> Finding:
    comp = port_component(dev, port)
    netdev_down = port.link_layer == "Ethernet" and port.netdev_operstate not in (None, "up")
    if netdev_down:
        return Finding.warn(comp, f"{dev.role} RoCE port down: netdev not up",
                            {"netdev": port.netdev, "operstate": port.netdev_operstate,
                             "state": port.state}, "up")
    if port.state not in (None, "ACTIVE"):
        return Finding.warn(comp, f"{dev.role} port not active", port.state, "ACTIVE")
    return Finding.passed(comp, f"{dev.role} port up", port.state)


@check("ib.port_state", needs=("infiniband",), params={"noncompute": "warn", "ignore_hcas": []},
       remedy="Polling means no link partner: reseat or replace the cable, check the switch "
              "port. INIT or ARMED with the link up: the subnet manager has not activated "
              "the port (is opensm/UFM running for this rail, does it log the port, "
              "`sminfo`, `ibportstate`). Disabled/Down: see whether the switch or the SM "
              "disabled the port "
              "(ibportstate, the switch log). A RoCE port is down when its netdev is: "
              "`ip link set DEV up` and check the network configuration. Ports that are "
              "unused on purpose can be listed in ignore_hcas.",
       actions=(Action.RESEAT_CABLE, Action.INVESTIGATE))
def port_state(ctx: CheckContext) -> Iterator[Finding]:
    """Every compute port is ACTIVE with its physical link up; other ports up (warn).

    A compute port in INIT or ARMED fails whatever its LID: with no LID the subnet
    manager never configured it (ib.subnet_manager says so too), with one it configured
    it and stopped short of ACTIVE; either way NCCL cannot use the rail.
    """
    ignore = {str(n) for n in ctx.params.get("ignore_hcas") or []}
    judged = False
    for dev in devices(ctx):
        if dev.name in ignore:
            continue
        for port in dev.ports:
            if dev.role == "compute":
                judged = True
                yield _compute_state(dev, port)
            elif ctx.params.get("noncompute") != "ignore":
                judged = True
                yield _other_state(dev, port)
    if not judged:
        yield no_compute(ctx)


# -- ib.rate ----------------------------------------------------------------------------


def _rate(dev: IbDevice, port: IbPort, expected: float) -> Finding:
    comp = port_component(dev, port)
    if port.rate_gbps is None:
        return unknown_finding(comp, "port rate", port.unknown.get("rate"))
    text = f"{port.rate_gbps:g} Gb/sec ({port.width} {port.speed})"
    if dev.hca_type == CONNECTX8 and port.speed == "SDR":
        # Kernels before "IB/core: Add support for XDR link speed" print XDR as SDR.
        return Finding.warn(comp, "ConnectX-8 reports SDR: kernel too old to name XDR, "
                                  "rate unknown", text, f">= {expected:g} Gb/s",
                            Action.FIX_CONFIG)
    if port.rate_gbps >= expected:
        return Finding.passed(comp, "rate as expected", text, f">= {expected:g} Gb/s")
    lower = "width" if port.width and port.width != "4X" else "speed"
    return Finding.fail(comp, f"link trained at a lower {lower}", text, f">= {expected:g} Gb/s",
                        Action.RESEAT_CABLE)


@check("ib.rate", needs=("infiniband",),
       remedy="A port below its rate trained down: reseat or replace the cable or "
              "transceiver, check the switch port, and watch ib.error_rate. A ConnectX-8 "
              "that shows SDR needs a kernel that names XDR (6.7 or later).",
       actions=(Action.RESEAT_CABLE, Action.FIX_CONFIG))
def rate(ctx: CheckContext) -> Iterator[Finding]:
    """Every active compute port runs at the platform's rate (400 Gb/s NDR on DGX H100)."""
    expected = ctx.profile.hca_rate_gbps
    if expected is None:
        yield Finding.skip(NODE, "profile states no HCA rate")
        return
    ports = list(compute_ports(ctx))
    for dev, port in ports:
        if port.state != "ACTIVE":
            yield Finding.skip(port_component(dev, port), "port not active (see ib.port_state)")
        else:
            yield _rate(dev, port, float(expected))
    if not ports:
        yield no_compute(ctx)


# -- ib.link_layer ----------------------------------------------------------------------


@check("ib.link_layer", needs=("infiniband",),
       remedy="A compute port on the wrong link layer was configured so: set the port type "
              "with mlxconfig (LINK_TYPE_P1=1 for InfiniBand, 2 for Ethernet) and reboot, "
              "or fix the profile if this cluster's compute fabric is RoCE.",
       actions=(Action.FIX_CONFIG,))
def link_layer(ctx: CheckContext) -> Iterator[Finding]:
    """Every compute port runs the platform's link layer (InfiniBand on DGX/GB200)."""
    expected = ctx.profile.hca_link_layer
    if expected is None:
        yield Finding.skip(NODE, "profile states no link layer")
        return
    ports = list(compute_ports(ctx))
    for dev, port in ports:
        comp = port_component(dev, port)
        if port.link_layer is None:
            yield unknown_finding(comp, "link layer", port.unknown.get("link_layer"))
        elif port.link_layer != expected:
            yield Finding.fail(comp, f"compute port runs {port.link_layer}", port.link_layer,
                               expected, Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, "link layer as expected", port.link_layer)
    if not ports:
        yield no_compute(ctx)


# -- ib.subnet_manager ------------------------------------------------------------------


@check("ib.subnet_manager", needs=("infiniband",),
       remedy="LID 0 or SM LID 0 means no subnet manager configured the port: check that "
              "opensm/UFM runs for this rail's subnet (sminfo, the UFM console) and that the "
              "switch port is in the right partition.",
       actions=(Action.INVESTIGATE,))
def subnet_manager(ctx: CheckContext) -> Iterator[Finding]:
    """Every linked InfiniBand compute port has a LID and sees a subnet manager."""
    judged = False
    for dev, port in compute_ports(ctx):
        comp = port_component(dev, port)
        if port.link_layer != "InfiniBand":
            continue
        judged = True
        if port.phys_state != "LinkUp" or port.state not in _LINKED:
            yield Finding.skip(comp, "no physical link (see ib.port_state)")
        elif port.lid is None or port.sm_lid is None:
            what = "LID" if port.lid is None else "SM LID"
            yield unknown_finding(comp, what, port.unknown.get("lid") or port.unknown.get("sm_lid"))
        elif port.lid == 0 or port.sm_lid == 0:
            yield Finding.fail(comp, "no subnet manager: LID or SM LID not assigned",
                               {"lid": port.lid, "sm_lid": port.sm_lid, "state": port.state},
                               "non-zero LID and SM LID")
        else:
            yield Finding.passed(comp, "LID and SM LID assigned",
                                 {"lid": port.lid, "sm_lid": port.sm_lid})
    if not judged:
        yield Finding.skip(NODE, "no InfiniBand compute port") if devices(ctx) \
            else no_compute(ctx)


# -- ib.pcie_link -----------------------------------------------------------------------


def _pcie(dev: IbDevice, gen: int | None, width: int | None) -> Finding:
    speed = GEN_GTS.get(gen) if gen else None
    if (speed and dev.pcie_speed_gts is None) or (width and dev.pcie_width is None):
        missing = "current_link_speed" if dev.pcie_speed_gts is None else "current_link_width"
        return unknown_finding(dev.name, "NIC PCIe link", dev.unknown.get(missing))
    observed = {"speed_gts": dev.pcie_speed_gts, "width": dev.pcie_width,
                "max_speed_gts": dev.pcie_max_speed_gts, "max_width": dev.pcie_max_width}
    expected = {"speed_gts": speed, "width": width}
    slow = speed is not None and (dev.pcie_speed_gts or 0) < speed
    narrow = width is not None and (dev.pcie_width or 0) < width
    if slow or narrow:
        what = "width" if narrow else "speed"
        return Finding.fail(dev.name, f"NIC PCIe link below the platform's {what}", observed,
                            expected, Action.INVESTIGATE)
    return Finding.passed(dev.name, "NIC PCIe link as expected", observed, expected)


@check("ib.pcie_link", needs=("infiniband",),
       remedy="A NIC that trained its PCIe link down (NICs do not drop speed when idle) "
              "cannot feed its port: reseat the card or riser, check the slot and BIOS "
              "bifurcation settings, and look for AER errors (host.pcie_aer).",
       actions=(Action.INVESTIGATE,))
def pcie_link(ctx: CheckContext) -> Iterator[Finding]:
    """Every compute NIC's PCIe link runs at the platform's generation and width."""
    gen, width = ctx.profile.nic_pcie_gen, ctx.profile.nic_pcie_width
    if gen is None and width is None:
        yield Finding.skip(NODE, "profile states no NIC PCIe link")
        return
    compute = [d for d in devices(ctx) if d.role == "compute"]
    for dev in compute:
        if dev.pci_bdf is None:
            yield unknown_finding(dev.name, "NIC PCIe link", dev.unknown.get("pci_bdf"))
        else:
            yield _pcie(dev, gen, width)
    if not compute:
        yield no_compute(ctx)


# -- ib.firmware ------------------------------------------------------------------------


@check("ib.firmware", needs=("infiniband",), params={"expected": {}},
       remedy="Bring every HCA of one model to the same firmware (mlxfwmanager or the "
              "vendor's bundle), then reboot or reset the device. Pin versions in config "
              "(checks: {ib.firmware: {expected: {MT4129: 28.41.1000}}}) to make a "
              "mismatch fail.",
       actions=(Action.FIX_CONFIG,))
def firmware(ctx: CheckContext) -> Iterator[Finding]:
    """HCAs of one model run one firmware version on this node (and the pinned one)."""
    pinned = {str(k): str(v) for k, v in (ctx.params.get("expected") or {}).items()}
    by_type: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for dev in devices(ctx):
        if dev.fw_ver is None:
            yield unknown_finding(dev.name, "firmware version", dev.unknown.get("fw_ver"))
            continue
        by_type[dev.hca_type or "unknown type"][dev.fw_ver].append(dev.name)
    for hca_type, versions in sorted(by_type.items()):
        majority = max(versions, key=lambda v: (len(versions[v]), v))
        want = pinned.get(hca_type)
        for version, names in sorted(versions.items()):
            for name in names:
                if want is not None and version != want:
                    yield Finding.fail(name, "HCA firmware is not the pinned version", version,
                                       want, Action.FIX_CONFIG)
                elif want is None and version != majority:
                    yield Finding.warn(name, "HCA firmware differs from the node's other "
                                             "HCAs of its model", version, majority,
                                       Action.FIX_CONFIG)
                else:
                    yield Finding.passed(name, "HCA firmware consistent", version)
    if not devices(ctx):
        yield no_compute(ctx)


# -- ib.kernel_errors -------------------------------------------------------------------

# (event kind, status, message, action)
_KERNEL_RULES = {
    "mlx5_health": (Status.FAIL, "mlx5 health error in the kernel log", Action.REBOOT),
    "pcie_slot_power": (Status.FAIL, "PCIe slot power fault in the kernel log",
                        Action.INVESTIGATE),
    "module_temperature": (Status.WARN, "NIC module high temperature in the kernel log",
                           Action.INVESTIGATE),
}


@check("ib.kernel_errors", needs=("kernel_log",), params={"window_s": 7200},
       remedy="mlx5 health errors (fatal syndromes, lost heartbeat, recovery flows) mean the "
              "NIC firmware failed: read `dmesg | grep mlx5`, collect `mlxdump`/sysinfo and "
              "reboot; repeats need an RMA. Slot power faults: check the riser and PSU. High "
              "module temperature: check airflow and the transceiver.",
       actions=(Action.REBOOT, Action.INVESTIGATE))
def kernel_errors(ctx: CheckContext) -> Iterator[Finding]:
    """No mlx5 health, slot-power or NIC module-temperature errors within ``window_s``."""
    log = ctx.snapshot.kernel_log
    if log is None:
        yield Finding.error(NODE, "kernel log was not collected")
        return
    if log.unknown and not log.lines_read:
        yield Finding(Status.ERROR, NODE, "kernel log unreadable", observed=dict(log.unknown),
                      action=Action.INVESTIGATE)
        return
    names = {d.pci_bdf: d.name for d in devices(ctx) if d.pci_bdf}
    since = ctx.now - float(ctx.params["window_s"])
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for event in log.events:
        if event.kind not in _KERNEL_RULES or (event.time is not None and event.time < since):
            continue
        where = names.get(event.device or "", event.device or NODE)
        grouped[(where, event.kind)].append(event.raw)
    for (where, kind), raws in sorted(grouped.items()):
        status, message, action = _KERNEL_RULES[kind]
        yield Finding(status, where, message, {"count": len(raws), "last": raws[-1][:200]},
                      "none", action)
    if not grouped:
        yield Finding.passed(NODE, "no mlx5 health, slot power or module temperature errors")
