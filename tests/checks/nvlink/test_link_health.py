"""nvlink.speed, nvlink.ber and nvlink.fec_history (checks/nvlink/link_health.py), and
the NVLink5 values they judge as the collector reads them from NVML."""

from __future__ import annotations

import copy

import pynvml
import pytest

from clusterdiag.agent.collectors.nvml_read import CountingNvml, GpuReader, read_bw_mode
from clusterdiag.agent.model import Snapshot, nvlink_ber
from clusterdiag.agent.model.gpu import Gpu
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.nvml import SimNvml
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.nvlink.factory import NOW, by_status, judge, make_gpu, make_snapshot, one

GB200 = "gb200-nvl72"


def gb200_gpus() -> list[Gpu]:
    return [make_gpu(i, GB200) for i in range(4)]


# --- NVML's packed BER (nvml.h NVML_NVLINK_BER_*) -------------------------------------

@pytest.mark.parametrize(("packed", "rate"), [
    (0xFFF, 1.5e-254),  # mantissa 15, exponent 255: NVML's "no errors"
    (0x10C, 1e-12),     # mantissa 1 at bits 8-11, exponent 12 at bits 0-7
    (0x30B, 3e-11),
    (0xA0D, 1e-12),     # 10 x 10^-13 is 1e-12 exactly, as DCGM counts it
])
def test_ber_decodes_nvml_packing(packed: int, rate: float) -> None:
    assert nvlink_ber.decode(packed) == rate
    assert nvlink_ber.decode(nvlink_ber.encode(packed >> 8, packed & 0xFF)) == rate


# --- what the collector reads ----------------------------------------------------------

def _read(profile: str, fec_history: bool) -> tuple[Gpu, int]:
    nv = CountingNvml(SimNvml(build(NodeSpec("n1", profile))))  # type: ignore[arg-type]
    nv.nvmlInit()
    before = nv.calls
    gpu = GpuReader(nv, 0, fec_history).read()  # type: ignore[arg-type]
    return gpu, nv.calls - before


def test_collector_reads_nvlink5_rates_in_the_one_link_batch() -> None:
    gpu, calls = _read(GB200, fec_history=False)
    link = gpu.nvlinks[0]
    assert (link.state, link.low_power, link.speed_mbps) == (1, False, 53125)
    assert link.effective_ber == link.symbol_ber == 1.5e-254
    assert link.fec_history is None  # only when nvlink.fec_history is planned
    with_fec, calls_fec = _read(GB200, fec_history=True)
    assert with_fec.nvlinks[17].fec_history[:3] == [1200, 40, 2]
    assert calls_fec == calls  # 18 x 16 more values, not one call more


def test_collector_leaves_pre_blackwell_links_as_they_were() -> None:
    gpu, _ = _read("dgx-h100", fec_history=True)
    link = gpu.nvlinks[0]
    assert link.active
    assert link.speed_mbps == 26562
    assert (link.state, link.effective_ber, link.fec_history) == (None, None, None)
    assert not [k for k in gpu.errors if k.startswith("nvlinks")]


# --- nvlink.speed ------------------------------------------------------------------------

def test_speed_passes_full_speed_links() -> None:
    findings = judge("nvlink.speed", make_snapshot(GB200), GB200)
    assert {f.status for f in findings} == {Status.PASS}
    assert findings[0].observed == "18 links at 53125 MB/s"


def test_speed_fails_a_slow_link_naming_gpu_and_link() -> None:
    gpus = gb200_gpus()
    gpus[2].nvlinks[5].speed_mbps = 26562
    findings = judge("nvlink.speed", make_snapshot(GB200, gpus), GB200)
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu2.link5"
    assert (bad.observed, bad.expected) == ("26562 MB/s", "53125 MB/s")
    assert bad.action is Action.RESET_GPU
    assert len(by_status(findings, Status.PASS)) == 3


def test_speed_notes_sleeping_and_low_power_links_without_failing() -> None:
    gpus = gb200_gpus()
    asleep = gpus[0].nvlinks[3]
    asleep.active, asleep.state, asleep.speed_mbps = False, 2, 0
    slow_power = gpus[0].nvlinks[4]
    slow_power.low_power, slow_power.speed_mbps = True, 1000
    findings = judge("nvlink.speed", make_snapshot(GB200, gpus), GB200)
    assert not by_status(findings, Status.FAIL)
    gpu0 = one([f for f in findings if f.component == "gpu0"])
    assert gpu0.status is Status.PASS
    assert gpu0.observed == "16 links at 53125 MB/s (not judged, asleep: 3; low power: 4)"


def _half_mode(gpus: list[Gpu]) -> Snapshot:
    snapshot = make_snapshot(GB200, gpus)
    assert snapshot.nvml is not None
    snapshot.nvml.nvlink_bw_mode = 3  # NVML_GPU_NVLINK_BW_MODE_HALF
    return snapshot


def test_speed_under_the_sites_reduced_mode_warns_naming_mode_and_speed() -> None:
    gpus = gb200_gpus()
    for gpu in gpus:
        for link in gpu.nvlinks:
            link.speed_mbps = 26562
    findings = judge("nvlink.speed", _half_mode(gpus), GB200)
    assert {f.status for f in findings} == {Status.WARN}
    assert [f.component for f in findings] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    warn = findings[0]
    assert warn.observed == "18 links at 26562 MB/s (NVLink bandwidth mode HALF)"
    assert warn.expected == "53125 MB/s in mode FULL"
    assert "HALF" in warn.message
    assert warn.action is Action.INVESTIGATE


def test_speed_under_a_reduced_mode_names_it_on_full_speed_links() -> None:
    findings = judge("nvlink.speed", _half_mode(gb200_gpus()), GB200)
    assert {f.status for f in findings} == {Status.PASS}
    assert findings[0].observed == "18 links at 53125 MB/s (NVLink bandwidth mode HALF)"


def test_speed_with_the_mode_unread_warns_on_a_uniform_slowdown() -> None:
    """An agent that is not root reads no mode (nvml.h: NO_PERMISSION): every link of every
    GPU at one lower speed looks like the site's reduced mode, a warning naming the unread
    mode, not 72 failed links. A mode read as FULL still fails them, and so do links at
    two lower speeds: one speed for every link is a mode's doing, two are links that
    trained down."""
    gpus = gb200_gpus()
    for gpu in gpus:
        for link in gpu.nvlinks:
            link.speed_mbps = 26562
    gpus[3].nvlinks[0].active, gpus[3].nvlinks[0].state = False, 2  # asleep: not judged
    snapshot = make_snapshot(GB200, gpus)
    findings = judge("nvlink.speed", snapshot, GB200)
    assert {f.status for f in findings} == {Status.WARN}
    assert [f.component for f in findings] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert findings[0].observed == "18 links at 26562 MB/s (NVLink bandwidth mode not read)"
    assert "unread" in findings[0].message
    assert {f.action for f in findings} == {Action.INVESTIGATE}
    assert snapshot.nvml is not None
    snapshot.nvml.nvlink_bw_mode = 0  # NVML_GPU_NVLINK_BW_MODE_FULL, read
    assert len(by_status(judge("nvlink.speed", snapshot, GB200), Status.FAIL)) == 71
    snapshot.nvml.nvlink_bw_mode = None
    gpus[2].nvlinks[7].speed_mbps = 13281
    assert {f.status for f in judge("nvlink.speed", snapshot, GB200)} == {Status.FAIL}


def test_collector_and_speed_on_a_mode_the_agent_may_not_read() -> None:
    """The simulated node refuses the mode as nvml.h says it does a user other than root;
    the collector files it as unknown and nvlink.speed warns."""
    node = build(NodeSpec("n1", GB200,
                          faults=[{"node": "n1", "kind": "nvlink_bw_mode_unreadable"}]))
    nv = CountingNvml(SimNvml(node))  # type: ignore[arg-type]
    nv.nvmlInit()
    readers = [GpuReader(nv, i) for i in range(4)]  # type: ignore[arg-type]
    gpus = [reader.read() for reader in readers]
    assert read_bw_mode(nv, readers) == {"mode": None, "error": None}  # type: ignore[arg-type]
    findings = judge("nvlink.speed", make_snapshot(GB200, gpus), GB200)
    assert {f.status for f in findings} == {Status.WARN}


def test_collector_reads_the_bandwidth_mode_once_per_node_on_nvlink5() -> None:
    node = build(NodeSpec("n1", GB200, faults=[{"node": "n1", "kind": "nvlink_bw_mode_reduced"}]))
    nv = CountingNvml(SimNvml(node))  # type: ignore[arg-type]
    nv.nvmlInit()
    readers = [GpuReader(nv, i) for i in range(4)]  # type: ignore[arg-type]
    for reader in readers:
        reader.read()
    before = nv.calls
    assert read_bw_mode(nv, readers) == {"mode": 3, "error": None}  # type: ignore[arg-type]
    assert nv.calls - before == 1


def test_collector_does_not_ask_the_mode_below_nvlink5() -> None:
    nv = CountingNvml(SimNvml(build(NodeSpec("n1", "dgx-h100"))))  # type: ignore[arg-type]
    nv.nvmlInit()
    reader = GpuReader(nv, 0)  # type: ignore[arg-type]
    reader.read()
    before = nv.calls
    assert read_bw_mode(nv, [reader]) is None  # type: ignore[arg-type]
    assert nv.calls == before


@pytest.mark.parametrize(("code", "answer"), [
    (4, {"mode": None, "error": None}),  # NVML_ERROR_NO_PERMISSION: not root, mode unknown
    (999, {"mode": None, "error": "Unknown"}),
])
def test_collector_files_a_mode_it_could_not_read(code: int, answer: dict[str, object]
                                                  ) -> None:
    nv = CountingNvml(SimNvml(build(NodeSpec("n1", GB200))))  # type: ignore[arg-type]
    nv.nvmlInit()
    reader = GpuReader(nv, 0)  # type: ignore[arg-type]
    reader.read()

    def refuse() -> int:
        raise pynvml.NVMLError(code)

    nv._module.nvmlSystemGetNvlinkBwMode = refuse  # type: ignore[attr-defined]
    assert read_bw_mode(nv, [reader]) == answer  # type: ignore[arg-type]


def test_speed_skips_where_the_profile_names_no_speed() -> None:
    finding = one(judge("nvlink.speed", make_snapshot("dgx-h100"), "dgx-h100"))
    assert (finding.status, finding.component) == (Status.SKIP, "node")


# --- nvlink.ber --------------------------------------------------------------------------

@pytest.mark.parametrize(("packed", "status"), [
    (0xFFF, Status.PASS), (0x10C, Status.PASS), (0xA0D, Status.PASS),  # at most 1e-12
    (0x20C, Status.FAIL), (0xB0D, Status.FAIL), (0x10B, Status.FAIL),  # above it
])
def test_ber_fails_an_effective_ber_above_dcgms_threshold(packed: int, status: Status) -> None:
    """DCGM 4.6's own cases (IsEffectiveBerThresholdExceeded): 1e-12 and 10e-13 pass,
    2e-12, 11e-13 and 1e-11 fail."""
    gpus = gb200_gpus()
    gpus[1].nvlinks[9].effective_ber = nvlink_ber.decode(packed)
    findings = judge("nvlink.ber", make_snapshot(GB200, gpus), GB200)
    gpu1 = [f for f in findings if f.component.startswith("gpu1")]
    assert [f.status for f in gpu1] == [status]
    if status is Status.FAIL:
        assert gpu1[0].component == "gpu1.link9"
        assert gpu1[0].expected == "<= 1e-12"


def test_ber_warns_a_symbol_ber_above_dcgms_floor() -> None:
    gpus = gb200_gpus()
    gpus[0].nvlinks[2].symbol_ber = nvlink_ber.decode(nvlink_ber.encode(4, 9))
    finding = one(by_status(judge("nvlink.ber", make_snapshot(GB200, gpus), GB200),
                            Status.WARN))
    assert (finding.component, finding.observed) == ("gpu0.link2", "4.0e-09")


def test_ber_skips_generations_without_the_fields() -> None:
    finding = one(judge("nvlink.ber", make_snapshot("dgx-h100"), "dgx-h100"))
    assert (finding.status, finding.component) == (Status.SKIP, "node")


# --- nvlink.fec_history ------------------------------------------------------------------

def test_fec_history_reports_each_bins_growth_without_a_verdict() -> None:
    earlier = gb200_gpus()
    later = copy.deepcopy(earlier)
    later[0].nvlinks[0].fec_history = [500, 7] + [0] * 14
    later[0].nvlinks[1].fec_history = [100] + [0] * 15
    findings = judge("nvlink.fec_history", make_snapshot(GB200, later), GB200,
                     previous=make_snapshot(GB200, earlier, taken_at=NOW - 10))
    assert {f.status for f in findings} == {Status.PASS}
    gpu0 = one([f for f in findings if f.component == "gpu0"])
    assert gpu0.observed == {"bins": [600, 7] + [0] * 14, "seconds": 10.0}


def test_fec_history_is_judged_at_full_only() -> None:
    assert REGISTRY["nvlink.fec_history"].levels == ("full",)
    assert REGISTRY["nvlink.speed"].levels == REGISTRY["nvlink.ber"].levels == ("quick", "full")
