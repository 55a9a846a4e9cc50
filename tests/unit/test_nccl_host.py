"""nccl.gpudirect_rdma, nccl.acs, nccl.iommu, nccl.host_limits, nccl.gpu_nic_affinity:
the host facts as read from a tree, and each check's verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdiag.agent.collectors.nccl_host import (
    parse_limits_conf,
    parse_limits_file,
    read_gpudirect,
    read_iommu,
    read_limits,
)
from clusterdiag.agent.collectors.pci import read_acs_ctrl
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.ib import IbDevice
from clusterdiag.agent.model.nccl import (
    Gpudirect,
    HcaPort,
    HostLimits,
    Iommu,
    MemlockSource,
    NcclInfo,
)
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.agent.sysfs import FileCounter
from clusterdiag.checks.finding import Status
from clusterdiag.checks.nccl.affinity import gpu_nic_affinity
from clusterdiag.checks.nccl.gpudirect import gpudirect_rdma
from clusterdiag.checks.nccl.limits import host_limits
from clusterdiag.checks.nccl.pcie import acs
from clusterdiag.checks.nccl.pcie import iommu as iommu_check
from clusterdiag.checks.profile import load_profile
from clusterdiag.checks.registry import CheckContext

GPU, NIC = 0x030200, 0x020700
RP, UP, DG, DN = "0000:14:01.0", "0000:15:00.0", "0000:1a:00.0", "0000:17:00.0"


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _bridge(bdf: str, acs: int | None = 0, unknown: dict | None = None) -> PciDevice:
    return PciDevice(bdf, 0x10B5, 0xC030, 0x060400, acs_ctrl=acs, unknown=unknown or {})


def _pci(gpu_numa: int = 0, nic_numa: int = 0, acs: int | None = 0,
         unknown: dict | None = None) -> list[PciDevice]:
    """One GPU and its NIC under one PCIe switch (PIX), like a DGX H100 slot."""
    return [_bridge(b, acs, unknown) for b in (RP, UP, DG, DN)] + [
        PciDevice("0000:1b:00.0", 0x10DE, 0x2330, GPU, numa_node=gpu_numa,
                  path=[RP, UP, DG, "0000:1b:00.0"]),
        PciDevice("0000:18:00.0", 0x15B3, 0x1021, NIC, numa_node=nic_numa,
                  path=[RP, UP, DN, "0000:18:00.0"]),
    ]


def _ctx(info: NcclInfo | None = None, pci: list[PciDevice] | None = None,
         ib: list[IbDevice] | None = None, mode: str = "run", profile: str = "dgx-h100",
         **params: object) -> CheckContext:
    snap = Snapshot(node="n", taken_at=0.0, nccl=info or NcclInfo(),
                    pci=_pci() if pci is None else pci, infiniband=ib)
    return CheckContext(snapshot=snap, profile=load_profile(profile), mode=mode,
                        params={"memlock_fail_mib": 1024, "shm_min_mib": 1024, **params})


def _statuses(findings: object) -> list[Status]:
    return [f.status for f in findings]  # type: ignore[attr-defined]


# -- GPUDirect RDMA ----------------------------------------------------------------

OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.58.02  Release Build  (x)"
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 2024"


def test_gpudirect_facts_from_a_tree(tmp_path: Path) -> None:
    _write(tmp_path, "sys/module/nvidia_peermem/version", "550.127.05\n")
    _write(tmp_path, "proc/sys/kernel/osrelease", "5.15.0-1063-nvidia\n")
    _write(tmp_path, "proc/driver/nvidia/version", PROPRIETARY + "\nGCC version: 12\n")
    info = read_gpudirect(tmp_path, FileCounter())
    assert info.peermem == "/sys/module/nvidia_peermem/version"
    assert info.driver_open is False
    assert info.kernel_release == "5.15.0-1063-nvidia"


@pytest.mark.parametrize(("gdr", "status"), [
    (Gpudirect(peermem="/sys/module/nvidia_peermem/version"), Status.PASS),
    (Gpudirect(kernel_release="6.8.0-45-generic", driver_line=OPEN, driver_open=True),
     Status.PASS),
    (Gpudirect(kernel_release="6.8.0-45-generic", driver_line=PROPRIETARY, driver_open=False),
     Status.FAIL),
    (Gpudirect(kernel_release="5.4.0-150-generic", driver_line=OPEN, driver_open=True),
     Status.FAIL),
    (Gpudirect(kernel_release="6.8.0"), Status.FAIL),
])
def test_gpudirect_verdicts(gdr: Gpudirect, status: Status) -> None:
    (finding,) = gpudirect_rdma(_ctx(NcclInfo(gpudirect=gdr)))
    assert finding.status is status


def test_gpudirect_skips_without_rdma_nic() -> None:
    ctx = _ctx(NcclInfo(gpudirect=Gpudirect()), pci=_pci()[:-1])
    assert _statuses(gpudirect_rdma(ctx)) == [Status.SKIP]


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


def test_acs_redirect_fails_on_the_device_below_it() -> None:
    pci = _pci()
    pci[2] = _bridge(DG, 0x1D)  # the GPU's switch port: SrcValid ReqRedir CmpltRedir UpFwd
    (finding,) = acs(_ctx(pci=pci))
    assert finding.status is Status.FAIL
    assert finding.component == "gpu0"
    assert finding.observed == {DG: ["ReqRedir", "CmpltRedir"]}


def test_acs_source_validation_alone_passes() -> None:
    pci = _pci()
    pci[0] = _bridge(RP, 0x01)
    assert _statuses(acs(_ctx(pci=pci))) == [Status.PASS]


def test_acs_unreadable_config_skips_with_the_reason() -> None:
    why = {"acs": "extended config space not readable (needs root)"}
    (finding,) = acs(_ctx(pci=_pci(acs=None, unknown=why)))
    assert finding.status is Status.SKIP
    assert "needs root" in finding.message
    assert acs.__name__ == "acs"


def test_acs_is_registered_as_privileged() -> None:
    from clusterdiag.checks import REGISTRY

    assert REGISTRY["nccl.acs"].privileged


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


@pytest.mark.parametrize(("iommu", "status"), [
    (Iommu(), Status.PASS),
    (Iommu(units=["dmar0"], group_types={"1": "identity"},
           device_groups={"0000:1b:00.0": "1"}), Status.PASS),
    (Iommu(units=["dmar0"], group_types={"1": "DMA-FQ"},
           device_groups={"0000:1b:00.0": "1"}), Status.FAIL),
    (Iommu(units=["dmar0"]), Status.WARN),
])
def test_iommu_verdicts(iommu: Iommu, status: Status) -> None:
    (finding,) = iommu_check(_ctx(NcclInfo(iommu=iommu)))
    assert finding.status is status


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


def _limits(*memlock: MemlockSource, shm: int = 32 << 30, remove_ipc: bool = False
            ) -> NcclInfo:
    return NcclInfo(limits=HostLimits(memlock=list(memlock), shm_bytes=shm,
                                      remove_ipc=remove_ipc))


def test_host_limits_verdicts() -> None:
    own_low = MemlockSource("/proc/self/limits", 8 << 20)
    assert _statuses(host_limits(_ctx(_limits(own_low)))) == [Status.FAIL]
    # in the agent the process limit is clusterdiag's own, not the jobs'
    assert _statuses(host_limits(_ctx(_limits(own_low), mode="agent"))) == [Status.PASS]
    conf = MemlockSource("/etc/security/limits.conf:3", 64 << 30, "* hard memlock 67108864")
    assert _statuses(host_limits(_ctx(_limits(conf), mode="agent"))) == [Status.WARN]
    assert _statuses(host_limits(_ctx(_limits(shm=64 << 20)))) == [Status.FAIL]
    assert _statuses(host_limits(_ctx(_limits(remove_ipc=True)))) == [Status.WARN]
    unlimited = MemlockSource("/proc/self/limits", -1)
    assert _statuses(host_limits(_ctx(_limits(unlimited)))) == [Status.PASS]


# -- GPU-NIC affinity ------------------------------------------------------------------


def _ib(role: str = "compute") -> list[IbDevice]:
    dev = IbDevice("mlx5_0", pci_bdf="0000:18:00.0")
    dev.role = role  # type: ignore[attr-defined]
    return [dev]


def test_affinity_passes_for_a_nic_under_the_gpus_switch() -> None:
    (finding,) = gpu_nic_affinity(_ctx(ib=_ib()))
    assert finding.status is Status.PASS
    assert finding.observed == {"gpu0": "mlx5_0 PIX"}


def test_affinity_wrong_numa_warns_on_the_nic() -> None:
    (finding,) = gpu_nic_affinity(_ctx(pci=_pci(nic_numa=1), ib=_ib()))
    assert finding.status is Status.WARN
    assert finding.component == "mlx5_0"


def test_affinity_fails_when_the_nic_is_across_the_socket() -> None:
    pci = _pci(nic_numa=1)
    pci[-1].path = ["0000:9a:01.0", "0000:18:00.0"]
    (finding,) = gpu_nic_affinity(_ctx(pci=pci, ib=_ib()))
    assert finding.status is Status.FAIL
    assert finding.component == "gpu0"
    assert finding.observed == {"mlx5_0": "SYS"}


def test_affinity_sys_is_expected_on_grace_trays_and_storage_nics_do_not_count() -> None:
    pci = _pci()
    pci[-1] = PciDevice("0000:03:00.0", 0x15B3, 0x1021, NIC, numa_node=0,
                        path=["0000:00:00.0", "0000:03:00.0"])
    ib = [IbDevice("mlx5_0", pci_bdf="0000:03:00.0")]
    ib[0].role = "compute"  # type: ignore[attr-defined]
    ctx = _ctx(pci=pci, ib=ib, profile="gb200-nvl72")
    assert _statuses(gpu_nic_affinity(ctx)) == [Status.PASS]
    assert _statuses(gpu_nic_affinity(_ctx(ib=_ib("storage")))) == [Status.SKIP]
    assert _statuses(gpu_nic_affinity(_ctx(profile="generic"))) == [Status.SKIP]


def test_rdma_ports_alone_count_as_rdma_present() -> None:
    info = NcclInfo(ports={"mlx5_0/1": HcaPort("ACTIVE", "InfiniBand")},
                    gpudirect=Gpudirect())
    ctx = _ctx(info, pci=[])
    assert _statuses(gpudirect_rdma(ctx)) == [Status.FAIL]


def test_affinity_defers_to_ib_when_the_nics_rdma_device_is_missing() -> None:
    """The NIC is on the bus but its driver registered no RDMA device: ib.hca_count says
    so; the GPU's placement is not judged twice."""
    other = IbDevice("mlx5_9", pci_bdf="0000:9a:00.0")
    other.role = "compute"  # type: ignore[attr-defined]
    pci = [*_pci(), PciDevice("0000:9a:00.0", 0x15B3, 0x1021, NIC, numa_node=1,
                              path=["0000:98:01.0", "0000:9a:00.0"])]
    (finding,) = gpu_nic_affinity(_ctx(pci=pci, ib=[other]))
    assert finding.status is Status.SKIP
    assert finding.component == "gpu0"
