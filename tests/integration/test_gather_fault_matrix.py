"""The cluster-level half of the fault matrix: every cluster kind of the fault table,
planted on one node of a small simulated cluster, served by simulated agents, gathered
over HTTP and judged, is caught by its cluster check with the declared status, action and
component, names the right node, and trips nothing else."""

from __future__ import annotations

import pytest

from clusterdiag.agent.cluster.fleet import Fleet
from clusterdiag.agent.sim.cluster import present, racks
from clusterdiag.agent.sim.faults.catalog import FAULTS, FaultKind
from clusterdiag.agent.sim.spec import parse_spec
from clusterdiag.checks.core.finding import Status
from clusterdiag.reports.cluster_checks import judge, settings_from
from clusterdiag.reports.fleet.gather import GatherSettings, gather_agent

CLUSTER_KINDS = sorted(k for k, f in FAULTS.items() if f.cluster)
TOKEN = "matrix-token"


def _cluster(kind: FaultKind) -> tuple[dict[str, object], str]:
    profile = kind.profiles[0] if kind.profiles else "dgx-h100"
    fault: dict[str, object] = {"kind": kind.kind}
    if "version" in kind.keys:
        fault["version"] = "550.54.15"
    if "nvl72" in profile:
        spec = {"nodes": [{"names": "r1-tray[01-18]", "profile": profile, "rack": "r1"}]}
        target = "r1-tray03"
    else:
        spec = {"nodes": [{"names": "n[1-5]", "profile": profile}]}
        target = "n3"
    spec["faults"] = [{**fault, "node": target}]
    return spec, target


@pytest.mark.parametrize("kind", CLUSTER_KINDS, ids=str)
def test_cluster_fault_is_caught_across_nodes(kind: str) -> None:
    declared = FAULTS[kind]
    data, target = _cluster(declared)
    spec = parse_spec(data, "matrix")
    settings = settings_from({"racks": racks(spec)})
    with Fleet(present(spec), token=TOKEN) as fleet:
        gathered = gather_agent(fleet.urls, GatherSettings(token=TOKEN, retries=0,
                                                           connect_timeout_s=1))
    report = judge(*gathered, settings, via="agent")
    problems = [c for c in report.findings
                if c.finding.status not in (Status.PASS, Status.SKIP)]
    hits = [c for c in problems if c.finding.check == declared.check]
    assert hits, f"{kind}: {declared.check} did not trip; {problems}"
    assert {c.finding.status.value for c in hits} == {declared.status}, hits
    assert declared.component.format(rack="r1") in {c.finding.component for c in hits}
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
