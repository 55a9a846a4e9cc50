"""H100 NVL servers (cards bridged in pairs) and HGX B300 boards: detected from a simulated
node, and an H100 NVL pair with its links down fails the NVLink checks against the part's
12 links."""

from __future__ import annotations

import time

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import NvLink
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.profiles.detect import detect_profile


def _snapshot(profile: str) -> Snapshot:
    env = env_for(NodeSpec("n1", profile))
    return collect_snapshot(env, ["pci", "nvml", "host"], time.monotonic() + 20)


@pytest.fixture(scope="module")
def nvl() -> Snapshot:
    return _snapshot("h100-nvl")


@pytest.mark.parametrize("profile", ["h100-nvl", "hgx-b300-8gpu"])
def test_a_healthy_node_is_detected(profile: str) -> None:
    found = detect_profile(_snapshot(profile))
    assert (found.name, found.confident) == (profile, True), found.reason


@pytest.mark.parametrize(("profile", "pci_id"), [("h100-nvl", "0x2321"),
                                                 ("hgx-b300-8gpu", "0x3182")])
def test_without_nvml_the_pci_device_id_names_the_platform(profile: str, pci_id: str
                                                           ) -> None:
    snap = _snapshot(profile)
    assert snap.nvml is not None
    for gpu in snap.nvml.gpus:
        gpu.name = None
    found = detect_profile(snap)
    assert found.name == profile
    assert pci_id in found.reason


def test_the_bridged_pairs_pass_every_nvlink_check(nvl: Snapshot) -> None:
    report = evaluate(nvl, Config(), RunOptions(patterns=("nvlink.*",)))
    assert report.profile["name"] == "h100-nvl"
    judged = ("nvlink.links_up", "nvlink.topology", "nvlink.remote", "nvlink.version")
    statuses = {f.status for f in report.findings if f.check in judged}
    assert statuses == {Status.PASS}, report.findings
    assert {f.check for f in report.findings} >= set(judged)


def _pair_down(snap: Snapshot) -> Snapshot:
    """GPU0 and GPU1's bridges off: every link inactive, and NVML answering for link
    numbers 12-17 too (inactive), as a reader walking NVML's 18 link numbers sees them."""
    copy = Snapshot.from_dict(snap.to_dict())
    assert copy.nvml is not None
    for gpu in copy.nvml.gpus[:2]:
        for link in gpu.nvlinks:
            link.active = False
        gpu.nvlinks += [NvLink(link=n, active=False) for n in range(12, 18)]
    copy.nvml.p2p_nvlink["0-1"] = "not_supported"
    return copy


def test_a_pair_with_its_links_down_fails_against_12_links(nvl: Snapshot) -> None:
    report = evaluate(_pair_down(nvl), Config(), RunOptions(patterns=("nvlink.*",)))
    assert report.profile["name"] == "h100-nvl"
    down = [f for f in report.findings
            if f.check == "nvlink.links_up" and f.status is Status.FAIL]
    assert [f.component for f in down] == ["gpu0", "gpu1"]
    for finding in down:
        assert finding.observed == "0/12 (down: 0-11)"
        assert finding.expected == "12/12"
    (topology,) = [f for f in report.findings if f.check == "nvlink.topology"]
    assert topology.status is Status.FAIL
    assert topology.observed == {"gpu0": "0 NVLink peers", "gpu1": "0 NVLink peers"}
