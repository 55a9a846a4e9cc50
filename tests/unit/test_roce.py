"""RoCE facts as real hosts print them (agent/collectors/roce.py, dcb, mlnx_qos), the
RoCE site-profile keys, and the simulator's RoCE spec; the roce.* checks are judged in
tests/checks/ib/test_roce.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.base.errors import ConfigError, UsageError
from clusterdiag.agent.collectors import ib as ib_collector
from clusterdiag.agent.collectors.roce import (
    parse_dcb_dscp,
    parse_dcb_pfc,
    parse_mlnx_qos,
    read_all_qos,
    read_ecn,
    read_qos,
)
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.ib import RoceQos
from clusterdiag.agent.read.sources import CommandResult, SourceEnv
from clusterdiag.agent.read.sysfs import FileCounter
from clusterdiag.agent.settings.site_profiles import load_site_profiles
from clusterdiag.agent.sim.spec import parse_spec
from tests.checks.ib.factory import command_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROCFS = FIXTURES / "ib" / "procfs"
GPUD_H100 = FIXTURES / "ib" / "gpud-h100"


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


def test_qos_falls_back_to_mlnx_qos_and_says_when_neither_tool_is_there() -> None:
    deadline = time.monotonic() + 10
    env = SourceEnv(root=PROCFS, runner=command_runner({"mlnx_qos": CommandResult(
        ["mlnx_qos"], 0, _mlnx_qos_output("pcp", "0 0 0 1 0 0 0 0"))}))
    qos = read_qos(env, "eth0", FileCounter(), deadline)
    assert (qos.tool, qos.trust, qos.pfc, qos.ecn_np) == ("mlnx_qos", "pcp", [3],
                                                          [0, 1, 3, 4, 6, 7])
    bare = read_qos(SourceEnv(root=PROCFS, runner=command_runner({})), "eth0", FileCounter(),
                    deadline)
    assert bare.pfc is None
    assert bare.trust is None
    assert "neither dcb" in bare.unknown["pfc"]


def test_a_tool_that_does_not_answer_costs_its_value_not_the_source() -> None:
    hung = CommandResult(["dcb"], None, error="dcb: no answer within 2 s")
    env = SourceEnv(root=PROCFS, runner=command_runner({"dcb": hung}))
    qos = read_qos(env, "eth0", FileCounter(), time.monotonic() + 10)
    assert qos.unknown["pfc"] == "dcb: no answer within 2 s"
    assert qos.ecn_np == [0, 1, 3, 4, 6, 7]  # sysfs still read


def test_the_real_h100_bond_has_no_gid_table_and_no_ecn_files() -> None:
    """gpud's H100 capture: mlx5_bond_0 is Ethernet with neither gids/ nor a netdev tree:
    the facts say unknown, with the reason, and nothing is invented."""
    env = SourceEnv(root=GPUD_H100, runner=command_runner({}))
    devices = ib_collector.collect(env, SourceStats(), deadline=1e18)
    bond = next(d for d in devices if d.name == "mlx5_bond_0")
    port = bond.ports[0]
    assert port.link_layer == "Ethernet"
    assert port.gids == []
    assert port.unknown["gids"] == "missing"


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
