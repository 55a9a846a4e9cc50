"""Detection beside site profiles (checks/profiles/detect.py): a file in ``profile_dir`` never
makes detection fall to a less specific profile. Every built-in profile a node can be is
held beside a site profile extending each built-in, registered in shuffled orders: the
node's own built-in's site profile judges it, and equally specific matches are a tie that
host.profile warns about, judged by the profile that sets more expectations."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.settings.site_profiles import load_site_profiles
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.profiles import profile as profile_module
from clusterdiag.checks.profiles.detect import detect_profile
from clusterdiag.checks.profiles.profile import (
    Profile,
    add_site_profiles,
    builtin_names,
    expectations,
    lineage,
)

# Each built-in profile a node can be, and the simulated node that is one: an OEM server on
# an HGX baseboard is the DGX's hardware under another DMI name (tests/unit/test_detect.py).
NODES = {name: (name, None) for name in (
    "dgx-a100", "dgx-b200", "dgx-h100", "dgx-h200", "gb200-nvl72", "gb300-nvl72", "h100-nvl",
    "hgx-b300-8gpu", "hgx-h100-pcie")} | {
    f"hgx-{gpu}-8gpu": (f"dgx-{gpu}", "ProLiant XD670 Gen11")
    for gpu in ("a100", "b200", "h100", "h200")}


@pytest.fixture(scope="module")
def snapshots() -> dict[str, Snapshot]:
    snaps = {}
    for builtin, (platform, dmi) in NODES.items():
        env = env_for(NodeSpec("n1", platform, rack="r1" if "nvl72" in platform else None))
        snap = collect_snapshot(env, ["pci", "nvml", "host", "infiniband"],
                                time.monotonic() + 20)
        if dmi is not None:
            assert snap.host is not None
            snap.host.dmi_product_name = dmi
        snaps[builtin] = snap
    return snaps


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No site profile but those a test registers, and none left behind."""
    monkeypatch.setattr(profile_module, "_SITE", {})
    profile_module.profile_names.cache_clear()
    yield
    profile_module.profile_names.cache_clear()


def _register(profiles: dict[str, Profile], seed: int) -> None:
    """Register ``profiles`` in an order shuffled by ``seed``."""
    names = sorted(profiles)
    random.Random(seed).shuffle(names)
    profile_module._SITE.clear()
    add_site_profiles({n: profiles[n] for n in names})


def _site_profiles(tmp_path: Path, files: dict[str, str]) -> dict[str, Profile]:
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    return {n: s.profile for n, s in load_site_profiles(tmp_path).items()}


def test_a_site_profile_beside_every_builtin_judges_the_node_of_its_base(
        tmp_path: Path, snapshots: dict[str, Snapshot], site: None) -> None:
    """One site profile extending each built-in, side by side: each node is judged by the
    one extending its own built-in (never by a less specific profile), whatever the
    order the profiles were registered in."""
    assert {b: detect_profile(s).name for b, s in snapshots.items()} == {b: b for b in NODES}
    profiles = _site_profiles(tmp_path, {f"site-{b}": f"extends: {b}\ndescription: ours\n"
                                         for b in builtin_names()})
    for seed in range(5):
        _register(profiles, seed)
        for builtin, snap in snapshots.items():
            found = detect_profile(snap)
            assert (found.name, found.confident) == (f"site-{builtin}", True), (seed, found)
            assert found.matched[:2] == (f"site-{builtin}", builtin)
            assert found.tied == (f"site-{builtin}",)
            assert f"the most specific of site-{builtin}, {builtin}" in found.reason


def test_a_dgx_capture_keeps_judging_the_dgx_with_its_nic_checks(
        tmp_path: Path, snapshots: dict[str, Snapshot], site: None) -> None:
    """The deploy trap: a profile captured from a DGX H100 (extends dgx-h100, so it bears
    the DGX's DMI names) beside dgx-h100 sent detection to the NIC-less HGX baseboard, and
    the five NIC checks skipped. It judges the node now, with those checks."""
    _register(_site_profiles(tmp_path, {"captured": "extends: dgx-h100\ngpu_count: 8\n"
                                        "compute_hcas: 8\nhca_rate_gbps: 400.0\n"}), 0)
    report = evaluate(snapshots["dgx-h100"], Config(),
                      RunOptions(patterns=("ib.hca_count", "host.profile")))
    assert report.profile["name"] == "captured"
    assert report.profile["matched"] == ["captured", "dgx-h100"]
    assert "captured -> dgx-h100 -> hgx-h100-8gpu" in report.profile["reason"]
    assert {f.check: f.status for f in report.findings} == {"ib.hca_count": Status.PASS,
                                                            "host.profile": Status.PASS}


def test_equally_specific_matches_warn_naming_both_and_the_fuller_one_judges(
        tmp_path: Path, snapshots: dict[str, Snapshot], site: None) -> None:
    """Two site profiles extending dgx-h100: neither is more specific. The one that sets
    more expectations judges the node (its name sorting last, so that no order decides),
    and host.profile warns naming both."""
    profiles = _site_profiles(tmp_path, {
        "a-roce": "extends: dgx-h100\nhca_link_layer: Ethernet\n",
        "z-captured": "extends: dgx-h100\ndriver_versions: ['590.48.01']\n"
                      "nic_firmware: ['28.41.1000']\n"})
    assert expectations(profiles["z-captured"]) == expectations(profiles["a-roce"]) + 2
    for seed in range(4):
        _register(profiles, seed)
        found = detect_profile(snapshots["dgx-h100"])
        assert (found.name, found.tied) == ("z-captured", ("z-captured", "a-roce")), seed
        assert found.matched == ("z-captured", "a-roce", "dgx-h100")
    report = evaluate(snapshots["dgx-h100"], Config(), RunOptions(patterns=("host.profile",)))
    (finding,) = report.findings
    assert finding.status == Status.WARN
    assert "z-captured, a-roce match equally" in str(finding.observed)
    assert report.profile["name"] == "z-captured"


def test_the_dmi_name_outranks_a_deeper_profile_matched_by_weaker_evidence(
        tmp_path: Path, snapshots: dict[str, Snapshot], site: None) -> None:
    """A site's OEM baseboard profiles, however deep, never judge a node whose DMI name
    says DGX: the DMI product is stronger evidence than the NVSwitches."""
    _register(_site_profiles(tmp_path, {
        "oem": "extends: hgx-h100-8gpu\ncompute_hcas: 8\n",
        "oem-rack7": "extends: oem\ngpu_count: 8\n"}), 0)
    assert lineage(profile_module.load_profile("oem-rack7")) == ("oem", "hgx-h100-8gpu")
    assert detect_profile(snapshots["dgx-h100"]).name == "dgx-h100"
    found = detect_profile(snapshots["hgx-h100-8gpu"])
    assert (found.name, found.matched) == ("oem-rack7", ("oem-rack7", "oem", "hgx-h100-8gpu"))
