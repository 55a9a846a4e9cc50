"""The cost of ``clusterdiag qualify`` with its defaults (every test that applies: the node
tests, pairs, rails and scaling) as the cluster grows: at 16, 128 and 1,024 simulated DGX
H100 nodes (racks of 32, two slow cables planted), the schedule's simulated duration from
the time model ``qualify`` itself prints before starting (agent/qualify/timing.py: launch,
NCCL set-up, each tool's own work, at most ``parallel_nodes`` at a time), and clusterdiag's
own time running it through the command (planning, launching, parsing, judging, the
report) with stand-ins that answer at once: wall and CPU time with the stand-ins' own time
taken out, the CPU time's growth exponent, and the overhead as a share of the simulated
schedule. The run must name exactly the planted nodes, every run must give its figures, and
the rounds between nodes that ran must be the rounds the time model counted, or the figures
are not the schedule's and the benchmark fails.

    .venv/bin/python bench/qualify_schedule.py [--quick] [--json] [--profile]

``--profile`` then runs the largest size once more under cProfile (CPU time, every thread)
and prints where the time goes on stderr: the stand-ins' functions (agent/sim/) are the
simulated hardware's, the rest clusterdiag's.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from common import Figure, emit, fail, growth, module_note

from clusterdiag.agent.qualify import command
from clusterdiag.agent.qualify.command import Request
from clusterdiag.agent.qualify.schedule import default_groups
from clusterdiag.agent.qualify.timing import Schedule, estimate
from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import SimNode
from clusterdiag.agent.sim.tools import SimTools, simulated_cluster
from clusterdiag.checks.core.levels import Level
from clusterdiag.reports.model.qualify import QualifyReport

RACK = 32
GOAL_PCT = 5.0


class Timed:
    """The stand-ins, with the time during which any of them ran (wall: the union of their
    intervals, since runs overlap) and the CPU time they used (each call's own thread):
    that time is the simulated hardware's, not clusterdiag's."""

    def __init__(self, tools: SimTools) -> None:
        self.tools = tools
        self.wall = 0.0
        self.cpu = 0.0
        self.calls = 0
        self._lock = threading.Lock()
        self._running = 0
        self._since = 0.0

    def _enter(self) -> float:
        with self._lock:
            if not self._running:
                self._since = time.perf_counter()
            self._running += 1
        return time.thread_time()

    def _leave(self, cpu: float) -> None:
        used = time.thread_time() - cpu
        with self._lock:
            self.cpu += used
            self.calls += 1
            self._running -= 1
            if not self._running:
                self.wall += time.perf_counter() - self._since

    def __call__(self, node: str, argv: list[str], env: Mapping[str, str],
                 timeout_s: float) -> CommandResult:
        cpu = self._enter()
        try:
            return self.tools(node, argv, env, timeout_s)
        finally:
            self._leave(cpu)

    def group(self, nodes: Sequence[str], argv: list[str], env: Mapping[str, str],
              timeout_s: float) -> CommandResult:
        cpu = self._enter()
        try:
            return self.tools.group(nodes, argv, env, timeout_s)
        finally:
            self._leave(cpu)


def spec(count: int, where: Path) -> tuple[str, list[str]]:
    names = [f"g{i:04d}" for i in range(1, count + 1)]
    racks = [{"names": f"g[{i + 1:04d}-{min(i + RACK, count):04d}]", "profile": "dgx-h100",
              "rack": f"r{i // RACK + 1:02d}"} for i in range(0, count, RACK)]
    slow = [names[2], names[count - 6]]
    path = where / f"spec-{count}.json"
    path.write_text(json.dumps({"nodes": racks, "faults": [
        {"node": slow[0], "kind": "cable_slow", "hca": "mlx5_4"},
        {"node": slow[1], "kind": "cable_slow", "hca": "mlx5_9"}]}))
    return str(path), sorted(slow)


def planned(path: str, config: Config) -> Schedule:
    """The schedule ``qualify`` says before it starts: the default groups, the time model."""
    sims, _ = simulated_cluster(path)
    nodes = sorted(sims)
    profiles = {n: s.profile for n, s in sims.items()}
    racks: dict[str, list[str]] = {}
    for name, sim in sims.items():
        racks.setdefault(sim.rack or "", []).append(name)
    return estimate(nodes, profiles, default_groups(nodes, profiles, racks),
                    Level(config.data["level"]), dict(config.section("qualify")), "srun",
                    racks)


def profiled() -> list[cProfile.Profile]:
    """cProfile in this thread and in every thread started from now on (the runs of a
    round are threads, which a single profiler does not see)."""
    profilers = [cProfile.Profile(time.thread_time)]  # CPU: waiting threads cost nothing

    def start(*_: object) -> None:
        sys.setprofile(None)
        profilers.append(cProfile.Profile(time.thread_time))
        profilers[-1].enable()

    threading.setprofile(start)  # type: ignore[arg-type]
    profilers[0].enable()
    return profilers


def qualify_cluster(count: int, where: Path, profile: bool = False
                    ) -> tuple[QualifyReport, Schedule, float, float, Timed]:
    """The command as the CLI runs it, with the stand-ins timed apart."""
    path, slow = spec(count, where)
    config = Config()
    schedule = planned(path, config)
    stand_ins: list[Timed] = []

    def timed_cluster(arg: str, seed: int = 0) -> tuple[dict[str, SimNode], Any]:
        """Building the simulated nodes is the simulator's time too."""
        started, cpu = time.perf_counter(), time.thread_time()
        sims, tools = simulated_cluster(arg, seed)
        stand_ins.append(Timed(tools))
        stand_ins[-1].wall = time.perf_counter() - started
        stand_ins[-1].cpu = time.thread_time() - cpu
        return sims, stand_ins[-1]

    command.simulated_cluster = timed_cluster  # type: ignore[assignment]
    profilers = profiled() if profile else []
    wall, cpu = time.perf_counter(), time.process_time()
    report = command.run(Request(simulate=path, budget=10 * schedule.seconds), config)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if profilers:
        threading.setprofile(None)  # type: ignore[arg-type]
        profilers[0].disable()
        stats = pstats.Stats(*profilers, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(50)
    check(report, schedule, slow, count)
    return report, schedule, wall, cpu, stand_ins[0]


def check(report: QualifyReport, schedule: Schedule, slow: list[str], count: int) -> None:
    """The figures are the schedule's only if it found what was planted, every run gave
    its figures, and the rounds between nodes are those the time model counted."""
    where = f"{count:,} nodes"
    if report.bad_nodes != slow:
        fail(f"{where}: convicted {report.bad_nodes}, planted {slow}")
    failed = [r for r in report.runs if r.error or r.skipped or not (r.figures or r.evidence)]
    failed += [g.run.run for g in report.cross if g.run.run.error or not g.run.run.figures]
    if failed:
        fail(f"{where}: {len(failed)} runs gave no figure, e.g. {failed[0].error}")
    ran = dict(report.schedule["rounds_by_test"])
    counted: dict[str, int] = {}
    for stage in schedule.stages:
        if stage.group != "node":
            counted[stage.group] = counted.get(stage.group, 0) + stage.rounds
    if ran != counted:
        fail(f"{where}: the rounds that ran {ran} are not those the time model counted "
             f"{counted}")


def main() -> None:
    print(module_note(), file=sys.stderr)
    sizes = [16, 128] if "--quick" in sys.argv else [16, 128, 1024]
    figures: list[Figure] = []
    cpu_s: dict[int, float] = {}
    wall_s: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for count in sizes:
            report, schedule, wall, cpu, stand_in = qualify_cluster(count, Path(tmp))
            ours_wall, ours_cpu = wall - stand_in.wall, cpu - stand_in.cpu
            wall_s[count], cpu_s[count] = ours_wall, ours_cpu
            share = 100 * ours_wall / schedule.seconds
            by_test = report.schedule["rounds_by_test"]
            runs = len(report.runs) + len(report.cross)
            top = max(report.scaling, key=lambda p: p.nodes)
            name = f"{count:,} nodes"
            figures += [
                Figure(f"{name}: simulated schedule (time model; node tests "
                       f"{round(schedule.group_seconds('node'))} s)", round(schedule.seconds),
                       "s"),
                Figure(f"{name}: rounds between nodes (pairs {by_test['pairs']}, rails "
                       f"{by_test['rails']}, scaling {by_test['scaling']})",
                       sum(by_test.values()), "rounds", "pairs and rails constant"),
                Figure(f"{name}: tool runs (node tests, pairs, rails)", runs, "runs"),
                Figure(f"{name}: clusterdiag wall (stand-ins' {stand_in.wall:.1f} s out)",
                       round(ours_wall, 2), "s", f"<= {GOAL_PCT:g} % of the schedule",
                       "simulated schedule", round(ours_wall / schedule.seconds, 5)),
                Figure(f"{name}: clusterdiag CPU (stand-ins' {stand_in.cpu:.1f} s out)",
                       round(ours_cpu, 2), "s"),
                Figure(f"{name}: clusterdiag's overhead, % of the simulated schedule",
                       round(share, 3), "%", f"<= {GOAL_PCT:g} %"),
                Figure(f"{name}: Ring busbw at {top.nodes} nodes vs 2 nodes",
                       round(100 * (top.efficiency or 0.0), 1), "%", "breaks below 90 %"),
            ]
        if "--profile" in sys.argv:  # once more, apart: profiling slows what it measures
            qualify_cluster(sizes[-1], Path(tmp), profile=True)
    emit(figures + growth("clusterdiag CPU", cpu_s) + growth("clusterdiag wall", wall_s))


if __name__ == "__main__":
    main()
