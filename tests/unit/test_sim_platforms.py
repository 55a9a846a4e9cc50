"""A platform in one place: every profile is simulated, and the faults that apply to a
platform follow from what its profile and layout say it has (agent/sim/state/platforms.py), not
from lists of platform names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clusterdiag.agent.sim.bandwidth import RATES
from clusterdiag.agent.sim.faults import catalog as faults_module
from clusterdiag.agent.sim.faults.catalog import FAULTS
from clusterdiag.agent.sim.state.layout import LAYOUTS
from clusterdiag.agent.sim.state.platforms import (
    Capability,
    capabilities,
    simulated_as,
    unsimulated,
)
from clusterdiag.checks.catalogs.profile_data import PROFILES
from clusterdiag.checks.profiles.profile import builtin_names


def test_every_profile_but_generic_is_simulated() -> None:
    assert unsimulated() == [], "add a layout in agent/sim/state/layout.py LAYOUTS for these"


def test_every_laid_out_platform_has_its_simulated_tool_figures() -> None:
    """Without its row a platform's simulated qualify tools would answer the generic
    figures, and its fault-free qualify would judge them against its own profile."""
    assert sorted(LAYOUTS) == sorted(RATES), "add the platform's Rates in agent/sim/bandwidth.py"


def test_a_new_profile_without_a_layout_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROFILES, "dgx-r100", {"extends": "hgx-r100-8gpu"})
    monkeypatch.setitem(PROFILES, "hgx-r100-8gpu", {"nvswitch": True})
    assert unsimulated() == ["dgx-r100", "hgx-r100-8gpu"]


def test_a_baseboard_is_simulated_as_the_chassis_built_on_it() -> None:
    assert simulated_as("dgx-h100") == "dgx-h100"
    assert simulated_as("hgx-b200-8gpu") == "dgx-b200"
    assert simulated_as("hgx-a100-8gpu") == "dgx-a100"
    baseboards = [n for n in builtin_names() if n not in LAYOUTS and n != "generic"]
    assert baseboards, "no baseboard profile left to test"
    for name in baseboards:
        assert PROFILES[str(simulated_as(name))]["extends"] == name


def test_capabilities_are_read_from_the_profile_and_layout() -> None:
    b200, a100 = capabilities("dgx-b200"), capabilities("dgx-a100")
    # The B200 baseboard's NVSwitches are no PCI functions: managed through ConnectX ones.
    assert {Capability.NVSWITCH, Capability.NVSWITCH_MGMT} <= b200
    assert Capability.NVSWITCH_PCI not in b200
    assert {Capability.NVSWITCH, Capability.NVSWITCH_PCI} <= a100
    assert Capability.FABRIC_INFO not in a100  # fabric info starts with Hopper
    tray = capabilities("gb200-nvl72")
    assert {Capability.NVL72, Capability.IB, Capability.FABRIC_INFO} <= tray
    assert not {Capability.NVSWITCH, Capability.RAIL_PER_GPU} & tray
    assert capabilities("hgx-h100-pcie") == {Capability.SRAM_ECC}
    assert Capability.OEM_LAYOUT in capabilities("dgx-h100")


def test_the_b200_baseboard_gets_its_faults_from_what_it_has() -> None:
    on_b200 = {kind for kind, f in FAULTS.items() if "dgx-b200" in f.profiles}
    assert {"nvswitch_manager_missing", "fabric_manager_down", "nvlink_down",
            "fabric_not_registered", "hca_missing", "nic_wrong_numa"} <= on_b200
    # No NVSwitch on its PCI bus: nothing to remove, no host driver to log an SXid.
    assert not {"nvswitch_missing", "sxid"} & on_b200


def test_every_kind_applies_somewhere_and_needs_what_it_claims() -> None:
    for kind in FAULTS.values():
        assert kind.profiles, f"{kind.kind} applies to no simulated platform"
        for platform in kind.profiles:
            assert kind.needs <= capabilities(platform)


def test_the_fault_table_names_no_platform() -> None:
    """The name lists cannot come back: no profile name is written in the fault table."""
    source = Path(faults_module.__file__).read_text(encoding="utf-8")
    named = sorted(n for n in builtin_names() if re.search(rf"[\"']{re.escape(n)}[\"']", source))
    assert named == []
