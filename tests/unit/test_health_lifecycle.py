"""The health lifecycle (agent/health/lifecycle.py) and its state file (store.py): only
the declared moves, a bounded incident history, and a hostile file never trusted."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from clusterdiag.agent.health import store
from clusterdiag.agent.health.lifecycle import (
    MAX_AGE_S,
    MAX_INCIDENTS,
    Basis,
    Health,
    Incident,
    Outcome,
    Reading,
    Result,
    State,
    TransitionError,
)


def _incident(at: float, family: str = "nvlink") -> Incident:
    return Incident(family, "nvlink.error_rate", "gpu3", "crc 12/s", at)


def test_the_way_back_goes_through_validation() -> None:
    health = Health()
    health.drain(_incident(100.0))
    assert (health.state, health.since, health.open) == (State.DRAINED, 100.0, _incident(100.0))
    health.start(200.0)
    health.finish(Outcome(Result.FAILED, "crc 9/s", 300.0))
    assert health.state is State.DRAINED
    assert health.open is not None
    health.start(400.0)
    health.finish(Outcome(Result.PASSED, "passed", 500.0))
    assert (health.state, health.open, health.last) == (
        State.HEALTHY, None, Outcome(Result.PASSED, "passed", 500.0))


@pytest.mark.parametrize("moves", [
    ["start"],  # healthy -> validating
    ["drain", "finish"],  # drained -> healthy, skipping validation
    ["drain", "hold", "finish"],  # held -> healthy
    ["drain", "drain"],  # drained twice
    ["hold"],  # healthy -> held
])
def test_any_other_move_is_refused(moves: list[str]) -> None:
    health = Health()
    do = {"start": lambda: health.start(1.0), "hold": lambda: health.hold(1.0),
          "drain": lambda: health.drain(_incident(1.0)),
          "finish": lambda: health.finish(Outcome(Result.PASSED, "", 1.0))}
    for move in moves[:-1]:
        do[move]()
    before = store.to_dict(health)
    with pytest.raises(TransitionError):
        do[moves[-1]]()
    assert store.to_dict(health) == before


def test_a_held_node_is_released_into_validation_only() -> None:
    health = Health()
    health.drain(_incident(1.0))
    health.hold(2.0)
    health.start(3.0)
    assert health.state is State.VALIDATING


def test_incidents_are_bounded_and_the_totals_only_grow() -> None:
    health = Health()
    for n in range(100):
        health.drain(_incident(float(n), "nvlink" if n % 2 else "ib_port"))
        health.start(n + 0.5)
        health.finish(Outcome(Result.PASSED, "", n + 0.6))
    assert len(health.incidents) == MAX_INCIDENTS
    assert health.totals == {"nvlink": 50, "ib_port": 50}
    assert health.count("nvlink", 10.0, 99.0) == 6  # the odd ones of 89 to 99
    late = 99.0 + MAX_AGE_S + 1
    health.drain(_incident(late))
    assert health.incidents == [_incident(late)]
    assert health.totals["nvlink"] == 51


def test_the_file_round_trips(tmp_path: Path) -> None:
    health = Health()
    health.drain(_incident(10.0))
    health.start(20.0)
    health.finish(Outcome(Result.ERROR, "nvbandwidth not found", 30.0))
    store.save(tmp_path, health)
    assert store.load(tmp_path) == health


def _valid() -> dict[str, object]:
    health = Health()
    health.drain(_incident(10.0))
    return store.to_dict(health)


READING = Reading("qualify.gpu_compute", "gpu2", "GPU compute throughput more than 10 % "
                  "below peers", 43004.0, 53567.5, "Gflop/s", Basis.PEERS)


def _failed() -> dict[str, object]:
    health = Health()
    health.drain(_incident(10.0))
    health.start(20.0)
    health.finish(Outcome(Result.FAILED, "the full text", 30.0, READING))
    return store.to_dict(health)


def test_a_failures_figure_round_trips(tmp_path: Path) -> None:
    health = store.from_dict(_failed())
    assert health.last == Outcome(Result.FAILED, "the full text", 30.0, READING)
    store.save(tmp_path, health)
    assert store.load(tmp_path) == health
    older = _failed()
    del older["last"]["reading"]  # type: ignore[attr-defined]  # written before figures
    assert store.from_dict(older).last == Outcome(Result.FAILED, "the full text", 30.0)


def _reading(**changed: object) -> bytes:
    data = _failed()
    data["last"] = {**data["last"], "reading": {  # type: ignore[dict-item]
        **data["last"]["reading"], **changed}}  # type: ignore[index]
    return json.dumps(data).encode()


@pytest.mark.parametrize("body", [
    b"{not json", b"[]", b'{"version": 2}',
    json.dumps({**_valid(), "state": "resting"}).encode(),
    json.dumps({**_valid(), "open": None}).encode(),  # drained without an incident
    json.dumps({**_valid(), "since": float("inf")}).encode().replace(b"Infinity", b"1e999"),
    json.dumps({**_valid(), "incidents": [_valid()["open"]] * (MAX_INCIDENTS + 1)}).encode(),
    json.dumps({**_valid(), "totals": {"nvlink": -1}}).encode(),
    json.dumps({**_valid(), "open": {**_valid()["open"], "check": "x" * 500}}).encode(),  # type: ignore[dict-item]
    b"[" * 100_000 + b"]" * 100_000,
    _reading(unit="GB/s (+9 more)"), _reading(basis="gut feeling"), _reading(observed="1"),
    _reading(expected=1e300), _reading(observed=True), _reading(message="x" * 600),
    _reading(component=None), json.dumps({**_failed(), "last": {
        **_failed()["last"], "reading": []}}).encode(),  # type: ignore[dict-item]
])
def test_a_corrupt_file_is_set_aside_logged_and_a_fresh_state(
        tmp_path: Path, body: bytes, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / store.NAME).write_bytes(body)
    with caplog.at_level(logging.ERROR, "clusterdiag.health"):
        assert store.load(tmp_path) == Health()
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["health_state_corrupt"]
    assert str(tmp_path / store.NAME) in caplog.records[0].getMessage()
    assert not (tmp_path / store.NAME).exists()
    assert len(list(tmp_path.glob(f"{store.NAME}.corrupt-*"))) == 1


def test_a_link_a_fifo_or_a_huge_file_is_not_read(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_bytes(store.body(Health(State.HELD, 1.0, _incident(1.0))))
    path = tmp_path / store.NAME
    for plant in (lambda: path.symlink_to(target), lambda: os.mkfifo(path),
                  lambda: path.write_bytes(b" " * (store.MAX_BYTES + 1))):
        plant()
        with caplog.at_level(logging.ERROR, "clusterdiag.health"):
            assert store.load(tmp_path) == Health()
        path.unlink()
    assert len(caplog.records) == 3


def test_hostile_text_is_kept_inert(tmp_path: Path) -> None:
    data = _valid()
    data["open"] = {**data["open"], "evidence": "\x1b]0;owned\x07 \u202e"}  # type: ignore[dict-item]
    data["incidents"] = [data["open"]]
    (tmp_path / store.NAME).write_text(json.dumps(data))
    loaded = store.load(tmp_path)
    assert loaded.open is not None
    assert loaded.open.evidence.isprintable()


def test_the_agents_view_follows_the_file(tmp_path: Path) -> None:
    view = store.HealthFile(tmp_path)
    assert view.current() == Health()
    health = Health()
    health.drain(_incident(5.0))
    store.save(tmp_path, health)
    assert view.current() == health
    (tmp_path / store.NAME).write_text("garbage, and longer than before")
    assert view.current() == Health()
    assert (tmp_path / store.NAME).exists()  # the agent only reads
