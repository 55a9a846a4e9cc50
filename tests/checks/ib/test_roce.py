"""The roce.* checks (checks/ib/roce.py) on simulated RoCE nodes, and roce.nccl's
arithmetic on constructed snapshots."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.ib import IbDevice, IbPort, RoceGid, RoceQos
from clusterdiag.agent.model.nccl import NcclInfo
from clusterdiag.agent.read.sources import SourceEnv
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.settings.site_profiles import load_site_profiles
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.profiles import profile as profile_module
from clusterdiag.checks.profiles.profile import add_site_profiles
from clusterdiag.reports.model.node import NodeReport
from tests.checks.harness import run_check
from tests.checks.ib.factory import command_runner

ROCE_PROFILE = Path(__file__).resolve().parents[2] / "fixtures" / "profiles" / "roce-h100.yaml"
ROCE_CHECKS = ("roce.mtu", "roce.gid", "roce.ecn", "roce.pfc", "roce.nccl")


@pytest.fixture(scope="module", autouse=True)
def _roce_profile() -> Iterator[None]:
    """The RoCE site profile registered for this module only: a registered site profile
    takes part in detection (it outranks its base), which would change other modules'
    DGX H100 verdicts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profile_module, "_SITE", {})
        add_site_profiles({n: s.profile for n, s in
                           load_site_profiles(ROCE_PROFILE.parent, ROCE_PROFILE).items()})
        yield
    profile_module.profile_names.cache_clear()


def _roce_env(faults: list[dict[str, Any]] | None = None) -> SourceEnv:
    return env_for(NodeSpec("r1", "dgx-h100", fabric="roce", faults=faults or []))


def _judge(env: SourceEnv, profile: str = "roce-h100") -> NodeReport:
    return run_node(env, Config(), RunOptions(level="quick", profile=profile, budget_s=20))


def _findings(report: NodeReport, check: str) -> list[Finding]:
    return [f for f in report.findings if f.check == check]


# -- the checks on simulated RoCE nodes -------------------------------------------------


def test_healthy_roce_node_passes_every_roce_check_on_every_rail() -> None:
    report = _judge(_roce_env())
    for check in ROCE_CHECKS:
        found = _findings(report, check)
        assert {f.status for f in found} == {Status.PASS}, (check, found)
        assert len(found) == 8, check
    assert not [f for f in report.findings if f.status in (Status.FAIL, Status.ERROR)]


def test_an_infiniband_profile_skips_the_roce_checks_and_names_the_wrong_mode_rails() -> None:
    """The same RoCE node judged as a DGX H100 (InfiniBand): its Ethernet ports are not the
    compute fabric, so it has no rails, and ib.hca_count says where the eight are and
    why (fix_config); the RoCE checks do not add to it."""
    report = _judge(_roce_env(), "dgx-h100")
    for check in ROCE_CHECKS:
        assert {f.status for f in _findings(report, check)} == {Status.SKIP}, check
    (count,) = _findings(report, "ib.hca_count")
    assert count.status is Status.FAIL
    assert count.action.value == "fix_config"
    assert len(count.observed["wrong_link_layer"]) == 8
    assert "mlx5_4 (runs Ethernet (beside GPU 0000:52:00.0), not the compute fabric's " \
           "InfiniBand)" in count.message


def test_no_infiniband_only_check_fails_a_roce_port() -> None:
    report = _judge(_roce_env())
    for check in ("ib.subnet_manager", "ib.port_state", "ib.rate", "ib.link_layer"):
        assert not [f for f in _findings(report, check)
                    if f.status in (Status.FAIL, Status.ERROR, Status.WARN)], check


def test_a_host_without_gid_table_ecn_files_or_tools_skips_with_the_reason() -> None:
    env = _roce_env()
    env.runner = command_runner({})  # neither dcb nor mlnx_qos installed
    for port in (env.root / "sys/class/infiniband").glob("*/ports/1"):
        if (port / "link_layer").read_text().strip() == "Ethernet":
            shutil.rmtree(port / "gids")
            shutil.rmtree(port / "gid_attrs")
    for ecn in (env.root / "sys/class/net").glob("*/ecn"):
        shutil.rmtree(ecn.resolve())
    report = _judge(env)
    reasons = {check: {f.message for f in _findings(report, check)}
               for check in ("roce.gid", "roce.ecn", "roce.pfc")}
    assert reasons["roce.gid"] == {"no GID table in sysfs on this host"}
    assert reasons["roce.ecn"] == {"ecn/roce_np not readable: the driver exposes no ECN "
                                   "settings in sysfs"}
    assert reasons["roce.pfc"] == {"pfc not readable: neither dcb (iproute2) nor mlnx_qos "
                                   "(MLNX_OFED) is installed"}
    for check in reasons:
        assert {f.status for f in _findings(report, check)} == {Status.SKIP}
    # The trust is unknown too: roce.nccl falls back to the profile's roce_trust.
    assert {f.status for f in _findings(report, "roce.nccl")} == {Status.PASS}


@pytest.mark.parametrize(("kind", "check", "message"), [
    ("roce_pfc_off", "roce.pfc", "PFC off for priority 3"),
    ("roce_trust_pcp", "roce.pfc", "trust pcp, not dscp"),
    ("roce_ecn_off", "roce.ecn", "ECN off for priority 3 (notification point)"),
    ("roce_no_v2_gid", "roce.gid", "no RoCE v2 GID: only RoCE v1 entries"),
    ("roce_mtu_small", "roce.mtu", "RoCE netdev MTU below the fabric's"),
])
def test_each_broken_setting_fails_its_rail_only(kind: str, check: str, message: str) -> None:
    report = _judge(_roce_env([{"node": "r1", "kind": kind, "hca": "mlx5_4"}]))
    failed = [f for f in _findings(report, check) if f.status is Status.FAIL]
    assert [(f.component, f.message) for f in failed] == [("mlx5_4/1", message)]
    assert {f.status for f in _findings(report, check) if f.component != "mlx5_4/1"} == {
        Status.PASS}


def test_nccl_traffic_class_off_the_lossless_priority_fails_every_rail() -> None:
    report = _judge(_roce_env([{"node": "r1", "kind": "roce_nccl_tc_wrong", "tc": 0}]))
    failed = [f for f in _findings(report, "roce.nccl") if f.status is Status.FAIL]
    assert len(failed) == 8
    assert failed[0].message == "NCCL's traffic lands on priority 0, not the lossless 3"
    assert failed[0].observed["set_in"]["NCCL_IB_TC"] == "/etc/nccl.conf"


# -- roce.nccl's arithmetic on constructed snapshots ------------------------------------


def _roce_snap(env: dict[str, str], qos: RoceQos, gids: list[RoceGid] | None = None
               ) -> Snapshot:
    port = IbPort(port=1, state="ACTIVE", phys_state="LinkUp", link_layer="Ethernet",
                  netdev="enp24s0np0", netdev_operstate="up", netdev_mtu=9000,
                  gids=gids or [RoceGid(3, "0000:0000:0000:0000:0000:ffff:0a00:0001",
                                        "RoCE v2")], qos=qos)
    dev = IbDevice(name="mlx5_0", role="compute", ports=[port])
    return Snapshot(node="n1", taken_at=1.0, infiniband=[dev],
                    nccl=NcclInfo(env=env, env_sources={k: "/etc/nccl.conf" for k in env}))


def _nccl(snap: Snapshot) -> list[Finding]:
    return run_check("roce.nccl", snap, profile="roce-h100", now=1.0)


@pytest.mark.parametrize(("env", "qos", "status", "lands"), [
    ({"NCCL_IB_TC": "106"}, RoceQos(trust="dscp"), Status.PASS, 3),  # DSCP 26 -> 3
    ({"NCCL_IB_TC": "104"}, RoceQos(trust="dscp"), Status.PASS, 3),
    ({"NCCL_IB_TC": "136"}, RoceQos(trust="dscp"), Status.FAIL, 4),  # DSCP 34 -> 4
    # The site's own map: DSCP 34 on priority 3.
    ({"NCCL_IB_TC": "136"}, RoceQos(trust="dscp", dscp_prio=[3 if d == 34 else d >> 3
                                                             for d in range(64)]),
     Status.PASS, 3),
    ({"NCCL_IB_TC": "106", "NCCL_IB_SL": "3"}, RoceQos(trust="pcp"), Status.PASS, 3),
    ({"NCCL_IB_TC": "106"}, RoceQos(trust="pcp"), Status.FAIL, 0),  # PCP from SL 0
    ({}, RoceQos(trust="dscp"), Status.WARN, 0),  # unset where we can see: jobs may set it
])
def test_nccl_traffic_class_maps_to_a_priority(env: dict[str, str], qos: RoceQos,
                                                status: Status, lands: int) -> None:
    (finding,) = _nccl(_roce_snap(env, qos))
    assert finding.status is status, finding
    assert finding.observed["priority"] == lands


def test_a_fixed_gid_index_on_a_roce_v1_entry_fails() -> None:
    gids = [RoceGid(2, "0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1"),
            RoceGid(3, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2")]
    (bad,) = _nccl(_roce_snap({"NCCL_IB_TC": "106", "NCCL_IB_GID_INDEX": "2"},
                              RoceQos(trust="dscp"), gids))
    assert bad.status is Status.FAIL
    assert "IB/RoCE v1" in bad.message
    (good,) = _nccl(_roce_snap({"NCCL_IB_TC": "106", "NCCL_IB_GID_INDEX": "3"},
                               RoceQos(trust="dscp"), gids))
    assert good.status is Status.PASS


def test_a_garbage_traffic_class_is_one_clear_fail() -> None:
    (finding,) = _nccl(_roce_snap({"NCCL_IB_TC": "0x6a"}, RoceQos(trust="dscp")))
    assert finding.status is Status.FAIL
    assert finding.message == "NCCL_IB_TC is not a number 0-255"
