"""The InfiniBand/RoCE source: every device in /sys/class/infiniband and its ports, as facts.

Roles (compute rail, storage, management) are not decided here: checks/core/rails.py
decides them when judging, from these facts and the profile, so a snapshot re-judged
under another profile re-derives them. What the collector records for that: each port's
link layer, the PCIe hops to every GPU the device shares a bridge with, model, GUID and
names.

Ethernet (RoCE) ports also get their GID table, ECN settings and, on compute rails, PFC
and trust from the tools (collectors/roce.py).

Counters are read, where the caller wants them (``SourceEnv.counters``), for every device
but the BlueField DPUs and those config names storage or management: on DGX/GB200-class
systems reading the PMA counters of a firmware-restricted function makes mlx5 send
ACCESS_REG commands that fail and flood the kernel log
(node_exporter#3434, gpud#1164; gpud infiniband/kmsg_matcher.go).

PHY health (pre-/post-FEC BER, FEC corrections, module temperature, voltage and optical
power, as ``mlxlink -d <pci> -c -e -m`` and ``ethtool -m <netdev>`` print them) is not
read yet: its parser waits for real captures of those tools. Its place, when it comes:
a collector module ``ib_phy.py`` that runs the tools through the command runner
(``SourceEnv.run``, with its own deadline), called for compute ports from the agent's
collection only (``agent/daemon/cycle.collect``) — never from the prolog, since
``mlxlink`` takes seconds per port and sends firmware register reads (the ACCESS_REG
side effect above) — storing the readings as facts under a new ``IbPort`` field; an
``ib.phy`` check would judge them and skip with the reason where they were not read.
"""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

from ..model import SourceStats
from ..model.ib import DPU_TYPES, IbDevice, nvswitch_management
from ..model.pci import NVIDIA_VENDOR
from ..read.sources import SourceEnv
from ..read.sysfs import (
    FileCounter,
    bdf_path,
    link_target,
    list_present,
    parse_int,
    read_int,
    read_text,
    under,
)
from .ib_port import read_port
from .kept import kept
from .roce import read_all_qos
from .vpd import read_vpds, vpd_path

# VPD reads (collectors/vpd.py) get at most this long, so a wedged function leaves the
# ports their time.
_VPD_BUDGET_S = 1.0

_DEVICE_FILES = ("fw_ver", "node_guid", "sys_image_guid", "hca_type", "board_id", "node_desc")
_GPU_CLASSES = (0x0300, 0x0302)
# "Optional" device files: absent on some drivers (hfi1 has no hca_type), not a fault.
_OPTIONAL = frozenset({"hca_type", "node_desc", "sys_image_guid"})


def _resolved(path: str) -> str:
    """``realpath`` of a sysfs link by one readlink, where ``realpath`` costs an lstat per
    component: the link's directory is real (a class or bus directory, or one already
    resolved) and /sys/devices, where it leads, holds no links. Not a link (a captured
    tree's plain directory): the long way."""
    try:
        return os.path.normpath(os.path.join(os.path.dirname(path), link_target(path)))
    except OSError:
        return os.path.realpath(path)


def pci_path(device_link: str) -> tuple[str, ...]:
    """The bdfs along the resolved ``device`` link, root port first; () when unresolved.
    The class entry (``/sys/class/infiniband/mlx5_0``) is a link itself, so it is resolved
    first and ``device`` from there."""
    if not os.path.exists(device_link):
        return ()
    parent, name = os.path.split(device_link)
    return tuple(bdf_path(_resolved(os.path.join(_resolved(parent), name))))


def _gpu_path(base: str, counter: FileCounter) -> tuple[str, ...] | None:
    """The PCI path of the function at ``base`` if it is an NVIDIA GPU, else None."""
    vendor, _ = read_int(f"{base}/vendor", counter, 16)
    if vendor != NVIDIA_VENDOR:
        return None
    pci_class, _ = read_int(f"{base}/class", counter, 16)
    if pci_class is None or (pci_class >> 8) not in _GPU_CLASSES:
        return None
    return tuple(bdf_path(_resolved(base)))


def gpu_paths(root: Path, counter: FileCounter) -> list[tuple[str, ...]]:
    """PCI paths of the NVIDIA GPUs (class 0x0300/0x0302) under ``root``; what each
    function is, and where, is fixed while it exists (collectors/kept.py)."""
    devices = str(under(root, "/sys/bus/pci/devices"))
    found = (kept("ib.gpu", f"{devices}/{bdf}", partial(_gpu_path, f"{devices}/{bdf}", counter))
             for bdf in list_present(devices))
    return [path for path in found if path is not None]


def _speed_gts(text: str | None) -> float | None:
    try:
        return float(text.split()[0]) if text else None
    except ValueError:
        return None


def _read_link(dev: IbDevice, device_dir: str, counter: FileCounter, speed: tuple[str, str],
               width: tuple[str, str]) -> None:
    """A PCIe link speed and width of the device's PCI function (generic PCI sysfs):
    ``(attribute, file)`` each, the current or the capable one."""
    attr, name = speed
    text, reason = read_text(f"{device_dir}/{name}", counter)
    value = _speed_gts(text)
    if value is None:
        dev.unknown[name] = reason or f"garbage {(text or '')[:40]!r}"
    setattr(dev, attr, value)
    attr, name = width
    number, reason = read_int(f"{device_dir}/{name}", counter, 10)
    if number is None:
        dev.unknown[name] = reason or "unreadable"
    setattr(dev, attr, number)


# What read_device reads that is fixed while the device exists (collectors/kept.py keeps
# it in the agent): its identity files, its PCI function, NUMA node and link capability.
_FIXED = (*_DEVICE_FILES, "pci_bdf", "numa_node", "pcie_max_speed_gts", "pcie_max_width")
Fixed = tuple[tuple[tuple[str, object], ...], tuple[tuple[str, str], ...], tuple[str, ...]]


def _read_fixed(base: str, counter: FileCounter) -> Fixed:
    """(attribute, value) of each of ``_FIXED``, what could not be read, the PCI path."""
    dev = IbDevice(name=os.path.basename(base))
    for name in _DEVICE_FILES:
        text, reason = read_text(f"{base}/{name}", counter)
        if text is None and not (name in _OPTIONAL and reason == "missing"):
            dev.unknown[name] = reason or "unreadable"
        setattr(dev, name, text or None)
    path = pci_path(f"{base}/device")
    if path:
        dev.pci_bdf = path[-1].lower()
        dev.numa_node, _ = read_int(f"{base}/device/numa_node", counter, 10)
        _read_link(dev, f"{base}/device", counter, ("pcie_max_speed_gts", "max_link_speed"),
                   ("pcie_max_width", "max_link_width"))
    else:
        dev.unknown["pci_bdf"] = "no device link to a PCI function"
    return tuple((f, getattr(dev, f)) for f in _FIXED), tuple(dev.unknown.items()), path


def read_device(base: str, counter: FileCounter) -> tuple[IbDevice, tuple[str, ...]]:
    """Identity and PCI facts of one device (no ports yet) and its PCI path. Paths are
    plain strings here and in ib_port: a Path per file cost about as much as reading it."""
    values, unknown, path = kept("ib.device", base, partial(_read_fixed, base, counter),
                                 lambda fixed: not fixed[1])
    dev = IbDevice(name=os.path.basename(base))
    for attr, value in values:
        setattr(dev, attr, value)
    dev.unknown.update(unknown)
    if path:
        _read_link(dev, f"{base}/device", counter, ("pcie_speed_gts", "current_link_speed"),
                   ("pcie_width", "current_link_width"))
    return dev, path


def _port_numbers(base: str, dev: IbDevice) -> list[int]:
    numbers = []
    for name in list_present(f"{base}/ports"):
        value, _ = parse_int(name, 10)
        if value is None:
            dev.unknown[f"ports/{name}"] = "not a port number"
        else:
            numbers.append(value)
    return sorted(numbers)


def _wanted(env: SourceEnv, key: str) -> list[str]:
    value = env.wants("ib.hca_count", key, [])
    return [str(v) for v in value] if isinstance(value, list) else []


def gpu_hops(path: tuple[str, ...], gpus: list[tuple[str, ...]]) -> dict[str, int]:
    """PCIe hops from the function at the end of ``path`` to each GPU it shares a bridge
    with, through their deepest shared bridge (a fact about the tree, not a role)."""
    hops = {}
    for gpu in gpus:
        shared = 0
        while shared < min(len(path), len(gpu)) - 1 and path[shared] == gpu[shared]:
            shared += 1
        if shared:
            hops[gpu[-1]] = (len(path) - shared) + (len(gpu) - shared)
    return hops


def _named(dev: IbDevice, names: list[str]) -> bool:
    guid = (dev.node_guid or "").lower().replace(":", "")
    return dev.name in names or bool(
        guid and guid in {n.lower().replace(":", "").removeprefix("0x") for n in names})


def _skip_counters(dev: IbDevice, env: SourceEnv) -> bool:
    """Whether not to read the device's counters: a BlueField DPU's firmware-restricted
    functions (and the limited functions that manage a B200's NVSwitches) answer PMA
    reads with failing ACCESS_REG commands that flood the kernel log, and config may keep
    a port out (named storage or management, or not among the
    compute_hcas it lists)."""
    if dev.hca_type in DPU_TYPES or nvswitch_management(dev):
        return True
    if _named(dev, [*_wanted(env, "storage_hcas"), *_wanted(env, "management_hcas")]):
        return True
    compute = _wanted(env, "compute_hcas")
    return bool(compute) and not _named(dev, compute)


def _read_vpd(found: list[tuple[IbDevice, str]], deadline: float) -> None:
    """Each device's VPD keywords, or why they could not be read (collectors/vpd.py)."""
    paths = {dev.name: vpd_path(f"{base}/device") for dev, base in found if dev.pci_bdf}
    read = read_vpds(list(paths.values()), min(deadline, time.monotonic() + _VPD_BUDGET_S))
    for dev, _ in found:
        value = read.get(paths.get(dev.name, ""))
        if isinstance(value, dict):
            dev.vpd = dict(value)
        elif value is not None:
            dev.unknown["vpd"] = value


def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> list[IbDevice]:
    counter = FileCounter()
    class_dir = str(under(env.root, "/sys/class/infiniband"))
    found: list[tuple[IbDevice, str, tuple[str, ...]]] = []
    for name in list_present(class_dir):
        dev, path = read_device(f"{class_dir}/{name}", counter)
        found.append((dev, f"{class_dir}/{name}", path))
    if not found:
        stats.files_read += counter.count
        return []
    gpus = gpu_paths(env.root, counter)
    _read_vpd([(dev, base) for dev, base, _ in found], deadline)
    devices = []
    tools: dict[str, bool] = {}  # by netdev: a bond's ports share one
    read_tools = bool(env.wants("roce.pfc", "read_tools", True))
    net_dir = str(under(env.root, "/sys/class/net"))
    for dev, base, path in found:
        dev.gpu_hops = gpu_hops(path, gpus) if path else {}
        dev.excluded = _skip_counters(dev, env)
        if time.monotonic() > deadline:
            dev.unknown["ports"] = "not read: the source's deadline passed"
        else:
            dev.ports = [read_port(net_dir, base, n, env.counters and not dev.excluded,
                                   counter, on_pci=bool(path))
                         for n in _port_numbers(base, dev)]
        for port in dev.ports:
            if port.link_layer == "Ethernet" and port.netdev is not None:
                tools.setdefault(port.netdev, read_tools and not dev.excluded)
        devices.append(dev)
    qos = read_all_qos(env, tools, counter, deadline)
    for dev in devices:
        for port in dev.ports:
            if port.netdev in qos and port.link_layer == "Ethernet":
                port.qos = qos[port.netdev]
    stats.files_read += counter.count
    stats.calls += len(devices)
    return devices
