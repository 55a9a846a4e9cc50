"""The straggler rule and the hard-failure rules of checks/qualify/judge.py, on plain data."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.qualify import Evidence, Expectation, Figure, ToolRun
from clusterdiag.agent.qualify.launch import remote_argv
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.qualify.judge import StragglerRule, judge, per_gpu_d2d, suspects

RULE = StragglerRule()  # warn above 5 %, fail above 10 % below the median


def _runs(values: dict[str, list[float]], test: str = "hbm") -> list[ToolRun]:
    """One run per node with one GPU figure each: ``values`` node -> runs of that figure."""
    runs = []
    for node, series in values.items():
        run = ToolRun("nvbandwidth", node, "nvbandwidth", "nvbandwidth -t x", 0, complete=True)
        run.figures.append(Figure(node, test, "gpu0", list(series), "GB/s", "nvbandwidth"))
        runs.append(run)
    return runs


def _status(values: dict[str, list[float]], node: str, floor: float | None = None,
            repeatable: bool = True) -> tuple[Status, Action]:
    expect = {"p": {"hbm": Expectation("hbm", "GB/s", "test", None, floor)}}
    result = judge(_runs(values), dict.fromkeys(values, "p"), expect, RULE, repeatable)
    (finding,) = [f for f in result.findings[node] if f.check == "qualify.hbm"]
    return finding.status, finding.action


PEERS = {"a": [100.0, 100.0], "b": [101.0, 101.0], "c": [99.0, 99.0], "d": [100.5, 100.0]}


@pytest.mark.parametrize(("value", "status", "action"), [
    (96.0, Status.PASS, Action.NONE),  # 4 % below
    (93.0, Status.WARN, Action.INVESTIGATE),  # 7 %
    (88.0, Status.FAIL, Action.DRAIN),  # 12 %
])
def test_straggler_thresholds(value: float, status: Status, action: Action) -> None:
    assert _status({**PEERS, "x": [value, value]}, "x") == (status, action)


def test_thresholds_come_from_config() -> None:
    rule = StragglerRule.from_config({"warn_pct": 2, "fail_pct": 3})
    result = judge(_runs({**PEERS, "x": [96.0, 96.0]}), dict.fromkeys([*PEERS, "x"], "p"),
                   {}, rule)
    assert [f.status for f in result.findings["x"]] == [Status.FAIL]


def test_a_good_repeat_clears_a_noisy_first_run() -> None:
    assert _status({**PEERS, "x": [80.0, 99.5]}, "x")[0] is Status.PASS


def test_unconfirmed_straggler_is_only_a_warning() -> None:
    """A saved log cannot be repeated: 20 % below is reported, not convicted."""
    one = {n: v[:1] for n, v in PEERS.items()}
    assert _status({**one, "x": [80.0]}, "x", repeatable=False)[0] is Status.WARN


def test_first_pass_suspects_are_what_gets_repeated() -> None:
    one = {n: v[:1] for n, v in PEERS.items()}
    result = judge(_runs({**one, "x": [93.0]}), dict.fromkeys([*one, "x"], "p"), {}, RULE)
    assert suspects(result.figures) == {("x", "hbm", "gpu0")}


def test_a_node_alone_below_the_floor_fails_whatever_its_peers_say() -> None:
    assert _status({**PEERS, "x": [50.0, 50.0]}, "x", floor=60.0) == (Status.FAIL, Action.DRAIN)


def test_a_cluster_slow_as_a_whole_is_one_cluster_fail_and_no_node_is_drained() -> None:
    """Every node 40 % below the profile: a setting, a driver or the expectation, which
    draining the nodes would not mend. One cluster-level fail names the figure, the
    expectation and its source; the nodes are judged against each other."""
    slow = {n: [60.0, 60.0] for n in "abcd"}
    expect = {"p": {"hbm": Expectation("hbm", "GB/s", "a published figure", 100.0, 90.0)}}
    result = judge(_runs(slow), dict.fromkeys(slow, "p"), expect, RULE)
    assert {f.status for own in result.findings.values() for f in own} == {Status.PASS}
    (whole,) = result.cluster
    assert (whole.status, whole.component, whole.check) == (Status.FAIL, "cluster",
                                                            "qualify.hbm")
    assert whole.observed == {"median": 60.0, "figures": 4, "unit": "GB/s"}
    assert whole.expected == {"expected": 100.0, "floor": 90.0, "source": "a published figure"}
    assert whole.action is Action.INVESTIGATE


def test_too_few_peers_give_no_median() -> None:
    result = judge(_runs({"a": [100.0, 100.0], "x": [50.0, 50.0]}), {"a": "p", "x": "p"}, {},
                   RULE)
    assert [f.status for f in result.findings["x"]] == [Status.PASS]


def test_d2d_median_names_the_slow_gpu_not_its_partners() -> None:
    pairs = [Figure("n", "d2d", f"gpu{a}-gpu{b}", [80.0 if 3 in (a, b) else 100.0], "GB/s",
                    "nvbandwidth") for a in range(8) for b in range(8) if a != b]
    per_gpu = {f.component: f.value for f in per_gpu_d2d(pairs)}
    assert per_gpu["gpu3"] == 80.0
    assert all(v == 100.0 for k, v in per_gpu.items() if k != "gpu3")


def test_hard_failures_fail_whatever_the_bandwidth() -> None:
    run = ToolRun("nccl-tests", "x", "allreduce", "all_reduce_perf", 0, complete=True)
    run.figures.append(Figure("x", "allreduce", "node", [999.0], "GB/s", "nccl-tests"))
    run.evidence.append(Evidence("fail", "node", "line 9: 3 wrong elements at 1024 B"))
    (finding,) = judge([run], {"x": "p"}, {}, RULE).findings["x"]
    assert (finding.status, finding.action) == (Status.FAIL, Action.DRAIN)


def test_warn_lines_are_reported_not_failed() -> None:
    run = ToolRun("nccl-tests", "x", "allreduce", "all_reduce_perf", 0, complete=True)
    run.figures.append(Figure("x", "allreduce", "node", [400.0], "GB/s", "nccl-tests"))
    run.evidence.append(Evidence("warn", "node", "x:1:1 [0] NCCL WARN something"))
    (finding,) = judge([run], {"x": "p"}, {}, RULE).findings["x"]
    assert (finding.status, finding.action) == (Status.WARN, Action.INVESTIGATE)
    assert "NCCL WARN" in finding.observed


@pytest.mark.parametrize(("returncode", "complete", "status"), [
    (1, True, Status.ERROR), (0, False, Status.FAIL), (None, False, Status.ERROR)])
def test_exit_and_missing_summary(returncode: int | None, complete: bool,
                                  status: Status) -> None:
    """A non-zero exit with no failure in the output is the launcher's, a library's or a
    usage error (srun without PMIx exits 1): an error carrying its last lines, no drain."""
    run = ToolRun("nccl-tests", "x", "allreduce", "all_reduce_perf", returncode,
                  from_log=returncode is None, complete=complete)
    run.notes.append("exit 1; its last lines: srun: error: Couldn't find the specified plugin")
    findings = judge([run], {"x": "p"}, {}, RULE).findings["x"]
    assert [f.status for f in findings] == [status]
    assert all(f.action is not Action.DRAIN for f in findings if f.status is Status.ERROR)
    if returncode:
        assert "specified plugin" in str(findings[0].observed)


def test_remote_commands_carry_their_own_timeout() -> None:
    argv = remote_argv("srun", "gpu7", ["all_reduce_perf", "-g", "8"], {"NCCL_ALGO": "Ring"},
                       120)
    assert argv[:4] == ["srun", "--nodes=1", "--ntasks=1", "--nodelist=gpu7"]
    assert "--export=ALL,NCCL_ALGO=Ring" in argv
    assert argv[-6:] == ["timeout", "--kill-after=5", "120", "all_reduce_perf", "-g", "8"]
    ssh = remote_argv("ssh", "gpu7", ["nvbandwidth", "-t", "a b"], {}, 30)
    assert ssh[-1] == "env timeout --kill-after=5 30 nvbandwidth -t 'a b'"
