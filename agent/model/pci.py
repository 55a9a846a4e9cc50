"""PCI devices as sysfs shows them: the ground truth a driver cannot hide."""

from __future__ import annotations

import re

from .record import field, record

NVIDIA_VENDOR = 0x10DE
MELLANOX_VENDOR = 0x15B3
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
"""A PCIe generation's transfer rate per lane (GT/s), as sysfs's ``*_link_speed`` gives it."""
_GEN_BY_GTS = {gts: gen for gen, gts in GEN_GTS.items()}


def gen_from_gts(gts: float | None) -> int | None:
    """The PCIe generation whose rate is ``gts`` GT/s, or None for a rate no generation has."""
    if gts is None:
        return None
    return _GEN_BY_GTS.get(round(float(gts), 1))


@record
class PciDevice:
    """One PCI function from sysfs: identity, driver, link, and the bridges above it
    (``path``), which give the GPU-NIC affinity."""

    bdf: str  # 0000:3b:00.0, as pci_address writes it
    vendor: int
    device: int
    pci_class: int  # 24-bit class code, e.g. 0x030200 (3D controller)
    driver: str | None = None
    numa_node: int | None = None
    path: list[str] = field(default_factory=list)  # bdfs from the root port down to this device
    current_link_speed_gts: float | None = None
    current_link_width: int | None = None
    max_link_speed_gts: float | None = None
    max_link_width: int | None = None
    local_cpulist: str | None = None
    aer: dict[str, dict[str, int]] = field(default_factory=dict)  # correctable/nonfatal/fatal
    acs_ctrl: int | None = None  # ACS control register, when config space was readable
    unknown: dict[str, str] = field(default_factory=dict)

    @property
    def is_nvidia_gpu(self) -> bool:
        # 0x0300 VGA, 0x0302 3D controller; NVSwitches are 0x0680 (bridge, other).
        return self.vendor == NVIDIA_VENDOR and (self.pci_class >> 8) in (0x0300, 0x0302)

    @property
    def is_nvswitch(self) -> bool:
        return self.vendor == NVIDIA_VENDOR and (self.pci_class >> 8) == 0x0680


def unidentified(devices: list[PciDevice] | None) -> dict[str, str]:
    """bdf -> why, for the devices whose vendor could not be read: any of them may be the
    GPU or switch a count is short of, so a short count with these is not a fail."""
    return {d.bdf: d.unknown["vendor"] for d in devices or [] if "vendor" in d.unknown}


def pci_address(domain: int, bus: int, device: int, function: int = 0) -> str:
    """The one form a PCI address has in a snapshot, whoever read it: ``0000:3b:00.0``,
    lower case, the domain in 4 digits (more only where it needs them), the function
    always written. The collectors store every address in this form (``normalize_bdf``),
    so the checks match GPUs, Xid lines, NVLink peers and PCI devices by it."""
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function}"


# [domain:]bus:device[.function]: NVML's busId has an 8-digit domain, sysfs and NVML's
# legacy busId 4, lspci may omit it; Xid lines omit the function (nvml.h
# NVML_DEVICE_PCI_BUS_ID_FMT; the NVIDIA Xid catalog's and gpud's kmsg lines).
_BDF = re.compile(r"(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
                  r"(?P<device>[0-9a-fA-F]{1,2})(?:\.(?P<function>[0-7]))?")


def normalize_bdf(text: str | None) -> str | None:
    """Any printed form of a PCI address in ``pci_address``'s form, or None when ``text``
    is not one. ``00000000:1B:00.0`` (NVML), ``0000:1b:00.0`` (sysfs), ``0000:1b:00``
    (an Xid line: the GPU's function, 0) and ``1b:00.0`` (no domain: 0) are all
    ``0000:1b:00.0``."""
    m = _BDF.fullmatch(text.strip()) if text else None
    if m is None:
        return None
    return pci_address(int(m["domain"] or "0", 16), int(m["bus"], 16), int(m["device"], 16),
                       int(m["function"] or "0"))
