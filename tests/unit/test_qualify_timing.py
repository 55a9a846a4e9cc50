"""The time model of a qualification (agent/qualify/timing.py) and the tests that apply by
default (agent/qualify/schedule.py): each tool's own time read from the command line the
planner builds, launch and NCCL set-up, the cap on parallel nodes, the deadlines, the rounds
between nodes as the cross-node tests run them, and what ``--fit-budget`` keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterdiag.agent.qualify.command import Request, run
from clusterdiag.agent.qualify.plan import NODE_TESTS
from clusterdiag.agent.qualify.schedule import GROUPS, default_groups
from clusterdiag.agent.qualify.timing import (
    GPU_BURN_KILL_WAIT_S,
    NCCL_INIT_PER_RANK_S,
    NCCL_INIT_S,
    Schedule,
    Stage,
    duration,
    estimate,
    launch_s,
    makespan,
    nccl_work_s,
    node_plan,
    run_time,
)
from clusterdiag.agent.settings.config import Config
from clusterdiag.checks.core.levels import Level
from clusterdiag.checks.profiles.profile import load_profile

H100 = load_profile("dgx-h100")
GB200 = load_profile("gb200-nvl72")
ALL = ("node", "pairs", "rails", "scaling", "rack")


def _nodes(count: int) -> list[str]:
    return [f"n{i:04d}" for i in range(1, count + 1)]


def _estimate(count: int, groups: tuple[str, ...] = ALL, level: Level = Level.QUICK,
              **settings: object) -> Schedule:
    nodes = _nodes(count)
    return estimate(nodes, dict.fromkeys(nodes, H100), groups, level, settings, "srun")


def test_allreduce_work_counts_every_collective_at_the_bus_bandwidth() -> None:
    """-b 1G -e 8G -f 2: 1+2+4+8 GiB; per size 5 warm-ups and, out of place and in place,
    one synchronising collective, 20 timed and one data check: 49 collectives of each size.
    16 ranks at 370 GB/s busbw move 370 / (2*15/16) GB/s of algorithm bandwidth."""
    argv = ("all_reduce_perf", "-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "-w", "5",
            "-n", "20")
    expected = 49 * (15 << 30) / (370e9 / (2 * 15 / 16))
    assert nccl_work_s(argv, 16, 370.0) == pytest.approx(expected)
    longer = ("all_reduce_perf", "-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "-w", "5",
              "-n", "100")
    assert nccl_work_s(longer, 16, 370.0) == pytest.approx(expected * 209 / 49)


def test_nccl_setup_grows_with_the_ranks() -> None:
    argv = ("all_reduce_perf", "-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    two = run_time("nccl-tests", "pairs", argv, via="srun", nodes=2)
    many = run_time("nccl-tests", "scaling", argv, via="srun", nodes=1024)
    assert two.setup_s == pytest.approx(NCCL_INIT_S + 16 * NCCL_INIT_PER_RANK_S)
    assert many.setup_s == pytest.approx(NCCL_INIT_S + 8192 * NCCL_INIT_PER_RANK_S)
    assert many.launch_s > two.launch_s  # two hops of the launch tree against one


@pytest.mark.parametrize(("nodes", "hops"), [(1, 0), (2, 1), (50, 1), (51, 2), (2500, 2),
                                             (2501, 3)])
def test_launch_reaches_nodes_through_a_tree_of_fifty(nodes: int, hops: int) -> None:
    assert launch_s("srun", nodes) == pytest.approx(launch_s("srun") + 0.5 * hops)


def test_gpu_burn_takes_its_seconds_and_its_kill_wait() -> None:
    cost = run_time("gpu_burn", "gpu_compute", ("gpu_burn", "-d", "-tc", "-c", "/x", "45"),
                    via="local")
    assert cost.work_s == 45 + GPU_BURN_KILL_WAIT_S


def test_dcgm_runs_as_long_as_its_level() -> None:
    quick = run_time("dcgmi", "dcgm", ("dcgmi", "diag", "-r", "2", "-j"), via="local")
    full = run_time("dcgmi", "dcgm", ("dcgmi", "diag", "-r", "3", "-j"), via="local")
    assert (quick.work_s, full.work_s) == (120.0, 900.0)


def test_a_slower_figure_takes_longer() -> None:
    argv = ("nvbandwidth", "-t", "host_to_device_memcpy_ce")
    fast = run_time("nvbandwidth", "nvbandwidth", argv, via="local", rates={"h2d": 50.0})
    slow = run_time("nvbandwidth", "nvbandwidth", argv, via="local", rates={"h2d": 25.0})
    assert slow.work_s > 1.9 * (fast.work_s - 8 * 0.3)


def test_makespan_is_a_thread_pool_taking_jobs_in_turn() -> None:
    assert makespan([10, 10, 10, 10], 2) == 20
    assert makespan([10, 1, 1, 1], 2) == 10
    assert makespan([3, 3, 3], 8) == 3
    assert makespan([], 4) == 0


def test_node_tests_run_at_most_parallel_nodes_at_a_time() -> None:
    per_node = node_plan(H100, Level.QUICK, {}, frozenset(NODE_TESTS), "srun").seconds
    for workers, waves in ((64, 2), (32, 4), (128, 1)):
        (node, *_) = _estimate(128, ("node",), parallel_nodes=workers).stages
        assert node.rounds == waves
        assert node.seconds == pytest.approx(waves * per_node)


def test_burn_seconds_and_level_lengthen_the_node_tests() -> None:
    base = _estimate(4, ("node",)).stages[0].seconds
    assert _estimate(4, ("node",), burn_s=130).stages[0].seconds == pytest.approx(base + 100)
    assert _estimate(4, ("node",), level=Level.FULL).stages[0].seconds > base + 780  # dcgm -r 3


def test_a_run_never_counts_past_its_deadline() -> None:
    free = _estimate(4, ("node",), repeat=False).stages[0].seconds
    capped = _estimate(4, ("node",), repeat=False, deadline_s={"dcgm": 10}).stages[0].seconds
    assert capped == pytest.approx(free - 120 - launch_s("srun") + 10)


def test_rounds_between_nodes_do_not_grow_with_the_nodes_but_scaling() -> None:
    for count, scaling in ((16, 8), (128, 14), (1024, 20)):
        rounds = {}
        for stage in _estimate(count, ("pairs", "rails", "scaling")).stages:
            rounds[stage.group] = rounds.get(stage.group, 0) + stage.rounds
        assert rounds == {"pairs": 2, "rails": 2, "scaling": scaling}


def test_the_rounds_planned_are_the_rounds_run(tmp_path: Path) -> None:
    """With a slow pair, the schedule that ran has the second pass the estimate counts."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"nodes": [{"names": "q[1-9]", "profile": "dgx-h100"}],
                                "faults": [{"node": "q3", "kind": "cable_slow",
                                            "hca": "mlx5_4"}]}))
    report = run(Request(simulate=str(spec), tests="pairs,rails,scaling"), Config())
    planned = {}
    nodes = [f"q{i}" for i in range(1, 10)]
    for stage in estimate(nodes, dict.fromkeys(nodes, H100), ("pairs", "rails", "scaling"),
                          Level.QUICK, {}, "srun").stages:
        planned[stage.group] = planned.get(stage.group, 0) + stage.rounds
    ran = report.schedule["rounds_by_test"]
    assert planned["pairs"] == ran["pairs"] == 2
    assert planned["rails"] == ran["rails"] == 2
    # 2, 4, 8 and 9 nodes planned (all pass); the 8 that passed ran 2, 4 and 8
    assert (planned["scaling"], ran["scaling"]) == (8, 6)


def test_the_rack_stage_is_planned_on_nvl72_racks() -> None:
    trays = _nodes(8)
    racks = {"r1": trays[:4], "r2": trays[4:]}
    schedule = estimate(trays, dict.fromkeys(trays, GB200), ("rack",), Level.QUICK, {},
                        "srun", racks)
    assert [(s.name, s.runs) for s in schedule.stages] == [
        ("IMEX channel of every tray", 8), ("all-reduce over each rack", 2)]
    assert not estimate(trays, dict.fromkeys(trays, H100), ("rack",), Level.QUICK, {},
                        "srun", racks).stages


def test_fit_keeps_groups_in_order_and_the_first_or_nothing() -> None:
    schedule = Schedule(8, "quick", "srun", (
        Stage("node", "node tests", 1, 8, 300.0), Stage("pairs", "first pass", 1, 4, 20.0),
        Stage("rails", "first pass", 1, 4, 50.0), Stage("scaling", "sizes", 6, 6, 60.0),
        Stage("rack", "racks", 1, 1, 5.0)))
    kept, dropped = schedule.fit(340.0)
    assert kept.groups == ("node", "pairs", "rack")
    assert dropped == ["rails", "scaling"]
    assert kept.seconds == 325.0
    assert schedule.fit(1000.0) == (schedule, [])
    nothing, dropped = schedule.fit(299.0)
    assert not nothing.stages
    assert dropped == list(GROUPS)


@pytest.mark.parametrize(("seconds", "text"), [(0.4, "0 s"), (59.6, "1 min 0 s"),
                                               (252, "4 min 12 s"), (7500, "2 h 5 min")])
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(("count", "profile", "racked", "groups"), [
    (1, H100, False, ("node",)),
    (2, H100, False, ("node", "pairs", "rails")),
    (4, H100, True, ("node", "pairs", "rails", "scaling")),
    (4, GB200, False, ("node", "pairs", "rails", "scaling")),
    (2, GB200, True, ("node", "pairs", "rails", "rack")),
])
def test_default_groups_follow_the_declarations(count: int, profile: object, racked: bool,
                                                groups: tuple[str, ...]) -> None:
    nodes = _nodes(count)
    racks = {"r1": nodes} if racked else {}
    assert default_groups(nodes, dict.fromkeys(nodes, profile), racks) == groups


def test_mixed_kinds_need_two_of_the_same_kind() -> None:
    """A DGX H100 beside a GB200 tray: no pair between them, so no test between nodes."""
    assert default_groups(["a", "b"], {"a": H100, "b": GB200}, {}) == ("node",)
