"""gpu.recovery_action (checks/gpu/recovery.py)."""

from __future__ import annotations

import pytest

from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import make_gpu, make_snap, run


@pytest.mark.parametrize(("value", "status", "action"), [
    (0, Status.PASS, Action.NONE), (1, Status.FAIL, Action.RESET_GPU),
    (2, Status.FAIL, Action.REBOOT), (3, Status.FAIL, Action.DRAIN),
    (4, Status.FAIL, Action.RESET_GPU), (5, Status.FAIL, Action.INVESTIGATE),
    (6, Status.FAIL, Action.REBOOT), (7, Status.FAIL, Action.REBOOT),
    (9, Status.WARN, Action.INVESTIGATE)])
def test_recovery_action(value: int, status: Status, action: Action) -> None:
    (finding,) = run("gpu.recovery_action", make_snap([make_gpu(0, recovery_action=value)]))
    assert (finding.status, finding.action) == (status, action)


def test_recovery_action_unsupported_skips() -> None:
    gpu = make_gpu(0, recovery_action=None, unsupported={"recovery_action": "NotSupported"})
    (finding,) = run("gpu.recovery_action", make_snap([gpu]))
    assert finding.status is Status.SKIP
