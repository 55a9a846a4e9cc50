"""RoCE compute fabrics (issue 13 item 5): the GID, ECN, PFC and trust facts as the host
shows them (real procfs ECN files, the tools' formats), and the roce.* checks on simulated
RoCE nodes, healthy and broken, including hosts that expose none of it."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.collectors import ib as ib_collector
from clusterdiag.agent.collectors.roce import (
    parse_dcb_dscp,
    parse_dcb_pfc,
    parse_mlnx_qos,
    read_all_qos,
    read_ecn,
    read_qos,
)
from clusterdiag.agent.config import Config
from clusterdiag.agent.errors import ConfigError, UsageError
from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.ib import IbDevice, IbPort, RoceGid, RoceQos
from clusterdiag.agent.model.nccl import NcclInfo
from clusterdiag.agent.runner import RunOptions, run_node
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec, parse_spec
from clusterdiag.agent.site_profiles import load_site_profiles
from clusterdiag.agent.sources import CommandResult, SourceEnv
from clusterdiag.agent.sysfs import FileCounter
from clusterdiag.checks import REGISTRY
from clusterdiag.checks import profile as profile_module
from clusterdiag.checks.finding import Finding, Status
from clusterdiag.checks.profile import add_site_profiles, load_profile
from clusterdiag.checks.registry import CheckContext
from clusterdiag.reports.node import NodeReport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROCFS = FIXTURES / "ib" / "procfs"
GPUD_H100 = FIXTURES / "ib" / "gpud-h100"
ROCE_PROFILE = FIXTURES / "profiles" / "roce-h100.yaml"
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


# -- the facts, from the formats real hosts print ---------------------------------------


def test_ecn_is_read_per_priority_from_the_real_procfs_fixture() -> None:
    """prometheus/procfs's eth0 (EXPECTED.md, TestEcnDevices): roce_np enable/0..7 =
    1,1,0,1,1,0,1,1 and roce_rp = 1,1,0,1,1,0,1,0."""
    qos = RoceQos()
    read_ecn(PROCFS, "eth0", qos, FileCounter())
    assert qos.ecn_np == [0, 1, 3, 4, 6, 7]
    assert qos.ecn_rp == [0, 1, 3, 4, 6]
    assert not qos.unknown


def test_a_netdev_without_ecn_files_says_the_driver_exposes_none(tmp_path: Path) -> None:
    (tmp_path / "sys/class/net/eth9").mkdir(parents=True)
    qos = RoceQos()
    read_ecn(tmp_path, "eth9", qos, FileCounter())
    assert qos.ecn_np is None
    assert qos.ecn_rp is None
    assert "no ECN settings" in qos.unknown["ecn/roce_np"]


def test_dcb_pfc_lines_as_dcb_prints_them() -> None:
    # dcb-pfc(8)'s example, and the one-line form some builds print.
    assert parse_dcb_pfc("pfc-cap 8 macsec-bypass off delay 4096\n"
                         "prio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:on 7:on\n") == [6, 7]
    assert parse_dcb_pfc("pfc-cap 8 prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off "
                         "delay 0") == [3]
    assert parse_dcb_pfc("pfc-cap 8 macsec-bypass off delay 0\n") is None
    assert parse_dcb_pfc("prio-pfc 0:off 1:off 2:off 3:on") is None  # not all 8


def test_dcb_app_dscp_entries_numeric() -> None:
    # dcb-app(8): "dcb -N app show dev eth0 dscp-prio" -> "dscp-prio 0:0 24:2 24:3 48:6".
    assert parse_dcb_dscp("dscp-prio 0:0 24:2 24:3 48:6\n") == {0: 0, 24: 3, 48: 6}
    assert parse_dcb_dscp("") == {}


def _mlnx_qos_output(trust: str, pfc: str) -> str:
    """``mlnx_qos -i IF`` in the layout MLNX_OFED prints (trust, dscp2prio, PFC table)."""
    rows = "".join(
        f"        prio:{p} dscp:{','.join(f'{d:02d}' for d in range(p * 8 + 7, p * 8 - 1, -1))},\n"
        for p in range(8))
    return (f"DCBX mode: OS controlled\nPriority trust state: {trust}\ndscp2prio mapping:\n"
            f"{rows}Cable len: 7\nPFC configuration:\n"
            f"        priority    0   1   2   3   4   5   6   7\n"
            f"        enabled     {pfc}\n"
            "tc: 0 ratelimit: unlimited, tsa: vendor\n         priority:  1\n")


def test_mlnx_qos_output_gives_trust_pfc_and_the_dscp_map() -> None:
    trust, pfc, table = parse_mlnx_qos(_mlnx_qos_output("dscp", "0   0   0   1   0   0   0   0"))
    assert (trust, pfc) == ("dscp", [3])
    assert table is not None
    assert table[26] == 3
    assert table[48] == 6
    assert len(table) == 64
    assert parse_mlnx_qos("garbage") == (None, None, None)


def _runner(answers: dict[str, CommandResult]) -> Any:
    def run(argv: list[str], timeout_s: float) -> CommandResult:
        assert 0 < timeout_s <= 2.0  # every tool under its own deadline
        return answers.get(argv[0], CommandResult(argv, None, error=f"{argv[0]}: not found"))
    return run


def test_qos_falls_back_to_mlnx_qos_and_says_when_neither_tool_is_there() -> None:
    deadline = time.monotonic() + 10
    env = SourceEnv(root=PROCFS, runner=_runner({"mlnx_qos": CommandResult(
        ["mlnx_qos"], 0, _mlnx_qos_output("pcp", "0 0 0 1 0 0 0 0"))}))
    qos = read_qos(env, "eth0", FileCounter(), deadline)
    assert (qos.tool, qos.trust, qos.pfc, qos.ecn_np) == ("mlnx_qos", "pcp", [3],
                                                          [0, 1, 3, 4, 6, 7])
    bare = read_qos(SourceEnv(root=PROCFS, runner=_runner({})), "eth0", FileCounter(), deadline)
    assert bare.pfc is None
    assert bare.trust is None
    assert "neither dcb" in bare.unknown["pfc"]


def test_a_tool_that_does_not_answer_costs_its_value_not_the_source() -> None:
    hung = CommandResult(["dcb"], None, error="dcb: no answer within 2 s")
    env = SourceEnv(root=PROCFS, runner=_runner({"dcb": hung}))
    qos = read_qos(env, "eth0", FileCounter(), time.monotonic() + 10)
    assert qos.unknown["pfc"] == "dcb: no answer within 2 s"
    assert qos.ecn_np == [0, 1, 3, 4, 6, 7]  # sysfs still read


def test_the_real_h100_bond_has_no_gid_table_and_no_ecn_files() -> None:
    """gpud's H100 capture: mlx5_bond_0 is Ethernet with neither gids/ nor a netdev tree:
    the facts say unknown, with the reason, and nothing is invented."""
    env = SourceEnv(root=GPUD_H100, runner=_runner({}))
    devices = ib_collector.collect(env, SourceStats(), deadline=1e18)
    bond = next(d for d in devices if d.name == "mlx5_bond_0")
    port = bond.ports[0]
    assert port.link_layer == "Ethernet"
    assert port.gids == []
    assert port.unknown["gids"] == "missing"


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
    env.runner = _runner({})  # neither dcb nor mlnx_qos installed
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
    spec = REGISTRY["roce.nccl"]
    ctx = CheckContext(snapshot=snap, profile=load_profile("roce-h100"), params=spec.params,
                       level="quick", now=1.0)
    return list(spec.func(ctx))


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


# -- profile keys -----------------------------------------------------------------------


@pytest.mark.parametrize(("line", "problem"), [
    ("roce_trust: dsp", "key 'roce_trust' must be dscp or pcp"),
    ("roce_priority: 9", "key 'roce_priority' must be a priority 0-7"),
    ("roce_mtu: big", "key 'roce_mtu' must be an integer"),
])
def test_roce_profile_keys_are_validated(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "site.yaml"
    path.write_text(f"extends: dgx-h100\n{line}\n")
    with pytest.raises(ConfigError, match=problem):
        load_site_profiles(tmp_path / "none", path)


# -- the simulator's spec ---------------------------------------------------------------


@pytest.mark.parametrize(("entry", "fault", "problem"), [
    ({"fabric": "rocev2"}, None, "fabric 'rocev2' is not one of infiniband, roce"),
    ({"profile": "hgx-h100-pcie", "fabric": "roce"}, None,
     "fabric roce: profile 'hgx-h100-pcie' has no compute NICs"),
    ({}, {"kind": "roce_pfc_off", "hca": "mlx5_0"},
     "fault roce_pfc_off: needs a node with fabric roce"),
])
def test_spec_fabric_is_validated(entry: dict[str, Any], fault: dict[str, Any] | None,
                                  problem: str) -> None:
    data: dict[str, Any] = {"nodes": [{"names": "r1", "profile": "dgx-h100", **entry}]}
    if fault is not None:
        data["faults"] = [{"node": "r1", **fault}]
    with pytest.raises(UsageError, match=problem):
        parse_spec(data, "spec.yaml")


def test_a_roce_spec_node_carries_its_fabric() -> None:
    spec = parse_spec({"nodes": [{"names": "r[1-2]", "profile": "dgx-h100", "fabric": "roce"}],
                       "faults": [{"node": "r2", "kind": "roce_ecn_off", "hca": "mlx5_3"}]},
                      "spec.yaml")
    assert {n.fabric for n in spec.nodes.values()} == {"roce"}
    assert spec.nodes["r2"].faults[0]["kind"] == "roce_ecn_off"


def test_the_netdevs_tools_are_asked_side_by_side() -> None:
    """Two netdevs' ``dcb pfc show`` must be under way at once: each waits (30 s at most)
    for the other before answering, so asked one after the other, the first would give
    up and its PFC would be unknown."""
    both = threading.Barrier(2, timeout=30)

    def run(argv: list[str], timeout_s: float) -> CommandResult:
        if argv[:2] == ["dcb", "pfc"]:
            try:
                both.wait()
            except threading.BrokenBarrierError:
                return CommandResult(argv, None, error="dcb: asked alone")
            return CommandResult(argv, 0, "pfc-cap 8 macsec-bw 0 del 0 prio-pfc 0:off 1:off "
                                          "2:off 3:on 4:off 5:off 6:off 7:off\n")
        return CommandResult(argv, 0, "dscp-prio 26:3\n")

    env = SourceEnv(root=PROCFS, runner=run)
    counter = FileCounter()
    qos = read_all_qos(env, {"eth0": True, "eth1": True, "eth2": False}, counter,
                       time.monotonic() + 60)
    assert sorted(qos) == ["eth0", "eth1", "eth2"]
    assert qos["eth0"].pfc == qos["eth1"].pfc == [3]
    assert qos["eth0"].trust == "dscp"
    assert qos["eth2"].pfc is None
    assert "not a compute rail" in qos["eth2"].unknown["pfc"]
    assert counter.count > 0  # the ECN files each read are counted
