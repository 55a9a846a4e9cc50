"""A simulated ConnectX function's Vital Product Data (state/ib.py ``SimVpd``) encoded in
the binary format the kernel's ``/sys/bus/pci/devices/<bdf>/vpd`` gives (PCI Local Bus
spec §6.4, include/linux/pci.h).

The keywords and the ``VA`` layout are a real ConnectX-7's as ``lspci -vv`` prints them
(linux-pci thread "PCI/sysfs: Fix read permissions for VPD attributes", 2024-11: PN, EC,
V2, SN, V3, ``VA: MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX713106A``, V0, VU, RV). The
NVSwitch management functions of an HGX B200 add ``SMDL=SW_MNG`` to VA (Fabric Manager
user guide); where in VA it sits is not documented: here before MODL, as a public test
fixture writes it (unverified).
"""

from __future__ import annotations

from ..state.ib import SimVpd

_ID_STRING, _READ_ONLY, _END = 0x82, 0x90, 0x78


def _large(tag: int, body: bytes) -> bytes:
    return bytes([tag]) + len(body).to_bytes(2, "little") + body


def _field(keyword: str, value: bytes) -> bytes:
    return keyword.encode("ascii") + bytes([len(value)]) + value


def encode_vpd(vpd: SimVpd) -> bytes:
    """The VPD of one function: identifier string, VPD-R closed by its checksum, end."""
    smdl = "SMDL=SW_MNG:" if vpd.manages_nvswitch else ""
    fields = b"".join(_field(k, v.encode("ascii")) for k, v in (
        ("PN", vpd.part), ("EC", "A7"), ("V2", vpd.part), ("SN", vpd.serial), ("V3", vpd.uuid),
        ("VA", f"MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:{smdl}MODL={vpd.model}"),
        ("V0", "PCIeGen5 x16"), ("VU", f"{vpd.serial}MLNXS0D0F0")))
    head = _large(_ID_STRING, vpd.product.encode("ascii"))
    # RV: one checksum byte making every byte from the start through it sum to zero.
    body = fields + b"RV\x01"
    partial = head + bytes([_READ_ONLY]) + (len(body) + 1).to_bytes(2, "little") + body
    checksum = (-sum(partial)) % 256
    return partial + bytes([checksum, _END])
