"""The simulated week's engine (bench/rts_week.py) on 8 nodes for one day: the real gate,
health check and ``clusterdiag validate`` with the simulated tools, a fake Slurm and an
injected clock, held to the week's goals, so the benchmark's figures come from code that
is tested."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def week_module() -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(REPO / "bench"))
        yield importlib.import_module("rts_week")


@pytest.fixture(scope="module")
def day(week_module: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return week_module.simulate(8, 1, tmp_path_factory.mktemp("week"))


def test_every_node_back_within_hold_down_interval_and_validation(
        week_module: ModuleType, day: Any) -> None:
    stays = week_module.stays(day)
    assert len(stays) >= 6  # flaps, the fleet event, the service, the slow GPU repaired
    assert [s for s in stays if s[1] > s[2]] == []


def test_each_flapping_node_is_held_at_its_third_own_drain(week_module: ModuleType,
                                                          day: Any) -> None:
    for node in day.plan.flappers:
        held = week_module.held(day, node)
        assert held is not None, node
        assert held[1] == 3, node


def test_the_fleet_event_counts_no_strike_and_its_hold_is_undone(week_module: ModuleType,
                                                                 day: Any) -> None:
    drains, strikes = week_module.fleet_strikes(day)
    assert (drains, strikes) == (2, 0)  # the third stopped by the circuit breaker
    ib = day.plan.flappers[1]
    assert "no longer held for repair: its strikes were a fleet event" in \
        day.runs[ib].log.lines


def test_no_node_is_resumed_without_a_passing_validation(day: Any) -> None:
    assert day.bad_resumes == []
    slow = day.plan.slow
    resumed = [t for n, t in day.slurm.resumes if n == slow]
    repaired = max(e.end for e in day.plan.episodes if e.node == slow)
    assert len(resumed) == 1
    assert resumed[0] >= repaired


def test_the_figures_say_every_goal_is_met(week_module: ModuleType, day: Any) -> None:
    found, notes = week_module.figures(day)
    assert len(found) == len(notes) == 7
    assert all(f.goal.endswith("met)") and "NOT MET" not in f.goal for f in found)
