"""The host facts NCCL depends on, read from a tree (agent/collectors/nccl_host.py, the
ACS register from PCI config space); the nccl.* host checks are judged in tests/checks/nccl/."""

from __future__ import annotations

from pathlib import Path

from clusterdiag.agent.collectors.nccl_host import (
    parse_limits_conf,
    parse_limits_file,
    read_gpudirect,
    read_iommu,
    read_limits,
)
from clusterdiag.agent.read.pci_config import read_acs_ctrl
from clusterdiag.agent.read.sysfs import FileCounter
from tests.checks.nccl.factory import PROPRIETARY


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_gpudirect_facts_from_a_tree(tmp_path: Path) -> None:
    _write(tmp_path, "sys/module/nvidia_peermem/version", "550.127.05\n")
    _write(tmp_path, "proc/sys/kernel/osrelease", "5.15.0-1063-nvidia\n")
    _write(tmp_path, "proc/driver/nvidia/version", PROPRIETARY + "\nGCC version: 12\n")
    info = read_gpudirect(tmp_path, FileCounter())
    assert info.peermem == "/sys/module/nvidia_peermem/version"
    assert info.driver_open is False
    assert info.kernel_release == "5.15.0-1063-nvidia"


# -- ACS -----------------------------------------------------------------------------


def test_acs_register_read_from_config_space(tmp_path: Path) -> None:
    data = bytearray(4096)
    data[0x100:0x104] = (0x0001 | 1 << 16 | 0x140 << 20).to_bytes(4, "little")  # AER first
    data[0x140:0x144] = (0x000D | 1 << 16).to_bytes(4, "little")
    data[0x146:0x148] = (0x1D).to_bytes(2, "little")
    (tmp_path / "config").write_bytes(bytes(data))
    assert read_acs_ctrl(tmp_path / "config", {}) == 0x1D
    (tmp_path / "short").write_bytes(bytes(64))  # what an unprivileged reader gets
    unknown: dict[str, str] = {}
    assert read_acs_ctrl(tmp_path / "short", unknown) is None
    assert "root" in unknown["acs"]


# -- IOMMU ---------------------------------------------------------------------------


def test_iommu_facts_from_a_tree(tmp_path: Path) -> None:
    _write(tmp_path, "proc/cmdline", "BOOT_IMAGE=/vmlinuz intel_iommu=on iommu=pt quiet\n")
    (tmp_path / "sys/class/iommu/dmar0").mkdir(parents=True)
    _write(tmp_path, "sys/kernel/iommu_groups/17/type", "identity\n")
    (tmp_path / "sys/kernel/iommu_groups/17/devices/0000:1b:00.0").mkdir(parents=True)
    info = read_iommu(tmp_path, FileCounter())
    assert info.cmdline == ["intel_iommu=on", "iommu=pt"]
    assert info.units == ["dmar0"]
    assert info.device_groups == {"0000:1b:00.0": "17"}
    assert info.group_types == {"17": "identity"}


# -- host limits -----------------------------------------------------------------------


def test_limits_parsers() -> None:
    text = ("Limit                     Soft Limit           Hard Limit           Units\n"
            "Max locked memory         8388608              8388608              bytes\n")
    assert parse_limits_file(text) == (8388608, None)
    assert parse_limits_file(text.replace("8388608 ", "unlimited"))[0] == -1
    entries = parse_limits_conf("# x\n*  soft  memlock  unlimited\n@hpc hard memlock 65536\n"
                                "* soft nofile 4096\n", "/etc/security/limits.conf")
    assert [(e.where, e.limit_bytes) for e in entries] == [
        ("/etc/security/limits.conf:2", -1), ("/etc/security/limits.conf:3", 65536 * 1024)]


def test_limits_from_a_tree(tmp_path: Path) -> None:
    _write(tmp_path, "proc/self/limits", "Max locked memory  unlimited  unlimited  bytes\n")
    _write(tmp_path, "run/slurmd.pid", "4242\n")
    _write(tmp_path, "proc/4242/limits", "Max locked memory  65536  65536  bytes\n")
    _write(tmp_path, "etc/security/limits.d/90-rdma.conf", "* hard memlock unlimited\n")
    _write(tmp_path, "proc/meminfo", "MemTotal:  1000000 kB\n")
    _write(tmp_path, "proc/mounts", "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=64m 0 0\n")
    _write(tmp_path, "etc/systemd/logind.conf", "[Login]\n#RemoveIPC=no\n")
    _write(tmp_path, "etc/systemd/logind.conf.d/nccl.conf", "[Login]\nRemoveIPC=no\n")
    _write(tmp_path, "etc/slurm/slurm.conf", "PropagateResourceLimitsExcept=MEMLOCK\n")
    limits = read_limits(tmp_path, FileCounter())
    assert [(m.where, m.limit_bytes) for m in limits.memlock] == [
        ("/proc/self/limits", -1), ("/proc/4242/limits (slurmd)", 65536),
        ("/etc/security/limits.d/90-rdma.conf:1", -1)]
    assert (limits.shm_bytes, limits.shm_source) == (64 << 20, "/proc/mounts size=64m")
    assert limits.remove_ipc is False
    assert limits.remove_ipc_source == "/etc/systemd/logind.conf.d/nccl.conf"
    assert limits.propagate_limits == "PropagateResourceLimitsExcept=MEMLOCK"


def test_shm_default_is_half_of_ram_and_logind_defaults_to_remove(tmp_path: Path) -> None:
    _write(tmp_path, "proc/meminfo", "MemTotal:  1000000 kB\n")
    _write(tmp_path, "proc/mounts", "tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0\n")
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    limits = read_limits(tmp_path, FileCounter())
    assert limits.shm_bytes == 1000000 * 1024 // 2
    assert (limits.remove_ipc, limits.remove_ipc_source) == (True, "systemd default")


def test_acs_next_pointer_keeps_only_its_offset_bits(tmp_path: Path) -> None:
    """The low two bits of a header's next field are reserved (pci_regs.h
    ``PCI_EXT_CAP_NEXT``: ``& 0xffc``): a device setting them still has its ACS found."""
    data = bytearray(4096)
    data[0x100:0x104] = (0x0001 | 1 << 16 | (0x140 | 0x3) << 20).to_bytes(4, "little")
    data[0x140:0x144] = (0x000D | 1 << 16).to_bytes(4, "little")
    data[0x146:0x148] = (0x04).to_bytes(2, "little")
    (tmp_path / "config").write_bytes(bytes(data))
    assert read_acs_ctrl(tmp_path / "config", {}) == 0x04
