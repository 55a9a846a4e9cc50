"""Kernel-log lines in the wordings current drivers and kernels print, parsed and judged.

Real lines come from tests/fixtures/kernel_log (Apache-2.0, PROVENANCE.md). Where no real
capture exists the line is constructed from the format string of the code that prints it,
cited beside it.
"""

from __future__ import annotations

from pathlib import Path

from clusterdiag.agent.collectors.kernel_log import parse_lines, worth_parsing
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.kernel import KernelLog
from clusterdiag.agent.model.pci import MELLANOX_VENDOR, NVIDIA_VENDOR, PciDevice
from clusterdiag.checks.core.finding import Action, Finding, Status
from tests.checks.gpu.factory import bad, make_gpu, make_snap
from tests.checks.gpu.factory import run as gpu_run
from tests.checks.harness import run_check
from tests.checks.ib.factory import eight_hcas
from tests.checks.ib.factory import make_snap as ib_snap
from tests.checks.ib.factory import run as ib_run
from tests.checks.nvlink.factory import judge as nvswitch_judge
from tests.checks.nvlink.factory import make_snapshot as nvswitch_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_log"
NOW = 1_700_000_000.0


def _fixture_line(name: str, number: int) -> str:
    return (FIXTURES / name).read_text().splitlines()[number - 1]


def _parse(*lines: str) -> KernelLog:
    assert all(worth_parsing(line) for line in lines)  # the prefilter keeps each
    return parse_lines(lines, now=NOW)


# --- PCIe AER: host.kernel_errors at quick --------------------------------------------
# Constructed from drivers/pci/pcie/aer.c (6.x): aer_print_port_info's
# "%s%s error message received from %04x:%02x:%02x.%d" with aer_error_severity_string
# "Uncorrectable (Fatal)" / "Uncorrectable (Non-Fatal)" / "Correctable", aer_print_error's
# "PCIe Bus Error: severity=%s, type=%s, (%s)", and drivers/pci/pcie/err.c
# report_error_detected's "can't recover (no error_detected callback)"; all behind the
# "AER: " dev_fmt of those files.
AER_GPU_FATAL = (
    "[ 5120.112233] pcieport 0000:15:01.0: AER: Uncorrectable (Fatal) error message "
    "received from 0000:1b:00.0",
    "[ 5120.112240] nvidia 0000:1b:00.0: AER: PCIe Bus Error: severity=Uncorrectable (Fatal), "
    "type=Inaccessible, (Unregistered Agent ID)",
    "[ 5120.112301] nvidia 0000:1b:00.0: AER: can't recover (no error_detected callback)",
)
AER_NIC_NONFATAL = (
    "[ 6001.000100] pcieport 0000:37:01.0: AER: Uncorrectable (Non-Fatal) error message "
    "received from 0000:3d:00.0",
)
AER_ELSEWHERE = (
    "[ 6002.000100] pcieport 0000:5d:01.0: AER: Uncorrectable (Fatal) error message "
    "received from 0000:5e:00.0",  # an NVMe drive: not an accelerator's path
    "[ 6003.000100] pcieport 0000:15:01.0: AER: Correctable error message received from "
    "0000:1b:00.0",
)


def _pci() -> list[PciDevice]:
    return [
        PciDevice("0000:1b:00.0", NVIDIA_VENDOR, 0x2330, 0x030200,
                  path=["0000:15:01.0", "0000:16:00.0"]),
        PciDevice("0000:3d:00.0", MELLANOX_VENDOR, 0x1021, 0x020700, path=["0000:37:01.0"]),
        PciDevice("0000:5e:00.0", 0x144D, 0xA80A, 0x010802, path=["0000:5d:01.0"]),
    ]


def _host_quick(log: KernelLog) -> list[Finding]:
    snap = Snapshot(node="n1", taken_at=NOW, pci=_pci(), kernel_log=log)
    return run_check("host.kernel_errors", snap, level="quick", now=NOW)


def test_aer_current_wording_fatal_fails_and_nonfatal_warns_at_quick() -> None:
    findings = _host_quick(_parse(*AER_GPU_FATAL, *AER_NIC_NONFATAL, *AER_ELSEWHERE))
    judged = {f.component: (f.status, f.action) for f in findings}
    assert judged == {"0000:1b:00.0": (Status.FAIL, Action.REBOOT),
                      "0000:3d:00.0": (Status.WARN, Action.INVESTIGATE)}
    gpu = next(f for f in findings if f.component == "0000:1b:00.0")
    assert gpu.observed["count"] == 3


def test_aer_on_a_bridge_above_the_gpu_fails() -> None:
    line = ("[ 5120.1] pcieport 0000:15:01.0: AER: Uncorrectable (Fatal) error message "
            "received from 0000:16:00.0")
    (finding,) = _host_quick(_parse(line))
    assert (finding.component, finding.status) == ("0000:16:00.0", Status.FAIL)
    assert finding.observed["path_of"] == "0000:1b:00.0"


def test_aer_corrected_alone_passes() -> None:
    (finding,) = _host_quick(_parse(AER_ELSEWHERE[1]))
    assert finding.status is Status.PASS


# --- mlx5 load failures: ib.kernel_errors -----------------------------------------------
# Constructed from drivers/net/ethernet/mellanox/mlx5/core/main.c probe_one's
# mlx5_core_err(dev, "mlx5_init_one failed with error code %d\n", err) (older kernels:
# "mlx5_load_one failed with error code %d", under mlx5_core_err's "%s:%d:(pid %d): "),
# and drivers/base/dd.c's "%s: probe of %s failed with error %d" (older kernels) and
# dev_err "probe with driver %s failed with error %d" (current).
MLX5_LOAD_FAILED = (
    "[   98.405123] mlx5_core 0000:3d:00.0: mlx5_load_one:1247:(pid 1523): mlx5_load_one "
    "failed with error code -110",
    "[   98.405200] mlx5_core 0000:3d:00.0: probe_one:1934:(pid 1523): mlx5_init_one failed "
    "with error code -110",
    "[   98.405300] mlx5_core: probe of 0000:3d:00.0 failed with error -110",
    "[   98.405400] mlx5_core 0000:3d:00.0: probe with driver mlx5_core failed with error -110",
)


def test_mlx5_load_failures_in_every_wording_fail_reboot() -> None:
    log = _parse(*MLX5_LOAD_FAILED)
    assert [e.kind for e in log.events] == ["mlx5_probe_failed"] * 4
    assert {e.device for e in log.events} == {"0000:3d:00.0"}
    findings = ib_run("ib.kernel_errors", ib_snap(eight_hcas(), log=log))
    assert [(f.component, f.status, f.action) for f in findings] == [
        ("0000:3d:00.0", Status.FAIL, Action.REBOOT)]
    assert findings[0].observed["count"] == 4


# --- Xid with an elided address: gpu.xid ------------------------------------------------
# gpud_sxid_readme.txt line 1 (real), its address elided as "PCI:..." (constructed).
XID79 = _fixture_line("gpud_sxid_readme.txt", 1)


def test_xid_with_elided_address_is_judged_on_an_unidentified_gpu() -> None:
    log = _parse(XID79.replace("PCI:0000:91:00", "PCI:..."))
    assert [(x.xid, x.pci_bdf) for x in log.xids] == [(79, "")]
    findings = bad(gpu_run("gpu.xid", make_snap([make_gpu(0)], kernel_log=log), now=NOW))
    assert [(f.component, f.status, f.action, f.message) for f in findings] == [
        ("node", Status.FAIL, Action.REBOOT,
         "Xid 79 (GPU_HAS_FALLEN_OFF_THE_BUS) on an unidentified GPU")]


# --- a module reload is no reset for a GPU that did not come back -----------------------
# The real fall-off line, then kernel-open/nvidia/nv.c nvidia_init_module's
# "NVRM: The NVIDIA probe routine failed for %d device(s).\n" and "NVRM: loading %s"
# (pNVRM_ID, "NVIDIA UNIX x86_64 Kernel Module  <version>  <build date>"), constructed.
RELOAD_AFTER_FALL = (
    XID79,
    "[6781900.100001] NVRM: The NVIDIA probe routine failed for 1 device(s).",
    "[6781900.100002] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  "
    "Thu Oct 19 18:56:32 UTC 2023",
)


def test_reload_does_not_clear_a_fallen_gpu_that_never_probed_again() -> None:
    log = _parse(*RELOAD_AFTER_FALL)
    assert [e.kind for e in log.events] == ["gpu_probe_failed", "gpu_reset"]
    # NVML sees only the GPU that probed: 91:00 is not among them.
    findings = bad(gpu_run("gpu.xid", make_snap([make_gpu(0)], kernel_log=log), now=NOW))
    assert [(f.component, f.status, f.action) for f in findings] == [
        ("node", Status.FAIL, Action.REBOOT)]
    assert findings[0].observed["gpu"] == "0000:91:00"


def test_reload_clears_the_xid_of_a_gpu_that_answers_again() -> None:
    log = _parse(*RELOAD_AFTER_FALL)
    gpu = make_gpu(0, pci_bdf="00000000:91:00.0")
    assert not bad(gpu_run("gpu.xid", make_snap([gpu], kernel_log=log), now=NOW))


# --- SXid severity from the Severity record: nvswitch.sxid ------------------------------
# gpud_sxid_readme.txt lines 4 and 8 (nvswitch2's "Severity 1 ..." records, real), with
# the code swapped for one the catalog lacks (constructed): 1 is
# NVSWITCH_ERROR_SEVERITY_FATAL (src/common/nvswitch/interface/ctrl_dev_nvswitch.h),
# printed by _nvswitch_dump_error_entry in src/common/nvswitch/kernel/nvswitch.c.
SEVERITY_ONLY = tuple(_fixture_line("gpud_sxid_readme.txt", n).replace("20034", "19999")
                      for n in (4, 8))


def test_sxid_severity_1_record_is_fatal() -> None:
    log = _parse(*SEVERITY_ONLY)
    findings = nvswitch_judge("nvswitch.sxid", nvswitch_snapshot(kernel_log=log))
    assert [(f.component, f.status, f.action) for f in findings] == [
        ("nvswitch2", Status.FAIL, Action.REBOOT)]


def test_sxid_severity_0_record_stays_a_warning() -> None:
    log = _parse(*(line.replace("Severity 1", "Severity 0") for line in SEVERITY_ONLY))
    findings = nvswitch_judge("nvswitch.sxid", nvswitch_snapshot(kernel_log=log))
    assert [(f.component, f.status) for f in findings] == [("nvswitch2", Status.WARN)]


def test_without_nvml_the_log_decides_whether_a_reload_brought_the_gpus_back() -> None:
    """A kernel log read alone (no NVML): a reload with the driver's probe failure beside it
    clears nothing; a clean reload clears the Xids before it, as it always did."""
    failed = _parse(*RELOAD_AFTER_FALL)
    assert [(f.status, f.action) for f in bad(gpu_run(
        "gpu.xid", make_snap([], kernel_log=failed), now=NOW))] == [
        (Status.FAIL, Action.REBOOT)]
    clean = _parse(RELOAD_AFTER_FALL[0], RELOAD_AFTER_FALL[2])
    assert not bad(gpu_run("gpu.xid", make_snap([], kernel_log=clean), now=NOW))


def test_a_reload_clears_an_unidentified_gpus_xid_when_every_gpu_answers() -> None:
    log = _parse(XID79.replace("PCI:0000:91:00", "PCI:..."), RELOAD_AFTER_FALL[2])
    assert not bad(gpu_run("gpu.xid", make_snap([make_gpu(0)], kernel_log=log), now=NOW))


def test_cant_recover_alone_is_no_fatal_error() -> None:
    """err.c prints "can't recover" for a driver without error_detected after a non-fatal
    error too: with no fatal line for the device it is a warning, never a reboot."""
    nonfatal = ("[ 5120.112233] pcieport 0000:15:01.0: AER: Uncorrectable (Non-Fatal) error "
                "message received from 0000:1b:00.0", AER_GPU_FATAL[2])
    judged = [(f.component, f.status, f.action) for f in _host_quick(_parse(*nonfatal))]
    assert judged == [("0000:1b:00.0", Status.WARN, Action.INVESTIGATE)]
