"""A failed validation's figure in the drain reason (agent/slurm/way_back.py, ``_failed``):
the observed value, the comparison and the expected value with its unit and basis always
fit within the reason's limit, the message dropped first, hostile text inert; the figures
are the simulator's, through ``clusterdiag validate`` (agent/qualify/validate.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterdiag.agent.health import store
from clusterdiag.agent.health.lifecycle import (
    Basis,
    Health,
    Incident,
    Outcome,
    Reading,
    Result,
)
from clusterdiag.agent.qualify.validate import Request, validate
from clusterdiag.agent.run import session
from clusterdiag.agent.slurm.reason import MAX_LENGTH, MAX_WORD, Verb, parse
from clusterdiag.agent.slurm.scontrol import NodeState
from clusterdiag.agent.slurm.way_back import Policy, plan
from clusterdiag.checks.qualify.active import ACTIVE_TESTS

T0 = 1_000_000.0


def _failed(incident: Incident, reading: Reading, reason: str) -> str:
    """The reason the health check sets on a drained node whose validation failed."""
    health = Health()
    health.drain(incident)
    health.start(T0 + 1)
    health.finish(Outcome(Result.FAILED, "the full text", T0 + 2, reading))
    step = plan(NodeState("n1", "IDLE+DRAIN", reason), health, False, Policy(), T0 + 3)
    assert step.reason is not None
    return step.reason


@pytest.mark.parametrize(("test", "component", "fault", "said"), [
    ("gpu_compute", "gpu2", {"kind": "gpu_slow", "gpu": 2},
     "clusterdiag: qualify gpu_compute gpu2 GPU compute throughput more than 10 % below "
     "peers: 43004 < 53568 Gflop/s (peers median)"),
    ("hbm", "gpu5", {"kind": "hbm_slow", "gpu": 5},
     "clusterdiag: qualify hbm gpu5 GPU memory copy bandwidth more than 10 % below peers: "
     "1159 < 1449 GB/s (peers median)"),
    ("nic", "mlx5_4/1", {"kind": "rail_slow", "hca": "mlx5_4"},
     "clusterdiag: qualify nic mlx5_4/1 321 < 380 Gb/s (floor)"),
    ("allreduce", "node", {"kind": "nvlink_slow", "gpu": 3},
     "clusterdiag: qualify allreduce node 381 < 460 GB/s (floor)")])
def test_a_failed_validations_figure_is_in_the_reason_whole(
        tmp_path: Path, test: str, component: str, fault: dict[str, Any], said: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"nodes": [{"names": "n1", "profile": "dgx-h100"}],
                                    "faults": [{"node": "n1", **fault}]}))
    state = tmp_path / "state"
    state.mkdir()
    health = Health()
    health.drain(Incident(f"qualify.{test}", f"qualify.{test}", component, "x", T0))
    store.save(state, health)
    answer = validate(Request(state, "n1", str(spec), clock=lambda: T0 + 1), session.load(None))
    assert answer.outcome is not None
    assert answer.outcome.result is Result.FAILED
    assert "; expected {" in answer.outcome.detail  # the full account stays in health.json
    step = plan(NodeState("n1", "IDLE+DRAIN", f"clusterdiag: qualify {test} {component} x"),
                store.load(state), False, Policy(), T0 + 2)
    assert step.reason == said


@pytest.mark.parametrize("test", sorted(ACTIVE_TESTS))
def test_the_figure_fits_beside_the_longest_component(test: str) -> None:
    component = ",".join(f"gpu{n}" for n in range(8)) + "x"  # the longest word kept: 40
    assert len(component) == MAX_WORD
    incident = Incident(test, f"qualify.{test}", component, "x", T0)
    reading = Reading(f"qualify.{test}", component, "a message far too long to fit " * 4,
                      987654.3, 1234567.8, "Gflop/s", Basis.PEERS)
    text = _failed(incident, reading, f"clusterdiag: qualify {test} {component} x")
    assert len(text) <= MAX_LENGTH
    assert text == f"clusterdiag: qualify {test} {component} 987654 < 1234568 Gflop/s " \
                   "(peers median)"


def test_a_figure_of_another_test_or_part_names_it() -> None:
    reading = Reading("qualify.hbm", "gpu5", "GPU memory copy bandwidth more than 10 % "
                      "below peers", 1158.51, 1449.07, "GB/s", Basis.PEERS)
    xid = Incident("gpu.xid", "gpu.xid", "gpu1", "Xid 79", T0)
    assert _failed(xid, reading, "clusterdiag: epilog gpu.xid gpu1 Xid 79") == (
        "clusterdiag: epilog gpu.xid gpu1 qualify.hbm gpu5 1159 < 1449 GB/s (peers median)")
    node = Incident("qualify.hbm", "qualify.hbm", "node", "x", T0)
    assert _failed(node, reading, "clusterdiag: qualify hbm node x").endswith(
        "hbm node gpu5 GPU memory copy bandwidth more than 10 % below peers: 1159 < 1449 "
        "GB/s (peers median)")


@pytest.mark.parametrize(("observed", "expected", "figure"), [
    (459.96, 460.0, "459.96 < 460"), (99.996, 100.0, "99.996 < 100"),
    (0.5, 0.25, "0.5 > 0.25"), (12.0, 12.0, "12 = 12"), (43004.0, 53567.5, "43004 < 53568")])
def test_the_figures_keep_their_order_in_few_digits(observed: float, expected: float,
                                                     figure: str) -> None:
    reading = Reading("qualify.nic", "mlx5_0/1", "", observed, expected, "Gb/s", Basis.FLOOR)
    incident = Incident("qualify.nic", "qualify.nic", "mlx5_0/1", "x", T0)
    text = _failed(incident, reading, "clusterdiag: qualify nic mlx5_0/1 x")
    assert text == f"clusterdiag: qualify nic mlx5_0/1 {figure} Gb/s (floor)"


def test_hostile_text_in_the_figure_is_inert_and_bounded() -> None:
    message = 'x" \x1b]0;owned\x07\n\u202e $(reboot) (+9 more)' * 40
    reading = Reading("qualify.gpu_compute", "gpu2\n(+3 more)", message, 1.0, 2.0, "GB/s",
                      Basis.EXPECTED)
    incident = Incident("qualify.gpu_compute", "qualify.gpu_compute", "gpu2", "x", T0)
    text = _failed(incident, reading, "clusterdiag: qualify gpu_compute gpu2 x")
    assert len(text) <= MAX_LENGTH
    assert text.isprintable()
    assert '"' not in text
    back = parse(text)
    assert back is not None
    assert (back.verb, back.check, back.component, back.more) == (Verb.QUALIFY, "gpu_compute",
                                                                  "gpu2", 0)
    assert back.detail == "gpu2_(+3_more) 1 < 2 GB/s (expected)"


@pytest.mark.parametrize(("unit", "observed"), [
    ("GB/s (+9 more)", 1.0), ('x"', 1.0), ("", 1.0), ("GB/s", float("nan")),
    ("GB/s", float("inf")), ("GB/s", 1e300), ("GB/s", True)])
def test_a_reading_refuses_what_is_not_a_unit_or_a_figure(unit: str, observed: Any) -> None:
    with pytest.raises(ValueError, match="not a"):
        Reading("qualify.hbm", "gpu0", "", observed, 1.0, unit, Basis.PEERS)
