"""The fault matrix of the active tests, as tests/integration/test_fault_matrix.py is for
the passive checks: every active test (checks/qualify/active.py) names a simulated fault
kind (agent/sim/faults/catalog.py) that is said to trip it, and ``clusterdiag qualify`` on
a simulated cluster with that fault does trip it, on the faulty node and part (or, for a
fault of the whole fabric, as a cluster-level finding)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.qualify.command import Request, run
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.faults.catalog import FAULTS
from clusterdiag.agent.sim.faults.ib import example_hca
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.qualify.active import ACTIVE_TESTS, ActiveTest, Scope
from clusterdiag.reports.model.qualify import QualifyReport
from tests.integration.test_qualify_cross import NVL72

TESTS = sorted(ACTIVE_TESTS)


@pytest.mark.parametrize("test", TESTS)
def test_every_active_test_names_a_simulated_fault_that_trips_it(test: str) -> None:
    declared = ACTIVE_TESTS[test]
    kind = FAULTS.get(declared.fault)
    assert kind is not None, f"{declared.check_id}: no fault kind {declared.fault!r} in the " \
                             "simulator's catalog"
    assert kind.active, f"{declared.fault} is no active fault kind"
    assert declared.check_id in (kind.check, *kind.also), (
        f"{declared.fault} trips {kind.check} (and {kind.also}), not {declared.check_id}")


def test_every_active_fault_kind_trips_a_declared_test() -> None:
    """The other way round: no active kind names a test nobody declared."""
    declared = {t.check_id for t in ACTIVE_TESTS.values()}
    for kind in FAULTS.values():
        if kind.active:
            assert {kind.check, *kind.also} <= declared | {"qualify.collective"}, kind


def _setup(declared: ActiveTest) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    """The cluster, the fault and the tests a run needs to show ``declared`` tripping."""
    kind = FAULTS[declared.fault]
    profile = "dgx-h100" if not kind.profiles or "dgx-h100" in kind.profiles \
        else kind.profiles[0]
    if profile != "dgx-h100":  # a rack's fault: two NVL72 racks of trays
        return NVL72, {"node": "t03", "kind": kind.kind}, "node,rack"
    fault: dict[str, Any] = {"node": "q3", "kind": kind.kind}
    if "gpu" in kind.keys:
        fault["gpu"] = 3
    if "hca" in kind.keys:
        fault["hca"] = example_hca(profile, kind.kind)
    nodes = [{"names": "q[1-4]", "profile": profile, "rack": "r1"},
             {"names": "q[5-8]", "profile": profile, "rack": "r2"}]
    tests = "node" if declared.scope is Scope.NODE else "node,pairs,rails,scaling"
    return nodes, fault, tests


def _trips(report: QualifyReport, check: str) -> list[tuple[str, str, str]]:
    """(node or 'cluster', part, status) of every non-pass finding of ``check``."""
    found = [(node, f.component, f.status.value) for node, own in report.findings.items()
             for f in own if f.check == check and f.status in (Status.FAIL, Status.WARN)]
    found += [("cluster", c.finding.component, c.finding.status.value)
              for c in report.cluster.findings if c.finding.check == check
              and c.finding.status in (Status.FAIL, Status.WARN)]
    return found


@pytest.mark.parametrize("test", [t for t in TESTS if ACTIVE_TESTS[t].fault in FAULTS])
def test_the_simulated_fault_trips_its_test(tmp_path: Path, test: str) -> None:
    declared = ACTIVE_TESTS[test]
    kind = FAULTS[declared.fault]
    nodes, fault, tests = _setup(declared)
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"nodes": nodes, "faults": [fault]}))
    config = Config()
    if kind.kind == "tool_hang":
        # A hang is found at its deadline: make that soon. Each of the node's ~20 runs, and
        # its inventory's probes, hang until it, one after another, so 1 s, the least a run
        # is started with (agent/qualify/run.py run_step); test_qualify.py's hung-tool test
        # checks the kill.
        config.section("qualify").update(
            deadline_s={r: 1.0 for r in ("inventory", "allreduce", "allreduce_ring",
                                         "allreduce_net", "nvbandwidth", "gpu_compute", "nic",
                                         "dcgm")},
            burn_s=0.5)
    report = run(Request(simulate=str(spec), tests=tests), config)
    trips = _trips(report, declared.check_id)
    assert trips, f"{kind.kind} did not trip {declared.check_id}"
    if kind.component == "cluster":
        assert {node for node, *_ in trips} == {"cluster"}, trips
        return
    assert {node for node, *_ in trips} == {fault["node"]}, trips
    part = kind.component.format(**fault)
    assert part in {component for _, component, _ in trips}, trips
    assert kind.status in {status for *_, status in trips}, trips
