"""The cluster-level half of the fault matrix: every cluster kind of the fault table,
planted on one node of a small simulated cluster, served by simulated agents, gathered
over HTTP and judged, is caught by its cluster check with the declared status, action and
component, names the right node, and trips nothing else."""

from __future__ import annotations

import pytest

from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.cluster.fleet import Fleet
from clusterdiag.agent.sim.cluster import blocks, present, racks
from clusterdiag.agent.sim.faults.catalog import FAULTS, FaultKind
from clusterdiag.agent.sim.spec import ClusterSpec, parse_spec
from clusterdiag.checks.core.finding import Status
from clusterdiag.reports.cluster_checks import judge, settings_from
from clusterdiag.reports.fleet.gather import GatherSettings, gather_agent
from clusterdiag.reports.model.cluster import ClusterFinding

CLUSTER_KINDS = sorted(k for k, f in FAULTS.items() if f.cluster)
TOKEN = "matrix-token"


def _cluster(kind: FaultKind) -> tuple[dict[str, object], str]:
    profile = kind.profiles[0] if kind.profiles else "dgx-h100"
    fault: dict[str, object] = {"kind": kind.kind}
    if "version" in kind.keys:
        fault["version"] = "550.54.15"
    if "block" in kind.keys:
        fault["block"] = "r2"
    if "nvl72" in profile:
        # A second, smaller rack: another NVLink partition, and another Slurm block.
        spec = {"nodes": [{"names": "r1-tray[01-18]", "profile": profile, "rack": "r1"},
                          {"names": "r2-tray[01-02]", "profile": profile, "rack": "r2"}]}
        target = "r1-tray03"
    else:
        spec = {"nodes": [{"names": "n[1-5]", "profile": profile}]}
        target = "n3"
    spec["faults"] = [{**fault, "node": target}]
    return spec, target


def fault_keys(spec: ClusterSpec, target: str) -> dict[str, object]:
    """The planted fault's keys, which its component may name (``block {block}``)."""
    return {k: v for f in spec.nodes[target].faults for k, v in f.items()}


@pytest.mark.parametrize("kind", CLUSTER_KINDS, ids=str)
def test_cluster_fault_is_caught_across_nodes(kind: str) -> None:
    declared = FAULTS[kind]
    data, target = _cluster(declared)
    spec = parse_spec(data, "matrix")
    settings = settings_from({"racks": racks(spec)})
    with Fleet(present(spec), token=TOKEN) as fleet:
        gathered = gather_agent(fleet.urls, GatherSettings(token=TOKEN, retries=0,
                                                           connect_timeout_s=1))
    report = judge(*gathered, settings, via="agent", blocks=blocks(spec))
    problems = [c for c in report.findings
                if c.finding.status not in (Status.PASS, Status.SKIP)]
    hits = [c for c in problems if c.finding.check == declared.check]
    assert hits, f"{kind}: {declared.check} did not trip; {problems}"
    assert {c.finding.status.value for c in hits} == {declared.status}, hits
    assert declared.component.format(rack="r1", **fault_keys(spec, target)) in {
        c.finding.component for c in hits}
    assert declared.action in {c.finding.action.value for c in hits}
    named = {n for c in hits for n in c.nodes}
    assert named == (set() if declared.absent else {target}), hits
    others = [c for c in problems if c.finding.check != declared.check]
    assert not others, f"{kind} also tripped {others}"
    node_problems = [(s.node, f) for s in report.nodes for f in s.problems]
    assert not node_problems, node_problems
    expected_bad = [target] if declared.status == "fail" and not declared.absent else []
    assert report.bad_nodes == expected_bad
    assert report.ready is (declared.status == "warn")


@pytest.mark.parametrize("block", ["r1", "r9"])
def test_tray_outside_block_must_name_another_rack_of_the_spec(block: str) -> None:
    """Each simulated rack is one Slurm block: a fault naming the tray's own rack, or no
    rack at all, would move nothing, and is refused like any fault the spec cannot hold."""
    data = {"nodes": [{"names": "r1-tray[01-02]", "profile": "gb200-nvl72", "rack": "r1"},
                      {"names": "r2-tray01", "profile": "gb200-nvl72", "rack": "r2"}],
            "faults": [{"node": "r1-tray01", "kind": "tray_outside_block", "block": block}]}
    with pytest.raises(UsageError, match="not another rack of the spec"):
        parse_spec(data, "matrix")


def test_tray_outside_block_moves_the_tray_in_the_simulated_blocks() -> None:
    data = {"nodes": [{"names": "r1-tray[01-02]", "profile": "gb200-nvl72", "rack": "r1"},
                      {"names": "r2-tray01", "profile": "gb200-nvl72", "rack": "r2"}],
            "faults": [{"node": "r1-tray01", "kind": "tray_outside_block", "block": "r2"}]}
    assert blocks(parse_spec(data, "matrix")).blocks == {
        "r1": ("r1-tray02",), "r2": ("r1-tray01", "r2-tray01")}


def _imex_report(faults: list[dict[str, object]]
                 ) -> tuple[list[ClusterFinding], list[str], bool]:
    """A three-tray rack and a two-tray one gathered from simulated agents: the
    cluster.imex_domain findings, the bad nodes, and whether the run is ready."""
    data = {"nodes": [{"names": "r1-tray[01-03]", "profile": "gb200-nvl72", "rack": "r1"},
                      {"names": "r2-tray[01-02]", "profile": "gb200-nvl72", "rack": "r2"}],
            "faults": faults}
    spec = parse_spec(data, "matrix")
    with Fleet(present(spec), token=TOKEN) as fleet:
        gathered = gather_agent(fleet.urls, GatherSettings(token=TOKEN, retries=0,
                                                           connect_timeout_s=1))
    report = judge(*gathered, settings_from({"racks": racks(spec)}), via="agent",
                   blocks=blocks(spec))
    hits = [c for c in report.findings if c.finding.check == "cluster.imex_domain"]
    return hits, report.bad_nodes, report.ready


def test_a_tray_missing_from_its_imex_domain_fails_alone() -> None:
    """tray03 (node #2 of its nodes file) is down; the two trays that see it gone warn on
    their own, and the cluster fails tray03, mapped through the address it reports as its
    own, and no other tray."""
    hits, bad, _ = _imex_report([
        {"node": "r1-tray[01-02]", "kind": "imex_domain_degraded", "peer": 2},
        {"node": "r1-tray03", "kind": "imex_down"}])
    assert [(c.finding.status, c.finding.component, c.nodes) for c in hits] == [
        (Status.FAIL, "rack r1", ("r1-tray03",))]
    assert bad == ["r1-tray03"]


def test_an_imex_peer_outside_the_run_is_named_by_address_and_fails_no_tray() -> None:
    hits, bad, ready = _imex_report([
        {"node": "r1-tray[01-03]", "kind": "imex_domain_degraded", "peer": 9}])
    assert [(c.finding.status, c.nodes) for c in hits] == [(Status.WARN, ())]
    assert "#9 10." in next(iter(hits[0].finding.observed))
    assert (bad, ready) == ([], True)


def test_one_tray_losing_a_healthy_peer_fails_neither() -> None:
    hits, bad, ready = _imex_report([
        {"node": "r1-tray01", "kind": "imex_domain_degraded", "peer": 2}])
    assert [(c.finding.status, c.nodes) for c in hits] == [(Status.WARN, ())]
    assert (bad, ready) == ([], True)
