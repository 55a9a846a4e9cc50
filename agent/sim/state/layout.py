"""Where things sit on each simulated platform: PCI addresses, NUMA nodes, NIC pairing,
and the NVML identity strings the real parts report.

Sources: DGX H100 user guide "Network Modules" table (ibp24s0..ibp220s0 give the
compute NIC buses), GB200 PCI domains 0008/0009/0018/0019 from real XID logs (gpud tests)
and NIC domains 0000/0002/0010/0012 (Mission Control guide), DGX A100 buses from the real
A100 topo capture's ordering. Layouts without a real capture are marked provisional in
their profile.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSlot:
    bdf: str
    numa: int
    nic_bdf: str | None  # the compute NIC sharing its PCIe switch (None on NVL72: SYS)
    ibdev: str | None


@dataclass(frozen=True)
class HostLayout:
    cpu_count: int
    memory_total_kib: int
    driver: str
    cuda: int
    cpulists: tuple[str, ...]  # per NUMA node


@dataclass(frozen=True)
class Layout:
    gpu_name: str
    architecture: int  # NVML_DEVICE_ARCH_*
    memory_bytes: int
    vbios: str
    board_part: str
    inforom: str
    gpus: tuple[GpuSlot, ...]
    nvswitch_bdfs: tuple[str, ...]
    dmi_product: str
    host: HostLayout
    # PCIe switch levels between a GPU and the switch it shares with its NIC: 2 on DGX
    # A100, whose real topo shows PXB from each GPU to its NIC (NVIDIA/nccl#1505).
    gpu_switch_levels: int = 1
    # PCI device ids (pci.ids): the GPU's, and the NVSwitch's where it is a PCI function.
    gpu_device_id: int = 0x2330  # GH100 [H100 SXM5 80GB]
    nvswitch_device_id: int = 0x22A3  # H100 NVSwitch


_H100_BUSES = ((0x1B, 0x18, "mlx5_0"), (0x43, 0x40, "mlx5_3"), (0x52, 0x4F, "mlx5_4"),
               (0x61, 0x5E, "mlx5_5"), (0x9D, 0x9A, "mlx5_6"), (0xC3, 0xC0, "mlx5_9"),
               (0xD1, 0xCE, "mlx5_10"), (0xDF, 0xDC, "mlx5_11"))


def _hgx(nvswitches: int, with_nics: bool = True) -> tuple[tuple[GpuSlot, ...], tuple[str, ...]]:
    slots = tuple(GpuSlot(f"0000:{g:02x}:00.0", 0 if i < 4 else 1,
                          f"0000:{n:02x}:00.0" if with_nics else None,
                          dev if with_nics else None)
                  for i, (g, n, dev) in enumerate(_H100_BUSES))
    switches = tuple(f"0000:{0x05 + i:02x}:00.0" for i in range(nvswitches))
    return slots, switches


_GIB = 1 << 30
_H100_GPUS, _H100_SWITCHES = _hgx(4)
_A100_GPUS, _A100_SWITCHES = _hgx(6)
# HGX B200: no NVSwitch is a PCI function (its ConnectX-7 management functions are
# RDMA devices instead: _b200_bridge below).
_B200_GPUS, _ = _hgx(2)
_PCIE_GPUS, _ = _hgx(0, with_nics=False)
_NVL72_GPUS = tuple(GpuSlot(bdf, numa, None, None) for bdf, numa in (
    ("0008:01:00.0", 0), ("0009:01:00.0", 0), ("0018:01:00.0", 1), ("0019:01:00.0", 1)))

_X86 = HostLayout(224, 2_113_323_008, "590.48.01", 13010, ("0-55,112-167", "56-111,168-223"))
_GRACE = HostLayout(144, 1_009_000_000, "590.48.01", 13010, ("0-71", "72-143"))

LAYOUTS: dict[str, Layout] = {
    "dgx-h100": Layout("NVIDIA H100 80GB HBM3", 9, 80 * _GIB, "96.00.A5.00.01",
                       "692-2G520-0200-000", "G520.0200.00.05", _H100_GPUS, _H100_SWITCHES,
                       "DGXH100", _X86),
    # Identity strings and memory size as a real H200 reported them (tests/fixtures/real).
    "dgx-h200": Layout("NVIDIA H200", 9, 150_754_820_096, "96.00.A5.00.1A",
                       "692-2G520-0282-001", "G520.0282.02.02", _H100_GPUS, _H100_SWITCHES,
                       "DGXH200", _X86, gpu_device_id=0x2335),  # GH100 [H200 SXM 141GB]
    "dgx-a100": Layout("NVIDIA A100-SXM4-80GB", 7, 80 * _GIB, "92.00.45.00.06",
                       "692-2G506-0210-002", "G506.0210.00.04", _A100_GPUS, _A100_SWITCHES,
                       "DGXA100", _X86, gpu_switch_levels=2,
                       # GA100 [A100 SXM4 80GB]; GA100 [A100 NVSwitch]
                       gpu_device_id=0x20B2, nvswitch_device_id=0x1AF1),
    "dgx-b200": Layout("NVIDIA B200", 10, 180 * _GIB, "97.00.4B.00.01", "692-2G525-0220-000",
                       "G525.0220.00.03", _B200_GPUS, (),
                       "DGXB200", _X86, gpu_device_id=0x2901),  # GB100 [B200]
    "gb200-nvl72": Layout("NVIDIA GB200", 10, 186 * _GIB, "97.00.82.00.0F",
                          "692-2G548-0200-000", "G548.0201.00.06", _NVL72_GPUS, (),
                          "GB200 NVL", _GRACE,
                          gpu_device_id=0x2941),  # GB200: not checked against pci.ids
    "gb300-nvl72": Layout("NVIDIA GB300", 10, 279 * _GIB, "97.10.2A.00.01",
                          "692-2G558-0200-000", "G558.0200.00.01", _NVL72_GPUS, (),
                          "GB300 NVL", _GRACE,
                          gpu_device_id=0x31C2),  # GB300: not checked against pci.ids
    "hgx-h100-pcie": Layout("NVIDIA H100 PCIe", 9, 80 * _GIB, "96.00.30.00.01",
                            "900-21010-0000-000", "G520.0210.00.03", _PCIE_GPUS, (),
                            "SYS-421GE-TNRT", _X86, gpu_device_id=0x2331),  # H100 PCIe
    # Eight H100 NVL cards in the PCIe server's slots, bridged in pairs (GPU0-1, 2-3, ...:
    # neighbouring slots, as the bridges span them). Board part 900-21010-0020-000 and the
    # VBIOS/InfoROM strings are the PCIe card's pattern, not a capture: provisional.
    "h100-nvl": Layout("NVIDIA H100 NVL", 9, 94 * _GIB, "96.00.99.00.01",
                       "900-21010-0020-000", "G520.0200.00.05", _PCIE_GPUS, (),
                       "SYS-421GE-TNRT", _X86, gpu_device_id=0x2321),  # GH100 [H100 NVL]
    # An OEM HGX B300 server (no DGX chassis name; DMI's common placeholder): the
    # B200 board's GPU places, no NVSwitch on PCI (how the host sees them is unpublished).
    "hgx-b300-8gpu": Layout("NVIDIA B300 SXM6 AC", 10, 279 * _GIB, "97.10.2A.00.02",
                            "692-2G558-0210-000", "G558.0210.00.01", _B200_GPUS, (),
                            "To Be Filled By O.E.M.", _X86,
                            gpu_device_id=0x3182),  # GB110 [B300 SXM6 AC]
}


@dataclass(frozen=True)
class HcaSlot:
    """One RDMA device of a platform: where it sits and what it is for.

    ``gpu_bdf`` is the GPU whose PCIe switch the NIC shares (None: its own root port).
    ``model`` keys ``state/ib.py MODELS`` (identity strings as the real parts report them).
    """

    name: str
    bdf: str
    numa: int
    role: str  # compute | storage | management: what the real machine uses it for
    model: str
    link_layer: str
    width: int
    speed: str  # per-lane speed name: NDR, HDR, XDR
    netdev: str
    gpu_bdf: str | None = None
    manages_nvswitch: bool = False  # VPD SMDL=SW_MNG (role "management")


def _netdev(bdf: str, link_layer: str, multi_function: bool) -> str:
    """systemd's predictable name: ``ibp24s0``, ``enP6p3s0f1np1`` (P<domain> when not 0)."""
    domain, bus, rest = bdf.split(":")
    slot, function = rest.split(".")
    where = (f"P{int(domain, 16)}" if int(domain, 16) else "") + f"p{int(bus, 16)}s{int(slot, 16)}"
    if link_layer == "InfiniBand":
        return f"ib{where}"
    return f"en{where}" + (f"f{function}np{function}" if multi_function else "np0")


def _slot(name: str, bdf: str, numa: int, role: str, model: str, link_layer: str, width: int,
          speed: str, gpu_bdf: str | None = None, multi_function: bool = False) -> HcaSlot:
    return HcaSlot(name, bdf, numa, role, model, link_layer, width, speed,
                   _netdev(bdf, link_layer, multi_function), gpu_bdf)


def _hgx_hcas(model: str, speed: str, storage_model: str) -> tuple[HcaSlot, ...]:
    """8 compute NICs under the GPUs' switches (DGX H100 guide ibdev names) plus two
    dual-port storage cards, mlx5_1/2 and mlx5_7/8, the names the guide leaves free
    (its "Network Modules" table), as RoCE."""
    compute = tuple(_slot(slot.ibdev or "", slot.nic_bdf or "", slot.numa, "compute", model,
                          "InfiniBand", 4, speed, slot.bdf)
                    for slot in _H100_GPUS)
    storage = tuple(_slot(name, bdf, numa, "storage", storage_model, "Ethernet", 4, speed,
                          multi_function=True)
                    for name, bdf, numa in (("mlx5_1", "0000:2a:00.0", 0),
                                            ("mlx5_2", "0000:2a:00.1", 0),
                                            ("mlx5_7", "0000:aa:00.0", 1),
                                            ("mlx5_8", "0000:aa:00.1", 1)))
    return compute + storage


def _tray_hcas(model: str, speed: str, under_gpu: bool = False) -> tuple[HcaSlot, ...]:
    """GB200 tray: 4 compute NICs at domains 0000/0002/0010/0012, SYS to every GPU, and 2
    dual-port BlueField-3 at 0006/0016 (NVIDIA Mission Control GB200 north-south network guide).
    GB300 (``under_gpu``): each B300 hangs off its ConnectX-8's built-in PCIe switch, so
    the NIC sits in its GPU's domain (Hot Chips 2025 ConnectX-8 coverage, unverified:
    provisional)."""
    places = (("mlx5_0", "0000", 0), ("mlx5_1", "0002", 0), ("mlx5_4", "0010", 1),
              ("mlx5_5", "0012", 1))
    compute = tuple(
        _slot(name, f"{gpu.bdf[:4]}:02:00.0" if under_gpu else f"{domain}:03:00.0", numa,
              "compute", model, "InfiniBand", 4, speed, gpu.bdf if under_gpu else None)
        for (name, domain, numa), gpu in zip(places, _NVL72_GPUS, strict=True))
    dpus = tuple(_slot(name, bdf, numa, "storage", "bf3", "Ethernet", 2, "NDR",
                       multi_function=True)
                 for name, bdf, numa in (("mlx5_2", "0006:03:00.0", 0),
                                         ("mlx5_3", "0006:03:00.1", 0),
                                         ("mlx5_6", "0016:03:00.0", 1),
                                         ("mlx5_7", "0016:03:00.1", 1)))
    return compute + dpus


def _b200_bridge() -> tuple[HcaSlot, ...]:
    """The HGX B200 baseboard's ConnectX-7 bridge: two ports, each one full and one limited
    PCI function, four RDMA devices with VPD SMDL=SW_MNG (Fabric Manager user guide; four
    such mlx5 devices on real B200 nodes, siderolabs/extensions#893 and #895). Their PCI
    place is not published: here two functions on each of two root ports, no GPU below
    them (provisional, like the profile); their names follow the rails' and storage's."""
    return tuple(HcaSlot(f"mlx5_{12 + i}", f"0000:{bus:02x}:00.{function}", 0 if bus < 0x80
                         else 1, "management", "cx7", "InfiniBand", 4, "NDR",
                         f"ibp{bus}s0f{function}",
                         manages_nvswitch=True)
                 for i, (bus, function) in enumerate(((0x0a, 0), (0x0a, 1), (0x8a, 0),
                                                      (0x8a, 1))))


def _oem_hgx_hcas(model: str, speed: str) -> tuple[HcaSlot, ...]:
    """An OEM HGX server as such boards are commonly built (the layout operators report):
    the same 8 compute NICs beside their GPUs, and 4 ConnectX-6 Dx 100 GbE storage ports,
    two of them under GPU0's and GPU4's PCIe switches (mlx5_7 at 1d:00.0, mlx5_8 at
    a0:00.0, free buses beside the switches' ports) and a dual-port card on its own root
    port (mlx5_1/2)."""
    compute = _hgx_hcas(model, speed, model)[:8]
    gpu0, gpu4 = _H100_GPUS[0].bdf, _H100_GPUS[4].bdf
    storage = (_slot("mlx5_1", "0000:2a:00.0", 0, "storage", "cx6dx", "Ethernet", 4, "EDR",
                     multi_function=True),
               _slot("mlx5_2", "0000:2a:00.1", 0, "storage", "cx6dx", "Ethernet", 4, "EDR",
                     multi_function=True),
               _slot("mlx5_7", "0000:1d:00.0", 0, "storage", "cx6dx", "Ethernet", 4, "EDR",
                     gpu0),
               _slot("mlx5_8", "0000:a0:00.0", 1, "storage", "cx6dx", "Ethernet", 4, "EDR",
                     gpu4))
    return compute + storage


# An OEM's name for an HGX H100/H200 8-GPU server (Supermicro's): no DGX product, so
# detection goes by the baseboard.
OEM_DMI_PRODUCT = "SYS-821GE-TNHR"
OEM_HCA_LAYOUTS: dict[str, tuple[HcaSlot, ...]] = {
    "dgx-h100": _oem_hgx_hcas("cx7", "NDR"),
    "dgx-h200": _oem_hgx_hcas("cx7", "NDR"),
    # An OEM HGX B200: the same storage ports beside GPU0 and GPU4, and the board's own
    # NVSwitch management functions.
    "dgx-b200": _oem_hgx_hcas("cx7", "NDR") + _b200_bridge(),
}

# Per profile; a profile not listed has no RDMA devices (PCIe-card servers vary by vendor).
HCA_LAYOUTS: dict[str, tuple[HcaSlot, ...]] = {
    "dgx-h100": _hgx_hcas("cx7", "NDR", "cx7"),
    "dgx-h200": _hgx_hcas("cx7", "NDR", "cx7"),
    "dgx-b200": _hgx_hcas("cx7", "NDR", "bf3") + _b200_bridge(),
    "dgx-a100": _hgx_hcas("cx6", "HDR", "cx6"),
    "gb200-nvl72": _tray_hcas("cx7", "NDR"),
    "gb300-nvl72": _tray_hcas("cx8", "XDR", under_gpu=True),
}
