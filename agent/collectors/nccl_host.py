"""Host facts that decide whether NCCL gets GPUDirect RDMA and its memory: the peer-memory
module or dma-buf prerequisites, the IOMMU mode, locked-memory limits, /dev/shm, logind.

Sources: NCCL src/transport/net_ib/gdr.cc (peer-memory paths), the driver's flavour line in
/proc/driver/nvidia/version (NVIDIA driver installation guide, "Kernel Modules"), kernel
Documentation/ABI/testing/sysfs-kernel-iommu_groups, NCCL's troubleshooting guide
(docs/userguide/source/troubleshooting) for memlock/shm/RemoveIPC.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from ..model.nccl import Gpudirect, HostLimits, Iommu, MemlockSource
from ..read.sysfs import FileCounter, list_readable, present, read_text, under, unreadable

# The files NCCL itself tests for a peer-memory client (transport/net_ib/gdr.cc).
PEERMEM_FILES = ("/sys/kernel/mm/memory_peers/nv_mem/version",
                 "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
                 "/sys/module/nvidia_peermem/version")
_IOMMU_PARAMS = ("intel_iommu=", "amd_iommu=", "iommu=", "iommu.passthrough=", "iommu.strict=")
_UNLIMITED = ("unlimited", "infinity", "-1")
_SIZE = re.compile(r"^(\d+)([kmgtKMGT%]?)$")


class _Reader:
    """Reads under ``root``, keeping each file that is there but could not be read
    (EACCES, EIO) in ``unreadable`` (its path as on the node -> the errno), so that the
    checks say so instead of taking the fact it held for absent."""

    def __init__(self, root: Path, counter: FileCounter) -> None:
        self.root, self.counter = root, counter
        self.unreadable: dict[str, str] = {}

    def _note(self, path: Path, reason: str | None) -> None:
        if unreadable(reason):
            self.unreadable[_shown(self.root, path)] = str(reason)

    def read(self, path: str | Path) -> tuple[str | None, str | None]:
        """``read_text`` of ``path`` (absolute on the node, or a Path under the root)."""
        full = under(self.root, path) if isinstance(path, str) else path
        text, reason = read_text(full, self.counter)
        self._note(full, reason)
        return text, reason

    def text(self, path: str | Path) -> str | None:
        return self.read(path)[0]

    def listing(self, path: str | Path) -> list[str]:
        full = under(self.root, path) if isinstance(path, str) else path
        entries, reason = list_readable(full)
        self._note(full, reason)
        return entries

    def is_file(self, path: str) -> bool:
        full = under(self.root, path)
        found, reason = present(full)
        self._note(full, reason)
        return found


def read_gpudirect(root: Path, counter: FileCounter) -> Gpudirect:
    read = _Reader(root, counter)
    info = Gpudirect(unreadable=read.unreadable)
    for path in PEERMEM_FILES:
        if read.is_file(path):
            info.peermem = path
            break
    info.kernel_release = read.text("/proc/sys/kernel/osrelease")
    text = read.text("/proc/driver/nvidia/version")
    if text:
        info.driver_line = text.splitlines()[0].strip()
        info.driver_open = "Open Kernel Module" in info.driver_line
    return info


def read_iommu(root: Path, counter: FileCounter) -> Iommu:
    read = _Reader(root, counter)
    info = Iommu(unreadable=read.unreadable)
    cmdline = read.text("/proc/cmdline")
    info.cmdline = [w for w in (cmdline or "").split() if w.startswith(_IOMMU_PARAMS)]
    info.units = read.listing("/sys/class/iommu")
    groups = under(root, "/sys/kernel/iommu_groups")
    for group in read.listing(groups):
        kind = read.text(groups / group / "type")
        if kind:
            info.group_types[group] = kind
        for bdf in read.listing(groups / group / "devices"):
            info.device_groups[bdf] = group
    return info


def parse_limits_file(text: str) -> tuple[int | None, str | None]:
    """The soft ``Max locked memory`` of a /proc/<pid>/limits file, -1 for unlimited."""
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            soft = (line[len("Max locked memory"):].split() or [""])[0]
            if soft in _UNLIMITED:
                return -1, None
            return (int(soft), None) if soft.isdecimal() else (None, f"garbage {soft!r}")
    return None, "no Max locked memory line"


def parse_limits_conf(text: str, where: str) -> list[MemlockSource]:
    """``memlock`` entries of a pam_limits file (domain type item value; value in KiB)."""
    entries = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if len(words) != 4 or words[2] != "memlock":
            continue
        value = words[3]
        limit = -1 if value in _UNLIMITED else int(value) * 1024 if value.isdecimal() else None
        entries.append(MemlockSource(f"{where}:{lineno}", limit, " ".join(words)))
    return entries


def _memlock(read: _Reader) -> list[MemlockSource]:
    sources: list[MemlockSource] = []
    text, reason = read.read("/proc/self/limits")
    limit = None
    if text is not None:
        limit, reason = parse_limits_file(text)
    sources.append(MemlockSource("/proc/self/limits", limit, reason))
    # Jobs are children of slurmd: without limit propagation they inherit its limits.
    pid = read.text("/run/slurmd.pid")
    if pid and pid.isdecimal():
        text, reason = read.read(f"/proc/{pid}/limits")
        limit = parse_limits_file(text)[0] if text else None
        sources.append(MemlockSource(f"/proc/{pid}/limits (slurmd)", limit, reason))
    pattern = str(under(read.root, "/etc/security/limits.d/*.conf"))
    conf = [under(read.root, "/etc/security/limits.conf"),
            *sorted(Path(p) for p in glob.glob(pattern))]
    for path in conf:
        text = read.text(path)
        if text:
            sources.extend(parse_limits_conf(text, _shown(read.root, path)))
    return sources


def _shown(root: Path, path: Path) -> str:
    """``path`` as it is on the node (without the root a captured tree sits under)."""
    return "/" + os.path.relpath(path, root) if root != Path("/") else str(path)


def _size_bytes(option: str, mem_total: int | None) -> int | None:
    match = _SIZE.match(option)
    if not match:
        return None
    number, unit = int(match.group(1)), match.group(2).lower()
    if unit == "%":
        return mem_total * number // 100 if mem_total else None
    return number << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[unit]


def _mem_total(read: _Reader) -> int | None:
    text = read.text("/proc/meminfo")
    for line in (text or "").splitlines():
        words = line.split()
        if words[:1] == ["MemTotal:"] and len(words) > 1 and words[1].isdecimal():
            return int(words[1]) * 1024
    return None


def _shm(read: _Reader, limits: HostLimits) -> None:
    if read.root == Path("/"):
        try:
            vfs = os.statvfs("/dev/shm")
        except OSError:
            pass
        else:
            limits.shm_bytes, limits.shm_source = vfs.f_frsize * vfs.f_blocks, "statvfs"
            return
    text = read.text("/proc/mounts")
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "/dev/shm":
            sizes = [o[5:] for o in fields[3].split(",") if o.startswith("size=")]
            # RAM decides only a size in % or tmpfs's default: read it only then.
            relative = not sizes or sizes[-1].endswith("%")
            mem_total = _mem_total(read) if relative else None
            if sizes:
                limits.shm_bytes = _size_bytes(sizes[-1], mem_total)
                limits.shm_source = f"/proc/mounts size={sizes[-1]}"
            elif fields[2] == "tmpfs" and mem_total:
                limits.shm_bytes, limits.shm_source = mem_total // 2, "tmpfs default (half of RAM)"
            return
    limits.shm_source = "/dev/shm not mounted"


def _remove_ipc(read: _Reader, limits: HostLimits) -> None:
    root = read.root
    files = [under(root, "/etc/systemd/logind.conf")]
    for pattern in ("/usr/lib/systemd/logind.conf.d/*.conf", "/run/systemd/logind.conf.d/*.conf",
                    "/etc/systemd/logind.conf.d/*.conf"):
        files.extend(sorted(Path(p) for p in glob.glob(str(under(root, pattern)))))
    for path in files:
        text = read.text(path)
        for line in (text or "").splitlines():
            key, _, value = line.strip().partition("=")
            if key.strip() == "RemoveIPC":
                limits.remove_ipc = value.strip().lower() in ("yes", "true", "1", "on")
                limits.remove_ipc_source = _shown(root, path)
    if limits.remove_ipc is None and under(root, "/run/systemd/system").is_dir():
        limits.remove_ipc, limits.remove_ipc_source = True, "systemd default"


def _propagation(read: _Reader, limits: HostLimits) -> None:
    for conf in ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf"):
        text = read.text(conf)
        if text is None:
            continue
        found = [line.split("#", 1)[0].strip() for line in text.splitlines()
                 if line.strip().lower().startswith("propagateresourcelimits")]
        limits.propagate_limits = "; ".join(found) or "PropagateResourceLimits=ALL (default)"
        return


def read_limits(root: Path, counter: FileCounter) -> HostLimits:
    read = _Reader(root, counter)
    limits = HostLimits(memlock=_memlock(read), unreadable=read.unreadable)
    _shm(read, limits)
    _remove_ipc(read, limits)
    _propagation(read, limits)
    return limits
