"""Counter rates: growth, resets, the min_events rule, sample intervals."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.checks.core.rates import (
    Rate,
    counter_growth,
    counter_rate,
    rate_per_s,
    sample_interval,
)


def test_growth_of_a_monotonic_counter() -> None:
    assert counter_growth(10, 25) == (15, False)
    assert counter_growth(7, 7) == (0, False)


def test_missing_reading_gives_none() -> None:
    assert counter_growth(None, 5) is None
    assert counter_growth(5, None) is None
    assert rate_per_s(None, 5, 1.0) is None


def test_reset_counts_what_was_counted_since_as_a_lower_bound() -> None:
    assert counter_growth(1000, 12) == (12, True)
    rate = counter_rate(1000, 12, 4.0)
    assert rate is not None
    assert rate.reset is True
    assert rate.events == 12
    assert rate.per_s == pytest.approx(3.0)


@pytest.mark.parametrize("dt", [0.0, -1.0, None])
def test_non_positive_interval_gives_no_rate(dt: float | None) -> None:
    assert rate_per_s(0, 10, dt) is None
    assert counter_rate(0, 10, dt) is None


def test_rate_per_s_and_per_min() -> None:
    assert rate_per_s(0, 30, 3.0) == pytest.approx(10.0)
    rate = counter_rate(0, 30, 3.0)
    assert rate is not None
    assert rate.per_min == pytest.approx(600.0)


def test_min_events_rule_keeps_a_tiny_sample_from_judging() -> None:
    # One event in 0.5 s is 120 a minute: far over any limit, but one event says nothing.
    small = Rate(events=1, seconds=0.5)
    assert small.per_min == pytest.approx(120.0)
    assert not small.judged(3)
    assert not small.over_per_min(6, min_events=3)
    big = Rate(events=3, seconds=0.5)
    assert big.judged(3)
    assert big.over_per_min(6, min_events=3)
    assert big.over_per_s(5.0, min_events=3)
    assert not big.over_per_s(6.0, min_events=3)


def test_min_events_of_zero_still_needs_one_event() -> None:
    assert not Rate(events=0, seconds=1.0).over_per_s(-1.0, min_events=0)


def test_to_dict_rounds_for_people() -> None:
    assert Rate(events=2, seconds=3.0).to_dict() == {
        "events": 2, "seconds": 3.0, "per_min": 40.0, "reset": False}


def test_sample_interval() -> None:
    now = Snapshot(node="n", taken_at=110.0)
    assert sample_interval(None, now) is None
    assert sample_interval(Snapshot(node="n", taken_at=100.0), now) == pytest.approx(10.0)
    assert sample_interval(Snapshot(node="n", taken_at=120.0), now) is None
