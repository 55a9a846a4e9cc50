"""gpu.model and gpu.inforom (checks/gpu/identity.py)."""

from __future__ import annotations

from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import GENERIC, make_gpu, make_snap, run


def test_model_pass_fail_skip() -> None:
    gpus = [make_gpu(0), make_gpu(1, name="NVIDIA H200")]
    findings = run("gpu.model", make_snap(gpus))
    assert [(f.status, f.component) for f in findings] == [
        (Status.PASS, "gpu0"), (Status.FAIL, "gpu1")]
    assert findings[1].action is Action.FIX_CONFIG
    assert findings[1].observed == "NVIDIA H200"
    assert [f.status for f in run("gpu.model", make_snap(gpus), GENERIC)] == [Status.SKIP]



def test_inforom() -> None:
    gpus = [make_gpu(0), make_gpu(1, inforom_valid=False),
            make_gpu(2, inforom_valid=None, unsupported={"inforom_valid": "NotSupported"})]
    findings = run("gpu.inforom", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.FAIL, Action.RMA), (Status.SKIP, Action.NONE)]
