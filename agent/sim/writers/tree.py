"""Lays out a simulated node as a filesystem tree: /sys, /proc, /dev, /etc under a root.

The collectors read this tree exactly as they read a real one, through --root. PCI
devices are real directories under /sys/devices with /sys/bus/pci/devices symlinks, so
the parent chain (root port, PCIe switch, device: state/pci.py) resolves the way the
kernel's does.
"""

from __future__ import annotations

import time
from pathlib import Path

from ..state.hardware import SimNode
from ..state.pci import gpu_bridges, nvswitch_bridges
from .imex import fib_trie, nodes_config
from .nccl import write_nccl_tree
from .pci_tree import PciTree
from .pci_tree import write_text as _write
from .tree_ib import write_ib_tree

_GPU_CLASS, _SWITCH_CLASS = "0x030200", "0x068000"


def write_tree(node: SimNode, root: Path) -> None:
    layout, profile = node.layout, node.profile
    pci = PciTree(root)
    for gpu in node.gpus:
        slot = layout.gpus[gpu.index]
        cpulist = layout.host.cpulists[slot.numa]
        pci.add(gpu_bridges(node, gpu), gpu.bdf, "0x10de", f"0x{layout.gpu_device_id:04x}",
                _GPU_CLASS, slot.numa, cpulist, gpu.pcie_gen, gpu.pcie_width, "nvidia",
                profile.gpu_pcie_gen, profile.gpu_pcie_width)
    for i, bdf in enumerate(node.nvswitch_bdfs):
        pci.add(nvswitch_bridges(bdf), bdf, "0x10de",
                f"0x{layout.nvswitch_device_id:04x}",
                _SWITCH_CLASS, 0 if i < len(node.nvswitch_bdfs) / 2 else 1,
                layout.host.cpulists[0], 4, 2, "nvidia")
    write_ib_tree(node, root, pci)  # the NICs, their RDMA devices and netdevs
    _write_host(node, root)
    write_nccl_tree(node, root)  # after the PCI tree: it sets bridges' ACS bits


def _write_host(node: SimNode, root: Path) -> None:
    host = node.layout.host
    boot_time = int(node.epoch - node.uptime_s)
    cpus = "".join(f"cpu{i} 100 0 100 10000 0 0 0 0 0 0\n" for i in range(host.cpu_count))
    _write(root / "proc/stat", f"cpu  1000 0 1000 100000 0 0 0 0 0 0\n{cpus}btime {boot_time}\n")
    _write(root / "proc/meminfo", f"MemTotal:       {host.memory_total_kib} kB\n"
                                  f"MemFree:        {host.memory_total_kib // 2} kB\n")
    _write(root / "proc/cmdline", node.cmdline + "\n")
    _write(root / "proc/sys/kernel/osrelease", "5.15.0-1063-nvidia\n")
    mounts = ("/dev/nvme0n1p2 / ext4 rw,relatime 0 0\ntmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0\n"
              "tmpfs /tmp tmpfs rw,nosuid,nodev 0 0\n")
    _write(root / "proc/mounts", mounts)
    _write(root / "proc/self/mounts", mounts)
    memlock = "unlimited" if node.memlock_kib is None else str(node.memlock_kib * 1024)
    _write(root / "proc/self/limits",
           "Limit                     Soft Limit           Hard Limit           Units     \n"
           f"Max locked memory         {memlock:<20} {memlock:<20} bytes     \n")
    for pid, name in node.proc_names.items():
        _write(root / f"proc/{pid}/comm", name + "\n")
        _write(root / f"proc/{pid}/stat", f"{pid} ({name}) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 "
                                          "10 10 0 0 20 0 1 0 5000 0 0\n")
    for pid, cgroup in node.proc_cgroups.items():
        _write(root / f"proc/{pid}/cgroup", cgroup + "\n")
    _write(root / "sys/class/dmi/id/product_name", node.layout.dmi_product + "\n")
    _write(root / "etc/os-release", 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    for mc in ("mc0", "mc1"):
        _write(root / f"sys/devices/system/edac/mc/{mc}/ce_count", "0\n")
        _write(root / f"sys/devices/system/edac/mc/{mc}/ue_count", "0\n")
    for module in node.modules:
        _write(root / f"sys/module/{module}/initstate", "live\n")
    (root / "run/systemd/system").mkdir(parents=True, exist_ok=True)
    if node.profile.imex:
        _write_imex(node, root)
    (root / "tmp").mkdir(exist_ok=True)
    if node.journal != "volatile":  # journald.conf(5) Storage=auto: persistent if it exists
        (root / "var/log/journal").mkdir(parents=True, exist_ok=True)
    write_kmsg(node, root)


def _write_imex(node: SimNode, root: Path) -> None:
    """The tray's IMEX nodes file and channel device (a plain file standing for the
    character device), and the DRA driver's kubelet plugin folder and registration socket
    where it runs (a plain file standing for the socket: the collector takes its presence
    in a simulated tree for a live plugin).
    The channel is always there: ``imex_channel`` is what a job's container sees
    (qualify's rack test), not the host's /dev."""
    _write(root / "etc/nvidia-imex/nodes_config.cfg", nodes_config(node))
    _write(root / "proc/net/fib_trie", fib_trie(node))
    _write(root / "dev/nvidia-caps-imex-channels/channel0", "")
    if node.dra_plugin:
        (root / "var/lib/kubelet/plugins/compute-domain.nvidia.com").mkdir(parents=True,
                                                                         exist_ok=True)
        _write(root / "var/lib/kubelet/plugins_registry/compute-domain.nvidia.com-reg.sock",
               "")


def write_kmsg(node: SimNode, root: Path) -> None:
    """Kernel messages as /dev/kmsg records (priority,seq,usec,flags;text)."""
    boot_time = int(node.epoch - node.uptime_s)
    now = time.time()
    lines = []
    for seq, (age_s, message) in enumerate(node.kernel_lines):
        usec = int((now - age_s - boot_time) * 1e6)
        lines.append(f"4,{seq},{usec},-;{message}\n")
    _write(root / "dev/kmsg", "".join(lines))
