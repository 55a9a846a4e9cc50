"""Strikes, fleet events and the circuit breaker (agent/health/policy.py), driven by an
injected clock: a repeat offender is held at the strike that reaches the limit, a fleet
event or a drain whose fleet is unknown is never a strike, an open breaker holds no one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterdiag.agent.health import policy, store
from clusterdiag.agent.health.lifecycle import Health, Incident, Outcome, Result, State
from clusterdiag.agent.health.policy import Peer, Settings

DAY = 86_400.0
SETTINGS = Settings()


def _incident(at: float, fleet: bool | None = False, family: str = "nvlink",
              check: str = "nvlink.error_rate") -> Incident:
    return Incident(family, check, "gpu3", "crc 12/s", at, fleet)


def _drain(health: Health, incident: Incident, breaker_open: bool = False
           ) -> policy.Decision:
    decision = policy.decide(health, incident, SETTINGS, breaker_open)
    policy.apply(health, incident, decision)
    return decision


def test_the_third_drain_in_seven_days_holds_the_node_with_the_repeated_fault() -> None:
    health = Health()
    assert _drain(health, _incident(0.0)) == policy.Decision(False, 1)
    other = _incident(DAY, check="gpu.temperature", family="thermal_power")
    assert _drain(health, other) == policy.Decision(False, 1)  # another family: no strike
    assert _drain(health, _incident(2 * DAY)) == policy.Decision(False, 2)
    assert health.state is State.DRAINED
    assert health.open == _incident(0.0)  # a node already out keeps its open incident
    third = _incident(6 * DAY)
    assert _drain(health, third) == policy.Decision(True, 3)
    assert (health.state, health.open, health.since) == (State.HELD, third, 6 * DAY)
    assert health.totals == {"nvlink": 3, "thermal_power": 1}


def test_strikes_older_than_the_window_do_not_count() -> None:
    health = Health()
    for day in (0, 8, 16):
        assert not _drain(health, _incident(day * DAY)).hold
    assert health.count("nvlink", SETTINGS.strike_window_s, 16 * DAY) == 1


@pytest.mark.parametrize("fleet", [True, None])
def test_a_fleet_event_or_an_unknown_fleet_is_never_a_strike(fleet: bool | None) -> None:
    health = Health()
    _drain(health, _incident(0.0))
    _drain(health, _incident(60.0))
    decision = _drain(health, _incident(120.0, fleet))
    assert decision == policy.Decision(False, 2)
    assert health.state is State.DRAINED
    assert len(health.incidents) == 3  # recorded all the same
    assert health.count("nvlink", SETTINGS.strike_window_s, 120.0) == 2


def test_an_open_breaker_holds_no_one_but_a_held_node_stays_held() -> None:
    health = Health()
    _drain(health, _incident(0.0))
    _drain(health, _incident(60.0))
    assert _drain(health, _incident(120.0), breaker_open=True) == policy.Decision(False, 3)
    assert health.state is State.DRAINED
    assert _drain(health, _incident(180.0)).hold
    held = health.open
    later = _incident(240.0, check="gpu.temperature", family="thermal_power")
    assert _drain(health, later, breaker_open=True).hold
    assert (health.state, health.open) == (State.HELD, held)


def _fleet(total: int, hits: int, at: float, check: str = "ib.error_rate") -> list[Peer]:
    return [Peer(f"n{i}", i < hits, check if i < hits else None, at if i < hits else None)
            for i in range(total)]


def test_a_fleet_event_is_the_same_check_on_over_a_tenth_of_the_fleet_in_ten_minutes() -> None:
    now = 10_000.0
    assert policy.fleet_event(_fleet(64, 7, now - 500), "ib.error_rate", now, SETTINGS)
    assert not policy.fleet_event(_fleet(64, 6, now - 500), "ib.error_rate", now, SETTINGS)
    assert not policy.fleet_event(_fleet(64, 7, now - 700), "ib.error_rate", now, SETTINGS)
    assert not policy.fleet_event(_fleet(64, 7, now), "nvlink.ber", now, SETTINGS)
    unknown = [Peer(p.name, p.ours, p.check, None) for p in _fleet(64, 30, now)]
    assert not policy.fleet_event(unknown, "ib.error_rate", now, SETTINGS)
    # a lone node on a small fleet is over a tenth of it, and still its own fault
    assert not policy.fleet_event(_fleet(4, 1, now), "ib.error_rate", now, SETTINGS)
    assert policy.fleet_event(_fleet(4, 2, now), "ib.error_rate", now, SETTINGS)


def test_the_breaker_opens_above_a_fifth_of_the_fleet_drained_by_clusterdiag() -> None:
    fleet = [*_fleet(64, 14, 0.0), Peer("me", True, "ib.error_rate", 0.0)]
    tripped = policy.breaker(fleet, "me", SETTINGS)  # the node draining now left out
    assert (tripped.drained, tripped.total, tripped.open) == (14, 65, True)
    assert str(tripped) == "14 of 65 nodes drained by clusterdiag (22%, over 20%)"
    assert not policy.breaker(_fleet(65, 13, 0.0), "me", SETTINGS).open  # 20%: not over
    assert not policy.breaker([], "me", SETTINGS).open


@pytest.mark.parametrize(("seconds", "words"), [
    (7 * DAY, "7 d"), (36 * 3600.0, "36 h"), (5400.0, "90 min"), (45.0, "45 s")])
def test_the_window_in_words(seconds: float, words: str) -> None:
    assert policy.span(seconds) == words


def test_the_fleet_field_round_trips_and_an_old_file_reads_as_the_nodes_own(
        tmp_path: Path) -> None:
    health = Health()
    for fleet in (False, True, None):
        health.record(_incident(1.0, fleet))
    store.save(tmp_path, health)
    saved = json.loads((tmp_path / store.NAME).read_text())
    assert [i["fleet"] for i in saved["incidents"]] == [False, True, "unknown"]
    assert store.load(tmp_path) == health
    for i in saved["incidents"]:
        del i["fleet"]
    assert [i.fleet for i in store.from_dict(saved).incidents] == [False] * 3


@pytest.mark.parametrize("bad", [1, 0, "yes", None, [], "unknown "])
def test_a_fleet_field_that_is_not_ours_makes_the_file_corrupt(bad: object) -> None:
    health = Health()
    health.record(_incident(1.0))
    data = store.to_dict(health)
    data["incidents"][0]["fleet"] = bad
    with pytest.raises(store.Corrupt, match="fleet"):
        store.from_dict(data)


def _peers(others: int, at: float, check: str = "nvlink.error_rate") -> list[Peer]:
    """64 nodes: ``others`` of them (not ``me``) drained by clusterdiag for ``check``."""
    return [Peer("me", True, check, at),
            *(Peer(f"n{i}", i < others, check if i < others else None,
                   at if i < others else None) for i in range(63))]


def test_the_first_drains_of_a_fleet_event_are_no_strike_once_the_event_shows() -> None:
    health = Health()
    _drain(health, _incident(0.0))  # the first of the event: the node alone, its own
    assert health.count("nvlink", SETTINGS.strike_window_s, 0.0) == 1
    assert policy.rejudge_due(health, 300.0, SETTINGS)
    found = policy.reclassify(health, _peers(19, 40.0), "me", 300.0, SETTINGS)
    assert found == policy.Rejudged(1, False)
    assert [i.fleet for i in health.incidents] == [True]
    assert health.open is not None
    assert health.open.fleet is True
    assert health.count("nvlink", SETTINGS.strike_window_s, 300.0) == 0
    assert not policy.rejudge_due(health, 600.0, SETTINGS)  # judged: the fleet is not read


def test_a_lone_drain_stays_a_strike_and_an_old_one_is_not_judged_again() -> None:
    health = Health()
    _drain(health, _incident(0.0))
    assert policy.reclassify(health, _peers(5, 0.0), "me", 300.0, SETTINGS) == \
        policy.Rejudged(0, False)  # 6 of 64: not over a tenth
    late = 600.0 + policy.REJUDGE_S + 1
    assert not policy.rejudge_due(health, late, SETTINGS)
    assert policy.reclassify(health, _peers(30, 0.0), "me", late, SETTINGS) == \
        policy.Rejudged(0, False)
    assert [i.fleet for i in health.incidents] == [False]


def test_a_hold_made_by_a_fleet_events_first_drain_is_undone_into_drained() -> None:
    health = Health()
    _drain(health, _incident(0.0))
    health.start(10.0)
    health.finish(Outcome(Result.PASSED, "passed", 20.0))
    _drain(health, _incident(DAY))
    health.start(DAY + 10)
    health.finish(Outcome(Result.PASSED, "passed", DAY + 20))
    event = 2 * DAY
    assert _drain(health, _incident(event)).hold  # read as the third strike
    found = policy.reclassify(health, _peers(19, event + 30), "me", event + 300, SETTINGS)
    assert found == policy.Rejudged(1, True)
    assert (health.state, health.since) == (State.DRAINED, event + 300)
    assert health.open is not None
    assert (health.open.at, health.open.fleet) == (event, True)
    assert health.count("nvlink", SETTINGS.strike_window_s, event) == 2


def test_a_hold_for_validations_that_could_not_run_is_not_undone() -> None:
    health = Health()
    _drain(health, _incident(0.0))
    health.hold(100.0)  # on_validation_error: hold, one strike only
    assert policy.reclassify(health, _peers(19, 0.0), "me", 300.0, SETTINGS) == \
        policy.Rejudged(1, False)
    assert health.state is State.HELD
