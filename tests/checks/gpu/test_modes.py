"""gpu.persistence_mode and gpu.mig_mode (checks/gpu/modes.py)."""

from __future__ import annotations

import pytest

from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import bad, make_gpu, make_snap, run


def test_persistence_mode() -> None:
    gpus = [make_gpu(0), make_gpu(1, persistence_mode=False)]
    findings = run("gpu.persistence_mode", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.WARN, Action.FIX_CONFIG)]
    assert not bad(run("gpu.persistence_mode", make_snap(gpus), required=False))


@pytest.mark.parametrize(("want", "cur", "pending", "status", "action"), [
    ("disabled", False, False, Status.PASS, Action.NONE),
    ("disabled", True, True, Status.FAIL, Action.FIX_CONFIG),
    ("disabled", True, False, Status.FAIL, Action.RESET_GPU),
    ("disabled", False, True, Status.WARN, Action.FIX_CONFIG),
    ("enabled", True, True, Status.PASS, Action.NONE),
    ("enabled", False, False, Status.FAIL, Action.FIX_CONFIG),
    ("any", True, False, Status.WARN, Action.FIX_CONFIG),
    ("any", True, True, Status.PASS, Action.NONE)])
def test_mig_mode(want: str, cur: bool, pending: bool, status: Status, action: Action) -> None:
    gpu = make_gpu(0, mig_enabled=cur, mig_pending=pending)
    (finding,) = run("gpu.mig_mode", make_snap([gpu]), mig=want)
    assert (finding.status, finding.action) == (status, action)


def test_mig_mode_unsupported() -> None:
    gpu = make_gpu(0, mig_enabled=None, mig_pending=None,
                   unsupported={"mig_enabled": "NotSupported"})
    assert [f.status for f in run("gpu.mig_mode", make_snap([gpu]))] == [Status.SKIP]
    assert [f.status for f in run("gpu.mig_mode", make_snap([gpu]), mig="enabled")] == [
        Status.FAIL]
    assert [f.status for f in run("gpu.mig_mode", make_snap([gpu]), mig="sometimes")] == [
        Status.ERROR]
