"""The gpu.* checks on snapshots built directly from the model dataclasses."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.kernel_log import parse_lines
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import Gpu, GpuProcess, NvmlEvent, NvmlInfo
from clusterdiag.agent.model.kernel import KernelEvent, KernelLog, XidEvent
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.checks import REGISTRY  # reading it loads every family: gpu.* is in two
from clusterdiag.checks.finding import Action, Finding, Status
from clusterdiag.checks.profile import Profile, load_profile
from clusterdiag.checks.registry import CheckContext

NOW = 1_800_000_000.0
H100 = "NVIDIA H100 80GB HBM3"
H100_BYTES = 85_520_809_984  # 81559 MiB, real nvidia-smi -q
GENERIC = Profile(name="generic")
GPU_IDS = sorted(k for k in REGISTRY if k.startswith("gpu."))


# --- factory -------------------------------------------------------------------------


def bdf(index: int) -> str:
    return f"0000:{0x18 + 0x10 * index:02x}:00.0"


def port(index: int) -> str:
    return f"0000:{0x17 + 0x10 * index:02x}:00.0"


def make_gpu(index: int = 0, **changes: Any) -> Gpu:
    """A healthy H100 as NVML reports it (NVML's bus id format, upper-case domain)."""
    gpu = Gpu(
        index=index, pci_bdf=f"00000000:{0x18 + 0x10 * index:02X}:00.0", name=H100,
        uuid=f"GPU-{index:08d}", inforom_image="G520.0200.00.05", inforom_valid=True,
        architecture=9, memory_total_bytes=H100_BYTES, ecc_enabled=True, ecc_pending=True,
        ecc_volatile_corrected=0, ecc_volatile_uncorrected=0, ecc_aggregate_corrected=0,
        ecc_aggregate_uncorrected=0, remapped_corrected=0, remapped_uncorrected=0,
        remap_pending=False, remap_failure=False,
        remap_histogram={"max": 2560, "high": 0, "partial": 0, "low": 0, "none": 0},
        sram_threshold_exceeded=False, unrepairable_memory=False, recovery_action=0,
        temperature_c=41, memory_temperature_c=48, slowdown_temperature_c=89,
        clock_event_reasons=0x1, sm_clock_mhz=345, sm_clock_max_mhz=1980,
        clock_event_time_ns={"sw_thermal": 0, "hw_thermal": 0, "hw_power_brake": 0},
        power_draw_w=70.0, power_limit_w=700.0,
        power_default_limit_w=700.0, performance_state=0, pcie_gen_current=5,
        pcie_width_current=16, pcie_replay_count=9, persistence_mode=True, mig_enabled=False,
        mig_pending=False, processes=[],
        unsupported={"retired_sbe": "NotSupported", "retired_dbe": "NotSupported",
                     "retired_pending": "NotSupported"},
    )
    return dataclasses.replace(gpu, **changes)


def pci_gpu(index: int, **changes: Any) -> PciDevice:
    dev = PciDevice(bdf=bdf(index), vendor=0x10DE, device=0x2330, pci_class=0x030200,
                    driver="nvidia", path=[port(index), bdf(index)],
                    current_link_speed_gts=32.0, current_link_width=16,
                    max_link_speed_gts=32.0, max_link_width=16)
    return dataclasses.replace(dev, **changes)


def bridge(index: int, **changes: Any) -> PciDevice:
    dev = PciDevice(bdf=port(index), vendor=0x10B5, device=0xC030, pci_class=0x060400,
                    driver="pcieport", path=[port(index)], current_link_speed_gts=32.0,
                    current_link_width=16, max_link_speed_gts=32.0, max_link_width=16)
    return dataclasses.replace(dev, **changes)


def make_snap(gpus: list[Gpu] | None = None, *, n: int = 8, pci: list[PciDevice] | None = None,
              kernel_log: KernelLog | None = None, taken_at: float = NOW,
              **nvml: Any) -> Snapshot:
    gpus = [make_gpu(i) for i in range(n)] if gpus is None else gpus
    if pci is None:
        pci = [d for g in gpus for d in (bridge(g.index), pci_gpu(g.index))]
    info = NvmlInfo(driver_version="570.124.06", device_count=len(gpus), gpus=gpus)
    info = dataclasses.replace(info, **nvml)
    return Snapshot(node="n1", taken_at=taken_at, pci=pci, nvml=info,
                    kernel_log=kernel_log if kernel_log is not None else KernelLog("test"))


def run(check_id: str, snap: Snapshot, profile: Profile | str = "dgx-h100", *,
        previous: Snapshot | None = None, mode: str = "run", now: float = NOW,
        **params: Any) -> list[Finding]:
    spec = REGISTRY[check_id]
    prof = load_profile(profile) if isinstance(profile, str) else profile
    unknown = set(params) - set(spec.params)
    assert not unknown, f"not params of {check_id}: {unknown}"
    ctx = CheckContext(snapshot=snap, profile=prof, params={**spec.params, **params},
                       mode=mode, now=now, previous=previous)
    findings = list(spec.func(ctx))
    assert findings, f"{check_id} yielded no finding"
    for f in findings:  # every action a check asks for when it fails or warns is declared
        if f.status in (Status.FAIL, Status.WARN):
            assert f.action in spec.actions, (check_id, f)
        elif f.status in (Status.PASS, Status.SKIP):
            assert f.action is Action.NONE, (check_id, f)
    return findings


def only(findings: list[Finding], status: Status) -> list[Finding]:
    return [f for f in findings if f.status is status]


def bad(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status not in (Status.PASS, Status.SKIP)]


def xid_line(code: int, index: int = 0, *, age: float | None = 60.0, pid: int | None = 4242,
             message: str = "Unspecified error.", pci: str | None = None) -> XidEvent:
    where = pci if pci is not None else f"0000:{0x18 + 0x10 * index:02x}:00.0"
    return XidEvent(xid=code, pci_bdf=where, pid=pid, process="python3" if pid else None,
                    message=message, raw=f"NVRM: Xid (PCI:{where}): {code}, {message}",
                    time=None if age is None else NOW - age)


def klog(*xids: XidEvent, events: list[KernelEvent] | None = None,
         boot_time: float | None = NOW - 86_400) -> KernelLog:
    return KernelLog(source="test", xids=list(xids), events=events or [],
                     lines_read=len(xids) + len(events or []) + 10, boot_time=boot_time)


# --- catalog-wide properties ---------------------------------------------------------


def test_family_registers_every_catalog_id() -> None:
    assert sorted([
        "gpu.clock_events", "gpu.clocks", "gpu.count", "gpu.ecc_corrected_rate", "gpu.ecc_mode",
        "gpu.ecc_uncorrected", "gpu.inforom", "gpu.memory_size", "gpu.mig_mode", "gpu.model",
        "gpu.pcie_link", "gpu.pcie_replay_rate", "gpu.persistence_mode", "gpu.power_limit",
        "gpu.processes", "gpu.recovery_action", "gpu.responsive", "gpu.retired_pages",
        "gpu.row_remap", "gpu.temperature", "gpu.xid"]) == GPU_IDS
    for check_id in GPU_IDS:
        spec = REGISTRY[check_id]
        assert spec.actions, check_id
        assert spec.summary, check_id
        assert spec.summary != check_id, check_id
        assert spec.remedy, check_id
    assert {i for i in GPU_IDS if REGISTRY[i].rate} == {"gpu.ecc_corrected_rate",
                                                         "gpu.pcie_replay_rate"}
    assert REGISTRY["gpu.ecc_corrected_rate"].levels == ("full",)


@pytest.mark.parametrize("check_id", GPU_IDS)
def test_healthy_node_has_no_problem(check_id: str) -> None:
    snap = make_snap()
    findings = run(check_id, snap, previous=make_snap(taken_at=NOW - 3))
    assert not bad(findings), findings


@pytest.mark.parametrize("check_id", GPU_IDS)
def test_unsupported_everything_is_never_a_fail_or_error(check_id: str) -> None:
    """A part that supports nothing (NotSupported / FunctionNotFound / NoPermission)."""
    keys = ["name", "memory", "temperature", "slowdown_temperature", "clock_event_reasons",
            "performance_state", "pcie_gen", "pcie_width", "persistence_mode", "mig_mode",
            "processes", "remap_histogram", "inforom_valid", "fields"]
    reasons = ["NotSupported", "FunctionNotFound", "NoPermission"]
    blank = {f.name: None for f in dataclasses.fields(Gpu)
             if f.default is None and f.name not in ("pci_bdf", "uuid")}
    gpus = [make_gpu(i, **blank, unsupported={k: reasons[(i + j) % 3]
                                              for j, k in enumerate(keys)}) for i in range(2)]
    findings = run(check_id, make_snap(gpus), GENERIC, previous=make_snap(gpus, taken_at=NOW - 3))
    assert not bad(findings), findings


@pytest.mark.parametrize("check_id", [i for i in GPU_IDS if i not in
                                      ("gpu.responsive", "gpu.count", "gpu.model", "gpu.xid")])
def test_per_gpu_checks_skip_when_nvml_is_unavailable(check_id: str) -> None:
    snap = make_snap(library_error="DriverNotLoaded", gpus=[], device_count=None)
    findings = run(check_id, snap, previous=snap)
    assert [f.status for f in findings] == [Status.SKIP]


@pytest.mark.parametrize("check_id", [i for i in GPU_IDS if i != "gpu.responsive"])
def test_a_lost_gpu_is_left_to_gpu_responsive(check_id: str) -> None:
    gpus = [make_gpu(0), Gpu(index=1, responsive=False, lost="GpuIsLost",
                             errors={"handle": "GpuIsLost"})]
    findings = run(check_id, make_snap(gpus), previous=make_snap(gpus, taken_at=NOW - 3))
    assert not [f for f in bad(findings) if f.component == "gpu1"], findings


# --- gpu.responsive ------------------------------------------------------------------


def test_responsive_passes_each_answering_gpu() -> None:
    findings = run("gpu.responsive", make_snap(n=4))
    assert [(f.status, f.component) for f in findings] == [
        (Status.PASS, f"gpu{i}") for i in range(4)]


@pytest.mark.parametrize(("lost", "action"), [("GpuIsLost", Action.REBOOT),
                                               ("ResetRequired", Action.RESET_GPU),
                                               ("timeout", Action.REBOOT)])
def test_responsive_fails_a_lost_gpu(lost: str, action: Action) -> None:
    gpus = [make_gpu(0), Gpu(index=1, responsive=False, lost=lost)]
    findings = run("gpu.responsive", make_snap(gpus))
    assert findings[0].status is Status.PASS
    assert (findings[1].status, findings[1].component, findings[1].action) == (
        Status.FAIL, "gpu1", action)


def test_responsive_fails_an_unanswered_gpu_with_a_stable_message() -> None:
    snap = make_snap([make_gpu(0)], unanswered=[1], device_count=2)
    findings = run("gpu.responsive", snap)
    fail = only(findings, Status.FAIL)
    assert [(f.component, f.message, f.action) for f in fail] == [
        ("gpu1", "GPU did not answer NVML within the deadline", Action.REBOOT)]


def test_responsive_fails_when_nvml_init_hangs() -> None:
    snap = make_snap([], device_count=None, errors={"init": "NVML did not answer"})
    assert [(f.status, f.component, f.action) for f in run("gpu.responsive", snap)] == [
        (Status.FAIL, "node", Action.REBOOT)]


def test_responsive_fails_a_gpu_whose_calls_error() -> None:
    gpu = make_gpu(0, temperature_c=None, errors={"temperature": "Unknown: Unknown Error"})
    findings = run("gpu.responsive", make_snap([gpu]))
    assert (findings[0].status, findings[0].action) == (Status.FAIL, Action.REBOOT)
    assert findings[0].observed == {"temperature": "Unknown: Unknown Error"}
    # ... and the check that reads the value skips rather than failing it twice.
    assert only(run("gpu.temperature", make_snap([gpu])), Status.SKIP)


def test_responsive_driver_broken_with_gpus_on_pci() -> None:
    snap = make_snap([], device_count=None, library_error="DriverNotLoaded",
                     library_message="Driver Not Loaded", pci=[pci_gpu(0), pci_gpu(1)])
    (finding,) = run("gpu.responsive", snap)
    assert (finding.status, finding.component, finding.action) == (
        Status.FAIL, "node", Action.REBOOT)
    assert finding.message == "NVIDIA GPUs on PCI but the driver does not answer"
    assert finding.observed["error"] == "DriverNotLoaded"
    assert finding.observed["message"] == "Driver Not Loaded"


def test_responsive_library_missing_with_gpus_on_pci_is_a_driver_install_problem() -> None:
    snap = make_snap([], device_count=None, library_error="LibraryNotFound",
                     pci=[pci_gpu(0)])
    (finding,) = run("gpu.responsive", snap)
    assert (finding.status, finding.action) == (Status.FAIL, Action.FIX_CONFIG)


def test_responsive_no_driver_and_no_gpu_is_not_a_gpu_node() -> None:
    snap = make_snap([], device_count=None, library_error="LibraryNotFound",
                     pci=[bridge(0)])
    (finding,) = run("gpu.responsive", snap)
    assert finding.status is Status.SKIP
    assert finding.message == ("no NVIDIA GPU on this node (PCI) and no driver "
                               "(libnvidia-ml.so.1 not found)")


def test_responsive_without_nvml_but_gpus_on_pci_fails() -> None:
    snap = Snapshot(node="n1", taken_at=NOW, pci=[pci_gpu(0)], nvml=None)
    (finding,) = run("gpu.responsive", snap)
    assert (finding.status, finding.action) == (Status.FAIL, Action.REBOOT)


def test_responsive_permission_problem_is_ours_not_the_node() -> None:
    snap = make_snap([], device_count=None, library_error="NoPermission", pci=[pci_gpu(0)])
    (finding,) = run("gpu.responsive", snap)
    assert finding.status is Status.ERROR


# --- gpu.count, gpu.model ------------------------------------------------------------


def test_count_matches_profile() -> None:
    (finding,) = run("gpu.count", make_snap())
    assert (finding.status, finding.observed, finding.expected) == (
        Status.PASS, {"pci": 8, "nvml": 8}, 8)


def test_count_names_the_bus_id_nvml_lost() -> None:
    snap = make_snap([make_gpu(i) for i in range(8) if i != 3],
                     pci=[pci_gpu(i) for i in range(8)])
    findings = run("gpu.count", snap)
    fail = only(findings, Status.FAIL)
    assert [(f.component, f.action, f.observed["bus_id"]) for f in fail] == [
        ("node", Action.REBOOT, bdf(3))]
    assert fail[0].message == "GPU on PCI but not enumerated by NVML"


def test_count_without_bus_ids_compares_counts() -> None:
    gpus = [make_gpu(i, pci_bdf=None) for i in range(7)]
    findings = run("gpu.count", make_snap(gpus, pci=[pci_gpu(i) for i in range(8)]))
    assert [f.message for f in only(findings, Status.FAIL)] == ["fewer GPUs in NVML than on PCI"]


def test_count_gpu_gone_from_pci_fails_against_the_profile() -> None:
    gpus = [make_gpu(i) for i in range(7)]
    findings = run("gpu.count", make_snap(gpus))
    assert [(f.status, f.message, f.action) for f in findings] == [
        (Status.FAIL, "fewer GPUs than the profile expects", Action.REBOOT)]


def test_count_more_than_profile_warns_fix_config() -> None:
    findings = run("gpu.count", make_snap(n=9))
    assert [(f.status, f.action) for f in findings] == [(Status.WARN, Action.FIX_CONFIG)]


def test_count_skips_without_profile_count_when_sources_agree() -> None:
    (finding,) = run("gpu.count", make_snap(n=4), GENERIC)
    assert finding.status is Status.SKIP


def test_count_skips_a_node_without_gpus() -> None:
    snap = make_snap([], device_count=0, pci=[bridge(0)])
    (finding,) = run("gpu.count", snap, GENERIC)
    assert (finding.status, finding.message) == (Status.SKIP, "no NVIDIA GPU on this node")


def test_count_driver_down_still_compares_pci_with_profile() -> None:
    snap = make_snap([], device_count=None, library_error="DriverNotLoaded",
                     pci=[pci_gpu(i) for i in range(6)])
    findings = run("gpu.count", snap)
    assert [(f.status, f.observed) for f in findings] == [
        (Status.FAIL, {"pci": 6, "nvml": None})]


def test_model_pass_fail_skip() -> None:
    gpus = [make_gpu(0), make_gpu(1, name="NVIDIA H200")]
    findings = run("gpu.model", make_snap(gpus))
    assert [(f.status, f.component) for f in findings] == [
        (Status.PASS, "gpu0"), (Status.FAIL, "gpu1")]
    assert findings[1].action is Action.FIX_CONFIG
    assert findings[1].observed == "NVIDIA H200"
    assert [f.status for f in run("gpu.model", make_snap(gpus), GENERIC)] == [Status.SKIP]


# --- ECC, retired pages, row remapping, recovery action ------------------------------


def test_ecc_mode() -> None:
    gpus = [make_gpu(0), make_gpu(1, ecc_enabled=False, ecc_pending=False),
            make_gpu(2, ecc_enabled=False, ecc_pending=True),
            make_gpu(3, ecc_enabled=True, ecc_pending=False),
            make_gpu(4, ecc_enabled=None, ecc_pending=None,
                     unsupported={"ecc_current": "NotSupported"})]
    findings = run("gpu.ecc_mode", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.FAIL, Action.FIX_CONFIG),
        (Status.FAIL, Action.REBOOT), (Status.WARN, Action.FIX_CONFIG),
        (Status.SKIP, Action.NONE)]


def test_ecc_uncorrected_judges_volatile_never_aggregate() -> None:
    gpus = [make_gpu(0, ecc_aggregate_uncorrected=7),
            make_gpu(1, ecc_volatile_uncorrected=2, ecc_aggregate_uncorrected=9)]
    findings = run("gpu.ecc_uncorrected", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.FAIL, Action.RESET_GPU)]
    assert findings[1].observed == 2
    assert only(run("gpu.ecc_uncorrected", make_snap(gpus), max_volatile=5), Status.FAIL) == []


def test_ecc_uncorrected_unsupported_skips_and_read_error_skips() -> None:
    gpus = [make_gpu(0, ecc_volatile_uncorrected=None,
                     unsupported={"ecc_dbe_volatile": "NotSupported"}),
            make_gpu(1, ecc_volatile_uncorrected=None, errors={"fields": "Unknown"})]
    findings = run("gpu.ecc_uncorrected", make_snap(gpus))
    assert [f.status for f in findings] == [Status.SKIP, Status.SKIP]
    assert "not supported" in findings[0].message
    assert "gpu.responsive" in findings[1].message


def _corrected(value: int, taken_at: float) -> Snapshot:
    return make_snap([make_gpu(0, ecc_volatile_corrected=value),
                      make_gpu(1, ecc_volatile_corrected=0)], taken_at=taken_at)


def test_ecc_corrected_rate_needs_a_previous_sample() -> None:
    (finding,) = run("gpu.ecc_corrected_rate", _corrected(500, NOW))
    assert finding.status is Status.SKIP


def test_ecc_corrected_rate_below_min_events_passes() -> None:
    # 2 errors in 1 s is 120/min, but 2 events are too few to judge.
    findings = run("gpu.ecc_corrected_rate", _corrected(2, NOW),
                   previous=_corrected(0, NOW - 1))
    assert [f.status for f in findings] == [Status.PASS, Status.PASS]
    assert findings[0].observed["events"] == 2


def test_ecc_corrected_rate_storm_warns() -> None:
    findings = run("gpu.ecc_corrected_rate", _corrected(600, NOW),
                   previous=_corrected(0, NOW - 3))
    assert [(f.status, f.component) for f in findings] == [
        (Status.WARN, "gpu0"), (Status.PASS, "gpu1")]
    assert findings[0].action is Action.INVESTIGATE
    assert findings[0].observed["per_min"] == pytest.approx(12000.0)


def test_ecc_corrected_rate_slow_growth_over_a_long_interval_passes() -> None:
    # 5 errors in 10 minutes: judged (>= 3 events), 0.5/min is under 6/min.
    findings = run("gpu.ecc_corrected_rate", _corrected(105, NOW),
                   previous=_corrected(100, NOW - 600))
    assert findings[0].status is Status.PASS


def test_ecc_corrected_rate_after_a_reset_uses_the_count_since() -> None:
    findings = run("gpu.ecc_corrected_rate", _corrected(40, NOW),
                   previous=_corrected(90_000, NOW - 4))
    assert findings[0].status is Status.WARN
    assert findings[0].observed["reset"] is True
    assert findings[0].observed["events"] == 40


def test_ecc_corrected_rate_matches_gpus_by_uuid_not_index() -> None:
    old = make_snap([make_gpu(0, uuid="GPU-b", ecc_volatile_corrected=0),
                     make_gpu(1, uuid="GPU-a", ecc_volatile_corrected=1000)],
                    taken_at=NOW - 3)
    new = make_snap([make_gpu(0, uuid="GPU-a", ecc_volatile_corrected=1000),
                     make_gpu(1, uuid="GPU-b", ecc_volatile_corrected=0)])
    assert not bad(run("gpu.ecc_corrected_rate", new, previous=old))


def test_retired_pages() -> None:
    base = {"unsupported": {}, "retired_pages_sbe": 0, "retired_pages_dbe": 0,
            "retired_pending": False, "architecture": 7}
    gpus = [make_gpu(0, **base), make_gpu(1, **{**base, "retired_pages_sbe": 60,
                                                 "retired_pages_dbe": 3}),
            make_gpu(2, **{**base, "retired_pending": True, "retired_pages_dbe": 1}),
            make_gpu(3)]  # Hopper: not supported
    findings = run("gpu.retired_pages", make_snap(gpus))
    assert [(f.component, f.status, f.action) for f in findings] == [
        ("gpu0", Status.PASS, Action.NONE), ("gpu1", Status.FAIL, Action.RMA),
        ("gpu2", Status.FAIL, Action.RESET_GPU), ("gpu3", Status.SKIP, Action.NONE)]


@pytest.mark.parametrize(("changes", "message", "action"), [
    ({"remap_pending": True}, "row remap pending: reset the GPU", Action.RESET_GPU),
    ({"remap_failure": True}, "row remapping failed", Action.RMA),
    ({"remapped_uncorrected": 512}, "uncorrectable row remaps at the RMA limit", Action.RMA),
    ({"remap_histogram": {"max": 2559, "high": 0, "partial": 0, "low": 0, "none": 1}},
     "memory banks without spare rows", Action.RMA),
    ({"unrepairable_memory": True}, "GPU reports unrepairable memory", Action.RMA),
    ({"sram_threshold_exceeded": True}, "SRAM uncorrectable error threshold exceeded",
     Action.RMA),
])
def test_row_remap_failures(changes: dict[str, Any], message: str, action: Action) -> None:
    findings = run("gpu.row_remap", make_snap([make_gpu(0, **changes)]))
    assert [(f.status, f.message, f.action) for f in findings] == [
        (Status.FAIL, message, action)]


def test_row_remap_under_the_limit_passes() -> None:
    findings = run("gpu.row_remap", make_snap([make_gpu(0, remapped_uncorrected=511,
                                                        remapped_corrected=20)]))
    assert [f.status for f in findings] == [Status.PASS]


def test_row_remap_skips_under_mig_and_when_unsupported() -> None:
    hidden = {"remap_pending": None, "remap_failure": None, "remapped_uncorrected": None,
              "remapped_corrected": None, "remap_histogram": None}
    mig = make_gpu(0, mig_enabled=True, **hidden,
                   unsupported={"remap_pending": "NotSupported",
                                "remap_histogram": "NotSupported"})
    old = make_gpu(1, architecture=6, **hidden, unsupported={"remap_pending": "NotSupported"})
    findings = run("gpu.row_remap", make_snap([mig, old]))
    assert [f.status for f in findings] == [Status.SKIP, Status.SKIP]
    assert "MIG" in findings[0].message
    assert "not supported" in findings[1].message


@pytest.mark.parametrize(("value", "status", "action"), [
    (0, Status.PASS, Action.NONE), (1, Status.FAIL, Action.RESET_GPU),
    (2, Status.FAIL, Action.REBOOT), (3, Status.FAIL, Action.DRAIN),
    (4, Status.FAIL, Action.RESET_GPU), (5, Status.FAIL, Action.INVESTIGATE),
    (6, Status.FAIL, Action.REBOOT), (7, Status.FAIL, Action.REBOOT),
    (9, Status.WARN, Action.INVESTIGATE)])
def test_recovery_action(value: int, status: Status, action: Action) -> None:
    (finding,) = run("gpu.recovery_action", make_snap([make_gpu(0, recovery_action=value)]))
    assert (finding.status, finding.action) == (status, action)


def test_recovery_action_unsupported_skips() -> None:
    gpu = make_gpu(0, recovery_action=None, unsupported={"recovery_action": "NotSupported"})
    (finding,) = run("gpu.recovery_action", make_snap([gpu]))
    assert finding.status is Status.SKIP


# --- gpu.xid -------------------------------------------------------------------------


def xid_run(*xids: XidEvent, gpus: list[Gpu] | None = None, **kw: Any) -> list[Finding]:
    events = kw.pop("events", None)
    boot = kw.pop("boot_time", NOW - 86_400)
    snap = make_snap(gpus if gpus is not None else [make_gpu(0), make_gpu(1)],
                     kernel_log=klog(*xids, events=events, boot_time=boot),
                     **kw.pop("nvml", {}))
    return run("gpu.xid", snap, **kw)


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


# --- thermals, clocks, power ---------------------------------------------------------


def test_temperature() -> None:
    gpus = [make_gpu(0), make_gpu(1, temperature_c=86), make_gpu(2, temperature_c=89),
            make_gpu(3, memory_temperature_c=96),
            make_gpu(4, slowdown_temperature_c=None,
                     unsupported={"slowdown_temperature": "NotSupported"},
                     memory_temperature_c=None)]
    findings = run("gpu.temperature", make_snap(gpus))
    got = [(f.component, f.status) for f in findings if f.status is not Status.PASS]
    assert got == [("gpu1", Status.WARN), ("gpu2", Status.FAIL), ("gpu3", Status.WARN),
                   ("gpu4", Status.SKIP)]
    assert only(findings, Status.WARN)[0].observed["margin_c"] == 3
    assert not bad(run("gpu.temperature", make_snap([gpus[1]]), min_slowdown_margin_c=2))


@pytest.mark.parametrize(("mask", "statuses"), [
    (0x1, [Status.PASS]), (0x4, [Status.PASS]), (0x2 | 0x10, [Status.PASS]),
    (0x40 | 0x8, [Status.FAIL]), (0x80 | 0x8, [Status.FAIL]), (0x8, [Status.WARN]),
    (0x20, [Status.WARN]), (0x80 | 0x40, [Status.FAIL, Status.FAIL])])
def test_clock_events(mask: int, statuses: list[Status]) -> None:
    findings = run("gpu.clock_events", make_snap([make_gpu(0, clock_event_reasons=mask)]))
    assert [f.status for f in findings] == statuses
    assert all(f.action is Action.INVESTIGATE for f in bad(findings))


def test_clock_events_sustained_hw_slowdown_fails() -> None:
    prev = make_snap([make_gpu(0, clock_event_reasons=0x8)], taken_at=NOW - 60)
    findings = run("gpu.clock_events", make_snap([make_gpu(0, clock_event_reasons=0x8)]),
                   previous=prev)
    assert [f.status for f in findings] == [Status.FAIL]
    assert findings[0].observed["reasons"] == ["hw_slowdown"]


@pytest.mark.parametrize(("changes", "status"), [
    ({}, Status.PASS),  # idle at 345 MHz with no clock setting: not judged
    ({"clock_event_reasons": 0x0, "sm_clock_mhz": 1980}, Status.PASS),  # busy at its max
    ({"clock_event_reasons": 0x2, "sm_clock_mhz": 1980}, Status.PASS),  # app clocks at max
    ({"clock_event_reasons": 0x2, "sm_clock_mhz": 1900}, Status.PASS),  # within 5 %
    ({"clock_event_reasons": 0x2, "sm_clock_mhz": 1410}, Status.WARN),  # locked low
    ({"clock_event_reasons": 0x3, "sm_clock_mhz": 1200}, Status.WARN),  # locked, idle too
    ({"sm_clock_mhz": None, "unsupported": {"sm_clock": "NotSupported"}}, Status.SKIP),
])
def test_clocks_held_below_max(changes: dict[str, Any], status: Status) -> None:
    findings = run("gpu.clocks", make_snap([make_gpu(0, **changes)]))
    assert [f.status for f in findings] == [status]
    if status is Status.WARN:
        assert findings[0].action is Action.FIX_CONFIG
        assert findings[0].observed["max_mhz"] == 1980


def _slowdown(ns: int, taken_at: float) -> Snapshot:
    times = {"sw_thermal": 0, "hw_thermal": ns, "hw_power_brake": 0}
    return make_snap([make_gpu(0, clock_event_time_ns=times)], taken_at=taken_at)


def test_clocks_slowdown_time_growing_across_samples_warns() -> None:
    # 6 s of HW thermal slowdown in a minute (10 %), though no sample caught it active.
    grown = run("gpu.clocks", _slowdown(6_000_000_000, NOW), previous=_slowdown(0, NOW - 60))
    assert [(f.status, f.action) for f in grown] == [(Status.WARN, Action.INVESTIGATE)]
    assert grown[0].observed["slowdown_ns"] == {"hw_thermal": 6_000_000_000}
    little = run("gpu.clocks", _slowdown(1_000_000_000, NOW), previous=_slowdown(0, NOW - 60))
    assert [f.status for f in little] == [Status.PASS]  # 1.7 %
    # A counter that went backwards (driver reload) proves nothing; one sample proves nothing.
    back = run("gpu.clocks", _slowdown(0, NOW), previous=_slowdown(9_000_000_000, NOW - 60))
    assert [f.status for f in back] == [Status.PASS]
    assert [f.status for f in run("gpu.clocks", _slowdown(6_000_000_000, NOW))] == [
        Status.PASS]


def test_power_limit() -> None:
    gpus = [make_gpu(0), make_gpu(1, power_limit_w=400.0), make_gpu(2, power_limit_w=680.0)]
    findings = run("gpu.power_limit", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.WARN, Action.FIX_CONFIG), (Status.PASS, Action.NONE)]
    assert findings[1].message == "power capped below the expected limit"
    assert not bad(run("gpu.power_limit", make_snap(gpus), expected_w=400))


def test_power_limit_without_profile_uses_the_default_limit() -> None:
    gpu = make_gpu(0, power_limit_w=300.0, power_default_limit_w=350.0)
    findings = run("gpu.power_limit", make_snap([gpu]), GENERIC)
    assert [f.status for f in findings] == [Status.WARN]
    assert findings[0].expected == ">= 350 W"


# --- PCIe ----------------------------------------------------------------------------


def test_pcie_link_healthy_and_narrow() -> None:
    gpus = [make_gpu(0), make_gpu(1, pcie_width_current=8)]
    findings = run("gpu.pcie_link", make_snap(gpus))
    width = [f for f in findings if "width" in f.message or "narrower" in f.message]
    assert [(f.component, f.status, f.action) for f in width] == [
        ("gpu0", Status.PASS, Action.NONE), ("gpu1", Status.FAIL, Action.INVESTIGATE)]
    assert (width[1].observed, width[1].expected) == ("x8", "x16")


def test_pcie_generation_judged_only_in_p0() -> None:
    busy = make_gpu(0, pcie_gen_current=3, performance_state=0)
    idle = make_gpu(1, pcie_gen_current=1, performance_state=8)
    findings = run("gpu.pcie_link", make_snap([busy, idle]))
    assert [(f.component, f.status) for f in bad(findings)] == [("gpu0", Status.FAIL)]
    assert any(f.component == "gpu1" and "not judged at idle" in f.message for f in findings)


def test_pcie_expectation_is_capped_by_the_slot() -> None:
    # A Gen5 GPU behind a Gen4 port: Gen4 in P0 is its maximum, not a fault.
    gpu = make_gpu(0, pcie_gen_current=4)
    pci = [bridge(0, max_link_speed_gts=16.0), pci_gpu(0)]
    findings = run("gpu.pcie_link", make_snap([gpu], pci=pci), GENERIC)
    assert not bad(findings)
    assert any(f.expected == "Gen4" for f in findings)


def test_pcie_link_without_any_expectation_skips() -> None:
    findings = run("gpu.pcie_link", make_snap([make_gpu(0)], pci=[]), GENERIC)
    assert [f.status for f in findings] == [Status.SKIP, Status.SKIP]


def _replays(count: int, taken_at: float) -> Snapshot:
    return make_snap([make_gpu(0, pcie_replay_count=count)], taken_at=taken_at)


def test_pcie_replay_rate() -> None:
    assert [f.status for f in run("gpu.pcie_replay_rate", _replays(9, NOW))] == [Status.SKIP]
    # Gen5 x16: DCGM allows ceil(1.92 * 16) = 31 replays a minute.
    storm = run("gpu.pcie_replay_rate", _replays(309, NOW), previous=_replays(9, NOW - 3))
    assert [(f.status, f.action, f.expected) for f in storm] == [
        (Status.WARN, Action.INVESTIGATE, "<= 31 per min")]
    few = run("gpu.pcie_replay_rate", _replays(11, NOW), previous=_replays(9, NOW - 1))
    assert [f.status for f in few] == [Status.PASS]  # 120/min but only 2 events
    slow = run("gpu.pcie_replay_rate", _replays(29, NOW), previous=_replays(9, NOW - 60))
    assert [f.status for f in slow] == [Status.PASS]  # 20/min < 31/min
    fixed = run("gpu.pcie_replay_rate", _replays(29, NOW), previous=_replays(9, NOW - 60),
                max_per_min=10)
    assert [f.status for f in fixed] == [Status.WARN]


# --- modes, processes, memory, InfoROM -----------------------------------------------


def test_persistence_mode() -> None:
    gpus = [make_gpu(0), make_gpu(1, persistence_mode=False)]
    findings = run("gpu.persistence_mode", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.WARN, Action.FIX_CONFIG)]
    assert not bad(run("gpu.persistence_mode", make_snap(gpus), required=False))


@pytest.mark.parametrize(("want", "cur", "pending", "status", "action"), [
    ("disabled", False, False, Status.PASS, Action.NONE),
    ("disabled", True, True, Status.FAIL, Action.FIX_CONFIG),
    ("disabled", True, False, Status.FAIL, Action.RESET_GPU),
    ("disabled", False, True, Status.WARN, Action.FIX_CONFIG),
    ("enabled", True, True, Status.PASS, Action.NONE),
    ("enabled", False, False, Status.FAIL, Action.FIX_CONFIG),
    ("any", True, False, Status.WARN, Action.FIX_CONFIG),
    ("any", True, True, Status.PASS, Action.NONE)])
def test_mig_mode(want: str, cur: bool, pending: bool, status: Status, action: Action) -> None:
    gpu = make_gpu(0, mig_enabled=cur, mig_pending=pending)
    (finding,) = run("gpu.mig_mode", make_snap([gpu]), mig=want)
    assert (finding.status, finding.action) == (status, action)


def test_mig_mode_unsupported() -> None:
    gpu = make_gpu(0, mig_enabled=None, mig_pending=None,
                   unsupported={"mig_mode": "NotSupported"})
    assert [f.status for f in run("gpu.mig_mode", make_snap([gpu]))] == [Status.SKIP]
    assert [f.status for f in run("gpu.mig_mode", make_snap([gpu]), mig="enabled")] == [
        Status.FAIL]
    assert [f.status for f in run("gpu.mig_mode", make_snap([gpu]), mig="sometimes")] == [
        Status.ERROR]


def _busy(index: int) -> Gpu:
    return make_gpu(index, processes=[GpuProcess(pid=4242, used_memory_bytes=2 << 30)])


def test_processes_left_before_a_job_fail_drain() -> None:
    findings = run("gpu.processes", make_snap([make_gpu(0), _busy(1)]), mode="prolog")
    assert [(f.component, f.status, f.action) for f in findings] == [
        ("gpu0", Status.PASS, Action.NONE), ("gpu1", Status.FAIL, Action.DRAIN)]
    assert findings[1].observed[0]["pid"] == 4242


def test_processes_are_not_judged_beside_running_jobs() -> None:
    findings = run("gpu.processes", make_snap([_busy(0)]), mode="agent")
    assert not bad(findings)


def _minors(gpus: list[Gpu], minors: list[int]) -> list[Gpu]:
    for gpu, minor in zip(gpus, minors, strict=True):
        gpu.minor_number = minor
    return gpus


def test_processes_only_on_the_jobs_gpus() -> None:
    snap = make_snap(_minors([make_gpu(0), make_gpu(1), _busy(2)], [0, 1, 2]))
    findings = run("gpu.processes", snap, mode="prolog", job_gpus="0,1")
    assert {f.component for f in findings} == {"gpu0", "gpu1"}
    assert not bad(findings)
    assert only(run("gpu.processes", snap, mode="prolog", job_gpus=[2]), Status.FAIL)
    unknown = run("gpu.processes", snap, mode="prolog", job_gpus=[7], job_id="5")
    assert [(f.status, f.action) for f in bad(unknown)] == [(Status.WARN, Action.FIX_CONFIG)]


def test_job_gpus_are_minor_numbers_or_uuids_never_nvml_indexes() -> None:
    """/dev/nvidia5 is NVML's GPU 2 here: SLURM_JOB_GPUS=5 is the busy one, 2 is not."""
    snap = make_snap(_minors([make_gpu(0), make_gpu(1), _busy(2)], [3, 4, 5]))
    assert only(run("gpu.processes", snap, mode="prolog", job_gpus="5", job_id="7"),
                Status.FAIL)
    assert not bad(run("gpu.processes", snap, mode="prolog", job_gpus="3,4", job_id="7"))
    by_uuid = run("gpu.processes", snap, mode="prolog", job_gpus=["GPU-00000002"], job_id="7")
    assert [f.component for f in bad(by_uuid)] == ["gpu2"]


def test_processes_are_judged_by_the_job_that_owns_them() -> None:
    other = GpuProcess(pid=1, slurm_job="99")
    own = GpuProcess(pid=2, slurm_job="7")
    nobody = GpuProcess(pid=3, slurm_job="")
    unreadable = GpuProcess(pid=4, slurm_job=None)
    gpus = _minors([make_gpu(0, processes=[other]), make_gpu(1, processes=[own]),
                    make_gpu(2, processes=[nobody, unreadable])], [0, 1, 2])
    snap = make_snap(gpus)

    def failing(mode: str, **params: Any) -> list[str]:
        return [f.component for f in bad(run("gpu.processes", snap, mode=mode, job_id="7",
                                             **params))]

    # Unknown GPUs (CPU-only job, NoDevFiles): never another job's (nor one whose cgroup
    # cannot be read); the job's own at its end, and nobody's.
    assert failing("prolog") == ["gpu2"]
    assert failing("epilog") == ["gpu1", "gpu2"]
    gpus[2].processes = [unreadable, GpuProcess(pid=5, name="nvidia-cuda-mps-server",
                                                slurm_job="")]
    assert failing("prolog") == []
    # The job holds GPUs 0 and 2 alone: anyone else's process there is a leftover.
    assert failing("prolog", job_gpus="0,2") == ["gpu0", "gpu2"]
    # gres/shard or gres/mps: other jobs' processes are expected there.
    assert failing("prolog", job_gpus="0,2", shared=True) == []
    assert failing("epilog", job_gpus="0,1", shared=True) == ["gpu1"]


def test_processes_no_permission_is_a_skip() -> None:
    gpu = make_gpu(0, processes=None, unsupported={"processes": "NoPermission"})
    findings = run("gpu.processes", make_snap([gpu]), mode="prolog")
    assert [f.status for f in findings] == [Status.SKIP]
    assert findings[0].observed == "NoPermission"


def test_memory_size() -> None:
    gpus = [make_gpu(0), make_gpu(1, memory_total_bytes=60 << 30),
            make_gpu(2, memory_total_bytes=141 << 30)]
    findings = run("gpu.memory_size", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.FAIL, Action.RMA), (Status.WARN, Action.FIX_CONFIG)]
    assert findings[0].observed == pytest.approx(79.6)


def test_memory_size_takes_the_variant_from_the_model_name() -> None:
    gpu = make_gpu(0, name="NVIDIA A100-SXM4-40GB", memory_total_bytes=40 << 30)
    assert not bad(run("gpu.memory_size", make_snap([gpu]), "dgx-a100"))


def test_memory_size_unknown_model_investigates_and_no_expectation_skips() -> None:
    gpu = make_gpu(0, name="NVIDIA H100 PCIe", memory_total_bytes=60 << 30)
    (finding,) = run("gpu.memory_size", make_snap([gpu]))
    assert (finding.status, finding.action) == (Status.FAIL, Action.INVESTIGATE)
    assert [f.status for f in run("gpu.memory_size", make_snap([gpu]), GENERIC)] == [
        Status.SKIP]


def test_inforom() -> None:
    gpus = [make_gpu(0), make_gpu(1, inforom_valid=False),
            make_gpu(2, inforom_valid=None, unsupported={"inforom_valid": "NotSupported"})]
    findings = run("gpu.inforom", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.FAIL, Action.RMA), (Status.SKIP, Action.NONE)]


# --- gpu.xid on real kernel-log lines (tests/fixtures/kernel_log, Apache-2.0) ---------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_log"


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


def test_responsive_leaves_nvlink_and_fabric_read_errors_to_their_families() -> None:
    gpu = make_gpu(0, errors={"nvlink3.crc": "Unknown", "fabric": "Unknown: x"})
    assert [f.status for f in run("gpu.responsive", make_snap([gpu]))] == [Status.PASS]


def test_xid_nvml_event_long_after_a_logged_one_is_its_own_occurrence() -> None:
    event = NvmlEvent(gpu_index=0, event_type=0x8, xid=46, time=NOW - 5)
    findings = xid_run(xid_line(46, 0, age=1000), nvml={"events": [event]})
    (fail,) = only(findings, Status.FAIL)
    assert (fail.observed["lines"], fail.observed["occurrences"]) == (2, 2)
