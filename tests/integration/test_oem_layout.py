"""The OEM HGX layout: 8 ConnectX-7 NDR rails beside the GPUs
plus ConnectX-6 Dx Ethernet storage ports, two under GPU0's and GPU4's PCIe switches.
Roles come from facts when judging, so the storage ports are never rails, under the
baseboard profile, the DGX one, the site's, and a RoCE site profile."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.settings.site_profiles import load_site_profiles
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec, parse_spec
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.profiles import profile as profile_module
from clusterdiag.checks.profiles.profile import add_site_profiles
from clusterdiag.reports.model.node import NodeReport
from tests.conftest import run_cli

SITE_PROFILES = Path(__file__).parent.parent / "fixtures" / "profiles"
RAILS = ["mlx5_0", "mlx5_10", "mlx5_11", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9"]


@pytest.fixture(scope="module", autouse=True)
def _site_profiles() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profile_module, "_SITE", {})
        add_site_profiles({n: s.profile for n, s in load_site_profiles(SITE_PROFILES).items()})
        yield
    profile_module.profile_names.cache_clear()


def _run(profile: str, faults: list[dict[str, Any]] | None = None,
         fabric: str = "infiniband") -> NodeReport:
    env = env_for(NodeSpec("o1", "dgx-h100", fabric=fabric, layout="oem", faults=faults or []))
    return run_node(env, Config(), RunOptions(level="quick", profile=profile, budget_s=20))


def _bad(report: NodeReport) -> list[Finding]:
    return [f for f in report.findings if f.status in (Status.FAIL, Status.ERROR, Status.WARN)]


def _roles(report: NodeReport) -> dict[str, tuple[str, str]]:
    return {h["name"]: (h["role"], h["role_reason"]) for h in report.inventory["hcas"]}


@pytest.mark.parametrize("profile", ["hgx-h100-8gpu", "dgx-h100", "oem-h100", "auto"])
def test_a_healthy_oem_server_passes_and_its_storage_ports_are_storage(profile: str) -> None:
    """The first report of this layout: this node got 8 fails and was drained, because a device
    sharing a bridge with a GPU was a rail whatever its link layer."""
    report = _run(profile)
    assert not _bad(report), _bad(report)
    roles = _roles(report)
    assert sorted(n for n, (r, _) in roles.items() if r == "compute") == RAILS
    assert roles["mlx5_7"][0] == roles["mlx5_8"][0] == "storage"
    assert "Ethernet" in roles["mlx5_7"][1]
    assert "0000:1b:00.0" in roles["mlx5_7"][1]  # beside GPU0, and said so


def test_auto_detection_takes_the_oem_server_for_its_baseboard_or_the_sites(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The site's profile of the board when it has one, else the built-in baseboard, whose
    roles then come from the board itself (the rails' link layer beside the GPUs)."""
    assert _run("auto").profile["name"] == "oem-h100"
    monkeypatch.setattr(profile_module, "_SITE", {})
    profile_module.profile_names.cache_clear()
    report = _run("auto")
    assert report.profile["name"] == "hgx-h100-8gpu"
    assert _roles(report)["mlx5_8"][1] == ("runs Ethernet beside GPU 0000:9d:00.0; the rails "
                                           "beside the GPUs run InfiniBand")
    assert not _bad(report)


def test_a_missing_rail_names_the_gpu_left_without_one() -> None:
    report = _run("oem-h100", [{"node": "o1", "kind": "oem_nic_missing", "hca": "mlx5_4"}])
    (count,) = [f for f in report.findings if f.check == "ib.hca_count"]
    assert count.status is Status.FAIL
    assert count.message == ("fewer compute HCAs than the platform has: no compute NIC beside "
                             "GPU 0000:52:00.0")
    assert count.observed["pci_without_rdma_device"] == ["0000:4f:00.0"]
    assert [f.check for f in _bad(report)] == ["ib.hca_count"]


def test_a_rail_on_the_wrong_link_layer_is_named_and_the_storage_cards_are_not() -> None:
    report = _run("oem-h100", [{"node": "o1", "kind": "oem_rail_lost_role", "hca": "mlx5_4"}])
    (count,) = [f for f in report.findings if f.check == "ib.hca_count"]
    assert count.status is Status.FAIL
    assert count.action.value == "fix_config"
    assert sorted(count.observed["wrong_link_layer"]) == ["mlx5_4"]  # not the CX-6 Dx


def test_a_roce_oem_server_keeps_the_rails_and_not_the_storage_ports_beside_them() -> None:
    """Everything runs Ethernet: 12 candidates for 8 rails. The nearest to each GPU, the
    400G rail before the 100G storage port under the same switch, is compute; the RoCE
    checks judge exactly the rails and pass."""
    report = _run("roce-h100", fabric="roce")
    assert not _bad(report), _bad(report)
    roles = _roles(report)
    assert sorted(n for n, (r, _) in roles.items() if r == "compute") == RAILS
    assert roles["mlx5_0"][1] == "Ethernet, the nearest to GPU 0000:1b:00.0 (4 PCIe hops)"
    assert "not the nearest to any GPU" in roles["mlx5_7"][1]
    judged = {f.component for f in report.findings if f.check == "roce.pfc"}
    assert judged == {f"{name}/1" for name in RAILS}


def test_topo_shows_each_nic_role_and_reason(tmp_path: Path) -> None:
    spec = tmp_path / "oem.yaml"
    spec.write_text("nodes:\n  - names: o1\n    profile: dgx-h100\n    layout: oem\n")
    proc = run_cli("topo", "--simulate", str(spec))
    assert proc.returncode == 0, proc.stderr
    assert ("mlx5_7 (NIC7): storage, runs Ethernet beside GPU 0000:1b:00.0; the rails "
            "beside the GPUs run InfiniBand") in proc.stdout
    assert "mlx5_4 (NIC4): compute, shares a PCIe bridge with GPU 0000:52:00.0" in proc.stdout


@pytest.mark.parametrize(("entry", "fault", "problem"), [
    ({"layout": "odm"}, None,
     "layout 'odm': 'reference', or 'oem' on dgx-b200, dgx-h100, dgx-h200"),
    ({"profile": "gb200-nvl72", "rack": "r1", "layout": "oem"}, None, "layout 'oem'"),
    ({}, {"kind": "oem_nic_missing", "hca": "mlx5_4"},
     "fault oem_nic_missing: needs a node with layout oem"),
])
def test_the_spec_layout_is_validated(entry: dict[str, Any], fault: dict[str, Any] | None,
                                      problem: str) -> None:
    data: dict[str, Any] = {"nodes": [{"names": "o1", "profile": "dgx-h100", **entry}]}
    if fault is not None:
        data["faults"] = [{"node": "o1", **fault}]
    with pytest.raises(UsageError, match=re.escape(problem)):
        parse_spec(data, "spec.yaml")
