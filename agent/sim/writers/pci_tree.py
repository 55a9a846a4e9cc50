"""Simulated PCI devices as the kernel lays them out: real directories under
/sys/devices for each hop of the chain (root port, switch ports, device) and a
/sys/bus/pci/devices symlink for each, so parent chains resolve as on a real node.
"""

from __future__ import annotations

import os
from pathlib import Path

_BRIDGE_CLASS = "0x060400"
# The one ACS extended capability written at 0x100 of each bridge's config space: its
# Control register (writers/nccl.py sets it where a fault redirects).
ACS_CTRL_OFFSET = 0x106
_GEN_SPEED = {3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}


def write_text(path: Path, text: str) -> None:
    """Write a file of the simulated tree, making its directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class PciTree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.devices = root / "sys/bus/pci/devices"
        self.devices.mkdir(parents=True, exist_ok=True)

    def add(self, chain: list[str], bdf: str, vendor: str, device: str, pci_class: str,
            numa: int, cpulist: str, gen: int, width: int, driver: str | None,
            max_gen: int | None = None, max_width: int | None = None) -> Path:
        domain = bdf.split(":")[0]
        host = self.root / "sys/devices" / f"pci{domain}:{chain[0].split(':')[1]}"
        path = host
        for hop in [*chain, bdf]:
            path = path / hop
            if hop != bdf and not (path / "vendor").exists():
                # The switch ports keep the slot's full link whatever the device trained to.
                self._fill(path, "0x10b5" if hop != chain[0] else "0x8086", "0xc030",
                           _BRIDGE_CLASS, numa, cpulist, max_gen or gen, max_width or width,
                           "pcieport")
                self._link(hop, path)
        self._fill(path, vendor, device, pci_class, numa, cpulist, gen, width, driver,
                   max_gen, max_width)
        self._link(bdf, path)
        return path

    def _link(self, bdf: str, path: Path) -> None:
        link = self.devices / bdf
        if not link.exists():
            os.symlink(os.path.relpath(path, self.devices), link)

    def _fill(self, path: Path, vendor: str, device: str, pci_class: str, numa: int,
              cpulist: str, gen: int, width: int, driver: str | None,
              max_gen: int | None = None, max_width: int | None = None) -> None:
        files = {"vendor": vendor, "device": device, "class": pci_class,
                 "numa_node": str(numa), "local_cpulist": cpulist,
                 "current_link_speed": _GEN_SPEED.get(gen, "Unknown"),
                 "current_link_width": str(width),
                 "max_link_speed": _GEN_SPEED.get(max_gen or gen, "Unknown"),
                 "max_link_width": str(max_width or width),
                 "aer_dev_correctable": "RxErr 0\nBadTLP 0\nBadDLLP 0\nTOTAL_ERR_COR 0\n",
                 "aer_dev_nonfatal": "Undefined 0\nCmpltTO 0\nTOTAL_ERR_NONFATAL 0\n",
                 "aer_dev_fatal": "Undefined 0\nSurpriseDown 0\nTOTAL_ERR_FATAL 0\n"}
        for name, text in files.items():
            write_text(path / name, text + ("\n" if not text.endswith("\n") else ""))
        if pci_class == _BRIDGE_CLASS:
            _write_config(path / "config", acs_ctrl=0)
        if driver:
            target = self.root / "sys/bus/pci/drivers" / driver
            target.mkdir(parents=True, exist_ok=True)
            if not (path / "driver").exists():
                os.symlink(os.path.relpath(target, path), path / "driver")


def _write_config(path: Path, acs_ctrl: int) -> None:
    """4 KiB of config space with one ACS extended capability at 0x100."""
    data = bytearray(4096)
    data[0:4] = (0x10B5 | 0xC030 << 16).to_bytes(4, "little")
    data[0x100:0x104] = (0x000D | 1 << 16 | 0 << 20).to_bytes(4, "little")
    data[0x104:0x106] = (0x5F).to_bytes(2, "little")  # capabilities
    data[ACS_CTRL_OFFSET:ACS_CTRL_OFFSET + 2] = acs_ctrl.to_bytes(2, "little")
    path.write_bytes(bytes(data))
