"""Simulated faults with a time window: validated in the spec, present only inside it,
and gone again afterwards, in NVML answers and in the /sys tree alike."""

from __future__ import annotations

from typing import Any

import pytest

from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.schedule import Schedule
from clusterdiag.agent.sim.spec import parse_spec
from clusterdiag.agent.sim.state import counter as sim_counter


def _spec(*faults: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": [{"names": "n1", "profile": "dgx-h100"}],
            "faults": [{"node": "n1", **f} for f in faults]}


@pytest.mark.parametrize(("window", "message"), [
    ({"from_s": -1}, "from_s must be a number of seconds >= 0"),
    ({"until_s": "soon"}, "until_s must be a number of seconds >= 0"),
    ({"from_s": True}, "from_s must be a number"),
    ({"from_s": 5, "until_s": 5}, "until_s 5 must be after from_s 5"),
])
def test_bad_windows_are_one_line_errors(window: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_spec(_spec({"kind": "gpu_hot", "gpu": 1, **window}), "s.yaml")


def test_untimed_spec_has_no_schedule_hook() -> None:
    env = env_for(parse_spec(_spec({"kind": "gpu_hot", "gpu": 1}), "s").nodes["n1"])
    assert not any(isinstance(h, Schedule) for h in env.before_sample)


def _timed_env(*faults: dict[str, Any]) -> tuple[Any, Schedule]:
    env = env_for(parse_spec(_spec(*faults), "s").nodes["n1"])
    hook = env.before_sample[0]
    assert isinstance(hook, Schedule)
    return env, hook


def test_faults_arrive_and_leave_on_time() -> None:
    """Each sample sets the node's clock to the moment it is taken (its epoch that far in
    the past), so the windows are tested, not how promptly a loaded machine wakes up."""
    env, hook = _timed_env({"kind": "gpu_hot", "gpu": 1, "from_s": 0.4, "until_s": 1.0},
                           {"kind": "ib_port_down", "hca": "mlx5_0", "until_s": 0.7})
    node, state = hook.node, env.root / "sys/class/infiniband/mlx5_0/ports/1/state"
    nvml = env.nvml()
    nvml.nvmlInit()

    def sample(at_s: float) -> tuple[int, str]:
        node.epoch = sim_counter.now() - at_s
        for run in env.before_sample:
            run()
        handle = nvml.nvmlDeviceGetHandleByIndex(1)  # what the NVML collector asks
        return nvml.nvmlDeviceGetTemperature(handle, 0), state.read_text().strip()

    cool, hot = sample(0.1)[0], 90
    assert sample(0.1) == (cool, "1: DOWN")
    assert sample(0.55) == (hot, "1: DOWN")
    assert sample(0.85) == (hot, "4: ACTIVE")
    assert sample(1.2) == (cool, "4: ACTIVE")


def test_a_schedule_set_up_late_still_applies_what_is_due() -> None:
    """The node is built with the faults present at its start; a schedule hook that is
    created (or first runs) after a window opened must still apply it. It used to take
    the faults due at its own creation as already applied, so on a slow start a fault
    whose window had opened meanwhile never arrived."""
    env, hook = _timed_env({"kind": "gpu_hot", "gpu": 1, "from_s": 0.4})
    hook.node.epoch -= 5  # as if building the tree had taken five seconds
    late = Schedule(hook.node, hook.faults, env.root, hook.rebuild, hook.write_tree)
    nvml = env.nvml()
    nvml.nvmlInit()
    assert nvml.nvmlDeviceGetTemperature(nvml.nvmlDeviceGetHandleByIndex(1), 0) < 90
    late()
    assert nvml.nvmlDeviceGetTemperature(nvml.nvmlDeviceGetHandleByIndex(1), 0) == 90
