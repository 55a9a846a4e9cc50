"""The host checks, judged on hand-built snapshots (and one collected from a fixture tree)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.collectors import host as host_collector
from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.host import (
    ClockSync,
    DiskUsage,
    EdacController,
    HostInfo,
    Mount,
    ServiceState,
    StuckProcess,
)
from clusterdiag.agent.model.kernel import KernelEvent, KernelLog
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.agent.sources import CommandResult, SourceEnv
from clusterdiag.checks import host as host_checks
from clusterdiag.checks.finding import Action, Finding, Status
from clusterdiag.checks.host.kernel_errors import mce_severity
from clusterdiag.checks.host.pcie import aer_growth
from clusterdiag.checks.profile import load_profile
from clusterdiag.checks.registry import REGISTRY, CheckContext

FIXTURES = Path(__file__).parent.parent / "fixtures" / "host"
NOW = 1_700_000_000.0
HOST_CHECKS = sorted(i for i in REGISTRY if i.startswith("host.") and
                     REGISTRY[i].func.__module__.startswith(f"{host_checks.__name__}."))


def judge(check_id: str, host: HostInfo | None = None, *, previous: Snapshot | None = None,
          pci: list[PciDevice] | None = None, kernel_log: KernelLog | None = None,
          taken_at: float = NOW, **params: Any) -> list[Finding]:
    snap = Snapshot(node="n1", taken_at=taken_at, host=host, pci=pci, kernel_log=kernel_log)
    ctx = CheckContext(snapshot=snap, profile=load_profile("generic"),
                       params={**REGISTRY[check_id].params, **params}, level="full",
                       now=taken_at, previous=previous)
    return list(REGISTRY[check_id].func(ctx))


def statuses(findings: list[Finding]) -> list[Status]:
    return [f.status for f in findings]


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


def test_the_catalog_has_every_host_check() -> None:
    assert sorted(f"host.{n}" for n in (
        "cpu_count", "memory", "disk", "mounts", "services", "clock_sync", "kernel_cmdline",
        "kernel_errors", "dstate_processes", "pcie_aer")) == HOST_CHECKS
    assert REGISTRY["host.dstate_processes"].rate
    assert REGISTRY["host.pcie_aer"].rate
    assert not REGISTRY["host.disk"].rate


@pytest.mark.parametrize("check_id", HOST_CHECKS)
def test_every_check_yields_a_finding_on_an_empty_host(check_id: str) -> None:
    findings = judge(check_id, HostInfo("n1"), pci=[], kernel_log=KernelLog("file:x"),
                     previous=Snapshot("n1", NOW - 10, host=HostInfo("n1"), pci=[]))
    assert findings
    assert all(f.status is not Status.FAIL for f in findings)


@pytest.mark.parametrize("check_id", HOST_CHECKS)
def test_every_check_errors_without_its_source(check_id: str) -> None:
    findings = judge(check_id, previous=Snapshot("n1", NOW - 10))
    assert statuses(findings) == [Status.ERROR]


# --- cpu_count ------------------------------------------------------------------------

def test_cpu_count_skips_without_minimum() -> None:
    assert one(judge("host.cpu_count", HostInfo("n1", cpu_count=8))).status is Status.SKIP


@pytest.mark.parametrize(("count", "status"), [(224, Status.PASS), (112, Status.FAIL)])
def test_cpu_count_against_minimum(count: int, status: Status) -> None:
    finding = one(judge("host.cpu_count", HostInfo("n1", cpu_count=count), min=224))
    assert (finding.status, finding.observed) == (status, count)


def test_cpu_count_unreadable_is_error_with_reason() -> None:
    info = HostInfo("n1", unknown={"cpu_count": "/proc/stat: missing"})
    finding = one(judge("host.cpu_count", info, min=8))
    assert finding.status is Status.ERROR
    assert finding.observed == "/proc/stat: missing"


# --- memory -----------------------------------------------------------------------------

def test_memory_size_below_minimum_fails() -> None:
    findings = judge("host.memory", HostInfo("n1", memory_total_bytes=1000 * (1 << 30)),
                     min_gib=1900)
    assert statuses(findings) == [Status.FAIL, Status.SKIP]  # no EDAC controllers
    assert findings[0].observed == 1000.0


def test_memory_size_pass_and_edac_pass() -> None:
    info = HostInfo("n1", memory_total_bytes=2000 * (1 << 30),
                    edac=[EdacController("mc0", 3, 0), EdacController("mc1", 0, 0)])
    assert statuses(judge("host.memory", info, min_gib=1900)) == [Status.PASS] * 3


def test_memory_edac_uncorrected_fails_corrected_warns() -> None:
    info = HostInfo("n1", edac=[EdacController("mc0", 0, 1), EdacController("mc1", 101, 0),
                                EdacController("mc2", 100, 0)])
    findings = {f.component: f for f in judge("host.memory", info)}
    assert findings["node"].status is Status.SKIP  # no minimum size configured
    assert (findings["mc0"].status, findings["mc0"].action) == (Status.FAIL, Action.INVESTIGATE)
    assert findings["mc1"].status is Status.WARN
    assert findings["mc2"].status is Status.PASS


def test_memory_edac_thresholds_are_params() -> None:
    info = HostInfo("n1", edac=[EdacController("mc0", 5, 2)])
    findings = judge("host.memory", info, edac_uncorrected_max=2, edac_corrected_warn=4)
    assert statuses(findings) == [Status.SKIP, Status.WARN]


def test_memory_garbage_edac_count_is_error() -> None:
    info = HostInfo("n1", edac=[EdacController("mc0", None, 0)],
                    unknown={"edac.mc0.ce_count": "garbage 'abc'", "edac.mc10.ce_count": "x"})
    finding = judge("host.memory", info)[-1]
    assert finding.status is Status.ERROR
    assert finding.observed == {"edac.mc0.ce_count": "garbage 'abc'"}


# --- disk -------------------------------------------------------------------------------

def disk(path: str, free_pct: float, inodes_free_pct: float = 50.0) -> DiskUsage:
    return DiskUsage(path, 1000, int(free_pct * 10), 1000, int(inodes_free_pct * 10))


@pytest.mark.parametrize(("pct", "status"), [(50, Status.PASS), (9.9, Status.WARN),
                                             (10, Status.PASS), (4.9, Status.FAIL)])
def test_disk_space_thresholds(pct: float, status: Status) -> None:
    findings = judge("host.disk", HostInfo("n1", disks=[disk("/", pct), disk("/tmp", 50)]))
    by_path = {f.component: f for f in findings if "space" in f.message}
    assert by_path["/"].status is status
    assert by_path["/tmp"].status is Status.PASS


def test_disk_inodes_judged_separately() -> None:
    findings = judge("host.disk", HostInfo("n1", disks=[disk("/", 50, 1), disk("/tmp", 50)]))
    assert [(f.component, f.status) for f in findings if f.status is not Status.PASS] == [
        ("/", Status.FAIL)]
    assert "inodes" in findings[1].message


def test_disk_messages_group_across_nodes() -> None:
    one_node = judge("host.disk", HostInfo("n1", disks=[disk("/", 1)]), paths=["/"])
    other = judge("host.disk", HostInfo("n2", disks=[disk("/", 3)]), paths=["/"])
    assert one_node[0].message == other[0].message
    assert one_node[0].observed != other[0].observed


def test_disk_error_missing_and_sizeless() -> None:
    info = HostInfo("n1", disks=[DiskUsage("/", error="No such file or directory"),
                                 DiskUsage("/proc", 0, 0, 0, 0)])
    findings = judge("host.disk", info, paths=["/", "/proc", "/scratch"])
    assert [(f.component, f.status) for f in findings] == [
        ("/", Status.ERROR), ("/proc", Status.SKIP), ("/scratch", Status.ERROR)]
    assert findings[0].observed == "No such file or directory"


def test_disk_without_inode_count_judges_space_only() -> None:
    info = HostInfo("n1", disks=[DiskUsage("/", 1000, 500, 0, 0)])  # btrfs
    assert [f.message for f in judge("host.disk", info, paths=["/"])] == ["enough free space"]


# --- mounts -----------------------------------------------------------------------------

MOUNTS = [Mount("/", "ext4", "/dev/nvme0n1p2"), Mount("/home", "nfs4", "10.0.0.5:/home"),
          Mount("/scratch", "ext4", "/dev/md0"), Mount("/scratch", "lustre", "mds@o2ib:/fs")]


def test_mounts_skip_when_none_required() -> None:
    assert one(judge("host.mounts", HostInfo("n1", mounts=MOUNTS))).status is Status.SKIP


def test_mounts_pass_fail_and_wrong_type() -> None:
    required = ["/home", {"path": "/scratch", "fstype": "lustre"},
                {"path": "/home", "fstype": "nfs"}, "/data"]
    findings = judge("host.mounts", HostInfo("n1", mounts=MOUNTS), required=required)
    assert [(f.component, f.status) for f in findings] == [
        ("/home", Status.PASS), ("/scratch", Status.PASS), ("/home", Status.FAIL),
        ("/data", Status.FAIL)]
    assert findings[2].observed == "nfs4"
    assert findings[2].action is Action.FIX_CONFIG
    assert findings[3].message == "required filesystem not mounted"


def test_mounts_invalid_entry_and_unreadable_table() -> None:
    findings = judge("host.mounts", HostInfo("n1", mounts=MOUNTS), required=[{"fstype": "x"}])
    assert one(findings).status is Status.ERROR
    info = HostInfo("n1", unknown={"mounts": "/proc/mounts: missing"})
    assert one(judge("host.mounts", info, required=["/"])).status is Status.ERROR


# --- services ---------------------------------------------------------------------------

def test_services_skip_without_config_or_systemd() -> None:
    assert one(judge("host.services", HostInfo("n1", has_systemd=True))).status is Status.SKIP
    finding = one(judge("host.services", HostInfo("n1"), required=["slurmd"]))
    assert finding.status is Status.SKIP
    assert "systemd" in finding.message


def test_services_states() -> None:
    info = HostInfo("n1", has_systemd=True, services=[
        ServiceState("slurmd", "active", "running", "loaded"),
        ServiceState("munge", "failed", "failed", "loaded"),
        ServiceState("nvidia-fabricmanager", "inactive", "dead", "not-found"),
        ServiceState("dcgm", "activating", "start", "loaded"),
        ServiceState("sshd", error="systemctl: no answer within 3 s"),
    ])
    required = ["slurmd", "munge", "nvidia-fabricmanager", "dcgm", "sshd", "chronyd"]
    findings = judge("host.services", info, required=required)
    assert [(f.component, f.status) for f in findings] == [
        ("slurmd", Status.PASS), ("munge", Status.FAIL), ("nvidia-fabricmanager", Status.FAIL),
        ("dcgm", Status.WARN), ("sshd", Status.ERROR), ("chronyd", Status.ERROR)]
    assert findings[1].action is Action.FIX_CONFIG
    assert findings[1].observed == "failed/failed"
    assert findings[2].message == "required service not installed"
    assert findings[4].message == "systemctl did not answer"


# --- clock_sync -------------------------------------------------------------------------

def test_clock_sync_states() -> None:
    synced = HostInfo("n1", clock=ClockSync("chronyc", True))
    assert one(judge("host.clock_sync", synced)).status is Status.PASS
    drifting = HostInfo("n1", clock=ClockSync("timedatectl", False, "no"))
    finding = one(judge("host.clock_sync", drifting))
    assert (finding.status, finding.action) == (Status.WARN, Action.FIX_CONFIG)


def test_clock_sync_skip_when_no_tool_error_when_one_hung() -> None:
    none = HostInfo("n1", clock=ClockSync(None, None, "timedatectl: not found"))
    assert one(judge("host.clock_sync", none)).status is Status.SKIP
    hung = HostInfo("n1", clock=ClockSync(None, None), unknown={"clock": "chronyc: no answer"})
    finding = one(judge("host.clock_sync", hung))
    assert finding.status is Status.ERROR
    assert finding.observed == "chronyc: no answer"


# --- kernel_cmdline ---------------------------------------------------------------------

CMDLINE = ["BOOT_IMAGE=/vmlinuz", "ro", "iommu=off", "iommu=pt", "nvidia-drm.modeset=1",
           "quiet", "--", "init_only=1"]


def test_kernel_cmdline_skips_when_nothing_configured() -> None:
    assert one(judge("host.kernel_cmdline", HostInfo("n1", cmdline=CMDLINE))).status is \
        Status.SKIP


def test_kernel_cmdline_passes() -> None:
    findings = judge("host.kernel_cmdline", HostInfo("n1", cmdline=CMDLINE),
                     required=["iommu=pt", "nvidia_drm.modeset=1", "quiet"],
                     forbidden=["iommu=off", "init_only", "nosmt"])
    assert statuses(findings) == [Status.PASS]


def test_kernel_cmdline_failures_name_the_entry() -> None:
    findings = judge("host.kernel_cmdline", HostInfo("n1", cmdline=CMDLINE),
                     required=["iommu=on", "intel_iommu"], forbidden=["iommu=pt", "quiet"])
    assert statuses(findings) == [Status.FAIL] * 4
    assert [f.message for f in findings] == [
        "required kernel parameter missing: iommu=on",
        "required kernel parameter missing: intel_iommu",
        "forbidden kernel parameter set: iommu=pt", "forbidden kernel parameter set: quiet"]
    assert [f.observed for f in findings] == ["iommu=pt", None, "iommu=pt", "quiet"]
    assert {f.action for f in findings} == {Action.FIX_CONFIG}


def test_kernel_cmdline_unreadable_is_error() -> None:
    info = HostInfo("n1", unknown={"cmdline": "/proc/cmdline: unbalanced quote"})
    assert one(judge("host.kernel_cmdline", info, required=["ro"])).status is Status.ERROR


# --- kernel_errors ----------------------------------------------------------------------

def event(kind: str, message: str, age_s: float | None = 60.0) -> KernelEvent:
    return KernelEvent(kind, message, f"[ 1.0] {message}",
                       time=None if age_s is None else NOW - age_s)


def kernel_errors(*events: KernelEvent, **params: Any) -> list[Finding]:
    log = KernelLog("file:/var/log/kern.log", events=list(events), lines_read=100)
    return judge("host.kernel_errors", kernel_log=log, **params)


UC_HEADER = "mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 5: be00000000800400"
CE_HEADER = "mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 7: 8c00004000010090"


@pytest.mark.parametrize(("message", "severity"), [
    (UC_HEADER, "uncorrected"),
    (CE_HEADER, "corrected"),
    ("mce: [Hardware Error]: Machine check events logged", "corrected"),
    ("mce: Uncorrected hardware memory error in user-access at 3f2e4c000", "uncorrected"),
    ("mce: [Hardware Error]: RIP !INEXACT! 10:<ffffffff8100b2d0> {intel_idle+0x50/0x90}",
     None),
])
def test_mce_severity(message: str, severity: str | None) -> None:
    assert mce_severity(event("mce", message)) == severity


def test_kernel_errors_clean_log_passes() -> None:
    finding = one(kernel_errors(event("mce", CE_HEADER)))
    assert finding.status is Status.PASS
    assert finding.observed["mce_corrected"] == 1


def test_kernel_errors_uncorrected_mce_and_hard_lockup_fail() -> None:
    findings = kernel_errors(event("mce", UC_HEADER),
                             event("hard_lockup", "Watchdog detected hard LOCKUP on cpu 12"))
    assert [(f.status, f.action) for f in findings] == [
        (Status.FAIL, Action.INVESTIGATE), (Status.FAIL, Action.REBOOT)]


def test_kernel_errors_lockups_hung_tasks_and_nmis_warn() -> None:
    findings = kernel_errors(
        event("soft_lockup", "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [nv:42]"),
        event("hung_task", "INFO: task jbd2/md0-8:612 blocked for more than 120 seconds."),
        event("hung_task", "INFO: task python:4242 blocked for more than 120 seconds."),
        event("nmi", "Uhhuh. NMI received for unknown reason 2d on CPU 0."))
    assert statuses(findings) == [Status.WARN] * 3
    assert [f.observed for f in findings] == [1, 2, 1]


def test_kernel_errors_window_and_undated_events() -> None:
    old = event("hard_lockup", "Watchdog detected hard LOCKUP on cpu 1", age_s=8000)
    assert one(kernel_errors(old)).status is Status.PASS
    assert one(kernel_errors(old, window_s=9000)).status is Status.FAIL
    undated = event("hard_lockup", "Watchdog detected hard LOCKUP on cpu 1", age_s=None)
    assert one(kernel_errors(undated)).status is Status.FAIL


def test_kernel_errors_corrected_mce_threshold() -> None:
    logged = event("mce", "mce: [Hardware Error]: Machine check events logged")
    assert one(kernel_errors(*[logged] * 9)).status is Status.PASS
    finding = one(kernel_errors(*[logged] * 10))
    assert (finding.status, finding.observed) == (Status.WARN, 10)


def test_kernel_errors_unreadable_log_is_error() -> None:
    log = KernelLog("kmsg", unknown={"kmsg": "permission denied"})
    finding = one(judge("host.kernel_errors", kernel_log=log))
    assert finding.status is Status.ERROR
    assert finding.observed == {"kmsg": "permission denied"}


# --- dstate_processes -------------------------------------------------------------------

def dstate_sample(*procs: StuckProcess, taken_at: float = NOW - 3,
                  unknown: dict[str, str] | None = None) -> Snapshot:
    return Snapshot("n1", taken_at, host=HostInfo("n1", dstate=list(procs),
                                                    unknown=unknown or {}))


SMI = StuckProcess(1234, "nvidia-smi", 987654, "os_acquire_mutex")
CP = StuckProcess(2345, "cp", 990000, "rpc_wait_bit_killable")
SYNC = StuckProcess(3456, "sync", 990100, None)


def dstate(before: Snapshot | None, *now: StuckProcess, **params: Any) -> list[Finding]:
    return judge("host.dstate_processes", HostInfo("n1", dstate=list(now)), previous=before,
                 **params)


def test_dstate_skips_without_previous_or_when_too_close() -> None:
    assert one(dstate(None, SMI)).status is Status.SKIP
    assert one(dstate(dstate_sample(SMI, taken_at=NOW - 0.5), SMI)).status is Status.SKIP


def test_dstate_same_process_in_both_samples_warns() -> None:
    finding = one(dstate(dstate_sample(SMI, CP), SMI, SYNC))
    assert finding.status is Status.WARN
    assert finding.observed == [{"pid": 1234, "name": "nvidia-smi",
                                 "wchan": "os_acquire_mutex"}]


def test_dstate_reused_pid_is_another_process() -> None:
    reused = StuckProcess(1234, "nvidia-smi", 999999, None)
    assert one(dstate(dstate_sample(SMI), reused)).status is Status.PASS


def test_dstate_many_stuck_fail_and_ignore_list() -> None:
    before = dstate_sample(SMI, CP, SYNC)
    assert one(dstate(before, SMI, CP, SYNC)).status is Status.FAIL
    assert one(dstate(before, SMI, CP, SYNC, ignore=["sync"])).status is Status.WARN
    assert one(dstate(before, SMI, CP, SYNC, fail_count=4)).status is Status.WARN


def test_dstate_unreadable_process_list_is_error() -> None:
    before = dstate_sample(unknown={"dstate": "/proc: missing"})
    assert one(dstate(before, SMI)).status is Status.ERROR


# --- pcie_aer ---------------------------------------------------------------------------

def aer_dev(bdf: str, cor: int = 0, nonfatal: int = 0, fatal: int = 0) -> PciDevice:
    return PciDevice(bdf, 0x10DE, 0x2330, 0x030200, aer={
        "correctable": {"RxErr": cor, "BadTLP": 0, "TOTAL_ERR_COR": cor},
        "nonfatal": {"CmpltTO": nonfatal, "TOTAL_ERR_NONFATAL": nonfatal},
        "fatal": {"SurpriseDown": fatal, "TOTAL_ERR_FATAL": fatal},
    })


def aer(before: list[PciDevice] | None, now: list[PciDevice], elapsed_s: float = 60.0,
        **params: Any) -> list[Finding]:
    previous = None if before is None else Snapshot("n1", NOW - elapsed_s, pci=before)
    return judge("host.pcie_aer", pci=now, previous=previous, **params)


def test_aer_skips_without_previous_or_aer() -> None:
    assert one(aer(None, [aer_dev("0000:1b:00.0")])).status is Status.SKIP
    bare = [PciDevice("0000:1b:00.0", 0x10DE, 0x2330, 0x030200)]
    assert one(aer(bare, bare)).message == "no PCI device exposes AER counters"


def test_aer_no_growth_passes() -> None:
    devices = [aer_dev("0000:1b:00.0", cor=5), aer_dev("0000:43:00.0")]
    finding = one(aer(devices, devices))
    assert (finding.status, finding.observed) == (Status.PASS, 2)


def test_aer_fatal_growth_fails_with_reboot() -> None:
    findings = aer([aer_dev("0000:1b:00.0"), aer_dev("0000:43:00.0")],
                   [aer_dev("0000:1b:00.0", fatal=1), aer_dev("0000:43:00.0")])
    finding = one(findings)
    assert (finding.status, finding.action, finding.component) == (
        Status.FAIL, Action.REBOOT, "0000:1b:00.0")
    assert finding.observed == {"SurpriseDown": 1, "TOTAL_ERR_FATAL": 1}


def test_aer_nonfatal_warns_or_fails_by_param() -> None:
    before, now = [aer_dev("0000:1b:00.0")], [aer_dev("0000:1b:00.0", nonfatal=2)]
    assert one(aer(before, now)).status is Status.WARN
    assert one(aer(before, now, nonfatal_fail=True)).status is Status.FAIL


def test_aer_correctable_rate_per_minute() -> None:
    before = [aer_dev("0000:1b:00.0", cor=100)]
    assert one(aer(before, [aer_dev("0000:1b:00.0", cor=110)])).status is Status.PASS
    finding = one(aer(before, [aer_dev("0000:1b:00.0", cor=106)], elapsed_s=30))
    assert finding.status is Status.WARN
    assert finding.observed["per_min"] == 12.0


def test_aer_counter_that_went_down_was_reset() -> None:
    assert aer_growth({"RxErr": 50, "BadTLP": 2}, {"RxErr": 3, "BadTLP": 2}) == {
        "RxErr": 3}
    finding = one(aer([aer_dev("0000:1b:00.0", fatal=5)], [aer_dev("0000:1b:00.0", fatal=1)]))
    assert finding.status is Status.FAIL
    assert finding.observed["TOTAL_ERR_FATAL"] == 1


def test_aer_device_without_total_is_summed() -> None:
    dev_before = PciDevice("0000:1b:00.0", 0x15B3, 0x1021, 0x020700,
                           aer={"nonfatal": {"CmpltTO": 0, "UnxCmplt": 0}})
    dev_now = PciDevice("0000:1b:00.0", 0x15B3, 0x1021, 0x020700,
                        aer={"nonfatal": {"CmpltTO": 1, "UnxCmplt": 1}})
    assert one(aer([dev_before], [dev_now])).status is Status.WARN


# --- end to end: a collected fixture tree -------------------------------------------------

def test_fixture_tree_through_collector_and_checks() -> None:
    def runner(argv: list[str], timeout_s: float) -> CommandResult:
        if argv[0] == "systemctl":
            return CommandResult(argv, 0, "Id=slurmd.service\nActiveState=inactive\n"
                                          "SubState=dead\nLoadState=loaded\n")
        return CommandResult(argv, None, error=f"{argv[0]}: not found")

    params = {"host.services": {"required": ["slurmd"]}}
    env = SourceEnv(node="n1", root=FIXTURES / "healthy", runner=runner, params=params)
    info = host_collector.collect(env, SourceStats(), time.monotonic() + 5)
    assert statuses(judge("host.services", info, required=["slurmd"])) == [Status.FAIL]
    assert statuses(judge("host.cpu_count", info, min=8)) == [Status.PASS]
    assert statuses(judge("host.memory", info, min_gib=1900)) == [Status.PASS] * 3
    assert statuses(judge("host.mounts", info, required=[
        {"path": "/home", "fstype": "nfs4"}, "/mnt/my data"])) == [Status.PASS] * 2
    assert statuses(judge("host.kernel_cmdline", info, required=["iommu=pt"],
                          forbidden=["single"])) == [Status.PASS]
    assert statuses(judge("host.clock_sync", info)) == [Status.SKIP]
    space = judge("host.disk", info, paths=["/"])[0]
    assert space.message.endswith("space")
    assert 0 <= space.observed <= 100
    previous = Snapshot("n1", NOW - 5, host=info)
    findings = judge("host.dstate_processes", info, previous=previous)
    assert one(findings).status is Status.FAIL  # the same three D-state processes
