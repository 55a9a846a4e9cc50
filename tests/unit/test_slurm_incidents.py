"""The gate's drains in the node's lifecycle (agent/slurm/incidents.py, through
entry.drain): a drain that happened opens an incident, one that did not (an operator's
reason kept, already drained with it) records nothing; the third strike holds the node
with the ``repair`` reason; a fleet event and an unknown fleet are no strike; the open
breaker stops the health check's drains; our own trouble never changes the drain."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from clusterdiag import checks
from clusterdiag.agent.health import store
from clusterdiag.agent.health.lifecycle import Health, Incident, Outcome, Result, State
from clusterdiag.agent.settings.config import load_config
from clusterdiag.agent.slurm import entry, healthcheck, incidents
from clusterdiag.agent.slurm.reason import Lift, Reason, Verb, parse, write
from clusterdiag.agent.slurm.scontrol import NodeState, SlurmError

CATALOG = {spec.id: spec.schema for spec in checks.REGISTRY.values()}
REASON = Reason(Verb.NONE, "nvlink.error_rate", "gpu3", "crc 12/s")


class FakeSlurm:
    """``show_node``/``show_nodes``/``drain`` on a dict of nodes; ``fleet_error`` makes the
    whole-fleet call fail."""

    def __init__(self, nodes: int = 20) -> None:
        self.nodes = {f"n{i}": NodeState(f"n{i}", "IDLE", None) for i in range(nodes)}
        self.fleet_error = False
        self.drains: list[tuple[str, str]] = []

    def show_node(self, name: str) -> NodeState:
        return self.nodes[name]

    def show_nodes(self) -> list[NodeState]:
        if self.fleet_error:
            raise SlurmError("scontrol show node: no answer within 3 s")
        return list(self.nodes.values())

    def drain(self, name: str, reason: str) -> None:
        self.drains.append((name, reason))
        self.nodes[name] = NodeState(name, "IDLE+DRAIN", reason, time.time())

    def resume(self, name: str) -> None:
        self.nodes[name] = NodeState(name, "IDLE", None)


class FakeRun:
    def __init__(self, slurm: FakeSlurm, state: Path, program: str = "prolog",
                 node: str = "n0", **health: Any) -> None:
        path = state.parent / f"config-{program}.json"
        path.write_text(json.dumps({"agent": {"state_dir": str(state)}, "health": health}))
        self.config = load_config(path, CATALOG)
        self.program = program
        self.node = node
        self.slurm = slurm
        self.lines: list[str] = []

    def scontrol(self) -> FakeSlurm:
        return self.slurm

    def log(self, event: str, **fields: Any) -> None:
        self.lines.append(f"{event} {fields}")


def _drain(run: FakeRun, reason: Reason = REASON) -> None:
    entry.drain(run, write(reason), reason)  # type: ignore[arg-type]
    run.slurm.resume(run.node)  # the way back is not under test here


def _saved(state: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((state / store.NAME).read_text())
    return data


def test_a_drain_opens_an_incident_with_the_figure(tmp_path: Path) -> None:
    run = FakeRun(FakeSlurm(), tmp_path)
    before = time.time()
    entry.drain(run, write(REASON), REASON)  # type: ignore[arg-type]
    health = store.load(tmp_path)
    assert health.state is State.DRAINED
    assert health.open is not None
    assert (health.open.family, health.open.check, health.open.component,
            health.open.evidence, health.open.fleet) == (
        "nvlink", "nvlink.error_rate", "gpu3", "crc 12/s", False)
    assert before <= health.open.at <= time.time()


def test_a_drain_that_did_not_happen_records_nothing(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    slurm.nodes["n0"] = NodeState("n0", "IDLE+DRAIN", "op: bad fan", 1.0)
    run = FakeRun(slurm, tmp_path)
    entry.drain(run, write(REASON), REASON)  # type: ignore[arg-type]
    assert not (tmp_path / store.NAME).exists()
    slurm.nodes["n0"] = NodeState("n0", "IDLE+DRAIN", write(REASON), 1.0)
    entry.drain(run, write(REASON), REASON)  # type: ignore[arg-type]
    assert not (tmp_path / store.NAME).exists()
    assert slurm.drains == []


def test_the_same_fault_drained_again_with_a_new_figure_is_no_new_strike(
        tmp_path: Path) -> None:
    slurm = FakeSlurm()
    run = FakeRun(slurm, tmp_path, program="healthcheck")
    for figure in ("crc 12/s", "crc 14/s", "crc 19/s"):
        reason = Reason(Verb.NONE, "nvlink.error_rate", "gpu3", figure)
        entry.drain(run, write(reason), reason)  # type: ignore[arg-type]
    assert len(slurm.drains) == 3
    assert len(store.load(tmp_path).incidents) == 1


def test_the_third_strike_holds_the_node_for_repair(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    run = FakeRun(slurm, tmp_path)
    _drain(run)
    _drain(run)
    assert store.load(tmp_path).state is State.DRAINED
    entry.drain(run, write(REASON), REASON)  # type: ignore[arg-type]
    held = "clusterdiag: repair nvlink.error_rate gpu3 (3 drains in 7 d)"
    assert slurm.drains[-1] == ("n0", held)
    assert slurm.nodes["n0"].reason == held
    parsed = parse(held)
    assert parsed is not None
    assert (parsed.verb, parsed.lift) == (Verb.REPAIR, Lift.PERSON)
    assert store.load(tmp_path).state is State.HELD
    assert any(line.startswith("held for repair") for line in run.lines)


def test_a_fleet_event_is_recorded_but_is_no_strike(tmp_path: Path) -> None:
    slurm = FakeSlurm(20)
    for i in (1, 2):  # with this node, 3 of 20 drained for the check: over a tenth
        slurm.nodes[f"n{i}"] = NodeState(f"n{i}", "IDLE+DRAIN", write(REASON), time.time())
    run = FakeRun(slurm, tmp_path)
    for _ in range(3):
        _drain(run)
    health = store.load(tmp_path)
    assert [i.fleet for i in health.incidents] == [True] * 3
    assert health.state is State.DRAINED
    assert all("repair" not in reason for _, reason in slurm.drains)


def test_when_the_fleet_cannot_be_read_the_drain_stands_and_is_no_strike(
        tmp_path: Path) -> None:
    slurm = FakeSlurm()
    slurm.fleet_error = True
    run = FakeRun(slurm, tmp_path, program="healthcheck")
    for _ in range(3):
        _drain(run)
    assert slurm.drains == [("n0", write(REASON))] * 3
    health = store.load(tmp_path)
    assert [i.fleet for i in health.incidents] == [None] * 3
    assert health.state is State.DRAINED
    assert any(line.startswith("ERROR could not read the fleet") for line in run.lines)


def test_the_open_breaker_stops_the_health_checks_drains_not_the_prologs(
        tmp_path: Path) -> None:
    slurm = FakeSlurm(10)
    other = Reason(Verb.NONE, "gpu.temperature", "gpu0", "95 C")
    for i in (1, 2, 3):  # 3 of 10 drained by clusterdiag: over a fifth
        slurm.nodes[f"n{i}"] = NodeState(f"n{i}", "IDLE+DRAIN", write(other), 1.0)
    check = FakeRun(slurm, tmp_path, program="healthcheck")
    entry.drain(check, write(REASON), REASON)  # type: ignore[arg-type]
    assert slurm.drains == []
    assert any(line.startswith("ERROR circuit breaker open: 3 of 10 nodes drained by "
                               "clusterdiag (30%, over 20%)") for line in check.lines)
    prolog = FakeRun(slurm, tmp_path)
    for _ in range(3):
        _drain(prolog)
    assert slurm.drains == [("n0", write(REASON))] * 3  # drained, never held
    assert store.load(tmp_path).state is State.DRAINED
    assert any("not holding for repair" in line for line in prolog.lines)


def test_a_state_file_that_cannot_be_written_never_changes_the_drain(
        tmp_path: Path) -> None:
    slurm = FakeSlurm()
    run = FakeRun(slurm, tmp_path / "missing")
    entry.drain(run, write(REASON), REASON)  # type: ignore[arg-type]
    assert slurm.drains == [("n0", write(REASON))]
    assert any(line.startswith("ERROR could not record the drain") for line in run.lines)


def test_a_hostile_state_file_is_set_aside_and_the_drain_recorded(tmp_path: Path) -> None:
    (tmp_path / store.NAME).write_text('{"version": 1, "state": "held", "open": 7}')
    run = FakeRun(FakeSlurm(), tmp_path)
    entry.drain(run, write(REASON), REASON)  # type: ignore[arg-type]
    assert store.load(tmp_path).state is State.DRAINED
    assert list(tmp_path.glob(f"{store.NAME}.corrupt-*"))


def test_our_own_trouble_and_a_qualify_test_name_the_incidents_check() -> None:
    assert incidents.incident_check(Reason(Verb.ERROR, None, detail="x")) is None
    assert incidents.incident_check(parse("clusterdiag: qualify nic mlx5_4/1 321.9 Gb/s")) \
        == "qualify.nic"
    assert incidents.incident_check(parse("clusterdiag: epilog gpu.xid gpu1 Xid 79")) \
        == "gpu.xid"


@pytest.mark.parametrize("program", ["prolog", "epilog", "healthcheck"])
def test_a_held_nodes_repair_reason_is_kept_by_every_program(tmp_path: Path,
                                                            program: str) -> None:
    slurm = FakeSlurm()
    held = "clusterdiag: repair nvlink.error_rate gpu3 (3 drains in 7 d)"
    slurm.nodes["n0"] = NodeState("n0", "IDLE+DRAIN", held, 1.0)
    entry.drain(FakeRun(slurm, tmp_path, program=program), write(REASON),  # type: ignore[arg-type]
                REASON)
    assert slurm.drains == []


HELD = "clusterdiag: repair nvlink.error_rate gpu3 (3 drains in 7 d)"
T = 1_000_000.0


def _held_on_a_fleet_event(tmp_path: Path) -> tuple[FakeSlurm, FakeRun]:
    """n0 held at its third drain, which was the first of a fleet event: 19 more of the
    64 nodes were drained for the same check within the minute after it."""
    slurm = FakeSlurm(64)
    run = FakeRun(slurm, tmp_path, program="healthcheck")
    for at in (T - 2 * 86_400, T - 86_400, T):
        slurm.nodes["n0"] = NodeState("n0", "IDLE", None)
        entry.drain(run, write(REASON), REASON, clock=lambda at=at: at)  # type: ignore[arg-type,misc]
    assert (store.load(tmp_path).state, slurm.nodes["n0"].reason) == (State.HELD, HELD)
    for i in range(1, 20):
        slurm.nodes[f"n{i}"] = NodeState(f"n{i}", "IDLE+DRAIN", write(REASON), T + 3 * i)
    return slurm, run


def test_the_health_check_undoes_a_hold_its_fleet_event_made_and_validates(
        tmp_path: Path) -> None:
    slurm, run = _held_on_a_fleet_event(tmp_path)
    started: list[int] = []

    def start(_run: object, _state_dir: Path, fd: int) -> int:
        started.append(fd)
        return 4242

    healthcheck.way_back(run, slurm, slurm.nodes["n0"], [],  # type: ignore[arg-type]
                         clock=lambda: T + 300, start=start)
    assert slurm.nodes["n0"].reason == write(REASON)
    health = store.load(tmp_path)
    assert health.state is State.DRAINED
    assert [i.fleet for i in health.incidents] == [False, False, True]
    assert health.asked is not None
    assert health.asked.at == T + 300
    assert len(started) == 1
    assert any(line.startswith("no longer held for repair") for line in run.lines)


def test_a_fleet_that_cannot_be_read_leaves_the_hold(tmp_path: Path) -> None:
    slurm, run = _held_on_a_fleet_event(tmp_path)
    slurm.fleet_error = True
    healthcheck.way_back(run, slurm, slurm.nodes["n0"], [],  # type: ignore[arg-type]
                         clock=lambda: T + 300)
    assert (store.load(tmp_path).state, slurm.nodes["n0"].reason) == (State.HELD, HELD)
    assert any(line.startswith("ERROR could not read the fleet from Slurm: the node's "
                               "recent drains") for line in run.lines)


QUALIFY = Reason(Verb.QUALIFY, "gpu_compute", "gpu2", "43004 < 53568 Gflop/s (peers median)")


def _qualify_drained(slurm: FakeSlurm, at: float) -> NodeState:
    """n0 as ``qualify --drain`` leaves it: drained from a head node, which records
    nothing in the node's lifecycle."""
    slurm.nodes["n0"] = NodeState("n0", "IDLE+DRAIN", write(QUALIFY), at)
    return slurm.nodes["n0"]


def _closed(health: Health, at: float) -> None:
    health.drain(Incident("qualify.gpu_compute", "qualify.gpu_compute", "gpu2", "slow", at))
    health.start(at + 60)
    health.finish(Outcome(Result.PASSED, "gpu_compute passed", at + 300))


def _health_check_after_qualify(tmp_path: Path) -> tuple[FakeSlurm, FakeRun]:
    """n0 drained by ``qualify --drain`` at T, and the health check two minutes later."""
    slurm = FakeSlurm()
    run = FakeRun(slurm, tmp_path, program="healthcheck")
    healthcheck.way_back(run, slurm, _qualify_drained(slurm, T), [],  # type: ignore[arg-type]
                         clock=lambda: T + 120, start=lambda *_: 4242)
    return slurm, run


def test_a_qualify_drain_is_recorded_by_the_health_check_as_a_strike(tmp_path: Path) -> None:
    _, run = _health_check_after_qualify(tmp_path)
    health = store.load(tmp_path)
    assert [(i.check, i.at, i.fleet) for i in health.incidents] == [
        ("qualify.gpu_compute", T, False)]
    assert health.state is State.DRAINED
    assert any(line.startswith("validation started") for line in run.lines)


def test_a_third_qualify_drain_holds_the_node_for_repair(tmp_path: Path) -> None:
    slurm = FakeSlurm()
    run = FakeRun(slurm, tmp_path, program="healthcheck")
    health = Health()
    _closed(health, T - 2 * 86_400)
    _closed(health, T - 86_400)
    store.save(tmp_path, health)
    started: list[int] = []
    node = _qualify_drained(slurm, T)
    healthcheck.way_back(run, slurm, node, [],  # type: ignore[arg-type]
                         clock=lambda: T + 120, start=lambda *_: started.append(1) or 4242)
    assert store.load(tmp_path).state is State.HELD
    assert slurm.nodes["n0"].reason == \
        "clusterdiag: repair qualify.gpu_compute gpu2 (3 drains in 7 d)"
    assert not started


def test_a_validated_node_is_resumed_not_recorded_again(tmp_path: Path) -> None:
    slurm, run = _health_check_after_qualify(tmp_path)
    health = store.load(tmp_path)
    health.start(T + 130)
    health.finish(Outcome(Result.PASSED, "gpu_compute passed", T + 400))
    store.save(tmp_path, health)
    healthcheck.way_back(run, slurm, slurm.nodes["n0"], [],  # type: ignore[arg-type]
                         clock=lambda: T + 600, start=lambda *_: 4242)
    assert slurm.nodes["n0"].reason is None
    assert len(store.load(tmp_path).incidents) == 1
