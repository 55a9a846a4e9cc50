"""gpu.xid (checks/gpu/xid.py), on built events and on real kernel-log lines."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from clusterdiag.agent.collectors.kernel_log import parse_lines
from clusterdiag.agent.model.gpu import Gpu, NvmlEvent
from clusterdiag.agent.model.kernel import KernelEvent, KernelLog
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import (
    NOW,
    bad,
    klog,
    make_gpu,
    make_snap,
    only,
    run,
    xid_line,
    xid_run,
)


def test_xid_recent_79_on_an_answering_gpu_fails_reboot() -> None:
    findings = xid_run(xid_line(79, 1, pci="0000:28:00", message="GPU has fallen off the bus."))
    fail = only(findings, Status.FAIL)
    assert [(f.component, f.action, f.message) for f in fail] == [
        ("gpu1", Action.REBOOT, "Xid 79 (GPU_HAS_FALLEN_OFF_THE_BUS)")]
    assert fail[0].observed["occurrences"] == 1
    assert ("gpu0", Status.PASS) in [(f.component, f.status) for f in findings]


def test_xid_bus_id_matching_ignores_case_domain_width_and_function() -> None:
    gpu = make_gpu(0, pci_bdf="00000000:9B:00.0")
    findings = xid_run(xid_line(79, pci="0000:9b:00.0"), gpus=[gpu])
    assert [f.component for f in only(findings, Status.FAIL)] == ["gpu0"]


def test_xid_outside_the_window_is_history() -> None:
    findings = xid_run(xid_line(79, 0, age=3 * 3600))
    assert not bad(findings)
    history = [f for f in findings if f.component == "gpu0" and f.observed]
    assert history[0].observed["history"] == {79: 1}
    assert "older" in history[0].message


def test_xid_window_is_a_param() -> None:
    assert only(xid_run(xid_line(79, 0, age=3 * 3600), window_s=4 * 3600), Status.FAIL)


def test_xid_before_a_driver_reload_is_history() -> None:
    reset = KernelEvent(kind="gpu_reset", message="NVRM: loading NVIDIA UNIX x86_64 Kernel "
                        "Module 570.124.06", raw="...", device=None, time=NOW - 30)
    assert not bad(xid_run(xid_line(79, 0, age=60), events=[reset]))
    # ... but one after the reload still counts.
    assert only(xid_run(xid_line(79, 0, age=10), events=[reset]), Status.FAIL)


def test_xid_reset_of_another_gpu_does_not_clear_this_one() -> None:
    reset = KernelEvent(kind="gpu_reset", message="GPU reset executed: GPU-00000001",
                        raw="...", device="GPU-00000001", time=NOW - 30)
    findings = xid_run(xid_line(79, 0, age=60), xid_line(79, 1, age=60), events=[reset])
    assert [f.component for f in only(findings, Status.FAIL)] == ["gpu0"]


def test_xid_reset_ordered_by_uptime_when_there_is_no_wall_time() -> None:
    line = dataclasses.replace(xid_line(79, 0, age=None), uptime_s=100.0)
    reset = KernelEvent(kind="gpu_reset", message="NVRM: loading NVIDIA UNIX ...", raw="...",
                        uptime_s=200.0)
    assert not bad(xid_run(line, events=[reset]))


def test_xid_before_the_last_boot_is_history() -> None:
    assert not bad(xid_run(xid_line(79, 0, age=600), boot_time=NOW - 300))


def test_xid_without_time_counts_as_recent() -> None:
    assert only(xid_run(xid_line(79, 0, age=None)), Status.FAIL)


def test_xid_application_error_alone_never_fails() -> None:
    one_job = [xid_line(13, 0, age=10 + i * 0.001) for i in range(16)]  # one burst
    findings = xid_run(*one_job)
    assert not bad(findings)
    (note,) = [f for f in findings if f.observed and f.observed.get("xid") == 13]
    assert (note.observed["lines"], note.observed["occurrences"]) == (16, 1)


def test_xid_application_error_across_jobs_warns_never_fails() -> None:
    jobs = [xid_line(13, 0, age=600 * i + 10, pid=1000 + i) for i in range(3)]
    findings = xid_run(*jobs)
    assert [(f.status, f.action, f.message) for f in bad(findings)] == [
        (Status.WARN, Action.INVESTIGATE, "Xid 13 (GR_EXCEPTION) repeated across jobs")]
    same_job = [xid_line(13, 0, age=600 * i + 10, pid=1000) for i in range(3)]
    assert not bad(xid_run(*same_job))


def test_xid_repeat_threshold_counts_bursts() -> None:
    # 46 (RESET_GPU) fails on one occurrence; a site that wants two bursts says so.
    limit = {"46": 2}  # string keys, as YAML config gives them
    one = xid_run(xid_line(46, 0, age=100), repeat_thresholds=limit)
    assert [(f.status, f.action) for f in bad(one)] == [(Status.WARN, Action.RESET_GPU)]
    burst = xid_run(xid_line(46, 0, age=100), xid_line(46, 0, age=95), repeat_thresholds=limit)
    assert only(burst, Status.FAIL) == []
    two = xid_run(xid_line(46, 0, age=1000), xid_line(46, 0, age=100), repeat_thresholds=limit)
    assert [(f.status, f.action) for f in bad(two)] == [(Status.FAIL, Action.RESET_GPU)]
    assert [f.status for f in bad(xid_run(xid_line(46, 0, age=100)))] == [Status.FAIL]


def test_xid_ignore_param() -> None:
    assert not bad(xid_run(xid_line(79, 0), ignore=[79]))


def test_xid_unknown_code_warns() -> None:
    findings = xid_run(xid_line(999, 0))
    assert [(f.status, f.message) for f in bad(findings)] == [
        (Status.WARN, "Xid 999 not in the catalog")]


def test_xid_48_defers_to_ecc_when_the_count_shows_it() -> None:
    line = xid_line(48, 0, message="An uncorrectable double bit error (DBE) has been detected")
    shown = xid_run(line, gpus=[make_gpu(0, ecc_volatile_uncorrected=2)])
    assert not bad(shown)
    assert any("gpu.ecc_uncorrected" in f.message for f in shown)
    # With the volatile count at 0 the Xid is the only evidence: it fails.
    hidden = xid_run(line, gpus=[make_gpu(0)])
    assert [(f.status, f.action) for f in bad(hidden)] == [(Status.FAIL, Action.RESET_GPU)]


def test_xid_on_a_lost_gpu_is_left_to_gpu_responsive() -> None:
    lost = Gpu(index=1, responsive=False, lost="GpuIsLost", errors={"handle": "GpuIsLost"})
    findings = xid_run(xid_line(79, 1), xid_line(119, 1), gpus=[make_gpu(0), lost])
    assert not bad(findings)
    assert {f.component for f in findings if f.observed and "xid" in f.observed} == {"gpu1"}


def test_xid_for_a_bus_id_nvml_does_not_know_fails_on_the_node() -> None:
    findings = xid_run(xid_line(79, pci="0000:c1:00.0"))
    fail = only(findings, Status.FAIL)
    assert [(f.component, f.observed["gpu"]) for f in fail] == [("node", "0000:c1:00")]


def test_xid_154_is_judged_by_the_action_it_reports() -> None:
    msg = "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
    no_field = make_gpu(0, recovery_action=None,
                        unsupported={"recovery_action": "NotSupported"})
    findings = xid_run(xid_line(154, 0, message=msg), gpus=[no_field])
    assert [(f.status, f.action) for f in bad(findings)] == [(Status.FAIL, Action.RESET_GPU)]
    # Field 230 reading 0 does not cancel what the line asked for (a logged reset does).
    assert [f.status for f in bad(xid_run(xid_line(154, 0, message=msg),
                                          gpus=[make_gpu(0)]))] == [Status.FAIL]
    reboot = "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x2 (Node Reboot)"
    assert [f.action for f in bad(xid_run(xid_line(154, 0, message=reboot)))] == [
        Action.REBOOT]
    cleared = "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
    assert not bad(xid_run(xid_line(154, 0, message=cleared)))


FATAL_149 = "NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x0 0x0 0x0 0x0)"
NONFATAL_145 = "RLW_SRC_TRACK Nonfatal XC1 i0 Link 03 (0x040868e2 0x00000008 0x0 0x0 0x0 0x0)"


def test_xid_nvlink5_fatal_fails_nonfatal_only_counts() -> None:
    findings = xid_run(xid_line(149, 0, message=FATAL_149))
    assert [(f.status, f.action) for f in bad(findings)] == [(Status.FAIL, Action.RESET_GPU)]
    # Field 230 reading 0 (make_gpu's default) cancels nothing; a reset after it does.
    reset = KernelEvent(kind="gpu_reset", message="GPU reset executed: GPU-00000000",
                        raw="...", device="GPU-00000000", time=NOW - 30)
    assert not bad(xid_run(xid_line(149, 0, message=FATAL_149), events=[reset]))
    assert not bad(xid_run(xid_line(145, 0, message=NONFATAL_145)))
    three = [xid_line(145, 0, age=100 + 600 * i, message=NONFATAL_145) for i in range(3)]
    assert [(f.status, f.action) for f in bad(xid_run(*three))] == [
        (Status.WARN, Action.INVESTIGATE)]


def test_xid_nvlink5_recovery_field_adds_never_cancels() -> None:
    """A Nonfatal line with field 230 asking for a reset: gpu.recovery_action fails it, and
    gpu.xid does not say the opposite (it counts the line as it would anyway)."""
    gpus = [make_gpu(0, recovery_action=1)]
    snap = make_snap(gpus, kernel_log=klog(xid_line(145, 0, message=NONFATAL_145)))
    assert [f.status for f in bad(run("gpu.recovery_action", snap))] == [Status.FAIL]
    assert not bad(run("gpu.xid", snap))
    fatal = make_snap(gpus, kernel_log=klog(xid_line(149, 0, message=FATAL_149)))
    assert [f.status for f in bad(run("gpu.xid", fatal))] == [Status.FAIL]


def test_xid_from_nvml_events_and_no_double_count() -> None:
    event = NvmlEvent(gpu_index=1, event_type=0x8, xid=79, time=NOW - 5)
    findings = xid_run(nvml={"events": [event]})
    assert [f.component for f in only(findings, Status.FAIL)] == ["gpu1"]
    both = xid_run(xid_line(79, 1, age=5), nvml={"events": [event]})
    (fail,) = only(both, Status.FAIL)
    assert fail.observed["lines"] == 1


def test_xid_skips_without_a_kernel_log() -> None:
    snap = dataclasses.replace(make_snap(), kernel_log=None)
    assert [f.status for f in run("gpu.xid", snap)] == [Status.SKIP]
    unreadable = KernelLog(source="kmsg", unknown={"kmsg": "PermissionError: [Errno 1]"})
    snap = dataclasses.replace(make_snap(), kernel_log=unreadable)
    assert [f.status for f in run("gpu.xid", snap)] == [Status.SKIP]



# --- gpu.xid on real kernel-log lines (tests/fixtures/kernel_log, Apache-2.0) ---------

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kernel_log"


def _real(name: str, now: float) -> KernelLog:
    return parse_lines((FIXTURES / name).read_text().splitlines(), now=now)


def test_xid_real_burst_of_xid_13_is_one_job_and_passes() -> None:
    log = _real("gpud_memory_dmesg.decode.iso.log", now=1737434504 + 60)
    gpu = make_gpu(0, pci_bdf="00000000:38:00.0")
    findings = run("gpu.xid", make_snap([gpu], kernel_log=log), now=1737434504 + 60)
    assert not bad(findings), findings
    (x13,) = [f for f in findings if f.observed and f.observed.get("xid") == 13]
    assert (x13.observed["lines"], x13.observed["occurrences"]) == (16, 1)


def test_xid_real_gsp_timeouts_fail_reset_gpu() -> None:
    """119 GSP_RPC_TIMEOUT: NVIDIA's immediate action is RESET_GPU."""
    now = 1740328213 + 60
    log = _real("gpud_dmesg-with-xid-119.log", now=now)
    gpu = make_gpu(4, pci_bdf="00000000:9B:00.0")
    findings = run("gpu.xid", make_snap([gpu], kernel_log=log), now=now)
    (fail,) = bad(findings)
    assert (fail.status, fail.component, fail.action) == (Status.FAIL, "gpu4", Action.RESET_GPU)
    assert fail.observed["nvidia_action"] == "RESET_GPU"
    assert (fail.observed["lines"], fail.observed["occurrences"]) == (5, 3)


def test_xid_real_gb200_nvlink5_follows_the_recovery_action() -> None:
    log = _real("gpud_gb200_kmsg.txt", now=NOW)
    bus = ["0008", "0009", "0018", "0019"]
    no_field = [make_gpu(i, pci_bdf=f"{b}:01:00.0", recovery_action=None,
                         unsupported={"recovery_action": "NotSupported"})
                for i, b in enumerate(bus)]
    findings = run("gpu.xid", make_snap(no_field, kernel_log=log))
    fails = only(findings, Status.FAIL)
    assert {f.component for f in fails} == {"gpu0", "gpu1", "gpu2", "gpu3"}
    assert {f.action for f in fails} == {Action.RESET_GPU}
    # The recovery-action field reading 0 cancels nothing: the Fatal 149s and the 154s
    # that ask for a reset still fail, and only they (the Nonfatal lines count).
    readable = [dataclasses.replace(g, recovery_action=0, unsupported={}) for g in no_field]
    findings = run("gpu.xid", make_snap(readable, kernel_log=log))
    assert [(f.component, f.message) for f in only(findings, Status.FAIL)] == [
        (f.component, f.message) for f in fails]
    assert not [f for f in fails if "Nonfatal" in str(f.observed)]



def test_xid_nvml_event_long_after_a_logged_one_is_its_own_occurrence() -> None:
    event = NvmlEvent(gpu_index=0, event_type=0x8, xid=46, time=NOW - 5)
    findings = xid_run(xid_line(46, 0, age=1000), nvml={"events": [event]})
    (fail,) = only(findings, Status.FAIL)
    assert (fail.observed["lines"], fail.observed["occurrences"]) == (2, 2)


def test_xid_a_kernel_log_read_cut_short_warns_instead_of_passing() -> None:
    log = klog()
    log.unknown["file"] = ("stopped at the source deadline after 52,000 lines read newest "
                           "first, back to 2025-06-15T10:00:00Z: older lines were not read")
    findings = run("gpu.xid", make_snap([make_gpu(0), make_gpu(1)], kernel_log=log))
    (warn,) = only(findings, Status.WARN)
    assert warn.message.startswith("kernel log read in part: stopped at the source deadline")
    assert "back to 2025-06-15T10:00:00Z" in warn.message
    assert not any("no Xid errors" in f.message for f in findings)


def test_xid_a_kernel_log_with_approximate_times_warns() -> None:
    log = klog(xid_line(79, 0, age=10 * 86400))
    log.unknown["time"] = "no line prints a time this parser can place: approximate"
    findings = run("gpu.xid", make_snap([make_gpu(0), make_gpu(1)], kernel_log=log))
    assert [f.message for f in only(findings, Status.WARN)] == [
        "kernel log times approximate: no line prints a time this parser can place: "
        "approximate"]
    assert not only(findings, Status.FAIL)


def test_xid_run_on_a_long_file_judges_the_window(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: read_file on a log whose recent lines sit at its end, deadline passed."""
    from clusterdiag.agent.collectors import kernel_log

    monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", 4096)

    path = tmp_path / "kern.log"
    stamp = "%Y-%m-%dT%H:%M:%S+00:00"
    old = [time.strftime(stamp, time.gmtime(NOW - 9000 + i)) + " systemd[1]: Started x."
           for i in range(3000)]
    # Copied from tests/fixtures/real/xid/kmsg.txt line 1 (message part), bus of gpu1.
    xid = ("NVRM: Xid (PCI:0000:28:00): 79, pid='<unknown>', name=<unknown>, "
           "GPU has fallen off the bus.")
    path.write_text("\n".join([*old, time.strftime(stamp, time.gmtime(NOW - 60)) + " " + xid])
                    + "\n")
    log = kernel_log.read_file(path, now=NOW, lookback_s=7200, deadline=time.monotonic() - 1)
    findings = run("gpu.xid", make_snap([make_gpu(0), make_gpu(1)], kernel_log=log))
    assert [(f.component, f.status) for f in bad(findings)] == [
        ("gpu1", Status.FAIL), ("node", Status.WARN)]
