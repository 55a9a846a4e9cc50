"""nvlink.topology and nvlink.remote (checks/nvlink/topology.py)."""

from __future__ import annotations

import dataclasses

from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.profiles.profile import load_profile
from tests.checks.harness import run_check
from tests.checks.nvlink.factory import by_status, judge, make_gpu, make_snapshot, one

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


def _bridged_pairs() -> dict[str, str]:
    """H100 NVL: NVLink P2P within each bridged pair (0-1, 2-3, ...), none across."""
    return {f"{a}-{b}": "ok" if a // 2 == b // 2 else "not_supported"
            for a in range(8) for b in range(a + 1, 8)}


def test_topology_on_bridged_pairs_expects_each_gpus_partner_only() -> None:
    snap = make_snapshot("h100-nvl")
    assert snap.nvml is not None
    snap.nvml.p2p_nvlink = _bridged_pairs()
    finding = one(judge("nvlink.topology", snap, "h100-nvl"))
    assert (finding.status, finding.observed) == (Status.PASS, "4 pairs ok")
    snap.nvml.p2p_nvlink["2-3"] = "not_supported"
    finding = one(judge("nvlink.topology", snap, "h100-nvl"))
    assert finding.status is Status.FAIL
    assert finding.observed == {"gpu2": "0 NVLink peers", "gpu3": "0 NVLink peers"}
    assert finding.expected == "1 per GPU"


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
    findings = run_check("nvlink.remote", snap, profile=profile)
    assert one(by_status(findings, Status.PASS)).component == "gpu0"
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu1.link5"
    assert bad.message == "NVLink peer is not a GPU of this node"
