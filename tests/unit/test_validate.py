"""``clusterdiag validate`` on the simulator: a planted fault opens an incident, the
validation its fault class declares fails with the figure while the fault is there, and
passes once it is cleared (a recheck only after its hold-down: the clock is injected)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from clusterdiag.agent.base.errors import ConfigError, ExitCode, UsageError
from clusterdiag.agent.cli import cli
from clusterdiag.agent.health import store
from clusterdiag.agent.health.incident import incident_from
from clusterdiag.agent.health.lifecycle import Health, Incident, Result, State
from clusterdiag.agent.qualify.run import QualifyOptions, qualify
from clusterdiag.agent.qualify.validate import Request, validate
from clusterdiag.agent.run import session
from clusterdiag.agent.run.runner import run_node
from clusterdiag.agent.sim.tools import simulated_cluster
from clusterdiag.checks.core.finding import Finding, Status

T0 = 1_000_000.0


def _spec(tmp_path: Path, name: str, faults: list[dict[str, Any]]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"names": "n1", "profile": "dgx-h100"}],
                                    "faults": faults}))
    return str(path)


def _drained_by(tmp_path: Path, finding: Finding) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    health = Health()
    health.drain(incident_from(finding, T0))
    store.save(state, health)
    return state


def _validate(state: Path, spec: str, now: float, release: bool = False) -> Any:
    return validate(Request(state, "n1", spec, release=release, clock=lambda: now),
                    session.load(None))


def test_a_service_down_is_rechecked_and_returns_only_after_the_hold_down(
        tmp_path: Path) -> None:
    planted = _spec(tmp_path, "planted", [{"node": "n1", "kind": "fabric_manager_down"}])
    cleared = _spec(tmp_path, "cleared", [])
    config = session.load(None)
    report = run_node(session.source_env(config, None, None, planted, "n1"), config,
                      session.run_options(config, None, None, None, "fabric.manager"))
    fail = next(f for f in report.findings if f.status is Status.FAIL)
    state = _drained_by(tmp_path, fail)

    answer = _validate(state, planted, T0 + 60)
    assert (answer.exit_code, answer.outcome.result) == (ExitCode.FAIL, Result.FAILED)
    assert "fabric.manager node failed/dead" in answer.outcome.detail
    answer = _validate(state, cleared, T0 + 599)
    assert (answer.exit_code, answer.outcome.result) == (ExitCode.FAIL, Result.WAITING)
    assert store.load(state).state is State.DRAINED
    answer = _validate(state, cleared, T0 + 600)
    assert (answer.exit_code, answer.outcome.result) == (ExitCode.READY, Result.PASSED)
    saved = store.load(state)
    assert (saved.state, saved.open, saved.totals) == (State.HEALTHY, None,
                                                       {"fabric.manager": 1})


def test_a_sites_hold_down_for_the_family_is_the_one_waited_for(tmp_path: Path) -> None:
    planted = _spec(tmp_path, "planted", [{"node": "n1", "kind": "fabric_manager_down"}])
    cleared = _spec(tmp_path, "cleared", [])
    config = session.load(None)
    report = run_node(session.source_env(config, None, None, planted, "n1"), config,
                      session.run_options(config, None, None, None, "fabric.manager"))
    state = _drained_by(tmp_path, next(f for f in report.findings if f.status is Status.FAIL))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"health": {"hold_down_s": {"fabric.manager": 20}}}))
    short = session.load(path)
    answer = validate(Request(state, "n1", cleared, clock=lambda: T0 + 19), short)
    assert (answer.outcome.result, answer.outcome.detail) == (
        Result.WAITING, "the check passes; its hold-down of 20 s ends in 1 s")
    answer = validate(Request(state, "n1", cleared, clock=lambda: T0 + 20), short)
    assert answer.outcome.result is Result.PASSED


@pytest.mark.parametrize(("given", "said"), [
    ({"fabric.manger": 20}, r"'health\.hold_down_s\.fabric\.manger' \(did you mean "
                            r"'health\.hold_down_s\.fabric\.manager'\?\)"),
    ({"fabric.manager": -1}, r"'health\.hold_down_s\.fabric\.manager' must be"),
    ({"fabric.manager": "10m"}, r"'health\.hold_down_s\.fabric\.manager' must be a number")])
def test_a_hold_down_names_a_check_and_seconds(tmp_path: Path, given: dict[str, Any],
                                               said: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"health": {"hold_down_s": given}}))
    with pytest.raises(ConfigError, match=said):
        session.load(path)


def test_a_slow_gpu_is_validated_by_its_qualify_test_with_the_figure(tmp_path: Path) -> None:
    planted = _spec(tmp_path, "planted", [{"node": "n1", "kind": "gpu_slow", "gpu": 2}])
    cleared = _spec(tmp_path, "cleared", [])
    config = session.load(None)
    sims, runner = simulated_cluster(planted)
    outcome = qualify(["n1"], runner, {"n1": sims["n1"].profile}, QualifyOptions(
        frozenset({"gpu_compute"}), settings=dict(config.section("qualify"))))
    fail = next(f for f in outcome.judgement.findings["n1"] if f.status is Status.FAIL)
    state = _drained_by(tmp_path, fail)
    assert store.load(state).open == Incident("qualify.gpu_compute", "qualify.gpu_compute",
                                              "gpu2", fail.brief(), T0)

    answer = _validate(state, planted, T0 + 1)
    assert (answer.exit_code, answer.outcome.result) == (ExitCode.FAIL, Result.FAILED)
    assert "qualify.gpu_compute gpu2" in answer.outcome.detail
    assert "observed 4" in answer.outcome.detail
    assert "peers_median" in answer.outcome.detail
    assert store.load(state).state is State.DRAINED
    answer = _validate(state, cleared, T0 + 2)  # no hold-down: the test is the evidence
    assert (answer.exit_code, answer.outcome.result) == (ExitCode.READY, Result.PASSED)
    assert store.load(state).state is State.HEALTHY


def test_a_reset_class_xid_needs_the_reset_seen_then_the_burn_and_hbm(tmp_path: Path) -> None:
    planted = _spec(tmp_path, "planted", [{"node": "n1", "kind": "xid_reset_gpu", "gpu": 1}])
    state = _drained_by(tmp_path, Finding(Status.FAIL, "gpu1", "Xid 79", check="gpu.xid"))
    answer = _validate(state, planted, T0 + 1)
    assert answer.outcome.result is Result.FAILED
    assert "gpu.xid gpu1" in answer.outcome.detail
    answer = _validate(state, _spec(tmp_path, "cleared", []), T0 + 2)
    assert answer.outcome.result is Result.PASSED
    assert answer.outcome.detail == "gpu_compute, hbm passed"


def test_what_cannot_run_is_our_trouble_never_a_fail(tmp_path: Path) -> None:
    state = _drained_by(tmp_path, Finding(Status.FAIL, "node", "x", check="gone.check"))
    answer = _validate(state, _spec(tmp_path, "cleared", []), T0 + 1)
    assert (answer.exit_code, answer.outcome.result) == (ExitCode.COLLECT, Result.ERROR)
    saved = store.load(state)
    assert (saved.state, saved.totals) == (State.DRAINED, {"gone.check": 1})


def test_a_held_node_waits_for_release(tmp_path: Path) -> None:
    state = _drained_by(tmp_path, Finding(Status.FAIL, "node", "x", check="fabric.manager"))
    health = store.load(state)
    health.hold(T0 + 1)
    store.save(state, health)
    cleared = _spec(tmp_path, "cleared", [])
    answer = _validate(state, cleared, T0 + 900)
    assert (answer.exit_code, answer.outcome) == (ExitCode.FAIL, None)
    assert "held for repair" in answer.message
    answer = _validate(state, cleared, T0 + 900, release=True)
    assert (answer.exit_code, answer.health.state) == (ExitCode.READY, State.HEALTHY)


@pytest.mark.parametrize(("body", "code", "said"), [
    (None, ExitCode.READY, "healthy: no open incident to validate"),
    (b"{garbage", ExitCode.READY, "healthy: no open incident to validate"),
])
def test_the_command_says_the_outcome_and_exits_with_it(
        tmp_path: Path, body: bytes | None, code: int, said: str) -> None:
    if body is not None:
        (tmp_path / store.NAME).write_bytes(body)
    result = CliRunner().invoke(cli, ["validate", "--simulate", "dgx-h100", "--state-dir",
                                      str(tmp_path)])
    assert (result.exit_code, result.output.strip()) == (code, said)


def test_release_of_a_node_not_held_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not held for repair"):
        _validate(tmp_path, _spec(tmp_path, "cleared", []), T0, release=True)
