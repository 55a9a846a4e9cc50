"""Detection beside site profiles (checks/profiles/detect.py): a file in ``profile_dir`` never
makes detection fall to a less specific profile. Every built-in profile a node can be is
held beside a site profile extending each built-in, registered in shuffled orders: the
node's own built-in's site profile judges it, and equally specific matches are a tie that
host.profile warns about, judged by the base the tied profiles share."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import replace
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
    lineage,
    load_profile,
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


def test_equally_specific_matches_warn_naming_both_and_their_shared_base_judges(
        tmp_path: Path, snapshots: dict[str, Snapshot], site: None) -> None:
    """Two site profiles extending dgx-h100, one for an Ethernet fabric, one for
    InfiniBand: neither is more specific and nothing says which the node is. The tie is
    not confident; dgx-h100, which both extend, judges the healthy InfiniBand node (never
    the Ethernet twin, which would fail its ports), and host.profile warns naming both,
    whatever the order they were registered in."""
    profiles = _site_profiles(tmp_path, {
        "a-roce": "extends: dgx-h100\nhca_link_layer: Ethernet\n",
        "z-captured": "extends: dgx-h100\ndriver_versions: ['590.48.01']\n"
                      "nic_firmware: ['28.41.1000']\n"})
    for seed in range(4):
        _register(profiles, seed)
        found = detect_profile(snapshots["dgx-h100"])
        assert (found.name, found.confident) == ("dgx-h100", False), seed
        assert found.tied == ("a-roce", "z-captured")
        assert found.matched == ("dgx-h100", "a-roce", "z-captured")
        assert "a-roce, z-captured match equally" in found.reason
    report = evaluate(snapshots["dgx-h100"], Config(),
                      RunOptions(patterns=("host.profile", "ib.link_layer")))
    assert report.profile["name"] == "dgx-h100"
    statuses = {f.check: f.status for f in report.findings}
    assert statuses == {"host.profile": Status.WARN, "ib.link_layer": Status.PASS}
    (warning,) = [f for f in report.findings if f.check == "host.profile"]
    assert warning.message == "profiles match equally: judged against the base they share"
    assert "a-roce, z-captured match equally" in str(warning.observed)


def test_a_tie_of_profiles_with_no_base_in_common_falls_to_generic(
        snapshots: dict[str, Snapshot], site: None) -> None:
    """Equally deep matches whose chains share no profile: nothing they agree on but
    the generic profile, which judges the node, and host.profile says so."""
    dgx = load_profile("dgx-h100")
    _register({"ours-root": replace(dgx, name="ours-root", extends=None),
               "ours": replace(dgx, name="ours", extends="ours-root"),
               "ours-site": replace(dgx, name="ours-site", extends="ours"),
               "theirs": replace(dgx, name="theirs", extends="dgx-h100")}, 0)
    found = detect_profile(snapshots["dgx-h100"])
    assert (found.name, found.confident, found.tied) == ("generic", False,
                                                         ("ours-site", "theirs"))
    report = evaluate(snapshots["dgx-h100"], Config(), RunOptions(patterns=("host.profile",)))
    (finding,) = report.findings
    assert (finding.status, finding.message) == (
        Status.WARN, "profiles match equally: judged against no hardware expectations")
    assert "ours-site, theirs match equally" in str(finding.observed)


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
