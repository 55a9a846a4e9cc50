"""Telling a hung NVML call from our own deadline (agent/collectors/nvml_budget.py): the
kernel's accounting of a thread that sleeps in a call and of one that needs the CPU, and
the rule over the split."""

from __future__ import annotations

import threading
import time

from clusterdiag.agent.collectors.nvml_budget import (
    HUNG_CALL_S,
    CallClock,
    ThreadTimes,
    from_dict,
    own_deadline,
)


def _in_call(spin: bool, seconds: float) -> ThreadTimes | None:
    """A thread that begins a "call" and stays in it, asleep or (``spin``) on the CPU,
    until released; its times as the clock sees them ``seconds`` into the call."""
    clock = CallClock()
    inside = threading.Event()
    release = threading.Event()

    def call() -> None:
        clock.begin()
        inside.set()
        if spin:
            while not release.is_set():
                pass
        else:
            release.wait(60)
        clock.end()

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    assert inside.wait(30)
    time.sleep(seconds)
    assert thread.native_id is not None
    times = clock.in_call(thread.native_id)
    release.set()
    thread.join(30)
    return times


def test_a_thread_asleep_in_a_call_is_a_hung_call() -> None:
    times = _in_call(False, 4 * HUNG_CALL_S)
    assert times is not None
    assert times.asleep_s >= HUNG_CALL_S, times
    assert own_deadline(times, 10.0) is None


def test_a_thread_that_needs_the_cpu_in_a_call_is_not_hung() -> None:
    """Spinning stands for a starved reader: whether it runs or waits for a CPU, the
    kernel does not count it asleep, so the miss is our deadline."""
    times = _in_call(True, 4 * HUNG_CALL_S)
    assert times is not None
    assert times.asleep_s < HUNG_CALL_S, times
    why = own_deadline(times, 1.0)
    assert why is not None
    assert "budget" in why, why


def test_the_rule_over_the_split() -> None:
    starved = ThreadTimes("R", alive_s=2.0, cpu_s=0.1, waited_s=1.85)
    assert "waited 1.85 s for a CPU" in (own_deadline(starved, 2.0) or "")
    assert own_deadline(ThreadTimes("D", 2.0, 0.01, 0.05), 2.0) is None
    assert "stopped" in (own_deadline(ThreadTimes("T", 5.0, 0.0, 0.0), 5.0) or "")
    assert "never got to wait" in (own_deadline(None, 0.5) or "")
    # without schedstat the wait is unknown and counted as sleep: a hang still fails
    assert own_deadline(ThreadTimes("S", 2.0, 0.1, None), 2.0) is None


def test_times_from_a_worker_line_are_data() -> None:
    times = ThreadTimes("S", 1.0, 0.1, 0.2)
    assert from_dict(times.to_dict()) == times
    assert from_dict({"state": "S"}) is None
    assert from_dict("garbage") is None
