"""gpu.pcie_link and gpu.pcie_replay_rate (checks/gpu/pcie.py)."""

from __future__ import annotations

from clusterdiag.agent.model import Snapshot
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import GENERIC, NOW, bad, bridge, make_gpu, make_snap, pci_gpu, run


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
