"""The cost of ``clusterdiag qualify --tests pairs,rails,scaling`` as the cluster grows: at
16, 128 and 1,024 simulated DGX H100 nodes (racks of 32, two slow cables planted), the
rounds of the schedule, the simulated test time of the whole schedule (each round as long
as its slowest run, from the stand-ins' own rows: nccl-tests' per-size times, perftest's
bytes at its rate), and clusterdiag's own time per round with stand-ins that answer at once
(launching every run of the round, the stand-ins printing, parsing; judging separately),
each with its growth exponent. The run must name exactly the planted nodes, or the figures
are not the schedule's and the benchmark fails.

    .venv/bin/python bench/qualify_schedule.py [--quick] [--json]
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping, Sequence

from common import Figure, emit, fail, growth, module_note

from clusterdiag.agent.qualify.cross import Cross, CrossOutcome
from clusterdiag.agent.qualify.run import QualifyOptions, qualify
from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import parse_spec
from clusterdiag.agent.sim.tools import SimTools
from clusterdiag.checks.core.finding import Status

TESTS = frozenset({"pairs", "rails", "scaling"})
RACK = 32


class Timed:
    """The stand-ins, with the time during which any of them ran (they are the simulated
    hardware's, not clusterdiag's). Runs overlap (``parallel_nodes``), so the time is the
    union of their intervals: summed per run it exceeded the wall time on a loaded
    machine, and clusterdiag's own time came out negative."""

    def __init__(self, tools: SimTools) -> None:
        self.tools = tools
        self.seconds = 0.0
        self._lock = threading.Lock()
        self._running = 0
        self._since = 0.0

    def _enter(self) -> None:
        with self._lock:
            if not self._running:
                self._since = time.perf_counter()
            self._running += 1

    def _leave(self) -> None:
        with self._lock:
            self._running -= 1
            if not self._running:
                self.seconds += time.perf_counter() - self._since

    def __call__(self, node: str, argv: list[str], env: Mapping[str, str],
                 timeout_s: float) -> CommandResult:
        self._enter()
        try:
            return self.tools(node, argv, env, timeout_s)
        finally:
            self._leave()

    def group(self, nodes: Sequence[str], argv: list[str], env: Mapping[str, str],
              timeout_s: float) -> CommandResult:
        self._enter()
        try:
            return self.tools.group(nodes, argv, env, timeout_s)
        finally:
            self._leave()


def simulated_seconds(outcome: CrossOutcome, tools: SimTools) -> float:
    """Each round as long as its slowest run, as the stand-ins' printed rows say."""
    total = 0.0
    for number in range(1, len(outcome.rounds) + 1):
        longest = 0.0
        for run in (r for r in outcome.runs if r.round == number):
            where = run.nodes[0] if run.test == "rails" else ",".join(run.nodes)
            longest = max(longest, tools.test_seconds.get((where, run.run.source), 0.0))
        total += longest
    return total


def qualify_cluster(count: int) -> tuple[CrossOutcome, float, float, SimTools]:
    names = f"g[0001-{count:04d}]"
    racks = [{"names": f"g[{i + 1:04d}-{min(i + RACK, count):04d}]", "profile": "dgx-h100",
              "rack": f"r{i // RACK + 1:02d}"} for i in range(0, count, RACK)]
    slow = ["g0003", f"g{count - 5:04d}"]
    spec = parse_spec({"nodes": racks, "faults": [
        {"node": slow[0], "kind": "cable_slow", "hca": "mlx5_4"},
        {"node": slow[1], "kind": "cable_slow", "hca": "mlx5_9"}]}, "bench")
    sims = {name: build(node) for name, node in spec.nodes.items()}
    tools = SimTools(sims)
    timed = Timed(tools)
    profiles = {n: s.profile for n, s in sims.items()}
    inventory = qualify(sorted(sims), timed, profiles, QualifyOptions(frozenset()))
    timed.seconds = 0.0
    racks: dict[str, list[str]] = {}
    for name, sim in sims.items():
        racks.setdefault(sim.rack or "", []).append(name)
    started = time.perf_counter()
    outcome = Cross(sorted(sims), inventory.inventories, profiles, timed, timed.group,
                    QualifyOptions(TESTS, settings={"parallel_nodes": 64}),
                    racks).run(TESTS, set())
    wall = time.perf_counter() - started
    convicted = sorted(n for n, own in outcome.findings.items()
                       if any(f.status is Status.FAIL for f in own))
    if convicted != sorted(slow):
        fail(f"{names}: convicted {convicted}, planted {sorted(slow)}")
    failed = [r for r in outcome.runs if r.run.error or r.run.skipped or not r.run.figures]
    if failed:
        fail(f"{names}: {len(failed)} runs gave no figure, e.g. {failed[0].run.error}")
    if len(outcome.scaling) != len(set(p.nodes for p in outcome.scaling)) or \
            outcome.scaling[-1].nodes != count - len(slow):
        fail(f"{names}: the scaling curve stops at {outcome.scaling[-1].nodes} nodes")
    return outcome, wall, timed.seconds, tools


def main() -> None:
    print(module_note(), file=sys.stderr)
    sizes = [16, 128] if "--quick" in sys.argv else [16, 128, 1024]
    figures: list[Figure] = []
    rounds: dict[int, float] = {}
    sim_time: dict[int, float] = {}
    per_round: dict[int, float] = {}
    for count in sizes:
        outcome, wall, stand_in, tools = qualify_cluster(count)
        by_test = outcome.schedule()["rounds_by_test"]
        n = len(outcome.rounds)
        parse = sum(r.parse_s for r in outcome.rounds)
        rounds[count] = n
        sim_time[count] = simulated_seconds(outcome, tools)
        per_round[count] = (wall - stand_in) / n
        eight = next(p for p in outcome.scaling if p.nodes == max(p.nodes for p in
                                                                   outcome.scaling))
        figures += [
            Figure(f"{count:,} nodes: rounds (pairs {by_test['pairs']}, rails "
                   f"{by_test['rails']}, scaling {by_test['scaling']})", n, "rounds",
                   "not O(N^2): pairs and rails constant"),
            Figure(f"{count:,} nodes: simulated test time of the schedule",
                   round(sim_time[count], 2), "s"),
            Figure(f"{count:,} nodes: clusterdiag per round (launch + parse, stand-ins' "
                   "time taken out)", round(per_round[count] * 1e3, 1), "ms"),
            Figure(f"{count:,} nodes: of which parsing per round", round(parse / n * 1e3, 2),
                   "ms"),
            Figure(f"{count:,} nodes: judging per round", round(outcome.judge_s / n * 1e3, 2),
                   "ms"),
            Figure(f"{count:,} nodes: runs in all", len(outcome.runs), "runs"),
            Figure(f"{count:,} nodes: Ring busbw at {eight.nodes} nodes vs 2 nodes",
                   round(100 * (eight.efficiency or 0.0), 1), "%",
                   "breaks below 90 %"),
        ]
    emit(figures + growth("rounds", rounds) + growth("simulated schedule", sim_time)
         + growth("clusterdiag per round", per_round))


if __name__ == "__main__":
    main()
