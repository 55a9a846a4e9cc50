"""A qualification report of N simulated DGX H100 nodes (8 GPUs and 8 compute rails each),
built directly from plain data for the renderers' tests and ``bench/qualify_report.py``.

Running the whole simulated qualification at 1,024 nodes takes minutes; the renderers only
need what ``agent/qualify/command.py`` hands to the report model. So the tool runs are made
here, every figure healthy with ±1 % of noise (seeded); the node tests' figures are graded
here under the straggler rule (``checks/qualify/judge.py``'s own ``grade`` takes each
group's median once per figure, minutes at 1,024 nodes), with findings shaped as the judge
words them, and pairs, rails and the scaling curve are judged by ``checks/qualify/cross.py``;
then it all goes into a ``QualifyReport`` as the command does. Planted:

- a slow GPU (``gpu_compute`` at 80 % of its peers, confirmed by a repeat);
- a slow rail (``nic`` loopback at 78 %, below the profile's floor);
- a hung tool (``gpu_burn`` killed at its deadline);
- a tool that printed a failure (``all_reduce_perf`` with out-of-bounds values);
- a slow pair (two-node all-reduce at 80 % between two nodes that are each fine with a
  known-good partner): the judge's per-node warnings and a cluster finding naming the pair;
- every GPU's host-to-device copy 4 % below the expected figure: a cluster finding
  (uniformly slow), no node at fault;
- the scaling curve: the Ring all-reduce losing ~1.9 % per doubling, so it breaks (more than
  10 % below the two-node figure) at 128 nodes.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from clusterdiag.agent.model.qualify import CrossRun, Evidence, Expectation, Figure, ToolRun
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.checks.profiles.profile import load_profile
from clusterdiag.checks.qualify.cross import Graded, attribute, grade, scaling_curve
from clusterdiag.checks.qualify.judge import (
    TEST_NAMES,
    Judged,
    StragglerRule,
    component_kind,
    expectations,
    figures_of,
    per_gpu_d2d,
    run_findings,
)
from clusterdiag.reports.model.cluster import ClusterFinding, ClusterReport
from clusterdiag.reports.model.qualify import QualifyReport, node_summary

PROFILE = "dgx-h100"
GPUS = 8
RAILS = ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")
# Healthy figures near the profile's expected ones (checks/profiles/dgx-h100.yaml).
HEALTHY = {"allreduce": 478.0, "allreduce_ring": 368.0, "allreduce_net": 44.1, "h2d": 49.0,
           "d2h": 51.9, "d2d": 369.0, "hbm": 2905.0, "gpu_compute": 53_700.0, "nic": 392.0,
           "pairs": 362.0, "rails": 391.0}
UNITS = {"gpu_compute": "Gflop/s", "nic": "Gb/s", "rails": "Gb/s"}
NOISE = 0.01
SLOW_GPU, SLOW_RAIL, SLOW_PAIR = 0.80, 0.78, 0.80
RING_LOSS_PER_DOUBLING = 0.019
VERSION = "0.0.0-synthetic"


@dataclass
class Planted:
    """What was planted, by node: the report must name these and no healthy node."""

    slow_gpu: tuple[str, str]  # node, component
    slow_rail: tuple[str, str]
    hung: str
    wrong: str
    slow_pair: tuple[str, str] = ("", "")
    breaks_at: int = 0  # the first scaling size more than 10 % below two nodes
    partners: set[str] = field(default_factory=set)  # known-good partners of the slow pair

    @property
    def convicted(self) -> list[str]:
        """The nodes that are not ready (the slow pair is a warning: nobody convicted)."""
        return sorted({self.slow_gpu[0], self.slow_rail[0], self.hung, self.wrong})

    @property
    def nodes(self) -> list[str]:
        return sorted({*self.convicted, *self.slow_pair})


def node_name(i: int) -> str:
    return f"n{i:04d}"


def _figure(node: str, test: str, component: str, values: list[float], tool: str,
            detail: str = "") -> Figure:
    return Figure(node, test, component, values, UNITS.get(test, "GB/s"), tool, detail)


class _Noise:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, test: str, factor: float = 1.0) -> float:
        return round(HEALTHY[test] * factor * (1 + self.rng.uniform(-NOISE, NOISE)), 2)


def _node_runs(node: str, noise: _Noise, planted: Planted, evidence: str,
               hung_error: str) -> list[ToolRun]:
    """The node tests' runs of one node, as the parsers leave them."""
    allreduce = "all_reduce_perf -b 1G -e 8G -f 2 -g 8 -w 5 -n 20"
    runs = []
    for test in ("allreduce", "allreduce_ring", "allreduce_net"):
        run = ToolRun("nccl-tests", node, test, allreduce, 0, complete=True, seconds=12.0)
        run.figures = [_figure(node, test, "node", [noise(test)], "nccl-tests",
                               "busbw at 8589934592 B")]
        if node == planted.wrong and test == "allreduce":
            run.evidence = [Evidence("fail", "node", evidence)]
        runs.append(run)
    nvb = ToolRun("nvbandwidth", node, "nvbandwidth", "nvbandwidth -t host_to_device_memcpy_ce",
                  0, complete=True, seconds=30.0)
    pairs = []
    for gpu in range(GPUS):
        for test in ("h2d", "d2h", "hbm"):
            nvb.figures.append(_figure(node, test, f"gpu{gpu}", [noise(test)], "nvbandwidth"))
        pairs += [_figure(node, "d2d", f"gpu{gpu}-gpu{other}", [noise("d2d")], "nvbandwidth")
                  for other in range(GPUS) if other != gpu]
    # Folded here as the judge folds them (per_gpu_d2d): its own folding compares every
    # figure with every pair figure, minutes at 1,024 nodes.
    nvb.figures += per_gpu_d2d(pairs)
    runs.append(nvb)
    burn = ToolRun("gpu_burn", node, "gpu_compute", "gpu_burn -d -tc 30", 0, complete=True,
                   seconds=35.0)
    if node == planted.hung:
        burn.returncode, burn.hung, burn.complete, burn.error = None, True, False, hung_error
    else:
        for gpu in range(GPUS):
            slow = (node, f"gpu{gpu}") == planted.slow_gpu
            values = [noise("gpu_compute", SLOW_GPU), noise("gpu_compute", SLOW_GPU)] \
                if slow else [noise("gpu_compute")]
            burn.figures.append(_figure(node, "gpu_compute", f"gpu{gpu}", values, "gpu_burn"))
    runs.append(burn)
    for i, hca in enumerate(RAILS):
        nic = ToolRun("perftest", node, "nic", f"ib_write_bw -d {hca} -i 1 --use_cuda={i} "
                      "-s 8388608 -n 2000 -F --report_gbits localhost", 0, complete=True,
                      seconds=4.0)
        slow = (node, f"{hca}/1") == planted.slow_rail
        values = [noise("nic", SLOW_RAIL), noise("nic", SLOW_RAIL)] if slow else [noise("nic")]
        nic.figures = [_figure(node, "nic", f"{hca}/1", values, "perftest")]
        runs.append(nic)
    dcgm = ToolRun("dcgmi", node, "dcgm", "dcgmi diag -r 2 -j", 0, complete=True, seconds=90.0)
    dcgm.evidence = [Evidence("pass", "node", name) for name in ("pcie", "memory", "sm_stress")]
    runs.append(dcgm)
    return runs


def _grade(figure: Figure, median: float, peers: int, expectation: Expectation | None,
           rule: StragglerRule) -> Judged:
    item = Judged(figure, PROFILE, median=median, peers=peers, expectation=expectation)
    floor = expectation.floor if expectation else None
    deficit = item.deficit_pct or 0.0
    if floor is not None and figure.value < floor:
        item.status, item.why = Status.FAIL, "below the profile's floor"
    elif deficit > rule.fail_pct:
        item.status, item.why = Status.FAIL, f"more than {rule.fail_pct:g} % below peers"
    elif deficit > rule.warn_pct:
        item.status, item.why = Status.WARN, f"more than {rule.warn_pct:g} % below peers"
    return item


def _figure_finding(j: Judged) -> Finding:
    f, exp = j.figure, j.expectation
    expected = {"peers_median": round(j.median or 0.0, 2), "unit": f.unit,
                "expected_value": exp.expected if exp else None,
                "floor": exp.floor if exp else None, "source": exp.source if exp else None}
    action = Action.RESEAT_CABLE if f.test == "nic" else Action.DRAIN
    return Finding(j.status, f.component, f"{TEST_NAMES[f.test]} {j.why}",
                   {"value": round(f.value, 2), "runs": [round(v, 2) for v in f.values]},
                   expected, action if j.status is Status.FAIL else Action.INVESTIGATE,
                   f"qualify.{f.test}")


def _judge(runs: list[ToolRun], expect: Mapping[str, Expectation], rule: StragglerRule
           ) -> tuple[list[Judged], dict[str, list[Finding]]]:
    """The straggler rule over the node tests, each group's median taken once."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in runs:
        for f in figures_of(run):
            groups[(f.test, component_kind(f.component))].append(f.value)
    medians = {key: statistics.median(values) for key, values in groups.items()}
    judged: list[Judged] = []
    findings: dict[str, list[Finding]] = defaultdict(list)
    for run in runs:
        own = run_findings(run)
        mine = [_grade(f, medians[(f.test, component_kind(f.component))],
                       len(groups[(f.test, component_kind(f.component))]), expect.get(f.test),
                       rule) for f in figures_of(run)]
        judged += mine
        if not any(f.status is Status.FAIL for f in own):
            own += [_figure_finding(j) for j in mine if j.status is not Status.PASS]
        for test in sorted({j.figure.test for j in mine} - {
                f.check.removeprefix("qualify.") for f in own}):
            own.append(Finding(Status.PASS, "node", f"{TEST_NAMES[test]} as expected", None,
                               None, Action.NONE, f"qualify.{test}"))
        findings[run.node] += own
    return judged, dict(findings)


def _pair_run(test: str, nodes: tuple[str, str], number: int, stage: str,
              figures: list[Figure]) -> list[CrossRun]:
    tool = "nccl-tests" if test == "pairs" else "perftest"
    out = []
    for figure in figures:
        run = ToolRun(tool, nodes[0], test, "all_reduce_perf -b 1G -e 8G -f 2 -g 8" if
                      test == "pairs" else f"ib_write_bw -d {figure.component[:-2]}", 0,
                      complete=True, seconds=10.0, figures=[figure])
        out.append(CrossRun(test, nodes, number, stage, run))
    return out


def _cross(nodes: list[str], noise: _Noise, planted: Planted
           ) -> tuple[list[CrossRun], list[CrossRun], list[CrossRun]]:
    """Round 1 pairs neighbours; the slow pair's two nodes meet a known-good partner each
    in round 2; rails run rail to rail in every first-pass pair; then the scaling sizes."""
    pairs = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    slow = pairs[(len(pairs) * 7) // 12]
    planted.slow_pair = slow
    good = [n for p in pairs if p != slow for n in p]
    partners = (good[0], good[1])
    planted.partners = set(partners)
    pair_runs = []
    for pair in pairs:
        factor = SLOW_PAIR if pair == slow else 1.0
        pair_runs += _pair_run("pairs", pair, 1, "first", [_figure(
            pair[0], "pairs", "node", [noise("pairs", factor)], "nccl-tests",
            "busbw at 8589934592 B")])
    for node, partner in zip(slow, partners, strict=True):
        pair_runs += _pair_run("pairs", (node, partner), 2, "second", [_figure(
            node, "pairs", "node", [noise("pairs")], "nccl-tests", "busbw at 8589934592 B")])
    rail_runs = []
    for pair in pairs:
        rail_runs += _pair_run("rails", pair, 3, "first", [
            _figure(pair[0], "rails", f"{hca}/1", [noise("rails")], "perftest")
            for hca in RAILS])
    scaling_runs = []
    sizes = [2 ** k for k in range(1, len(nodes).bit_length()) if 2 ** k < len(nodes)]
    number = 4
    for size in [*sizes, len(nodes)]:
        efficiency = 1.0 - RING_LOSS_PER_DOUBLING * (size.bit_length() - 2)
        if not planted.breaks_at and efficiency < 0.9:
            planted.breaks_at = size
        for stage, busbw in (("ring", HEALTHY["pairs"] * efficiency),
                             ("default", HEALTHY["pairs"] * (1.2 if size == 2 else
                                                             efficiency * 1.01))):
            run = ToolRun("nccl-tests", nodes[0], "scaling", "all_reduce_perf -b 1G -e 8G", 0,
                          complete=True, seconds=20.0,
                          figures=[_figure(nodes[0], "scaling", "node", [round(busbw, 2)],
                                           "nccl-tests")])
            scaling_runs.append(CrossRun("scaling", tuple(nodes[:size]), number, stage, run))
            number += 1
    return pair_runs, rail_runs, scaling_runs


def _plant(names: list[str]) -> Planted:
    count = len(names)
    at: Callable[[float], str] = lambda share: names[int(share * (count - 1))]  # noqa: E731
    return Planted(slow_gpu=(at(0.13), "gpu5"), slow_rail=(at(0.41), "mlx5_4/1"),
                   hung=at(0.76), wrong=at(0.87))


def build(count: int, seed: int = 0, rename: Mapping[str, str] | None = None,
          evidence: str = "#  Out of bounds values : 12 FAILED",
          hung_error: str = "no answer within 300 s; its process tree was killed"
          ) -> tuple[QualifyReport, Planted]:
    """The report of ``count`` nodes (``count`` >= 12) and what was planted in it.
    ``rename`` gives some nodes other names (hostile ones, for the inertness tests);
    ``evidence`` is the failure line the failing tool printed, ``hung_error`` the hung
    tool's."""
    rename = rename or {}
    names = [rename.get(node_name(i), node_name(i)) for i in range(1, count + 1)]
    planted = _plant(names)
    noise = _Noise(seed)
    runs = [run for node in names for run in _node_runs(node, noise, planted, evidence,
                                                        hung_error)]
    expect = expectations(load_profile(PROFILE))
    rule = StragglerRule()
    figures, findings = _judge(runs, expect, rule)
    failed = {n for n, own in findings.items() if any(f.status in (Status.FAIL, Status.ERROR)
                                                      for f in own)}
    eligible = [n for n in names if n not in failed]
    pair_runs, rail_runs, scaling_runs = _cross(eligible, noise, planted)
    graded: list[Graded] = []
    unattributed: list[Finding] = []
    for test, cross_runs in (("pairs", pair_runs), ("rails", rail_runs)):
        expectation = expect.get(test)
        these = grade(cross_runs, expectation, rule)
        graded += these
        by_node, cluster_level = attribute(test, these, expectation)
        unattributed += cluster_level
        for node, own in by_node.items():
            findings.setdefault(node, []).extend(own)
    points, scaling_findings = scaling_curve(scaling_runs, rule)
    h2d = expect["h2d"]
    a, b = planted.slow_pair
    cluster_findings = [ClusterFinding(f) for f in scaling_findings + unattributed] + [
        ClusterFinding(Finding(
            Status.WARN, "cluster", "host-to-device copy bandwidth uniformly slow: every "
            "node below the expected figure, none below its peers",
            {"median": HEALTHY["h2d"], "nodes": len(names)},
            {"expected": h2d.expected, "source": h2d.source}, Action.INVESTIGATE,
            "qualify.h2d")),
        ClusterFinding(Finding(
            Status.WARN, f"{a}-{b}", "two-node all-reduce bus bandwidth (NCCL_ALGO=Ring): "
            "slow pair, unattributed (each node is fine with a known-good partner: the path "
            "between the two, or a transient)", {"value": HEALTHY["pairs"] * SLOW_PAIR},
            {"reference": HEALTHY["pairs"], "basis": "peers' median"}, Action.INVESTIGATE,
            "qualify.pairs"), (a, b))]
    summaries = [node_summary(node, PROFILE, VERSION, GPUS, findings.get(node, []))
                 for node in names]
    cluster = ClusterReport(summaries, cluster_findings, VERSION, "srun")
    tests = ["allreduce", "allreduce_net", "allreduce_ring", "dcgm", "gpu_compute", "nic",
             "nvbandwidth", "pairs", "rails", "scaling"]
    report = QualifyReport(
        cluster, "run", tests, "quick", 612.0, figures, runs, findings,
        [(planted.slow_gpu[0], "gpu_compute"), (planted.slow_rail[0], "nic")],
        notes=[f"left out of the tests between nodes (failed their node tests): "
               f"{', '.join(sorted(failed))}"])
    report.cross = graded
    report.scaling = points
    report.schedule = {"rounds": 3 + len(scaling_runs),
                       "rounds_by_test": {"pairs": 2, "rails": 1, "scaling": len(scaling_runs)},
                       "seconds": 300.0, "judge_s": 0.1, "detail": []}
    report.fail_pct = rule.fail_pct
    return report, planted
