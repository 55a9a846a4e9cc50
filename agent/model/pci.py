"""PCI devices as sysfs shows them: the ground truth a driver cannot hide."""

from __future__ import annotations

from dataclasses import dataclass, field

NVIDIA_VENDOR = 0x10DE
MELLANOX_VENDOR = 0x15B3


@dataclass
class PciDevice:
    bdf: str  # 0000:3b:00.0, lower case
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
