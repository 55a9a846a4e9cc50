"""nvlink.links_up and nvlink.version (checks/nvlink/links.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.gpu import Gpu, NvLink
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.nvlink.factory import PLATFORMS, by_status, judge, make_gpu, make_snapshot, one

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


def test_links_down_on_a_12_link_part_name_only_its_12_links() -> None:
    """NVML answering for 18 link numbers on an H100 NVL: the six it does not have are
    not named as down."""
    gpus = [make_gpu(i, "h100-nvl") for i in range(8)]
    for link in gpus[0].nvlinks:
        link.active = False
    gpus[0].nvlinks += [NvLink(link=n, active=False) for n in range(12, 18)]
    bad = one(by_status(judge("nvlink.links_up", make_snapshot("h100-nvl", gpus), "h100-nvl"),
                        Status.FAIL))
    assert (bad.observed, bad.expected) == ("0/12 (down: 0-11)", "12/12")


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
    gpus[1].errors["nvlinks.4.active"] = "Unknown"
    gpus[2].nvlinks = []
    gpus[2].errors["nvlink_fields"] = "Timeout"
    findings = judge("nvlink.links_up", make_snapshot(gpus=gpus))
    errors = by_status(findings, Status.ERROR)
    assert [f.component for f in errors] == ["gpu1", "gpu2"]
    assert not by_status(findings, Status.FAIL)


def _idle(platform: str = "gb200-nvl72") -> list[Gpu]:
    """GB200 GPUs whose gpu1 has link 3 asleep (NVML_NVLINK_STATE_SLEEP), link 4 up with its
    traffic disabled (NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED) and link 5 active in its
    low-speed power state (field 167 = 1)."""
    gpus = [make_gpu(i, platform) for i in range(4)]
    sleeping, no_traffic, low = gpus[1].nvlinks[3], gpus[1].nvlinks[4], gpus[1].nvlinks[5]
    sleeping.active, sleeping.state, sleeping.low_power = False, 2, True
    no_traffic.active, no_traffic.state = False, 3
    low.low_power = True
    return gpus


def test_links_up_passes_idle_links_naming_them() -> None:
    findings = judge("nvlink.links_up", make_snapshot("gb200-nvl72", _idle()), "gb200-nvl72")
    assert {f.status for f in findings} == {Status.PASS}
    gpu1 = one([f for f in findings if f.component == "gpu1"])
    assert gpu1.observed == "18/18 (asleep: 3; low power: 5; traffic disabled: 4)"
    assert gpu1.message == "all NVLinks up, some idle"


def test_links_up_and_speed_judge_the_same_links_idle() -> None:
    """Both checks share one idle rule: a link with its traffic disabled is up to
    links_up and not judged on speed, never down to one and idle to the other."""
    snapshot = make_snapshot("gb200-nvl72", _idle())
    up = one([f for f in judge("nvlink.links_up", snapshot, "gb200-nvl72")
              if f.component == "gpu1"])
    fast = one([f for f in judge("nvlink.speed", snapshot, "gb200-nvl72")
                if f.component == "gpu1"])
    assert (up.status, fast.status) == (Status.PASS, Status.PASS)
    assert "asleep: 3; low power: 5; traffic disabled: 4" in str(up.observed)
    assert "asleep: 3; low power: 5; traffic disabled: 4" in str(fast.observed)


def test_links_up_fails_an_inactive_link_whatever_its_power_state() -> None:
    """Nothing NVIDIA publishes says an inactive link (state 0) in the low-speed power
    state is healthy: it is down."""
    gpus = _idle()
    dead = gpus[1].nvlinks[9]
    dead.active, dead.state, dead.low_power = False, 0, True
    bad = one(by_status(judge("nvlink.links_up", make_snapshot("gb200-nvl72", gpus),
                              "gb200-nvl72"), Status.FAIL))
    assert bad.component == "gpu1"
    assert bad.observed == "17/18 (down: 9) (asleep: 3; low power: 5; traffic disabled: 4)"
    assert bad.action is Action.RESET_GPU


def test_links_up_still_fails_a_down_link_beside_a_sleeping_one() -> None:
    gpus = _idle()
    down = gpus[1].nvlinks[9]
    down.active, down.state, down.low_power = False, 0, False  # inactive, high-speed power
    bad = one(by_status(judge("nvlink.links_up", make_snapshot("gb200-nvl72", gpus),
                              "gb200-nvl72"), Status.FAIL))
    assert (bad.component, bad.observed) == (
        "gpu1", "17/18 (down: 9) (asleep: 3; low power: 5; traffic disabled: 4)")
    assert bad.action is Action.RESET_GPU


def test_links_up_warns_under_a_reduced_bandwidth_mode_never_fails() -> None:
    """A site that set NVML_GPU_NVLINK_BW_MODE_OFF (1): links off by design are reported
    with the mode, never failed or sent to a reboot."""
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    for gpu in gpus:
        for link in gpu.nvlinks:
            link.active, link.state = False, 0
    snapshot = make_snapshot("gb200-nvl72", gpus)
    assert snapshot.nvml is not None
    snapshot.nvml.nvlink_bw_mode = 1
    findings = judge("nvlink.links_up", snapshot, "gb200-nvl72")
    assert {f.status for f in findings} == {Status.WARN}
    assert {f.action for f in findings} == {Action.INVESTIGATE}
    assert findings[0].observed == "0/18 (down: 0-17) (NVLink bandwidth mode OFF)"


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
