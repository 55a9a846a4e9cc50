"""The tests between nodes, round by round (the schedule is in schedule.py, the judging in
checks/qualify/cross.py).

``pairs``: all_reduce_perf over two nodes, every GPU of each, ``NCCL_ALGO=Ring`` (on two
nodes NCCL's default picks Tree/NVLSTree, whose busbw goes beyond the network: nccl-tests
#196), ``NCCL_DEBUG=INFO`` so a fall-back to sockets shows; all pairs of a round at once.
``rails``: ``ib_write_bw`` (``--use_cuda`` where the node's perftest has it and a GPU is near
the rail) from each rail of one node to the rail of its partner serving the same GPU
(matched_rails), every rail of a pair at once on its own port. ``scaling``: all_reduce_perf
over the first 2, 4, 8 … N nodes of each kind that passed (in rack order, so a group fills
a rack before it crosses the spine), Ring and NCCL's default at each size, one size at a
time. ``rack``: on NVL72 racks, the IMEX channel of every tray,
then all_reduce_perf over every GPU of the rack with ``NCCL_MNNVL_ENABLE=1``; a slow rack
is localised by pairing its trays over multi-node NVLink, with a second pass; then DCGM's
multi-node diagnostic over the trays with a channel, where its prerequisites hold
(mndiag.py), naming each GPU it fails, and nvbandwidth's multinode device-to-device read
over the same trays, one process per GPU, where the build has it (nvbw_multinode.py),
naming the slow GPU or tray.

Nodes the node tests already failed are left out: they would only slow their partners.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from ...checks.core.finding import Action, Finding, Status
from ...checks.profiles.profile import Profile
from ...checks.qualify.active import (
    ACTIVE_TESTS,
    PAIRS,
    RACK,
    RAILS,
    SCALING,
    Invocation,
    cross_tests,
    fill,
)
from ...checks.qualify.cross import (
    Graded,
    ScalingPoint,
    attribute,
    grade,
    imex_findings,
    rack_findings,
    scaling_curve,
    shortfall,
)
from ...checks.qualify.judge import TEST_NAMES, expectations
from ...checks.qualify.sanity import ceiling, screen
from ..model.qualify import CrossRun, Evidence, Expectation, ToolRun
from . import mndiag, nvbw_multinode
from .inventory import Inventory, Rail
from .launch import GroupRunner, ToolRunner
from .parsers.mndiag import parse as parse_mndiag
from .parsers.nccl import one_run
from .plan import DEADLINES, NIC_PORT_BASE, Step, iterations, program
from .run import QualifyOptions, result_run, run_step
from .schedule import Pair, first_pairing, peer_groups, scaling_sizes, second_pass

IMEX_CHANNELS = "/dev/nvidia-caps-imex-channels"
CROSS_DEADLINES = {t.id: t.invocation.deadline_s for t in cross_tests()}


class Measure(Protocol):
    """One pair's run(s) in a round; ``only`` limits a second pass to the suspect's rails."""

    def __call__(self, pair: Pair, stage: str, number: int, *,
                 only: frozenset[str] | None) -> list[CrossRun]: ...


@dataclass
class Round:
    """One round of the schedule: its runs ran at the same time."""

    test: str
    stage: str
    runs: int
    wall_s: float
    longest_s: float  # the slowest run of the round, launch to exit
    parse_s: float  # reading every run's output

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "stage": self.stage, "runs": self.runs,
                "wall_s": round(self.wall_s, 4), "longest_s": round(self.longest_s, 4),
                "parse_s": round(self.parse_s, 4)}


@dataclass
class CrossOutcome:
    runs: list[CrossRun] = field(default_factory=list)
    graded: list[Graded] = field(default_factory=list)
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    cluster: list[Finding] = field(default_factory=list)  # scaling: the cluster's, no node's
    scaling: list[ScalingPoint] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    judge_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(r.wall_s for r in self.rounds)

    def add(self, found: Mapping[str, list[Finding]]) -> None:
        for node, own in found.items():
            self.findings.setdefault(node, []).extend(own)

    def schedule(self) -> dict[str, Any]:
        by_test: dict[str, int] = {}
        for r in self.rounds:
            by_test[r.test] = by_test.get(r.test, 0) + 1
        return {"rounds": len(self.rounds), "rounds_by_test": by_test,
                "seconds": round(self.seconds, 3), "judge_s": round(self.judge_s, 4),
                "detail": [r.to_dict() for r in self.rounds]}


_INVOCATIONS: dict[str, Invocation] = {"pairs": PAIRS, "scaling": SCALING, "rack": RACK}


def matched_rails(mine: Inventory, theirs: Inventory) -> list[tuple[Rail, Rail]]:
    """Rail to rail between two nodes: the rails serving the same GPU (the rail of GPU k is
    rail k of the node, whatever its name or where ibstat prints it), else the rails of the
    same name; a rail with no counterpart is left out."""
    by_gpu = {r.gpu: r for r in theirs.rails if r.gpu is not None}
    by_name = {(r.hca, r.port): r for r in theirs.rails}
    out = []
    for rail in mine.rails:
        other = by_gpu.get(rail.gpu) if rail.gpu is not None else None
        other = other or by_name.get((rail.hca, rail.port))
        if other is not None:
            out.append((rail, other))
    return out


@dataclass
class Cross:
    """What the cross-node tests need: the nodes with their inventory and profile, the
    two runners, the options, and the racks (rack name -> its trays)."""

    nodes: list[str]
    inventories: Mapping[str, Inventory]
    profiles: Mapping[str, Profile]
    runner: ToolRunner
    group: GroupRunner
    options: QualifyOptions
    racks: Mapping[str, list[str]] = field(default_factory=dict)
    outcome: CrossOutcome = field(default_factory=CrossOutcome)
    deadline: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.deadline = self.deadline or time.monotonic() + self.options.budget_s
        self.rack_of = {n: rack for rack, trays in self.racks.items() for n in trays}
        self._profile_names = {n: p.name for n, p in self.profiles.items()}
        self._expectations = {p.name: expectations(p) for p in self.profiles.values()}

    # -- running ---------------------------------------------------------------------

    def _deadline_s(self, test: str) -> float:
        given = self.options.settings.get("deadline_s") or {}
        return float(given.get(test, CROSS_DEADLINES[test]))

    def _round(self, test: str, stage: str,
               jobs: Sequence[Callable[[int], list[CrossRun]]]) -> list[CrossRun]:
        if not jobs:
            return []
        number = len(self.outcome.rounds) + 1
        started = time.monotonic()
        workers = max(1, min(len(jobs), int(self.options.settings.get("parallel_nodes", 256))))
        with ThreadPoolExecutor(workers) as pool:
            runs = [r for batch in pool.map(lambda job: job(number), jobs) for r in batch]
        screen([r.run for r in runs], self._profile_names, self._expectations)
        self.outcome.rounds.append(Round(
            test, stage, len(runs), time.monotonic() - started,
            max((r.run.seconds for r in runs), default=0.0),
            sum(r.run.parse_s for r in runs)))
        self.outcome.runs.extend(runs)
        return runs

    def _gpus(self, nodes: Sequence[str]) -> int:
        return min(len(self.inventories[n].gpus) for n in nodes)

    def _allreduce(self, test: str, nodes: Sequence[str], stage: str, number: int,
                   env: Mapping[str, str]) -> CrossRun:
        tools = self.options.settings.get("tools") or {}
        iters = iterations(self.options.level)
        invocation = _INVOCATIONS[test]
        argv = [program(invocation.program, tools),
                *fill(invocation.argv, {"gpus": str(self._gpus(nodes)), "iters": iters})]
        step = Step(test, "nccl-tests", tuple(argv), tuple(sorted(env.items())),
                    self._deadline_s(test))
        left = min(step.deadline_s, self.deadline - time.monotonic())
        if left < 1.0:
            run = ToolRun("nccl-tests", nodes[0], test, " ".join(argv),
                          error="no time left in the qualification budget (--budget)")
        else:
            started = time.monotonic()
            result = self.group(list(nodes), argv, dict(env), left)
            run = result_run(step, nodes[0], result, time.monotonic() - started, left)
            self._one_job(run, nodes)
        return CrossRun(test, tuple(nodes), number, stage, run)

    def _one_job(self, run: ToolRun, nodes: Sequence[str]) -> None:
        """A figure between nodes counts only from one job that joined every rank of every
        node (nccl.one_run): otherwise it is the test's error, and its figure is dropped."""
        if run.error is not None or run.skipped is not None or not run.figures:
            return
        why = one_run(run, len(nodes), self._gpus(nodes))
        if why is not None:
            alone = len(run.hosts) == 1 and len(nodes) > 1  # a build without MPI
            run.evidence.append(Evidence("setup" if alone else "error", "node", why))
            run.notes += [f"figure not counted: {f.value:g} {f.unit}" for f in run.figures]
            run.figures = []

    def _rails(self, pair: Pair, stage: str, number: int, *,
               only: frozenset[str] | None) -> list[CrossRun]:
        """Rail i of pair[0] to rail i of pair[1], every rail at once."""
        client, server = pair
        tools = self.options.settings.get("tools") or {}
        perftest = program(RAILS.program, tools)
        steps = []
        for i, (rail, other) in enumerate(matched_rails(self.inventories[client],
                                                        self.inventories[server])):
            component = f"{rail.hca}/{rail.port}"
            if only is not None and component not in only:
                continue
            server_argv = (perftest, *fill(RAILS.argv, self._rail_values(server, other, i)))
            client_argv = (perftest, *fill(RAILS.argv, self._rail_values(client, rail, i)),
                           server)
            steps.append(Step("rails", RAILS.parser, client_argv,
                              deadline_s=self._deadline_s("rails"), server_argv=server_argv,
                              component=component, tests=("rails",), install=RAILS.install))
        if not steps:
            return []
        with ThreadPoolExecutor(len(steps)) as pool:
            runs = list(pool.map(lambda s: run_step(s, client, self.runner, self.deadline,
                                                    server_node=server), steps))
        return [CrossRun("rails", pair, number, stage, run) for run in runs]

    def _rail_values(self, node: str, rail: Rail, index: int) -> dict[str, str]:
        inv = self.inventories[node]
        cuda = f"--use_cuda={rail.gpu}" if inv.perftest_cuda and rail.gpu is not None else ""
        return {"hca": rail.hca, "port": str(rail.port), "use_cuda": cuda,
                "tcp_port": str(NIC_PORT_BASE + index)}

    # -- pairings --------------------------------------------------------------------

    def _pairwise(self, test: str, nodes: list[str],
                  measure: Measure,
                  expectation: Expectation | None) -> list[Graded]:
        """Round 1 over a disjoint pairing, then the second pass (schedule.py)."""
        pairs, odd = first_pairing(nodes, self.rack_of)
        first = self._round(test, "first", [partial(measure, p, "first", only=None)
                                            for p in pairs])
        graded = grade(first, expectation, self.options.rule)
        if graded and all(g.reference is None for g in graded):
            self.outcome.notes.append(
                f"{test}: {len(graded)} figure(s), too few for a peers' median and no expected "
                "figure in the profile (--profile): only failed runs and floors were judged")
        slow: dict[str, set[str]] = {}
        for g in graded:
            if g.status in (Status.FAIL, Status.WARN):
                for node in g.run.nodes:
                    slow.setdefault(node, set()).add(g.component)
        bad_pairs = {g.run.nodes for g in graded if g.status is not Status.PASS}
        good = [n for p in pairs if p not in bad_pairs for n in p if n not in slow]
        suspects = sorted(slow) + odd
        for rounds in second_pass(suspects, good):
            self._round(test, "second", [
                partial(measure, p, "odd", only=None) if p[0] in odd else
                partial(measure, p, "second", only=frozenset(slow[p[0]])) for p in rounds])
        if suspects and not good:
            self.outcome.notes.append(f"{test}: no pair passed, so no known-good partner "
                                      "could tell the slow node of a slow pair")
            self.outcome.add({node: [Finding(
                Status.SKIP, "node", f"{TEST_NAMES[test]}: not run (the odd node out of "
                "the first pass, and no pair passed to give it a known-good partner)",
                None, None, Action.NONE, f"qualify.{test}")] for node in odd})
        members = set(nodes)
        runs = [r for r in self.outcome.runs if r.test == test and r.nodes[0] in members
                and r.stage in ("first", "second", "odd")]
        started = time.monotonic()
        graded = grade(runs, expectation, self.options.rule)
        by_node, cluster = attribute(test, graded, expectation)
        self.outcome.add(by_node)
        self.outcome.cluster.extend(cluster)
        short = shortfall(test, runs, expectation, self.options.rule, self._kind(nodes))
        if short is not None:
            self.outcome.cluster.append(short)
        self.outcome.judge_s += time.monotonic() - started
        self.outcome.graded.extend(graded)
        return graded

    def _expect(self, nodes: Sequence[str], test: str) -> Expectation | None:
        """The profile's figure ``test`` is judged against (all ``nodes`` share a profile:
        peer_groups)."""
        key = ACTIVE_TESTS[test].expected_key
        return expectations(self.profiles[nodes[0]]).get(key) if nodes else None

    def _kind(self, nodes: Sequence[str]) -> str:
        return f"{self.profiles[nodes[0]].name} nodes" if nodes else "nodes"

    def pairs(self, nodes: list[str]) -> None:
        env = dict(PAIRS.env)
        self._pairwise("pairs", nodes, partial(self._pair, "pairs", env=env),
                       self._expect(nodes, "pairs"))

    def rails(self, nodes: list[str]) -> None:
        with_rails = [n for n in nodes if self.inventories[n].rails]
        self._pairwise("rails", with_rails, self._rails, self._expect(with_rails, "rails"))

    def scaling(self, nodes: list[str]) -> None:
        ordered = sorted(nodes, key=lambda n: (self.rack_of.get(n, ""), n))
        runs = []
        for size in scaling_sizes(len(ordered)):
            group = ordered[:size]
            for stage, env in (("ring", {"NCCL_ALGO": "Ring"}), ("default", {})):
                runs += self._round("scaling", stage, [
                    partial(self._one, "scaling", group, stage, env=env)])
        started = time.monotonic()
        points, found = scaling_curve(runs, self.options.rule, self._expect(ordered, "scaling"),
                                      self.profiles[ordered[0]].name)
        self.outcome.scaling.extend(points)
        self.outcome.cluster.extend(found)
        self.outcome.judge_s += time.monotonic() - started

    def rack(self, nodes: list[str]) -> None:
        chosen = set(nodes)
        racks = {rack: [t for t in trays if t in chosen] for rack, trays in self.racks.items()}
        racks = {r: t for r, t in racks.items() if len(t) >= 2
                 and all(self.profiles[n].nvl72 for n in t)}
        if not racks:
            self.outcome.notes.append("rack: no NVL72 rack with two trays or more among the "
                                      "nodes (cluster.racks names the racks)")
            return
        trays = [t for members in racks.values() for t in members]
        channels: dict[str, str | None] = {}
        self._round("rack", "imex", [partial(self._imex, t, channels) for t in trays])
        self.outcome.add(imex_findings(channels))
        env = dict(RACK.env)
        whole = self._round("rack", "rack", [partial(self._one, "rack", m, "rack", env=env)
                                             for m in racks.values()])
        expectation = self._expect(trays, "rack")
        started = time.monotonic()
        graded = grade(whole, expectation, self.options.rule)
        self.outcome.graded.extend(graded)
        slow = shortfall("rack", whole, expectation, self.options.rule, "racks")
        if slow is not None:
            self.outcome.cluster.append(slow)
        self.outcome.judge_s += time.monotonic() - started
        for (rack, members), g in zip(racks.items(), graded, strict=True):
            missing = [t for t in members if channels.get(t) is not None]
            if g.status is Status.PASS:
                self.outcome.add(rack_findings(rack, g, members))
            elif missing:  # the trays without a channel are named; the rest are not at fault
                self.outcome.add({t: [Finding(
                    Status.PASS, "node", f"IMEX channel present; the rack-wide all-reduce "
                    f"failed while {', '.join(missing)} has none", g.why, None, Action.NONE,
                    "qualify.rack")] for t in members if t not in missing})
            else:
                self._pairwise("rack", members, partial(self._pair, "rack", env=env), None)
                if not any(f.status is Status.FAIL and f.check == "qualify.rack"
                           for t in members for f in self.outcome.findings.get(t, [])):
                    self.outcome.add(rack_findings(rack, g, members))
        for rack, members in racks.items():
            self._mndiag(rack, [t for t in members if channels.get(t) is None])
            self._nvbandwidth(rack, [t for t in members if channels.get(t) is None])

    def _mndiag(self, rack: str, trays: list[str]) -> None:
        """DCGM's multi-node diagnostic over the rack's trays (agent/qualify/mndiag.py),
        where its prerequisites hold: else a note saying why and what to install."""
        if len(trays) < 2:
            return
        tools = self.options.settings.get("tools") or {}
        dcgmi = program("dcgmi", tools)
        head = trays[0]
        left = min(self._deadline_s("rack"), self.deadline - time.monotonic())
        why = "no time left in the qualification budget (--budget)" if left < 1.0 else \
            mndiag.prerequisites(head, trays, dcgmi, self.profiles[head].name, self.runner)
        if why is not None:
            self.outcome.notes.append(f"rack {rack}: dcgmi mndiag not run: {why} "
                                      f"({mndiag.INSTALL})")
            return
        result = self.runner(head, mndiag.command(dcgmi, trays), {}, left)
        read = parse_mndiag(result.stdout) if result.error is None else None
        if read is None or read.errors or not read.results:
            said = (read.errors[0] if read is not None and read.errors else
                    result.error or (result.stdout + result.stderr).strip()[-200:]
                    or f"exit {result.returncode}")
            self.outcome.notes.append(f"rack {rack}: dcgmi mndiag gave no verdict: {said}")
            return
        self.outcome.add(mndiag.findings(read, trays))

    def _nvbandwidth(self, rack: str, trays: list[str]) -> None:
        """nvbandwidth's multinode read testcase over the rack's trays, one process per GPU
        (agent/qualify/nvbw_multinode.py), where the installed build has it: else a note
        saying why and what to install."""
        if len(trays) < 2:
            return
        nvbandwidth = program("nvbandwidth", self.options.settings.get("tools") or {})
        head = trays[0]
        left = min(self._deadline_s("rack"), self.deadline - time.monotonic())
        why = "no time left in the qualification budget (--budget)" if left < 1.0 else \
            nvbw_multinode.unsupported(self.runner(head, nvbw_multinode.list_argv(
                nvbandwidth), {}, min(left, DEADLINES["inventory"])), head)
        if why is not None:
            self.outcome.notes.append(f"rack {rack}: nvbandwidth multinode not run: {why} "
                                      f"({nvbw_multinode.INSTALL})")
            return
        result = self.group(trays, nvbw_multinode.command(nvbandwidth), {}, left,
                            per_node=self._gpus(trays))
        bound = ceiling("d2d", "GB/s", self.profiles[head], None)
        read = nvbw_multinode.read(result.stdout, trays, head, bound) \
            if result.error is None else None
        if read is None or read.evidence or len(read.gpus) < 2:
            said = (read.evidence[0] if read is not None and read.evidence else
                    result.error or (result.stdout + result.stderr).strip()[-200:]
                    or f"exit {result.returncode}")
            self.outcome.notes.append(f"rack {rack}: nvbandwidth multinode gave no "
                                      f"verdict: {said}")
            return
        self.outcome.notes += [f"rack {rack}: nvbandwidth multinode: {n}"
                               for n in read.notes[:10]]
        floors = {self.profiles[t].name: self._expectations[self.profiles[t].name].get("d2d")
                  for t in trays}
        by_tray, cluster = nvbw_multinode.findings(read, self._profile_names, floors,
                                                   self.options.rule)
        self.outcome.add(by_tray)
        self.outcome.cluster.extend(cluster)

    def _one(self, test: str, nodes: Sequence[str], stage: str, number: int,
             env: Mapping[str, str]) -> list[CrossRun]:
        return [self._allreduce(test, nodes, stage, number, env)]

    def _pair(self, test: str, pair: Pair, stage: str, number: int, *,
              only: frozenset[str] | None, env: Mapping[str, str]) -> list[CrossRun]:
        return self._one(test, pair, stage, number, env)

    def _imex(self, tray: str, channels: dict[str, str | None], number: int
              ) -> list[CrossRun]:
        result = self.runner(tray, ["ls", IMEX_CHANNELS], {}, DEADLINES["inventory"])
        listed = result.returncode == 0 and "channel" in result.stdout
        with self._lock:
            channels[tray] = None if listed else (
                (result.stderr or result.error or f"ls exited {result.returncode}").strip()[:200])
        return []

    def run(self, tests: frozenset[str], excluded: set[str]) -> CrossOutcome:
        nodes = [n for n in self.nodes if n not in excluded and self.inventories.get(n)
                 and self.inventories[n].gpus]
        if excluded:
            self.outcome.notes.append(f"left out of the tests between nodes (failed their "
                                      f"node tests): {', '.join(sorted(excluded))}")
        groups = peer_groups(nodes, self.profiles)
        if len(groups) > 1:
            self.outcome.notes.append(
                "tests between nodes run within each kind of node: " + "; ".join(
                    f"{self.profiles[g[0]].name} ({len(g)})" for g in groups))
        for group in groups:
            for test in ("pairs", "rails"):
                if test in tests and len(group) >= 2:
                    getattr(self, test)(group)
        convicted = {n for n, own in self.outcome.findings.items()
                     if any(f.status in (Status.FAIL, Status.ERROR) for f in own)}
        for group in groups:
            passed = [n for n in group if n not in convicted]
            if "scaling" in tests and len(passed) >= 2:
                self.scaling(passed)
            for test in tests & {"pairs", "rails", "scaling"}:
                if len(group if test != "scaling" else passed) < 2:
                    self.outcome.notes.append(
                        f"{test}: {self.profiles[group[0]].name} needs two nodes or more that "
                        "passed their node tests")
        if "rack" in tests:
            self.rack(nodes)
        return self.outcome
