"""A PCIe bridge's ACS Control register, read from its config space in sysfs.

The register sits in the ACS extended capability, found by walking the extended
capability list from offset 0x100: each header holds the capability's ID and the next
one's offset, a header of 0 ending the list (Linux include/uapi/linux/pci_regs.h:
``PCI_CFG_SPACE_SIZE`` 256, ``PCI_EXT_CAP_ID(header)`` ``header & 0x0000ffff``,
``PCI_EXT_CAP_NEXT(header)`` ``(header >> 20) & 0xffc``, ``PCI_EXT_CAP_ID_ACS`` 0x0d,
``PCI_ACS_CTRL`` 0x06; drivers/pci/pci.c ``pci_find_next_ext_capability``). Each hop is
one ``pread`` of the header and the two registers after it, never the whole 4 KiB: on a
real bridge every dword the kernel returns is a config cycle (drivers/pci/pci-sysfs.c
``pci_read_config`` reads dword by dword), and the prolog reads each bridge above every
GPU and NIC for every job.

An unprivileged read of ``config`` returns only its first 64 bytes (``pci_read_config``:
the whole ``cfg_size`` only to CAP_SYS_ADMIN, else 64 bytes), so the extended list is
simply absent then: said as such, not as a bridge without the capability.
"""

from __future__ import annotations

import os

from ..base.safefile import open_regular_fd

TYPE_CHECKING = False  # typing and pathlib stay off the prolog's path (test_prolog_imports)
if TYPE_CHECKING:
    from pathlib import Path

EXTENDED_START = 0x100
ACS_CAPABILITY = 0x000D
NEEDS_ROOT = "extended config space not readable (needs root)"
# A list longer than this is a loop or garbage, never a device's.
_MAX_HOPS = 64


def read_acs_ctrl(config: str | Path, unknown: dict[str, str]) -> int | None:
    """The ACS Control register of the function whose ``config`` this is; None where it
    has no ACS capability, or where it could not be read (the reason in ``unknown["acs"]``)."""
    try:
        fd = open_regular_fd(config, follow=True)
    except OSError as exc:
        unknown["acs"] = exc.strerror or "unreadable"
        return None
    try:
        return _walk(fd, os.fstat(fd).st_size, unknown)
    except OSError as exc:
        unknown["acs"] = exc.strerror or "unreadable"
        return None
    finally:
        os.close(fd)


def _walk(fd: int, size: int, unknown: dict[str, str]) -> int | None:
    offset = EXTENDED_START
    for _ in range(_MAX_HOPS):
        # The header, then the capability's first two 16-bit registers (for ACS: its
        # Capability and Control registers, PCI_ACS_CAP at +4 and PCI_ACS_CTRL at +6).
        chunk = os.pread(fd, 8, offset)
        if offset == EXTENDED_START and not chunk:
            unknown["acs"] = NEEDS_ROOT
            return None
        header = int.from_bytes(chunk[:4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAPABILITY:
            return int.from_bytes(chunk[6:8], "little")
        offset = (header >> 20) & 0xFFC
        if offset < EXTENDED_START or offset + 8 > size:
            return None
    return None
