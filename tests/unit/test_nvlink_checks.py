"""The NVLink and NVSwitch checks, judged on hand-built snapshots of real platforms."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.gpu import Gpu, NvLink, NvmlInfo
from clusterdiag.agent.model.kernel import KernelLog, SxidEvent
from clusterdiag.agent.model.pci import NVIDIA_VENDOR, PciDevice
from clusterdiag.checks import nvlink as nvlink_checks
from clusterdiag.checks.finding import Action, Finding, Status
from clusterdiag.checks.profile import load_profile
from clusterdiag.checks.registry import REGISTRY, CheckContext

NOW = 1_700_000_000.0
NVLINK_CHECKS = ["nvlink.error_rate", "nvlink.links_up", "nvlink.remote", "nvlink.topology",
                 "nvlink.version"]
LEGACY = {"replay": 0, "recovery": 0, "crc": 0}
NVLINK5 = {"recovery_failed": 0, "recovery": 0, "rcv_errors": 0, "local_link_integrity": 0,
           "symbol_errors": 0}
# Per platform: links per GPU, NVML version enum, counters, GPUs.
PLATFORMS = {"dgx-h100": (18, 6, LEGACY, 8), "dgx-a100": (12, 4, LEGACY, 8),
             "gb200-nvl72": (18, 7, NVLINK5, 4), "hgx-h100-pcie": (0, None, {}, 8)}


# --- factory --------------------------------------------------------------------------

def make_gpu(index: int, platform: str = "dgx-h100", **changes: Any) -> Gpu:
    links, version, counters, _ = PLATFORMS[platform]
    gpu = Gpu(index=index, pci_bdf=f"0000:{0x18 + 16 * index:02x}:00.0",
              uuid=f"GPU-{platform}-{index}", mig_enabled=False)
    if links:
        gpu.nvlink_count = links
        gpu.nvswitch_link_count = links
        gpu.nvlinks = [NvLink(link=n, active=True, version=version, speed_mbps=26562,
                              errors=dict(counters)) for n in range(links)]
    else:
        gpu.unsupported["nvlink"] = "NotSupported"
        gpu.unsupported["nvlink_count"] = "NotSupported"
    for key, value in changes.items():
        setattr(gpu, key, value)
    return gpu


def make_snapshot(platform: str = "dgx-h100", gpus: list[Gpu] | None = None,
                  taken_at: float = NOW, **fields: Any) -> Snapshot:
    count = PLATFORMS[platform][3]
    gpus = gpus if gpus is not None else [make_gpu(i, platform) for i in range(count)]
    p2p = {f"{a.index}-{b.index}": "ok" if PLATFORMS[platform][0] else "not_supported"
           for i, a in enumerate(gpus) for b in gpus[i + 1:]}
    nvml = NvmlInfo(driver_version="570.86.15", device_count=len(gpus), gpus=gpus,
                    p2p_nvlink=p2p)
    return Snapshot(node="n1", taken_at=taken_at, nvml=nvml, **fields)


def judge(check_id: str, snapshot: Snapshot, platform: str = "dgx-h100", *,
          previous: Snapshot | None = None, **params: Any) -> list[Finding]:
    spec = REGISTRY[check_id]
    ctx = CheckContext(snapshot=snapshot, profile=load_profile(platform),
                       params={**spec.params, **params}, level="full", now=snapshot.taken_at,
                       previous=previous)
    findings = list(spec.func(ctx))
    assert findings, f"{check_id} yielded nothing"
    for finding in findings:  # every action a check emits is declared
        if finding.status in (Status.FAIL, Status.WARN):
            assert finding.action in spec.actions, (check_id, finding)
        if finding.status in (Status.SKIP, Status.ERROR):
            assert finding.message
    return findings


def by_status(findings: list[Finding], status: Status) -> list[Finding]:
    return [f for f in findings if f.status is status]


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


def nvswitch(bdf: str) -> PciDevice:
    return PciDevice(bdf=bdf, vendor=NVIDIA_VENDOR, device=0x22A3, pci_class=0x068000,
                     driver="nvidia-nvswitch")


# --- catalog --------------------------------------------------------------------------

def test_catalog_declares_the_contract() -> None:
    ids = sorted(i for i in REGISTRY if REGISTRY[i].func.__module__ == nvlink_checks.__name__)
    assert ids == [*NVLINK_CHECKS, "nvswitch.count", "nvswitch.sxid"]
    assert REGISTRY["nvlink.error_rate"].rate
    assert REGISTRY["nvlink.error_rate"].levels == ("full",)
    assert REGISTRY["nvlink.links_up"].levels == ("quick", "full")
    assert REGISTRY["nvlink.error_rate"].params["min_events"] == 3
    assert REGISTRY["nvlink.error_rate"].params["crc_fail_per_s"] == 100
    assert REGISTRY["nvswitch.sxid"].params["window_s"] == 7200
    assert REGISTRY["nvswitch.sxid"].needs == ("kernel_log",)
    assert REGISTRY["nvswitch.count"].needs == ("pci",)
    for check_id in NVLINK_CHECKS:
        assert REGISTRY[check_id].needs == ("nvml",)
        assert REGISTRY[check_id].remedy


# --- skips that keep NVLink checks off PCIe and MIG GPUs ------------------------------

@pytest.mark.parametrize("check_id", NVLINK_CHECKS)
def test_pcie_profile_skips_every_nvlink_check(check_id: str) -> None:
    snap = make_snapshot("hgx-h100-pcie")
    finding = one(judge(check_id, snap, "hgx-h100-pcie", previous=make_snapshot(
        "hgx-h100-pcie", taken_at=NOW - 10)))
    assert finding.status is Status.SKIP
    assert "profile expects none" in finding.message


@pytest.mark.parametrize("check_id", NVLINK_CHECKS)
def test_nvml_not_supported_skips_per_gpu_never_fails(check_id: str) -> None:
    # PCIe cards under an NVLink profile: NVML says NotSupported; that is never a failure.
    gpus = [make_gpu(i, "hgx-h100-pcie") for i in range(8)]
    snap = make_snapshot("hgx-h100-pcie", gpus)
    finding = one(judge(check_id, snap, "dgx-h100",
                        previous=make_snapshot("hgx-h100-pcie", taken_at=NOW - 10)))
    assert (finding.status, finding.component) == (Status.SKIP, "node")
    assert finding.message == "NVLink not supported on this GPU"
    # One such GPU among NVLink GPUs: that GPU skips, the others are judged.
    gpus = [make_gpu(i) for i in range(8)]
    gpus[3] = make_gpu(3, "hgx-h100-pcie")
    findings = judge(check_id, make_snapshot(gpus=gpus), "dgx-h100",
                     previous=make_snapshot(gpus=copy.deepcopy(gpus), taken_at=NOW - 10))
    assert one([f for f in findings if f.component == "gpu3"]).status is Status.SKIP
    assert not by_status(findings, Status.FAIL)
    assert by_status(findings, Status.PASS)


@pytest.mark.parametrize("check_id", NVLINK_CHECKS)
def test_mig_gpu_is_skipped_even_with_links_down(check_id: str) -> None:
    gpus = [make_gpu(i) for i in range(8)]
    gpus[2].mig_enabled = True
    for link in gpus[2].nvlinks:
        link.active = False
        link.version = 4
    snap = make_snapshot(gpus=gpus)
    assert snap.nvml is not None
    snap.nvml.p2p_nvlink = {k: ("not_supported" if "2" in k.split("-") else "ok")
                            for k in snap.nvml.p2p_nvlink}
    findings = judge(check_id, snap, previous=make_snapshot(taken_at=NOW - 10))
    gpu2 = [f for f in findings if f.component.startswith("gpu2")]
    assert [f.status for f in gpu2] == [Status.SKIP]
    assert "MIG" in gpu2[0].message
    assert not by_status(findings, Status.FAIL)


def test_gpu_not_answering_is_left_to_gpu_responsive() -> None:
    gpus = [make_gpu(i) for i in range(8)]
    gpus[5] = Gpu(index=5, responsive=False, lost="timeout")
    findings = judge("nvlink.links_up", make_snapshot(gpus=gpus))
    assert one([f for f in findings if f.component == "gpu5"]).status is Status.SKIP
    assert len(by_status(findings, Status.PASS)) == 7


def test_no_nvml_is_an_error_not_a_pass() -> None:
    snap = Snapshot(node="n1", taken_at=NOW,
                    sources={"nvml": SourceStats(status="timeout", error="deadline")})
    assert one(judge("nvlink.links_up", snap)).status is Status.ERROR
    snap = Snapshot(node="n1", taken_at=NOW, nvml=NvmlInfo(library_error="DriverNotLoaded"))
    finding = one(judge("nvlink.topology", snap))
    assert finding.status is Status.ERROR
    assert finding.observed == "DriverNotLoaded"


# --- nvlink.links_up ------------------------------------------------------------------

@pytest.mark.parametrize(("platform", "links"), [("dgx-h100", 18), ("dgx-a100", 12),
                                                  ("gb200-nvl72", 18)])
def test_links_up_passes_on_healthy_boards(platform: str, links: int) -> None:
    findings = judge("nvlink.links_up", make_snapshot(platform), platform)
    assert {f.status for f in findings} == {Status.PASS}
    assert len(findings) == PLATFORMS[platform][3]
    assert findings[0].observed == f"{links}/{links}"


def test_links_up_names_the_gpu_and_the_down_link() -> None:
    gpus = [make_gpu(i) for i in range(8)]
    gpus[3].nvlinks[7].active = False
    gpus[3].nvlinks[12].active = False
    findings = judge("nvlink.links_up", make_snapshot(gpus=gpus))
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu3"
    assert bad.observed == "16/18 (down: 7, 12)"
    assert str(bad.observed).startswith("16/18")  # drain reason: nvlink.links_up gpu3 16/18
    assert bad.expected == "18/18"
    assert bad.action is Action.RESET_GPU
    assert bad.message == "NVLinks down"  # no per-node numbers in the message
    assert len(by_status(findings, Status.PASS)) == 7


def test_links_up_counts_links_nvml_does_not_report_as_down() -> None:
    # An H800-like part (8 links) or a link NVML lost altogether, against an 18-link profile.
    gpus = [make_gpu(i) for i in range(8)]
    gpus[0].nvlinks = gpus[0].nvlinks[:8]
    bad = one(by_status(judge("nvlink.links_up", make_snapshot(gpus=gpus)), Status.FAIL))
    assert bad.observed == "8/18 (down: 8-17)"


def test_links_down_on_every_gpu_is_a_reboot() -> None:
    gpus = [make_gpu(i, "dgx-a100") for i in range(8)]
    for gpu in gpus:
        for link in gpu.nvlinks:
            link.active = False
    findings = judge("nvlink.links_up", make_snapshot("dgx-a100", gpus), "dgx-a100")
    assert len(by_status(findings, Status.FAIL)) == 8
    assert {f.action for f in findings} == {Action.REBOOT}
    assert findings[0].observed == "0/12 (down: 0-11)"


def test_links_up_unreadable_state_is_an_error() -> None:
    gpus = [make_gpu(i) for i in range(8)]
    gpus[1].nvlinks[4].active = None
    gpus[1].errors["nvlink4.state"] = "Unknown"
    gpus[2].nvlinks = []
    gpus[2].errors["nvlink_fields"] = "Timeout"
    findings = judge("nvlink.links_up", make_snapshot(gpus=gpus))
    errors = by_status(findings, Status.ERROR)
    assert [f.component for f in errors] == ["gpu1", "gpu2"]
    assert not by_status(findings, Status.FAIL)


# --- nvlink.topology ------------------------------------------------------------------

def test_topology_passes_when_every_pair_is_ok() -> None:
    finding = one(judge("nvlink.topology", make_snapshot()))
    assert finding.status is Status.PASS
    assert finding.observed == "28 pairs ok"


def test_topology_fails_naming_the_pairs() -> None:
    snap = make_snapshot()
    assert snap.nvml is not None
    snap.nvml.p2p_nvlink["3-5"] = "not_supported"
    snap.nvml.p2p_nvlink["1-3"] = "topology_not_supported"
    finding = one(judge("nvlink.topology", snap))
    assert finding.status is Status.FAIL
    assert finding.observed == {"1-3": "topology_not_supported", "3-5": "not_supported"}
    assert finding.action is Action.INVESTIGATE


def test_topology_without_p2p_matrix_is_an_error() -> None:
    snap = make_snapshot()
    assert snap.nvml is not None
    snap.nvml.p2p_nvlink = {}
    assert one(judge("nvlink.topology", snap)).status is Status.ERROR
    snap = make_snapshot()
    assert snap.nvml is not None
    snap.nvml.p2p_nvlink["0-7"] = "error:GpuIsLost"
    finding = one(judge("nvlink.topology", snap))
    assert finding.status is Status.ERROR
    assert finding.observed == {"0-7": "error:GpuIsLost"}


def test_topology_with_one_gpu_skips() -> None:
    snap = make_snapshot(gpus=[make_gpu(0)])
    assert one(judge("nvlink.topology", snap)).status is Status.SKIP


# --- nvlink.remote --------------------------------------------------------------------

def test_remote_passes_on_nvswitch_board_from_the_switch_link_count() -> None:
    findings = judge("nvlink.remote", make_snapshot())
    assert {f.status for f in findings} == {Status.PASS}
    assert len(findings) == 8


def test_remote_link_to_a_gpu_on_an_nvswitch_board_fails_on_the_link() -> None:
    gpus = [make_gpu(i) for i in range(8)]
    gpus[3].nvswitch_link_count = 17
    for link in gpus[3].nvlinks:
        link.remote_type = "switch"
    gpus[3].nvlinks[7].remote_type = "gpu"
    gpus[3].nvlinks[7].remote_bdf = "0000:28:00.0"
    findings = judge("nvlink.remote", make_snapshot(gpus=gpus))
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu3.link7"
    assert bad.action is Action.INVESTIGATE
    assert bad.observed == {"remote_type": "gpu", "remote_bdf": "0000:28:00.0"}
    assert not [f for f in findings if f.component == "gpu3"]


def test_remote_fewer_switch_links_than_active_without_per_link_answers_fails() -> None:
    gpus = [make_gpu(i) for i in range(8)]
    gpus[6].nvswitch_link_count = 16
    bad = one(by_status(judge("nvlink.remote", make_snapshot(gpus=gpus)), Status.FAIL))
    assert (bad.component, bad.observed) == ("gpu6", "16/18")


def test_remote_on_nvl72_gpu_peer_fails_reseat_unknown_warns() -> None:
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[1].nvswitch_link_count = 16
    for link in gpus[1].nvlinks:
        link.remote_type = "switch"
    gpus[1].nvlinks[0].remote_type = "gpu"
    gpus[1].nvlinks[9].remote_type = "unknown"
    findings = judge("nvlink.remote", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    fail = one(by_status(findings, Status.FAIL))
    warn = one(by_status(findings, Status.WARN))
    assert (fail.component, fail.action) == ("gpu1.link0", Action.RESEAT_CABLE)
    assert (warn.component, warn.action) == ("gpu1.link9", Action.INVESTIGATE)
    assert len(by_status(findings, Status.PASS)) == 3


def test_remote_on_a_board_without_nvswitch_checks_the_peer_gpu() -> None:
    # Two GPUs wired to each other directly: the profile says NVLink but no NVSwitch.
    gpus = [make_gpu(i) for i in range(2)]
    for gpu, peer in ((gpus[0], gpus[1]), (gpus[1], gpus[0])):
        gpu.nvswitch_link_count = 0
        for link in gpu.nvlinks:
            link.remote_type, link.remote_bdf = "gpu", peer.pci_bdf
    gpus[1].nvlinks[5].remote_bdf = "0000:99:00.0"
    snap = make_snapshot(gpus=gpus)
    profile = dataclasses.replace(load_profile("hgx-h100-pcie"), nvlinks_per_gpu=18,
                                  nvlink_version=6)
    spec = REGISTRY["nvlink.remote"]
    ctx = CheckContext(snapshot=snap, profile=profile, params=spec.params)
    findings = list(spec.func(ctx))
    assert one(by_status(findings, Status.PASS)).component == "gpu0"
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu1.link5"
    assert bad.message == "NVLink peer is not a GPU of this node"


# --- nvlink.error_rate ----------------------------------------------------------------

def counters_after(platform: str, dt: float, gpu: int, link: int, **grow: int
                   ) -> tuple[Snapshot, Snapshot]:
    before = make_snapshot(platform, taken_at=NOW - dt)
    after = copy.deepcopy(before)
    after.taken_at = NOW
    assert after.nvml is not None
    for name, value in grow.items():
        after.nvml.gpus[gpu].nvlinks[link].errors[name] += value
    return before, after


def test_error_rate_skips_without_an_earlier_sample() -> None:
    finding = one(judge("nvlink.error_rate", make_snapshot()))
    assert finding.status is Status.SKIP
    assert "earlier sample" in finding.message


def test_error_rate_passes_with_quiet_counters() -> None:
    before, after = counters_after("dgx-h100", 10, 0, 0)
    findings = judge("nvlink.error_rate", after, previous=before)
    assert {f.status for f in findings} == {Status.PASS}
    assert len(findings) == 8


def test_replay_below_min_events_is_not_a_verdict() -> None:
    before, after = counters_after("dgx-h100", 1, 3, 7, replay=2, recovery=1)
    findings = judge("nvlink.error_rate", after, previous=before)
    assert {f.status for f in findings} == {Status.PASS}


def test_replay_at_min_events_fails_on_the_link() -> None:
    before, after = counters_after("dgx-h100", 10, 3, 7, replay=3)
    findings = judge("nvlink.error_rate", after, previous=before)
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu3.link7"
    assert bad.message == "NVLink replay errors increasing"
    assert bad.observed["events"] == 3
    assert bad.action is Action.RESET_GPU
    assert not [f for f in findings if f.component == "gpu3"]  # no pass beside the fail


def test_min_events_is_a_parameter() -> None:
    before, after = counters_after("dgx-h100", 10, 3, 7, recovery=1)
    findings = judge("nvlink.error_rate", after, previous=before, min_events=1)
    assert one(by_status(findings, Status.FAIL)).message == "NVLink recoveries increasing"


def test_crc_fails_at_dcgm_rate_and_warns_below() -> None:
    before, after = counters_after("dgx-a100", 5, 0, 1, crc=1000)
    bad = one(by_status(judge("nvlink.error_rate", after, "dgx-a100", previous=before),
                        Status.FAIL))
    assert bad.observed["per_s"] == 200.0
    before, after = counters_after("dgx-a100", 5, 0, 1, crc=50)
    warn = one(by_status(judge("nvlink.error_rate", after, "dgx-a100", previous=before),
                         Status.WARN))
    assert warn.component == "gpu0.link1"
    assert warn.action is Action.INVESTIGATE


def test_counter_reset_counts_only_what_came_after() -> None:
    before, after = counters_after("dgx-h100", 10, 2, 2)
    assert before.nvml is not None
    assert after.nvml is not None
    before.nvml.gpus[2].nvlinks[2].errors["replay"] = 500
    after.nvml.gpus[2].nvlinks[2].errors["replay"] = 1  # GPU reset in between
    findings = judge("nvlink.error_rate", after, previous=before)
    assert not by_status(findings, Status.FAIL)
    after.nvml.gpus[2].nvlinks[2].errors["replay"] = 40  # a storm after the reset still shows
    assert one(by_status(judge("nvlink.error_rate", after, previous=before),
                         Status.FAIL)).observed["reset"] is True


def test_blackwell_failed_recovery_fails_at_once() -> None:
    before, after = counters_after("gb200-nvl72", 10, 1, 3, recovery_failed=1)
    bad = one(by_status(judge("nvlink.error_rate", after, "gb200-nvl72", previous=before),
                        Status.FAIL))
    assert (bad.component, bad.action) == ("gpu1.link3", Action.RESET_GPU)


def test_blackwell_counters_judged_by_their_own_names() -> None:
    before, after = counters_after("gb200-nvl72", 10, 0, 0, rcv_errors=2,
                                   symbol_errors=10_000)
    findings = judge("nvlink.error_rate", after, "gb200-nvl72", previous=before)
    assert {f.status for f in findings} == {Status.PASS}  # symbol errors: not judged
    before, after = counters_after("gb200-nvl72", 10, 0, 0, rcv_errors=20, recovery=5,
                                   local_link_integrity=4)
    findings = judge("nvlink.error_rate", after, "gb200-nvl72", previous=before)
    warns = by_status(findings, Status.WARN)
    assert sorted(f.message for f in warns) == ["NVLink local link integrity errors increasing",
                                                "NVLink receive errors increasing"]
    fail = one(by_status(findings, Status.FAIL))
    assert (fail.message, fail.action) == ("NVLink recoveries increasing", Action.RESET_GPU)
    # A receive-error storm (the simulator's nvlink_crc_storm on NVLink5) fails.
    before, after = counters_after("gb200-nvl72", 3, 2, 5, rcv_errors=1500)
    fail = one(by_status(judge("nvlink.error_rate", after, "gb200-nvl72", previous=before),
                         Status.FAIL))
    assert (fail.component, fail.action) == ("gpu2.link5", Action.RESET_GPU)
    before, after = counters_after("gb200-nvl72", 10, 0, 0, symbol_errors=10_000)
    findings = judge("nvlink.error_rate", after, "gb200-nvl72", previous=before,
                     symbol_errors_warn_per_s=100.0)
    assert one(by_status(findings, Status.WARN)).message == "NVLink symbol errors increasing"


def test_error_rate_out_of_order_samples_is_an_error() -> None:
    before = make_snapshot(taken_at=NOW + 5)
    assert one(judge("nvlink.error_rate", make_snapshot(), previous=before)).status \
        is Status.ERROR


# --- nvlink.version -------------------------------------------------------------------

def test_version_passes_and_fails_on_a_mismatched_link() -> None:
    assert {f.status for f in judge("nvlink.version", make_snapshot())} == {Status.PASS}
    gpus = [make_gpu(i) for i in range(8)]
    for link in gpus[4].nvlinks[:12]:
        link.version = 4
    bad = one(by_status(judge("nvlink.version", make_snapshot(gpus=gpus)), Status.FAIL))
    assert bad.component == "gpu4"
    assert bad.observed == "4 (NVLink 3.0) on links 0-11"
    assert bad.expected == "6 (NVLink 4.0)"
    assert bad.action is Action.INVESTIGATE


def test_version_ignores_down_links() -> None:
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[0].nvlinks[0].active = False
    gpus[0].nvlinks[0].version = 0
    findings = judge("nvlink.version", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    assert {f.status for f in findings} == {Status.PASS}


# --- nvswitch.count -------------------------------------------------------------------

def test_nvswitch_count_pass_and_missing_switch() -> None:
    switches = [nvswitch(f"0000:{0x05 + i:02x}:00.0") for i in range(4)]
    finding = one(judge("nvswitch.count", make_snapshot(pci=switches)))
    assert (finding.status, finding.observed, finding.expected) == (Status.PASS, 4, 4)
    finding = one(judge("nvswitch.count", make_snapshot(pci=switches[:3])))
    assert (finding.status, finding.action, finding.observed) == (Status.FAIL, Action.REBOOT, 3)


def test_nvswitch_count_ignores_nvidia_bridges_and_gpus() -> None:
    pci = [nvswitch(f"0000:{i:02x}:00.0") for i in range(6)]
    pci.append(PciDevice(bdf="0000:40:00.0", vendor=NVIDIA_VENDOR, device=0x22B1,
                         pci_class=0x060400))
    pci.append(PciDevice(bdf="0000:41:00.0", vendor=NVIDIA_VENDOR, device=0x20B2,
                         pci_class=0x030200))
    assert one(judge("nvswitch.count", make_snapshot("dgx-a100", pci=pci),
                     "dgx-a100")).status is Status.PASS


@pytest.mark.parametrize("platform", ["gb200-nvl72", "hgx-h100-pcie"])
def test_nvswitch_checks_skip_without_nvswitch(platform: str) -> None:
    snap = make_snapshot(platform, pci=[], kernel_log=KernelLog("file:x"))
    for check_id in ("nvswitch.count", "nvswitch.sxid"):
        assert one(judge(check_id, snap, platform)).status is Status.SKIP


def test_nvswitch_count_without_pci_is_an_error() -> None:
    assert one(judge("nvswitch.count", make_snapshot())).status is Status.ERROR


# --- nvswitch.sxid --------------------------------------------------------------------

def sxid_event(sxid: int, switch: int, message: str, time: float | None = NOW - 60,
               ) -> SxidEvent:
    return SxidEvent(sxid=sxid, pci_bdf=f"0000:{0x05 + switch:02x}:00.0", message=message,
                     raw=f"nvidia-nvswitch{switch}: SXid: {sxid}, {message}", time=time,
                     switch_device=f"nvidia-nvswitch{switch}")


def test_sxid_real_burst_fails_per_switch_without_counting_continuations() -> None:
    # The real gpud burst: two faults on nvswitch0, one each on 1 and 2, plus the driver's
    # Severity/Data continuation lines.
    log = KernelLog("file:x", sxids=[
        sxid_event(20034, 1, "Fatal, Link 48 LTSSM Fault Up"),
        sxid_event(20034, 0, "Fatal, Link 63 LTSSM Fault Up"),
        sxid_event(20034, 2, "Severity 1 Engine instance 60 Sub-engine instance 00"),
        sxid_event(20034, 0, "Data {0x10000000, 0x10000000, 0x00000000}"),
        sxid_event(20034, 2, "Fatal, Link 37 LTSSM Fault Up"),
        sxid_event(20034, 0, "Fatal, Link 62 LTSSM Fault Up"),
        sxid_event(20034, 2, "Severity 1 Engine instance 37 Sub-engine instance 00"),
        sxid_event(20034, 0, "Severity 1 Engine instance 62 Sub-engine instance 00"),
    ], lines_read=8)
    findings = judge("nvswitch.sxid", make_snapshot(kernel_log=log))
    assert [f.component for f in findings] == ["nvswitch0", "nvswitch1", "nvswitch2"]
    assert {f.status for f in findings} == {Status.FAIL}
    assert findings[0].observed["count"] == 2
    assert findings[2].observed["count"] == 1
    assert findings[0].message == "NVSwitch SXid 20034 (LTSSM_FAULT_UP)"
    assert findings[0].action is Action.RESET_GPU


def test_sxid_window_and_unknown_codes() -> None:
    log = KernelLog("file:x", sxids=[
        sxid_event(20034, 0, "Fatal, Link 48 LTSSM Fault Up", time=NOW - 8000),
        sxid_event(20009, 1, "Non-fatal, Link 3 RX Short Error Rate"),
        sxid_event(11004, 2, "Non-fatal, Link 5 something new"),
        sxid_event(19999, 3, "Fatal, Link 6 something worse"),
    ], lines_read=4)
    findings = {f.component: f for f in judge("nvswitch.sxid", make_snapshot(kernel_log=log))}
    assert "nvswitch0" not in findings  # outside the 2-hour window
    assert findings["nvswitch1"].status is Status.WARN
    assert findings["nvswitch2"].status is Status.WARN
    assert findings["nvswitch3"].status is Status.FAIL
    wider = judge("nvswitch.sxid", make_snapshot(kernel_log=log), window_s=10_000)
    assert "nvswitch0" in {f.component for f in wider}


def test_sxid_clean_log_passes_and_missing_log_errors() -> None:
    finding = one(judge("nvswitch.sxid", make_snapshot(kernel_log=KernelLog("kmsg",
                                                                            lines_read=900))))
    assert finding.status is Status.PASS
    assert one(judge("nvswitch.sxid", make_snapshot())).status is Status.ERROR
    unreadable = KernelLog("kmsg", unknown={"kmsg": "PermissionError"})
    assert one(judge("nvswitch.sxid", make_snapshot(kernel_log=unreadable))).status \
        is Status.ERROR


def test_sxid_uses_uptime_and_boot_time_when_no_wall_time() -> None:
    event = sxid_event(20034, 0, "Fatal, Link 1 LTSSM Fault Up", time=None)
    event.uptime_s = 100.0
    log = KernelLog("kmsg", sxids=[event], lines_read=1, boot_time=NOW - 100_000)
    assert one(judge("nvswitch.sxid", make_snapshot(kernel_log=log))).status is Status.PASS
    log.boot_time = NOW - 200
    assert one(judge("nvswitch.sxid", make_snapshot(kernel_log=log))).status is Status.FAIL
