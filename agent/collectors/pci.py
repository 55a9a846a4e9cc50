"""The PCI tree from sysfs: which GPUs, NVSwitches and NICs the bus shows, and where.

PCI is the ground truth a failed driver cannot hide: a GPU the driver did not
initialise is still on the bus. Only devices of the vendors and classes clusterdiag
judges are kept (NVIDIA, Mellanox/NVIDIA networking, and the bridges above them), so a
snapshot stays small on machines with hundreds of functions.
"""

from __future__ import annotations

import contextlib
import os
import time
from functools import partial
from pathlib import Path
from typing import NamedTuple

from ..model.pci import MELLANOX_VENDOR, NVIDIA_VENDOR, PciDevice, normalize_bdf
from ..model.snapshot import SourceStats
from ..read.pci_config import read_acs_ctrl
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
from .kept import kept

_KEEP_VENDORS = (NVIDIA_VENDOR, MELLANOX_VENDOR)
_AER_FILES = {"correctable": "aer_dev_correctable", "nonfatal": "aer_dev_nonfatal",
              "fatal": "aer_dev_fatal"}


def link_speed_gts(text: str | None) -> float | None:
    """A ``*_link_speed`` file's rate in GT/s: "16.0 GT/s PCIe", "32 GT/s"; None for
    "Unknown" (or "Unknown speed", as older kernels wrote it)."""
    if not text:
        return None
    try:
        return float(text.split()[0])
    except ValueError:
        return None


def parse_aer(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            value, _ = parse_int(parts[1], 10)
            if value is not None:
                counts[parts[0]] = value
    return counts


Read = tuple[int | None, str | None]


class Fixed(NamedTuple):
    """A function's attributes fixed while it exists (collectors/kept.py: the agent reads
    them once), and why its vendor or path could not be read."""

    vendor: int | None
    vendor_why: str | None
    device: int | None
    pci_class: int | None
    numa_node: int | None
    max_link_speed_gts: float | None
    max_link_width: int | None
    local_cpulist: str | None
    path: tuple[str, ...] | None
    path_why: str | None


def _read_fixed(base: str, counter: FileCounter, vendor_read: Read | None) -> Fixed:
    vendor, why = vendor_read or read_int(f"{base}/vendor", counter, 16)
    try:
        path: tuple[str, ...] | None = tuple(
            normalize_bdf(p) or p for p in bdf_path(link_target(base)))
        path_why = None
    except OSError as exc:
        path, path_why = None, str(exc)
    speed, _ = read_text(f"{base}/max_link_speed", counter)
    return Fixed(vendor, why, read_int(f"{base}/device", counter, 16)[0],
                 read_int(f"{base}/class", counter, 16)[0],
                 read_int(f"{base}/numa_node", counter, 10)[0], link_speed_gts(speed),
                 read_int(f"{base}/max_link_width", counter, 10)[0],
                 read_text(f"{base}/local_cpulist", counter)[0], path, path_why)


def _whole(fixed: Fixed) -> bool:
    return fixed.vendor is not None and fixed.path is not None


def read_device(root: Path, bdf: str, counter: FileCounter, with_config: bool,
                with_aer: bool = True, vendor_read: Read | None = None) -> PciDevice:
    """One device; ``vendor_read`` is its ``vendor`` file as the caller already read it
    (the listing reads every device's to pick the ones judged), so it is read once."""
    base = f"{under(root, '/sys/bus/pci/devices')}/{bdf}"
    unknown: dict[str, str] = {}
    fixed = kept("pci", base, lambda: _read_fixed(base, counter, vendor_read), _whole)
    # The kernel names devices as pci_address writes them; normalised all the same, so
    # the checks can match NVML's, the log's and sysfs's addresses as they stand.
    dev = PciDevice(bdf=normalize_bdf(bdf) or bdf, vendor=fixed.vendor or 0,
                    device=fixed.device or 0, pci_class=fixed.pci_class or 0)
    if fixed.vendor is None:
        unknown["vendor"] = fixed.vendor_why or "unreadable"
    if fixed.path is None:
        unknown["path"] = fixed.path_why or "unreadable"
    else:
        dev.path = list(fixed.path)
    with contextlib.suppress(OSError):  # no driver bound: no link
        dev.driver = os.path.basename(link_target(f"{base}/driver"))
    dev.numa_node, dev.local_cpulist = fixed.numa_node, fixed.local_cpulist
    dev.max_link_speed_gts, dev.max_link_width = fixed.max_link_speed_gts, fixed.max_link_width
    text, _ = read_text(f"{base}/current_link_speed", counter)
    dev.current_link_speed_gts = link_speed_gts(text)
    dev.current_link_width, _ = read_int(f"{base}/current_link_width", counter, 10)
    if with_aer:  # counters: only where rates or facts read them (SourceEnv.counters)
        for kind, name in _AER_FILES.items():
            text, reason = read_text(f"{base}/{name}", counter)
            if text is not None:
                dev.aer[kind] = parse_aer(text)
            elif reason not in ("missing", None):
                unknown[f"aer.{kind}"] = reason
    if with_config:
        dev.acs_ctrl = read_acs_ctrl(f"{base}/config", unknown)
    dev.unknown = unknown
    return dev


def read_topology(root: Path, bdf: str, counter: FileCounter, vendor_read: Read,
                  with_config: bool) -> PciDevice:
    """One device as the PCIe path checks read it (``SourceEnv.pci_topology_only``): its
    vendor (as the listing read it) and, for a device judged, its class and the bridges
    above it; for a bridge, its ACS control. Three of the ~ten files ``read_device``
    reads; every other field left at its default."""
    base = f"{under(root, '/sys/bus/pci/devices')}/{bdf}"
    vendor, why = vendor_read
    unknown: dict[str, str] = {}
    if vendor is None:
        unknown["vendor"] = why or "unreadable"
    dev = PciDevice(bdf=normalize_bdf(bdf) or bdf, vendor=vendor or 0, device=0, pci_class=0)
    if with_config:
        dev.acs_ctrl = read_acs_ctrl(f"{base}/config", unknown)
    else:
        dev.pci_class = read_int(f"{base}/class", counter, 16)[0] or 0
        try:
            dev.path = [normalize_bdf(p) or p for p in bdf_path(link_target(base))]
        except OSError as exc:
            unknown["path"] = str(exc)
    dev.unknown = unknown
    return dev


def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> list[PciDevice]:
    """The devices judged and the bridges above them: each whole, or (where
    ``env.pci_topology_only``) as ``read_topology`` reads it."""
    counter = FileCounter()
    devices_dir = under(env.root, "/sys/bus/pci/devices")
    wanted: dict[str, PciDevice] = {}
    bridges: set[str] = set()
    vendors: dict[str, Read] = {}
    for bdf in list_present(devices_dir):
        if time.monotonic() > deadline:
            # Judged as the whole bus, part of it would read as GPUs gone: the source
            # is our deadline's, not the node's (the runner drops a timed-out source).
            stats.status, stats.error = "timeout", "the PCI listing was not read by the deadline"
            return []
        base = f"{devices_dir}/{bdf}"
        vendor, why = kept("pci.vendor", base, partial(read_int, f"{base}/vendor", counter, 16),
                           lambda read: read[0] is not None)
        # A device whose vendor cannot be read may be one we judge: kept, with the reason
        # in its unknown. One whose files are gone was unplugged after the listing.
        vendors[bdf] = vendor, why
        if vendor not in _KEEP_VENDORS and (vendor is not None or why == "missing"):
            continue
        if env.pci_topology_only:
            dev = read_topology(env.root, bdf, counter, (vendor, why), with_config=False)
        else:
            dev = read_device(env.root, bdf, counter, with_config=False,
                              with_aer=env.counters, vendor_read=(vendor, why))
        wanted[bdf] = dev
        bridges.update(b for b in dev.path[:-1])
    for bdf in sorted(bridges - set(wanted)):
        if env.pci_topology_only:
            base = f"{devices_dir}/{bdf}"
            vendor_read = vendors.get(bdf) or read_int(f"{base}/vendor", counter, 16)
            wanted[bdf] = read_topology(env.root, bdf, counter, vendor_read, with_config=True)
            if env.acs_read is not None:
                env.acs_read.append([f"{base}/config", wanted[bdf].acs_ctrl,
                                     wanted[bdf].unknown.get("acs")])
        else:
            wanted[bdf] = read_device(env.root, bdf, counter, with_config=True,
                                      with_aer=env.counters)
    stats.files_read += counter.count
    return [wanted[b] for b in sorted(wanted)]
