"""The pairing schedule (agent/qualify/schedule.py) and the second pass's attribution
(checks/qualify/cross.py), on plain data."""

from __future__ import annotations

import math

import pytest

from clusterdiag.agent.model.qualify import CrossRun, Expectation, Figure, ToolRun
from clusterdiag.agent.qualify.launch import group_argv
from clusterdiag.agent.qualify.schedule import first_pairing, scaling_sizes, second_pass
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.qualify.cross import attribute, grade, scaling_curve, shortfall
from clusterdiag.checks.qualify.judge import StragglerRule

RULE = StragglerRule()


@pytest.mark.parametrize("count", [2, 3, 7, 16, 129])
def test_first_pairing_is_disjoint_and_covers_all_but_one(count: int) -> None:
    nodes = [f"n{i:03d}" for i in range(count)]
    pairs, odd = first_pairing(nodes)
    met = [n for p in pairs for n in p]
    assert len(met) == len(set(met))
    assert sorted(met + odd) == nodes
    assert len(odd) == count % 2


def test_first_pairing_keeps_pairs_inside_racks() -> None:
    rack_of = {**dict.fromkeys(["a1", "a2", "a3"], "A"), **dict.fromkeys(["b1", "b2", "b3"],
                                                                          "B")}
    pairs, odd = first_pairing(sorted(rack_of), rack_of)
    assert pairs == [("a1", "a2"), ("b1", "b2"), ("a3", "b3")]
    assert odd == []


@pytest.mark.parametrize(("suspects", "good", "rounds"), [(2, 14, 1), (14, 2, 7), (5, 5, 1),
                                                          (0, 8, 0), (3, 0, 0)])
def test_second_pass_rounds_are_disjoint(suspects: int, good: int, rounds: int) -> None:
    s = [f"s{i}" for i in range(suspects)]
    g = [f"g{i}" for i in range(good)]
    plan = second_pass(s, g)
    assert len(plan) == rounds == (math.ceil(suspects / good) if suspects and good else 0)
    for batch in plan:
        met = [n for p in batch for n in p]
        assert len(met) == len(set(met))
        assert all(a in s and b in g for a, b in batch)
    assert sorted(a for batch in plan for a, _ in batch) == (sorted(s) if good else [])


def test_scaling_sizes() -> None:
    assert scaling_sizes(2) == [2]
    assert scaling_sizes(12) == [2, 4, 8, 12]
    assert scaling_sizes(1024) == [2 ** k for k in range(1, 11)]
    assert scaling_sizes(1) == []


def _run(nodes: tuple[str, ...], stage: str, value: float | None, test: str = "pairs",
         **kw: object) -> CrossRun:
    run = ToolRun("nccl-tests", nodes[0], test, "all_reduce_perf", 0, complete=True, **kw)
    if value is not None:
        run.figures.append(Figure(nodes[0], test, "node", [value], "GB/s", "nccl-tests"))
    return CrossRun(test, nodes, 1 if stage == "first" else 2, stage, run)


FIRST = [_run(("a", "b"), "first", 370.0), _run(("c", "d"), "first", 368.0),
         _run(("e", "f"), "first", 369.0), _run(("x", "y"), "first", 290.0)]


def _findings(runs: list[CrossRun]) -> dict[str, list[tuple[Status, str]]]:
    found, _ = attribute("pairs", grade(runs, None, RULE))
    return {n: [(f.status, f.message) for f in own] for n, own in found.items()}


def test_a_suspect_slow_with_a_good_partner_is_convicted_the_other_cleared() -> None:
    out = _findings([*FIRST, _run(("x", "a"), "second", 291.0),
                     _run(("y", "c"), "second", 369.0)])
    assert out["x"][0][0] is Status.FAIL
    assert "known-good a" in out["x"][0][1]
    assert out["y"][0][0] is Status.PASS
    assert "cleared" in out["y"][0][1]
    assert all(s is Status.PASS for n in "abcdef" for s, _ in out[n])  # a stays good


def test_both_cleared_is_a_warning_on_the_pair_not_a_conviction() -> None:
    out = _findings([*FIRST, _run(("x", "a"), "second", 369.0),
                     _run(("y", "c"), "second", 370.0)])
    assert [s for s, _ in out["x"]] == [Status.WARN] == [s for s, _ in out["y"]]
    assert "only together" in out["x"][0][1]


def test_no_known_good_partner_fails_the_cluster_and_convicts_neither() -> None:
    """One of the two is slow, or the path: the cluster is not ready (a cluster-level fail
    naming both and how to attribute it), each node only warned, neither failed."""
    out = _findings([_run(("x", "y"), "first", 290.0)])
    assert [s for s, _ in out["x"]] == [Status.PASS]  # one pair: no median, no expectation
    expect = Expectation("pairs", "GB/s", "test", expected=370.0)
    found, cluster = attribute("pairs", grade([_run(("x", "y"), "first", 290.0)], expect,
                                              RULE), expect)
    assert {n: [f.status for f in own] for n, own in found.items()} == {
        "x": [Status.WARN], "y": [Status.WARN]}
    assert "no known-good partner" in found["x"][0].message
    assert {f.action for own in found.values() for f in own} == {Action.INVESTIGATE}
    (whole,) = cluster
    assert (whole.status, whole.component) == (Status.FAIL, "x and y")
    assert whole.message.startswith("slow pair, unattributed")
    assert "--nodes x,y," in whole.message


def test_a_failed_run_is_a_suspect_whatever_its_figure() -> None:
    hung = _run(("x", "y"), "first", None, hung=True, error="no answer within 300 s")
    out = _findings([*FIRST[:3], hung, _run(("x", "a"), "second", None, hung=True,
                                            error="no answer within 300 s"),
                     _run(("y", "c"), "second", 370.0)])
    assert out["x"][0][0] is Status.FAIL
    assert "hung" in out["x"][0][1]
    assert out["y"][0][0] is Status.PASS


def test_scaling_breaks_at_the_first_size_past_the_fail_line() -> None:
    runs = [_run(tuple(f"n{i}" for i in range(k)), stage, value, "scaling")
            for k, ring in ((2, 370.0), (4, 365.0), (8, 340.0), (16, 320.0))
            for stage, value in (("ring", ring), ("default", ring + 5))]
    points, findings = scaling_curve(runs, RULE)
    assert [p.status for p in points] == [Status.PASS, Status.PASS, Status.WARN, Status.FAIL]
    assert points[2].efficiency == pytest.approx(340 / 370)
    (finding,) = findings
    assert finding.status is Status.WARN
    assert "at 16 nodes" in finding.message


PAIRS = Expectation("pairs", "GB/s", "nccl-tests#290", expected=370.0, floor=300.0)


def _uniform(value: float) -> list[CrossRun]:
    return [_run((f"n{2 * i}", f"n{2 * i + 1}"), "first", value + i) for i in range(4)]


@pytest.mark.parametrize("value", [220.0, 320.0])
def test_a_cluster_slow_as_a_whole_is_one_cluster_fail_and_no_conviction(value: float) -> None:
    """Every pair 40 % slow (below the floor) or 13 % slow (above it, below expected): the
    peers agree, so no pair is a straggler; the peers' median against the profile is one
    cluster-level fail with the figure, the expectation and its source."""
    runs = _uniform(value)
    graded = grade(runs, PAIRS, RULE)
    assert {g.status for g in graded} == {Status.PASS}  # the floor convicts no pair
    found, unattributed = attribute("pairs", graded, PAIRS)
    assert unattributed == []
    assert {f.status for own in found.values() for f in own} == {Status.PASS}
    whole = shortfall("pairs", runs, PAIRS, RULE, "dgx-h100 nodes")
    assert whole is not None
    assert (whole.status, whole.component, whole.action) == (Status.FAIL, "cluster",
                                                             Action.INVESTIGATE)
    assert "dgx-h100 nodes are slow as a whole" in whole.message
    assert whole.expected == {"expected": 370.0, "floor": 300.0, "source": "nccl-tests#290"}


def test_a_healthy_cluster_has_no_shortfall_and_a_straggler_still_fails() -> None:
    runs = [*_uniform(368.0)[:3], _run(("x", "y"), "first", 250.0)]
    assert shortfall("pairs", runs, PAIRS, RULE, "nodes") is None
    graded = grade(runs, PAIRS, RULE)
    assert [g.status for g in graded] == [Status.PASS] * 3 + [Status.FAIL]


def test_too_few_pairs_for_a_median_are_judged_against_the_profile_each() -> None:
    runs = [_run(("x", "y"), "first", 220.0)]
    assert shortfall("pairs", runs, PAIRS, RULE, "nodes") is None  # attribute() says it
    (g,) = grade(runs, PAIRS, RULE)
    assert g.status is Status.FAIL
    assert "floor" in g.why


def test_scaling_that_holds_a_slow_start_fails_the_cluster() -> None:
    """A uniformly 40 % slow fabric scales 100 %: the two-node Ring figure against the
    profile's pairs figure says what efficiency cannot."""
    runs = [_run(tuple(f"n{i}" for i in range(k)), stage, 222.0, "scaling")
            for k in (2, 4, 8) for stage in ("ring", "default")]
    points, findings = scaling_curve(runs, RULE, PAIRS, "dgx-h100")
    assert [p.status for p in points] == [Status.PASS] * 3
    assert {p.group for p in points} == {"dgx-h100"}
    slow = [f for f in findings if f.status is Status.FAIL]
    assert len(slow) == 1
    assert slow[0].component == "cluster"
    assert "(dgx-h100)" in slow[0].message
    assert "starts slow" in slow[0].message
    healthy = [_run(tuple(f"n{i}" for i in range(k)), stage, 366.0, "scaling")
               for k in (2, 4) for stage in ("ring", "default")]
    assert all(f.status is Status.PASS for f in scaling_curve(healthy, RULE, PAIRS)[1])


def test_group_commands_run_one_task_per_node_under_a_timeout() -> None:
    argv = group_argv("srun", ["n1", "n2"], ["all_reduce_perf", "-g", "8"],
                      {"NCCL_ALGO": "Ring"}, 300, "none")
    assert argv[:5] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1",
                        "--nodelist=n1,n2"]
    assert "--export=ALL,NCCL_ALGO=Ring" in argv
    assert "--mpi=none" in argv
    assert argv[-6:] == ["timeout", "--kill-after=5", "300", "all_reduce_perf", "-g", "8"]
    mpi = group_argv("ssh", ["n1", "n2"], ["all_reduce_perf"], {"NCCL_ALGO": "Ring"}, 60)
    assert mpi[:5] == ["mpirun", "--host", "n1,n2", "-np", "2"]
    assert mpi[mpi.index("-x") + 1] == "NCCL_ALGO=Ring"


def test_heatmap_escapes_node_names_and_draws_each_pair_both_ways() -> None:
    from clusterdiag.reports.render.qualify_svg import HEAT_FAIL, pair_heatmap

    hostile = "<script>x</script>"
    runs = [_run(("a", hostile), "first", 290.0), *FIRST[:3]]
    picture = pair_heatmap(grade(runs, Expectation("pairs", "GB/s", "t", 370.0), RULE))
    assert "<script>" not in picture
    assert "&lt;script&gt;" in picture
    assert picture.count(f"fill='{HEAT_FAIL}'") == 2
    assert picture.count("<rect") == 1 + 2 * 4


def test_only_a_convicted_node_is_left_out() -> None:
    """A node whose tool could not run (our trouble, or a missing library) is not ready,
    but it is not convicted: bad_nodes, the exclude file and the drains hold only fails."""
    from clusterdiag.checks.core.finding import Finding
    from clusterdiag.reports.model.cluster import ClusterReport
    from clusterdiag.reports.model.qualify import QualifyReport, node_summary

    def one(status: Status) -> list[Finding]:
        return [Finding(status, "node", "x", None, None, Action.INVESTIGATE, "qualify.nic")]

    findings = {"slow": one(Status.FAIL), "unjudged": one(Status.ERROR),
                "fine": one(Status.PASS)}
    cluster = ClusterReport([node_summary(n, "dgx-h100", "0", 8, own)
                             for n, own in findings.items()], [], "0", "srun")
    report = QualifyReport(cluster, "run", ["nic"], "quick", 1.0, [], [], findings)
    assert report.bad_nodes == ["slow"]
    assert report.unjudged == ["unjudged"]
    assert not report.ready
    data = report.to_dict()
    assert (data["bad_nodes"], data["unjudged_nodes"]) == ("slow", "unjudged")
