"""The health check's way back for a drained node (agent/slurm/way_back.py), driven with an
injected clock: validation starts only on a fully drained node, resumes only on a passing
validation it asked for, retries what could not run and then falls back as configured, and
validates a node an operator returned while it is idle."""

from __future__ import annotations

import pytest

from clusterdiag.agent.health.lifecycle import Asked, Health, Incident, Outcome, Result, State
from clusterdiag.agent.slurm.reason import Verb, parse
from clusterdiag.agent.slurm.scontrol import NodeState
from clusterdiag.agent.slurm.way_back import Do, Policy, fully_drained, plan

T0 = 1_000_000.0
NVLINK = "clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"
SERVICE = "clusterdiag: fabric.manager node failed/dead"


def _node(state: str = "IDLE+DRAIN", reason: str | None = NVLINK) -> NodeState:
    return NodeState("n1", state, reason)


def _drained(check: str = "nvlink.links_up", component: str = "gpu3") -> Health:
    health = Health()
    family = "nvlink" if check.startswith("nvlink") else check
    health.drain(Incident(family, check, component, "17/18", T0))
    return health


def _ran(health: Health, result: Result, detail: str, at: float) -> None:
    health.start(at)
    health.finish(Outcome(result, detail, at))


@pytest.mark.parametrize(("state", "full"), [
    ("IDLE+DRAIN", True), ("DRAINED", True), ("MIXED+DRAIN", False),
    ("ALLOCATED+DRAIN", False), ("IDLE+COMPLETING+DRAIN", False), ("IDLE+DRAIN*", False),
    ("DOWN+DRAIN", False), ("IDLE", False)])
def test_only_a_drain_with_no_job_left_is_fully_drained(state: str, full: bool) -> None:
    assert fully_drained(_node(state)) is full


def test_a_drain_with_no_incident_opens_one_and_starts_its_validation() -> None:
    health = Health()
    step = plan(_node(), health, False, Policy(), T0)
    assert (step.do, step.changed) == (Do.START, True)
    assert health.open == Incident("nvlink", "nvlink.links_up", "gpu3", "17/18 (down: 7)", T0)
    assert health.asked == Asked(T0, False)


@pytest.mark.parametrize("state", ["MIXED+DRAIN", "ALLOCATED+DRAIN"])
def test_a_draining_node_is_not_validated_while_its_job_runs(state: str) -> None:
    assert plan(_node(state), _drained(), False, Policy(), T0).do is Do.NOTHING


def test_a_running_validation_is_left_alone() -> None:
    health = _drained()
    health.start(T0 + 1)
    step = plan(_node(), health, True, Policy(), T0 + 60)
    assert (step.do, step.changed, health.state) == (Do.NOTHING, False, State.VALIDATING)


def test_only_a_validation_asked_for_this_drain_resumes_the_node() -> None:
    health = _drained()
    assert plan(_node(), health, False, Policy(), T0 + 1).do is Do.START
    _ran(health, Result.PASSED, "allreduce, d2d passed", T0 + 100)
    step = plan(_node(), health, False, Policy(), T0 + 300)
    assert (step.do, health.asked) == (Do.RESUME, None)
    # drained again by someone who records no incident: the old pass frees nothing
    step = plan(_node(), health, False, Policy(), T0 + 900)
    assert (step.do, health.state, health.open.at) == (Do.START, State.DRAINED, T0 + 900)


def test_a_failed_validation_keeps_the_node_out_with_its_figure_and_runs_again() -> None:
    reason = "clusterdiag: epilog nvlink.links_up gpu3 17/18"
    health = _drained()
    health.asked = Asked(T0, False)
    _ran(health, Result.FAILED, "nvlink.links_up gpu3 16/18 (down: 2, 7)", T0 + 10)
    step = plan(_node(reason=reason), health, False, Policy(), T0 + 300)
    assert step.do is Do.START
    kept = parse(step.reason)
    assert (kept.verb, kept.check, kept.detail) == (Verb.EPILOG, "nvlink.links_up",
                                                    "16/18 (down: 2, 7)")


def test_a_hold_down_waits_then_validates_again() -> None:
    health = _drained("fabric.manager", "node")
    health.asked = Asked(T0, False)
    _ran(health, Result.WAITING, "the check passes; its hold-down ...", T0 + 60)
    assert plan(_node(reason=SERVICE), health, False, Policy(), T0 + 599).do is Do.NOTHING
    assert plan(_node(reason=SERVICE), health, False, Policy(), T0 + 600).do is Do.START


def test_a_sites_hold_down_for_the_family_replaces_the_declared_one() -> None:
    health = _drained("fabric.manager", "node")
    health.asked = Asked(T0, False)
    _ran(health, Result.WAITING, "the check passes; its hold-down ...", T0 + 5)
    short = Policy(hold_down_s={"fabric.manager": 20.0})
    assert plan(_node(reason=SERVICE), health, False, short, T0 + 19).do is Do.NOTHING
    assert plan(_node(reason=SERVICE), health, False, short, T0 + 20).do is Do.START
    other = Policy(hold_down_s={"gpu.count": 20.0})
    assert plan(_node(reason=SERVICE), health, False, other, T0 + 20).do is Do.NOTHING


@pytest.mark.parametrize(("fallback", "do", "said"), [
    ("recheck", Do.RECHECK, "clusterdiag: nvlink.links_up gpu3 validation could not run 3 "
                            "times: recheck"),
    ("hold", Do.HOLD, "clusterdiag: repair nvlink.links_up gpu3 (validation could not run 3 "
                      "times: hold)")])
def test_what_could_not_run_is_retried_then_falls_back_saying_which(
        fallback: str, do: Do, said: str) -> None:
    health = _drained()
    policy = Policy(3, fallback)
    for attempt in range(3):
        assert plan(_node(), health, False, policy, T0 + attempt * 300).do is Do.START
        _ran(health, Result.ERROR, "nvbandwidth: not found", T0 + attempt * 300 + 5)
    step = plan(_node(), health, False, policy, T0 + 1000)
    assert (step.do, step.reason) == (do, said)
    assert health.state is (State.HELD if fallback == "hold" else State.DRAINED)


def test_a_validation_killed_half_way_counts_as_one_that_could_not_run() -> None:
    health = _drained()
    health.start(T0 + 1)
    step = plan(_node(), health, False, Policy(), T0 + 300)
    assert (step.do, health.errors, health.last.result) == (Do.START, 1, Result.ERROR)


def test_a_node_returned_with_its_incident_open_is_validated_and_drained_only_on_a_fail(
        ) -> None:
    health = _drained()
    health.asked = Asked(T0, False)
    _ran(health, Result.FAILED, "nvlink.links_up gpu3 16/18", T0 + 10)  # before the return
    idle = _node("IDLE", None)
    step = plan(idle, health, False, Policy(), T0 + 600)
    assert (step.do, health.asked) == (Do.START, Asked(T0 + 600, True))
    assert plan(idle, health, True, Policy(), T0 + 660).do is Do.NOTHING
    _ran(health, Result.FAILED, "nvlink.links_up gpu3 15/18", T0 + 700)
    step = plan(idle, health, False, Policy(), T0 + 900)
    assert (step.do, step.reason) == (Do.DRAIN, "clusterdiag: nvlink.links_up gpu3 15/18")


def test_a_held_node_waits_for_a_person() -> None:
    health = _drained()
    health.hold(T0 + 1)
    assert plan(_node(), health, False, Policy(), T0 + 900).do is Do.NOTHING


@pytest.mark.parametrize("verb", [Verb.EPILOG, Verb.QUALIFY, Verb.REPAIR])
def test_a_reason_only_a_person_lifts_is_never_resumed_on_a_recheck(verb: Verb) -> None:
    from clusterdiag.agent.slurm.agent_report import Cached
    from clusterdiag.agent.slurm.healthcheck import may_resume
    from clusterdiag.agent.slurm.reason import Reason, write

    reason = write(Reason(verb, "nvlink.error_rate", "gpu3", "3 drains in 7 d"))
    resume, why = may_resume(reason, [], Cached(None, "no report"))
    assert not resume
    assert "a person resumes the node" in why


def test_a_qualify_drain_opens_the_qualify_tests_incident_and_keeps_its_reason() -> None:
    slow = "clusterdiag: qualify gpu_compute gpu2 41.0 TFLOPS"
    health = Health()
    step = plan(_node(reason=slow), health, False, Policy(), T0)
    assert step.do is Do.START
    assert health.open == Incident("qualify.gpu_compute", "qualify.gpu_compute", "gpu2",
                                   "41.0 TFLOPS", T0)
    _ran(health, Result.FAILED, "qualify.gpu_compute gpu2 40.2 TFLOPS", T0 + 60)
    step = plan(_node(reason=slow), health, False, Policy(), T0 + 300)
    assert (step.do, step.reason) == (Do.START, "clusterdiag: qualify gpu_compute gpu2 40.2 TFLOPS")
    _ran(health, Result.PASSED, "gpu_compute passed", T0 + 360)
    assert plan(_node(reason=step.reason), health, False, Policy(), T0 + 600).do is Do.RESUME
