"""Each cross-node check over hand-built node summaries: what it catches, whom it names,
and what it leaves alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.model.slurm_blocks import SlurmBlocks
from clusterdiag.agent.slurm.topology import parse_scontrol
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.reports.cluster_checks import Unreachable, judge, settings_from
from clusterdiag.reports.cluster_checks.capacity import capacity
from clusterdiag.reports.cluster_checks.ib_rails import ib_rails
from clusterdiag.reports.cluster_checks.imex_domain import imex_domain
from clusterdiag.reports.cluster_checks.nvl_blocks import nvl_blocks
from clusterdiag.reports.cluster_checks.nvl_domain import nvl_domain
from clusterdiag.reports.cluster_checks.outliers import outliers, outlying
from clusterdiag.reports.cluster_checks.profiles import node_sets, profiles
from clusterdiag.reports.cluster_checks.reachability import reachability
from clusterdiag.reports.cluster_checks.settings import ClusterSettings
from clusterdiag.reports.cluster_checks.versions import versions
from clusterdiag.reports.model.summary import (
    ImexPeerView,
    ImexView,
    NodeFacts,
    NodeSummary,
    unanswered,
)

UUID_A = "0cb9fff3-b336-5f08-b48e-8f30ff6ad12c"
UUID_B = "77777777-b336-5f08-b48e-8f30ff6ad12c"


def node(name: str, profile: str = "dgx-h100", verdict: Status = Status.PASS,
         version: str = "0.1.0", **facts: Any) -> NodeSummary:
    defaults: dict[str, Any] = {"driver": "590.48.01", "cuda": "13.1", "kernel": "5.15.0"}
    return NodeSummary(node=name, profile=profile, version=version, verdict=verdict, gpus=8,
                       counts={"pass": 10}, problems=[], facts=NodeFacts(**{**defaults,
                                                                             **facts}))


def tray(name: str, uuid: str = UUID_A, clique: int = 32766, state: int = 3) -> NodeSummary:
    fabric = [{"gpu": i, "state": state, "status": 0, "cluster_uuid": uuid, "clique_id": clique}
              for i in range(4)]
    summary = node(name, "gb200-nvl72", fabric=fabric)
    summary.gpus = 4
    return summary


def statuses(found: list[Any]) -> set[Status]:
    return {c.finding.status for c in found}


# -- versions -------------------------------------------------------------------------------

def test_versions_minority_driver_is_a_warning_naming_the_minority() -> None:
    nodes = [node(f"gpu{i:03d}") for i in range(1, 6)] + [node("gpu006", driver="550.54.15")]
    found = versions(nodes, ClusterSettings())
    assert len(found) == 1
    item = found[0]
    assert item.finding.status is Status.WARN
    assert item.finding.check == "cluster.versions"
    assert item.nodes == ("gpu006",)
    assert item.finding.expected == "590.48.01"
    assert item.finding.observed == {"550.54.15": "gpu006"}
    assert "dgx-h100" in item.finding.message


def test_versions_compares_only_within_a_profile() -> None:
    nodes = [node(f"gpu{i}") for i in range(3)] + [
        tray(f"nvl1-tray{i:02d}") for i in range(1, 4)]
    for t in nodes[3:]:
        t.facts.driver, t.facts.kernel = "570.10", "6.8.0-nvidia-64k"
    assert statuses(versions(nodes, ClusterSettings())) == {Status.PASS}


def test_versions_pinned_makes_every_differing_node_fail() -> None:
    nodes = [node("a"), node("b"), node("c", nccl="2.21.5"), node("d", nccl="2.23.4")]
    for n in nodes[:2]:
        n.facts.nccl = "2.21.5"
    found = versions(nodes, ClusterSettings(pinned={"nccl": "2.23.4"}))
    assert [c.nodes for c in found] == [("a", "b", "c")]
    assert found[0].finding.status is Status.FAIL
    assert found[0].finding.expected == "2.23.4"


def test_versions_includes_clusterdiag_itself_and_hca_firmware() -> None:
    nodes = [node("a", hca_firmware="28.41.1000"), node("b", hca_firmware="28.41.1000"),
             node("c", version="0.0.9", hca_firmware="28.39.1002")]
    found = versions(nodes, ClusterSettings())
    assert {c.finding.component for c in found} == {"clusterdiag", "hca_firmware"}
    assert all(c.nodes == ("c",) for c in found)


def test_versions_skips_nodes_that_did_not_answer() -> None:
    nodes = [node("a"), node("b"), unanswered("c")]
    assert statuses(versions(nodes, ClusterSettings())) == {Status.PASS}


# -- profiles -------------------------------------------------------------------------------

def test_profiles_flags_the_odd_node_of_a_node_set_only() -> None:
    nodes = [node(f"gpu{i:03d}") for i in range(1, 5)] + [node("gpu005", "generic")]
    nodes += [tray(f"nvl1-tray{i:02d}") for i in range(1, 3)]
    found = profiles(nodes)
    assert len(found) == 1
    assert found[0].nodes == ("gpu005",)
    assert found[0].finding.expected == "dgx-h100"


def test_node_sets_split_by_name_pattern() -> None:
    assert node_sets(["gpu001", "gpu002", "nvl1-tray01", "nvl2-tray03", "login"]) == [
        ["gpu001", "gpu002"], ["login"], ["nvl1-tray01", "nvl2-tray03"]]


# -- nvl_domain -----------------------------------------------------------------------------

def test_nvl_domain_names_the_tray_in_another_clique_not_the_rack() -> None:
    trays = [tray(f"nvl1-tray{i:02d}") for i in range(1, 19)]
    trays[4] = tray("nvl1-tray05", clique=32767)
    found = nvl_domain(trays, ClusterSettings())
    fails = [c for c in found if c.finding.status is Status.FAIL]
    assert len(fails) == 1
    assert fails[0].nodes == ("nvl1-tray05",)
    assert fails[0].finding.message == "tray in another NVLink partition than its rack"
    assert all(t.rack == f"nvl-{UUID_A[:8]}" for t in trays)


def test_nvl_domain_missing_tray_with_configured_rack_names_it() -> None:
    trays = [tray(f"nvl1-tray{i:02d}") for i in range(1, 19) if i != 7]
    settings = ClusterSettings(racks={"nvl1": tuple(f"nvl1-tray{i:02d}" for i in range(1, 19))})
    found = nvl_domain(trays, settings)
    assert [(c.finding.status, c.finding.message) for c in found] == [
        (Status.WARN, "rack has fewer trays than expected")]
    item = found[0]
    assert item.finding.component == "rack nvl1"
    assert item.nodes == ()
    assert item.finding.observed == {"trays": 17, "missing": "nvl1-tray07"}
    assert item.finding.expected == 18


def test_a_run_over_part_of_a_rack_is_ready_when_its_trays_are() -> None:
    asked = [tray(f"nvl1-tray{i:02d}") for i in range(1, 5)]
    settings = ClusterSettings(racks={"nvl1": tuple(f"nvl1-tray{i:02d}" for i in range(1, 19))})
    report = judge(asked, [], settings, via="agent")
    assert report.ready
    assert report.bad_nodes == []
    rack = [c for c in report.findings if c.finding.check == "cluster.nvl_domain"]
    assert [c.finding.status for c in rack] == [Status.WARN]


def test_nvl_domain_unreachable_tray_is_left_to_reachability() -> None:
    names = tuple(f"nvl1-tray{i:02d}" for i in range(1, 19))
    nodes = [tray(n) for n in names[:-1]] + [unanswered(names[-1])]
    found = nvl_domain(nodes, ClusterSettings(racks={"nvl1": names}))
    assert statuses(found) == {Status.PASS}
    assert nodes[-1].rack == "nvl1"


def test_nvl_domain_expected_trays_from_config_without_rack_names() -> None:
    trays = [tray(f"nvl1-tray{i:02d}") for i in range(1, 17)]
    assert statuses(nvl_domain(trays, ClusterSettings(expected_trays_per_rack=16))) == {
        Status.PASS}
    assert statuses(nvl_domain(trays, ClusterSettings())) == {Status.WARN}


def test_nvl_domain_fabric_not_completed_and_unassigned_trays() -> None:
    trays = [tray(f"t{i:02d}") for i in range(1, 19)]
    trays[2] = tray("t03", state=2)
    trays.append(tray("t19", uuid="00000000-0000-0000-0000-000000000000", clique=0))
    found = nvl_domain(trays, ClusterSettings(expected_trays_per_rack=18))
    by_message = {c.finding.message: c.nodes for c in found}
    assert by_message["tray has not completed NVLink fabric registration"] == ("t03",)
    assert by_message["tray not in any NVLink domain (zero cluster UUID or clique)"] == ("t19",)


def test_nvl_domain_skips_without_trays() -> None:
    assert statuses(nvl_domain([node("gpu1")], ClusterSettings())) == {Status.SKIP}


# -- ib_rails -------------------------------------------------------------------------------

def rails(rate: float = 400.0, subnet: str = "fe80:0000:0000:0000", odd_gpu: int = -1,
          odd: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out = []
    for gpu in range(8):
        rail = {"gpu": gpu, "hca": f"mlx5_{gpu}", "port": 1, "rate_gbps": rate,
                "subnet": subnet, "state": "ACTIVE"}
        if gpu == odd_gpu:
            rail.update(odd or {})
        out.append(rail)
    return out


def test_ib_rails_keyed_by_gpu_names_node_and_gpu() -> None:
    nodes = [node(f"n{i}", rails=rails()) for i in range(4)]
    nodes[2].facts.rails = rails(odd_gpu=3, odd={"rate_gbps": 200.0, "hca": "mlx5_9"})
    nodes[3].facts.rails = rails(odd_gpu=5, odd={"subnet": "fe80:0000:0000:0001"})
    found = ib_rails(nodes)
    assert {(c.finding.component, c.nodes, c.finding.status) for c in found} == {
        ("gpu3 rail", ("n2",), Status.FAIL), ("gpu5 rail", ("n3",), Status.FAIL)}


def test_ib_rails_device_names_may_differ() -> None:
    nodes = [node(f"n{i}", rails=rails()) for i in range(3)]
    for rail in nodes[1].facts.rails:
        rail["hca"] = "mlx5_" + str(11 - rail["gpu"])
    assert statuses(ib_rails(nodes)) == {Status.PASS}


def test_ib_rails_does_not_repeat_a_port_the_node_already_failed() -> None:
    """A slow port the node's own ib.rate failed is one problem in the report, not two;
    a rail slower than its peers that the node's profile did not catch is still named."""
    nodes = [node(f"n{i}", rails=rails()) for i in range(4)]
    nodes[1].facts.rails = rails(odd_gpu=2, odd={"rate_gbps": 200.0})
    nodes[1].problems = [Finding.fail("mlx5_2/1", "link trained at a lower speed", 200.0,
                                      ">= 400 Gb/s", Action.RESEAT_CABLE).replace(
                                          check="ib.rate")]
    nodes[2].facts.rails = rails(odd_gpu=6, odd={"rate_gbps": 200.0})
    found = ib_rails(nodes)
    assert {(c.finding.component, c.nodes) for c in found} == {("gpu6 rail", ("n2",))}


def test_ib_rails_never_fails_the_faster_rail_even_in_a_tie() -> None:
    nodes = [node("gpu01", rails=rails()), node("gpu02", rails=rails(odd_gpu=0,
                                                                     odd={"rate_gbps": 200.0}))]
    found = ib_rails(nodes)
    assert [(c.finding.status, c.nodes) for c in found] == [(Status.FAIL, ("gpu02",))]
    assert found[0].finding.expected == "400 Gb/s"


def test_ib_rails_one_absurdly_fast_rail_fails_no_one() -> None:
    nodes = [node(f"n{i}", rails=rails()) for i in range(4)]
    nodes[0].facts.rails = rails(odd_gpu=2, odd={"rate_gbps": 1.0e9})
    assert statuses(ib_rails(nodes)) == {Status.PASS}


def test_ib_rails_split_subnets_without_a_majority_warn_and_exclude_no_one() -> None:
    nodes = [node("a", rails=rails()),
             node("b", rails=rails(odd_gpu=1, odd={"subnet": "fe80:0000:0000:0009"}))]
    found = ib_rails(nodes)
    assert [(c.finding.status, c.nodes) for c in found] == [(Status.WARN, ())]
    assert set(found[0].finding.observed.values()) == {"a", "b"}


def test_ib_rails_skip_without_rail_data() -> None:
    assert statuses(ib_rails([node("a"), node("b")])) == {Status.SKIP}


# -- outliers -------------------------------------------------------------------------------

def test_outlying_uses_median_and_mad_with_a_minimum_excess() -> None:
    values = {f"n{i}": 40.0 + (i % 3) for i in range(20)} | {"hot": 58.0}
    median, high = outlying(values, k=6.0, min_delta=10.0)
    assert median == 41.0
    assert high == {"hot": 58.0}
    assert outlying(values | {"hot": 45.0}, 6.0, 10.0)[1] == {}


def test_outliers_warn_on_hot_node_within_its_profile() -> None:
    nodes = [node(f"n{i}", telemetry={"gpu_temperature_c": 41.0 + i % 2}) for i in range(8)]
    nodes.append(node("hot", telemetry={"gpu_temperature_c": 67.0}))
    found = outliers(nodes, ClusterSettings())
    assert len(found) == 1
    assert found[0].finding.status is Status.WARN
    assert found[0].nodes == ("hot",)


def test_outliers_need_enough_nodes() -> None:
    nodes = [node(f"n{i}", telemetry={"ecc_corrected_per_h": 0.0}) for i in range(3)]
    assert statuses(outliers(nodes, ClusterSettings())) == {Status.SKIP}


# -- reachability and capacity ------------------------------------------------------------

def test_reachability_groups_by_reason_and_names_files() -> None:
    found = reachability([Unreachable("answer is not JSON", node="a"),
                          Unreachable("answer is not JSON", node="b"),
                          Unreachable("file is not JSON", file="/x/c.json")], asked=5)
    assert [(c.finding.message, c.nodes) for c in found] == [
        ("answer is not JSON", ("a", "b")), ("file is not JSON", ())]
    assert found[1].finding.observed == {"files": ["/x/c.json"]}
    assert statuses(found) == {Status.FAIL}


def test_capacity_with_need() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    ok = capacity(nodes, ["n0", "n1", "n2"], need=3)[0].finding
    assert ok.status is Status.PASS
    assert ok.observed["on"] == "n[0-2]"
    short = capacity(nodes, ["n0"], need=3)[0].finding
    assert short.status is Status.FAIL
    assert short.observed["gpus_ready"] == 8


# -- judge: the whole report ----------------------------------------------------------------

def test_judge_bad_nodes_only_fail_or_error_and_unreachable_listed() -> None:
    nodes = [node("n1"), node("n2", verdict=Status.WARN), node("n3", verdict=Status.FAIL),
             node("n4", verdict=Status.ERROR), node("n5", driver="1.0")]
    report = judge(nodes, [Unreachable("no answer", node="n6")], ClusterSettings(), via="agent")
    assert report.bad_nodes == ["n3", "n4", "n6"]
    assert report.unreachable == ["n6"]
    assert not report.ready
    assert report.node_verdict(nodes[4]) is Status.WARN  # a version warning is not a fail


def test_judge_need_is_ready_when_enough_nodes_are() -> None:
    nodes = [node(f"n{i}") for i in range(4)] + [node("bad", verdict=Status.FAIL)]
    assert judge(nodes, [], ClusterSettings(), via="files", need=4).ready
    assert not judge(nodes, [], ClusterSettings(), via="files", need=5).ready
    assert not judge(nodes, [], ClusterSettings(), via="files").ready


def test_groups_most_severe_first_with_folded_nodes() -> None:
    nodes = [node(f"n{i}") for i in range(1, 5)]
    for n in nodes[:3]:
        n.problems.append(Finding(Status.WARN, "gpu1", "GPU warm", check="gpu.temperature"))
    nodes[3].problems.append(Finding(Status.FAIL, "gpu3", "NVLinks down", check="nvlink.links_up"))
    groups = judge(nodes, [], ClusterSettings(), via="files").groups()
    assert [(g.check, g.status, sorted(set(g.nodes))) for g in groups] == [
        ("nvlink.links_up", Status.FAIL, ["n4"]),
        ("gpu.temperature", Status.WARN, ["n1", "n2", "n3"])]


# -- settings -------------------------------------------------------------------------------

def test_settings_reject_unknown_pins_and_bad_racks() -> None:
    with pytest.raises(ConfigError, match=r"cluster\.pinned: unknown key 'drivr'"):
        settings_from({"pinned": {"drivr": "1"}})
    with pytest.raises(ConfigError, match=r"cluster\.racks\.r1: bad node set"):
        settings_from({"racks": {"r1": "tray[01-"}})
    settings = settings_from({"racks": {"r1": "t[1-3]"}, "pinned": {"driver": 550}})
    assert settings.racks == {"r1": ("t1", "t2", "t3")}
    assert settings.pinned == {"driver": "550"}


def test_config_cluster_section_is_validated(tmp_path: Any) -> None:
    from clusterdiag.agent.settings.config import load_config

    path = tmp_path / "config.yaml"
    path.write_text("cluster:\n  concurrency: 64\n  racks: {nvl1: 'nvl1-tray[01-18]'}\n")
    config = load_config(path, {})
    assert config.section("cluster")["concurrency"] == 64
    assert config.section("cluster")["read_timeout_s"] == 15.0
    assert settings_from(config.section("cluster")).racks["nvl1"][-1] == "nvl1-tray18"
    path.write_text("cluster:\n  concurency: 64\n")
    with pytest.raises(ConfigError, match=r"did you mean 'cluster\.concurrency'"):
        load_config(path, {})
    path.write_text("cluster:\n  concurrency: lots\n")
    with pytest.raises(ConfigError, match="must be an integer"):
        load_config(path, {})


# -- nvl_blocks -----------------------------------------------------------------------------

SLURM_FIXTURES = Path(__file__).parent.parent / "fixtures" / "slurm"


def _recorded_blocks(name: str = "scontrol-show-topology-24.11") -> SlurmBlocks:
    """Slurm's blocks as ``scontrol show topology`` printed them: nvl1 and nvl2, a block
    per rack of 18 trays."""
    blocks = parse_scontrol((SLURM_FIXTURES / name).read_text())
    assert blocks is not None
    return SlurmBlocks("scontrol show topology", blocks)


def _two_racks() -> list[NodeSummary]:
    return [tray(f"nvl1-tray{i:02d}", UUID_A) for i in range(1, 19)] + [
        tray(f"nvl2-tray{i:02d}", UUID_B) for i in range(1, 19)]


def test_nvl_blocks_passes_blocks_that_each_hold_one_partition() -> None:
    found = nvl_blocks(_two_racks(), _recorded_blocks("scontrol-show-topology-24.05"))
    assert [(c.finding.component, c.finding.status) for c in found] == [
        ("block nvl1", Status.PASS), ("block nvl2", Status.PASS)]


def test_nvl_blocks_several_blocks_inside_one_partition_are_healthy() -> None:
    halves = SlurmBlocks("topology.conf", {
        "a": tuple(f"nvl1-tray{i:02d}" for i in range(1, 10)),
        "b": tuple(f"nvl1-tray{i:02d}" for i in range(10, 19))})
    assert statuses(nvl_blocks(_two_racks(), halves)) == {Status.PASS}


def test_nvl_blocks_names_a_tray_registered_in_another_partition_than_its_block() -> None:
    nodes = _two_racks()
    nodes[20] = tray("nvl2-tray03", UUID_A)  # in rack nvl1's partition, in block nvl2
    found = nvl_blocks(nodes, _recorded_blocks())
    bad = [c for c in found if c.finding.status is not Status.PASS]
    assert len(bad) == 1
    assert (bad[0].finding.component, bad[0].nodes) == ("block nvl2", ("nvl2-tray03",))
    assert bad[0].finding.status is Status.FAIL
    assert bad[0].finding.action is Action.FIX_CONFIG
    assert bad[0].finding.observed == {f"{UUID_A}/32766": "nvl2-tray03"}
    assert bad[0].finding.expected == f"{UUID_B}/32766"


def test_nvl_blocks_names_the_minority_of_a_block_spanning_two_partitions() -> None:
    """A rack cut into two partitions of 9 and 9 trays (cliques 1 and 2) while Slurm still
    has one block of 18: a job placed in the block crosses the partition boundary."""
    nodes = [tray(f"nvl1-tray{i:02d}", clique=1 if i <= 9 else 2) for i in range(1, 19)]
    found = nvl_blocks(nodes, _recorded_blocks())
    assert [c.finding.status for c in found] == [Status.FAIL]
    assert found[0].nodes == tuple(f"nvl1-tray{i:02d}" for i in range(10, 19))
    assert found[0].finding.observed == {f"{UUID_A}/2": "nvl1-tray[10-18]"}


def test_nvl_blocks_leaves_to_nvl_domain_the_trays_it_names() -> None:
    """One fault, one finding: a tray in another clique than its rack is nvl_domain's."""
    nodes = _two_racks()
    nodes[2] = tray("nvl1-tray03", UUID_A, clique=7)
    report = judge(nodes, [], ClusterSettings(), via="files", blocks=_recorded_blocks())
    failed = {c.finding.check: c.nodes for c in report.findings
              if c.finding.status is Status.FAIL}
    assert failed == {"cluster.nvl_domain": ("nvl1-tray03",)}


def test_nvl_blocks_skips_or_errs_with_the_reason_and_never_fails_a_tray() -> None:
    nodes = _two_racks()
    assert statuses(nvl_blocks(nodes, None)) == {Status.SKIP}
    skipped = nvl_blocks(nodes, SlurmBlocks(skipped="no Slurm block topology: scontrol not "
                                                    "found"))
    assert [c.finding.status for c in skipped] == [Status.SKIP]
    assert "scontrol not found" in str(skipped[0].finding.observed)
    unreadable = nvl_blocks(nodes, SlurmBlocks("scontrol show topology",
                                               error="block b1: bad node set"))
    assert [(c.finding.status, c.nodes) for c in unreadable] == [(Status.ERROR, ())]
    assert statuses(nvl_blocks([node("gpu001")], _recorded_blocks())) == {Status.SKIP}
    elsewhere = SlurmBlocks("topology.conf", {"b": ("gpu001",)})
    assert statuses(nvl_blocks(nodes, elsewhere)) == {Status.SKIP}


# -- imex_domain ----------------------------------------------------------------------------

def imex_tray(name: str, own: str, down: dict[str, str] | None = None,
              hosts: tuple[str, ...] = ("10.0.0.1", "10.0.0.2", "10.0.0.3"),
              answered: bool = True) -> NodeSummary:
    """A tray whose IMEX daemon lists ``hosts``, each READY but those in ``down``."""
    marks = down or {}
    peers = [ImexPeerView(i, host, None, marks.get(host, "READY"))
             for i, host in enumerate(hosts)]
    summary = tray(name)
    summary.facts.imex = ImexView("DEGRADED" if marks else "UP", peers, [own] if own else [])
    summary.answered = answered
    return summary


def test_imex_domain_fails_the_missing_tray_alone_mapped_by_its_own_address() -> None:
    nodes = [imex_tray("t1", "10.0.0.1", {"10.0.0.3": "UNAVAILABLE"}),
             imex_tray("t2", "10.0.0.2", {"10.0.0.3": "UNAVAILABLE"}), tray("t3")]
    nodes[2].facts.imex = ImexView(None, [], ["10.0.0.3"])  # its daemon is down
    (found,) = imex_domain(nodes)
    assert found.finding.status is Status.FAIL
    assert found.finding.check == "cluster.imex_domain"
    assert found.nodes == ("t3",)
    assert found.finding.observed == {"tray": "t3", "peer": "#2 10.0.0.3",
                                      "UNAVAILABLE": "t[1-2]"}


def test_imex_domain_maps_a_peer_by_host_name_when_no_tray_claims_it() -> None:
    hosts = ("t1.rack.example", "t2.rack.example", "t3.rack.example")
    nodes = [imex_tray(name, "", {"t2.rack.example": "UNAVAILABLE"}, hosts=hosts)
             for name in ("t1", "t3")] + [tray("t2")]
    (found,) = imex_domain(nodes)
    assert found.finding.status is Status.FAIL
    assert found.nodes == ("t2",)


def test_imex_domain_a_name_in_another_trays_report_never_fails_a_ready_tray() -> None:
    """One tray lists an extra peer 10.9.9.9 named t2, not READY, while every tray lists
    t2 (10.0.0.2) READY and t2's own view is UP: t2 is not failed."""
    nodes = [imex_tray(f"t{i}", f"10.0.0.{i}") for i in (1, 2, 3)]
    nodes[0].facts.imex.peers.append(ImexPeerView(3, "10.9.9.9", "t2", "UNAVAILABLE"))
    nodes[0].facts.imex.status = "DEGRADED"
    found = imex_domain(nodes)
    assert statuses(found) == {Status.WARN}
    assert [c.nodes for c in found] == [()]
    assert found[0].finding.observed == {"#3 10.9.9.9 (t2)": {"UNAVAILABLE": "t1"}}


def test_imex_domain_a_tray_listing_itself_ready_is_never_failed_by_others() -> None:
    nodes = [imex_tray("t1", "10.0.0.1", {"10.0.0.3": "UNAVAILABLE"}),
             imex_tray("t2", "10.0.0.2", {"10.0.0.3": "UNAVAILABLE"}),
             imex_tray("t3", "10.0.0.3")]
    (found,) = imex_domain(nodes)
    assert (found.finding.status, found.nodes) == (Status.WARN, ())
    assert found.finding.observed == {"t3 (#2 10.0.0.3)": {"READY": "t3",
                                                           "UNAVAILABLE": "t[1-2]"}}


def test_imex_domain_one_voter_alone_fails_no_tray() -> None:
    nodes = [imex_tray("t1", "10.0.0.1", {"10.0.0.2": "UNAVAILABLE"},
                       hosts=("10.0.0.1", "10.0.0.2")), tray("t2")]
    nodes[1].facts.imex = ImexView(None, [], ["10.0.0.2"])  # its daemon is down
    (found,) = imex_domain(nodes)
    assert (found.finding.status, found.nodes) == (Status.WARN, ())


def test_imex_domain_names_an_unmappable_peer_by_address_and_fails_no_one() -> None:
    nodes = [imex_tray("t1", "10.0.0.1", {"10.0.0.3": "UNAVAILABLE"}),
             imex_tray("t2", "10.0.0.2", {"10.0.0.3": "UNAVAILABLE"})]
    (found,) = imex_domain(nodes)
    assert found.finding.status is Status.WARN
    assert found.nodes == ()
    assert found.finding.observed == {"#2 10.0.0.3": {"UNAVAILABLE": "t[1-2]"}}


def test_imex_domain_one_tray_against_the_rest_is_a_link_not_the_peer() -> None:
    nodes = [imex_tray("t1", "10.0.0.1", {"10.0.0.3": "UNAVAILABLE"}),
             imex_tray("t2", "10.0.0.2"), imex_tray("t3", "10.0.0.3")]
    (found,) = imex_domain(nodes)
    assert found.finding.status is Status.WARN
    assert found.nodes == ()


def test_imex_domain_an_address_two_trays_claim_maps_to_neither() -> None:
    nodes = [imex_tray("t1", "10.0.0.1", {"10.0.0.3": "UNAVAILABLE"}),
             imex_tray("t2", "10.0.0.3", {"10.0.0.3": "UNAVAILABLE"}), tray("t3")]
    nodes[2].facts.imex = ImexView(None, [], ["10.0.0.3"])
    assert [c.nodes for c in imex_domain(nodes)] == [()]


def test_imex_domain_leaves_a_silent_tray_to_reachability() -> None:
    nodes = [imex_tray("t1", "t1", {"t3": "UNAVAILABLE"}, hosts=("t1", "t3")),
             unanswered("t3")]
    assert imex_domain(nodes) == []  # neither a pass nor a second finding for t3
    report = judge(nodes[:1], [Unreachable("connection refused", "t3")], ClusterSettings(),
                   via="agent")
    assert report.bad_nodes == ["t3"]
    assert not [c for c in report.findings if c.finding.check == "cluster.imex_domain"]


def test_imex_domain_passes_a_whole_domain_and_skips_without_views() -> None:
    nodes = [imex_tray("t1", "10.0.0.1"), imex_tray("t2", "10.0.0.2")]
    assert statuses(imex_domain(nodes)) == {Status.PASS}
    assert statuses(imex_domain([tray("t1"), node("gpu001")])) == {Status.SKIP}
