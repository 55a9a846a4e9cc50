"""The NCCL side of a simulated node (state/nccl.py ``SimNccl``): its host library, settings
files, driver flavour, peer-memory module, IOMMU, ACS bits, job limits and logind — as
files under the root; and what loading the library and running all_reduce_perf answer.

A healthy node is what a well-run DGX is: host NCCL present, nvidia_peermem loaded, open
driver modules, IOMMU off, ACS redirect off, memlock unlimited, RemoveIPC=no. The library
"loads" through :func:`versions`, which answers from this state and never from the host.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ...read.sources import NcclVersions
from ..state.hardware import SimGpu, SimNode
from .pci_tree import ACS_CTRL_OFFSET

LIBRARY = "libnccl.so.2"
_MARK = "simulated libnccl "


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _code(version: str) -> int:
    major, minor, patch = (int(p) for p in version.split("."))
    return major * 10000 + minor * 100 + patch


def versions(root: Path) -> Callable[[list[str], float], NcclVersions]:
    """A stand-in for loading libraries: reads the version the simulated file carries."""
    def load(paths: list[str], timeout_s: float) -> NcclVersions:
        answers: NcclVersions = {}
        for path in paths:
            try:
                text = Path(path).read_text()
            except (OSError, UnicodeDecodeError) as exc:
                answers[path] = (None, f"{path}: cannot open shared object file: {exc}")
                continue
            inside = os.path.realpath(path).startswith(os.path.realpath(root))
            if inside and text.startswith(_MARK):
                answers[path] = (_code(text[len(_MARK):].strip()), None)
            else:
                answers[path] = (None, f"{path}: invalid ELF header")
        return answers
    return load


def write_nccl_tree(node: SimNode, root: Path) -> None:
    sim = node.nccl
    if sim.library_version:
        _write(root / f"usr/lib/{node.cpu_arch}-linux-gnu" / LIBRARY,
               f"{_MARK}{sim.library_version}\n")
    if sim.conf:
        _write(root / "etc/nccl.conf", "".join(f"{k}={v}\n" for k, v in sim.conf.items()))
    flavour = (f"NVIDIA UNIX Open Kernel Module for {node.cpu_arch}" if sim.driver_open
               else f"NVIDIA UNIX {node.cpu_arch} Kernel Module")
    _write(root / "proc/driver/nvidia/version",
           f"NVRM version: {flavour}  {node.driver_version}  Release Build  "
           "(dvs-builder@U22-I3-AF03-09-1)  Thu Nov  6 00:00:00 UTC 2025\n"
           "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
    for gpu in node.gpus:
        _write(root / "proc/driver/nvidia/gpus" / gpu.bdf / "information",
               gpu_information(gpu, node.driver_version))
    if "nvidia_peermem" in node.modules:
        _write(root / "sys/module/nvidia_peermem/version", f"{node.driver_version}\n")
    memlock = "unlimited" if sim.memlock_conf_kib is None else str(sim.memlock_conf_kib)
    _write(root / "etc/security/limits.conf",
           "# /etc/security/limits.conf\n"
           f"*               soft    memlock         {memlock}\n"
           f"*               hard    memlock         {memlock}\n")
    _write(root / "etc/systemd/logind.conf",
           f"[Login]\nRemoveIPC={'yes' if sim.remove_ipc else 'no'}\n")
    if sim.iommu_translated:
        _write_iommu(node, root)
    for index in sim.acs_gpus:
        _set_acs(root, node.gpus[index].bdf, 0x1D)  # SrcValid ReqRedir CmpltRedir UpstreamFwd


# The DMA mask the driver reports for a GPU that addresses 47 bits.
_DMA_BITS = 47


def gpu_information(gpu: SimGpu, driver_version: str) -> str:
    """``/proc/driver/nvidia/gpus/<bdf>/information`` as the driver writes it, line by line
    (NVIDIA/open-gpu-kernel-modules 595.45.04, kernel-open/nvidia/nv-procfs.c:124-180,
    ``nv_procfs_read_gpu_info``; no BAR lines, which only a DEBUG build prints). Its
    values are the ones the simulated NVML answers: the name, the UUID, the minor number
    (nvmlDeviceGetMinorNumber: the GPU's index) and the VBIOS, which the driver prints
    with ``%02x`` (src/nvidia/arch/nvalloc/unix/src/osinit.c:601), so in lower case. A GSP
    driver's firmware is its own version."""
    domain, bus, rest = gpu.bdf.split(":")
    slot, function = rest.split(".")
    return (f"Model: \t\t {gpu.name}\n"
            f"IRQ:   \t\t {gpu.index + 100}\n"
            f"GPU UUID: \t {gpu.uuid}\n"
            f"Video BIOS: \t {gpu.vbios.lower()}\n"
            "Bus Type: \t PCIe\n"
            f"DMA Size: \t {_DMA_BITS} bits\n"
            f"DMA Mask: \t 0x{(1 << _DMA_BITS) - 1:x}\n"
            f"Bus Location: \t {int(domain, 16):04x}:{int(bus, 16):02x}:{int(slot, 16):02x}."
            f"{int(function, 16):x}\n"
            f"Device Minor: \t {gpu.index}\n"
            f"GPU Firmware: \t {driver_version}\n"
            "GPU Excluded:\t No\n")


def _write_iommu(node: SimNode, root: Path) -> None:
    """An Intel IOMMU in translated mode: one DMA-FQ group per GPU and NIC."""
    (root / "sys/class/iommu/dmar0").mkdir(parents=True, exist_ok=True)
    bdfs = [g.bdf for g in node.gpus] + [h.pci_bdf for h in node.hcas]
    for group, bdf in enumerate(bdfs):
        base = root / "sys/kernel/iommu_groups" / str(group)
        _write(base / "type", "DMA-FQ\n")
        (base / "devices" / bdf).mkdir(parents=True, exist_ok=True)


def _set_acs(root: Path, bdf: str, ctrl: int) -> None:
    """Set the ACS Control register of the switch port right above ``bdf``."""
    device = Path(os.path.realpath(root / "sys/bus/pci/devices" / bdf))
    config = device.parent / "config"
    data = bytearray(config.read_bytes())
    data[ACS_CTRL_OFFSET:ACS_CTRL_OFFSET + 2] = ctrl.to_bytes(2, "little")
    config.write_bytes(bytes(data))


def allreduce_output(node: SimNode) -> str | None:
    """What all_reduce_perf prints on this node (nccl-tests table format), if installed."""
    busbw = node.nccl.allreduce_busbw_gbps
    if busbw is None:
        return None
    ranks = len(node.gpus)
    lines = [f"# nThread 1 nGpus {ranks} minBytes 536870912 maxBytes 1073741824 step: 2(factor)"
             " warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#",
             "#       size         count      type   redop    root     time   algbw   busbw "
             "#wrong     time   algbw   busbw #wrong"]
    for size in (536870912, 1073741824):
        algbw = busbw * ranks / (2 * (ranks - 1)) if ranks > 1 else busbw
        micros = size / (algbw * 1e3)
        lines.append(f"{size:>12} {size // 4:>13}     float     sum      -1 {micros:8.1f} "
                     f"{algbw:7.2f} {busbw:7.2f}      0 {micros:8.1f} {algbw:7.2f} "
                     f"{busbw:7.2f}      0")
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {busbw:.3f} ", ""]
    return "\n".join(lines)

