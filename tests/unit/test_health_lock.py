"""The validation lock (agent/health/lock.py) and what honours it: ``clusterdiag validate``
runs under it (or under the one a health check handed down) and never beside another; the
lifecycle keeps its count of errored tries and the health check's question on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterdiag.agent.base.errors import CollectError, ConfigError
from clusterdiag.agent.health import lock, store
from clusterdiag.agent.health.lifecycle import Asked, Health, Incident, Outcome, Result
from clusterdiag.agent.qualify.validate import Request, validate
from clusterdiag.agent.run import session

T0 = 1_000_000.0


def _drained(state: Path) -> Health:
    health = Health()
    health.drain(Incident("fabric.manager", "fabric.manager", "node", "failed", T0))
    store.save(state, health)
    return health


def test_one_holder_at_a_time_and_the_prolog_sees_it(tmp_path: Path) -> None:
    assert not lock.running(tmp_path)
    fd = lock.take(tmp_path)
    assert fd is not None
    try:
        assert lock.take(tmp_path) is None
        assert lock.running(tmp_path)
    finally:
        os.close(fd)
    assert not lock.running(tmp_path)


def test_a_link_is_no_lock(tmp_path: Path) -> None:
    (tmp_path / lock.NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="link"):
        lock.take(tmp_path)
    assert not lock.running(tmp_path)


def test_validate_never_runs_beside_another_and_leaves_the_lifecycle_alone(
        tmp_path: Path) -> None:
    _drained(tmp_path)
    before = (tmp_path / store.NAME).read_bytes()
    fd = lock.take(tmp_path)
    assert fd is not None
    try:
        with pytest.raises(CollectError, match="already running"):
            validate(Request(tmp_path, "n1", "dgx-h100", clock=lambda: T0 + 60),
                     session.load(None))
    finally:
        os.close(fd)
    assert (tmp_path / store.NAME).read_bytes() == before


def test_validate_runs_under_the_lock_a_health_check_handed_down(tmp_path: Path) -> None:
    _drained(tmp_path)
    fd = lock.take(tmp_path)
    assert fd is not None
    answer = validate(Request(tmp_path, None, "dgx-h100", clock=lambda: T0 + 60, lock_fd=fd),
                      session.load(None))
    assert answer.outcome is not None
    assert answer.outcome.result is Result.WAITING
    assert not lock.running(tmp_path)  # released with the run


def test_a_descriptor_that_is_not_the_lock_is_refused(tmp_path: Path) -> None:
    _drained(tmp_path)
    other = os.open(tmp_path / store.NAME, os.O_RDONLY)
    (tmp_path / lock.NAME).touch()
    with pytest.raises(CollectError, match="not the validation lock"):
        validate(Request(tmp_path, "n1", "dgx-h100", lock_fd=other), session.load(None))


def test_errored_tries_and_the_question_survive_a_restart(tmp_path: Path) -> None:
    health = _drained(tmp_path)
    health.asked = Asked(T0 + 5, True)
    health.start(T0 + 5)
    health.finish(Outcome(Result.ERROR, "nvbandwidth: not found", T0 + 6))
    store.save(tmp_path, health)
    again = store.load(tmp_path)
    assert (again.errors, again.asked) == (1, Asked(T0 + 5, True))


@pytest.mark.parametrize("field", [{"errors": -1}, {"errors": True}, {"asked": {"at": 1}},
                                   {"asked": {"at": -1, "idle": False}}])
def test_a_planted_count_or_question_is_corrupt(tmp_path: Path, field: dict[str, object]
                                                ) -> None:
    _drained(tmp_path)
    data = json.loads((tmp_path / store.NAME).read_text())
    (tmp_path / store.NAME).write_text(json.dumps({**data, **field}))
    assert store.load(tmp_path).open is None  # set aside, healthy
    assert list(tmp_path.glob(f"{store.NAME}.corrupt-*"))


def test_the_fallback_is_one_of_its_words(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"health": {"on_validation_error": "resume"}}))
    with pytest.raises(ConfigError, match=r"health\.on_validation_error' must be recheck or hold"):
        session.load(path)
    path.write_text(json.dumps({"health": {"on_validation_error": "hold",
                                           "validation_tries": 5}}))
    health = session.load(path).section("health")
    assert (health["on_validation_error"], health["validation_tries"]) == ("hold", 5)
