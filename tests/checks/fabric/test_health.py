"""fabric.health_mask and its decoding (checks/fabric/health.py)."""

from __future__ import annotations

import pytest

from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.fabric.health import decode_health_mask
from tests.checks.fabric.factory import (
    HEALTHY_MASK,
    by_status,
    judge,
    make_gpu,
    make_snapshot,
    one,
    statuses,
)


def test_decode_health_mask() -> None:
    fields = decode_health_mask(HEALTHY_MASK | 0x2 << 14)
    assert fields == {"degraded_bw": 2, "route_recovery": 2, "route_unhealthy": 2,
                      "access_timeout_recovery": 2, "incorrect_configuration": 1,
                      "partition_assigned": 1, "gfm_state": 2}


def test_health_mask_healthy_passes_and_hgx_without_fields_skips() -> None:
    assert statuses(judge("fabric.health_mask", make_snapshot("gb200-nvl72"),
                          "gb200-nvl72")) == {Status.PASS}
    assert statuses(judge("fabric.health_mask", make_snapshot("dgx-h200"),
                          "dgx-h200")) == {Status.SKIP}
    assert statuses(judge("fabric.health_mask", make_snapshot("dgx-a100"),
                          "dgx-a100")) == {Status.SKIP}


def _mask_with(shift: int, width: int, value: int) -> int:
    return (HEALTHY_MASK & ~(width << shift)) | value << shift


@pytest.mark.parametrize(("mask", "summary", "status", "message"), [
    (_mask_with(0, 0x3, 1), 1, Status.WARN, "NVLink fabric bandwidth degraded"),
    (_mask_with(4, 0x3, 1), 1, Status.FAIL, "NVLink fabric route unhealthy"),
    (_mask_with(2, 0x3, 1), 1, Status.WARN, "NVLink fabric route recovery in progress"),
    (_mask_with(6, 0x3, 1), 1, Status.WARN,
     "NVLink fabric access-timeout recovery in progress"),
    (_mask_with(14, 0x3, 2), 1, Status.WARN, "global fabric manager disconnected"),
    (HEALTHY_MASK, 2, Status.FAIL, "NVLink fabric health unhealthy"),
    (HEALTHY_MASK, 3, Status.WARN, "NVLink fabric at limited capacity"),
    (_mask_with(8, 0xF, 4), 1, Status.FAIL, "NVLink fabric configuration incorrect"),
])
def test_health_mask_problems(mask: int, summary: int, status: Status, message: str) -> None:
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[2] = make_gpu(2, "gb200-nvl72", health_mask=mask, health_summary=summary)
    findings = judge("fabric.health_mask", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    bad = one([f for f in findings if f.status is not Status.PASS])
    assert (bad.status, bad.component, bad.message) == (status, "gpu2", message)
    assert len(by_status(findings, Status.PASS)) == 3


def test_health_mask_incorrect_configuration_names_the_problem_and_the_fix() -> None:
    gpus = [make_gpu(0, "gb200-nvl72", health_mask=_mask_with(8, 0xF, 5))]
    bad = one(judge("fabric.health_mask", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72"))
    assert (bad.observed, bad.action) == ("insufficient NVLinks", Action.RESEAT_CABLE)
    gpus = [make_gpu(0, "gb200-nvl72", health_mask=_mask_with(8, 0xF, 6))]
    bad = one(judge("fabric.health_mask", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72"))
    assert (bad.observed, bad.action) == ("incompatible GPU firmware", Action.FIX_CONFIG)


def test_health_mask_real_gb200_with_unsupported_health_fields_skips() -> None:
    gpus = [make_gpu(i, "gb200-nvl72", health_mask=0, health_summary=None) for i in range(4)]
    finding = one(judge("fabric.health_mask", make_snapshot("gb200-nvl72", gpus),
                        "gb200-nvl72"))
    assert (finding.status, finding.component) == (Status.SKIP, "node")
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[1] = make_gpu(1, "gb200-nvl72", health_mask=0, health_summary=None)
    findings = judge("fabric.health_mask", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    assert one(by_status(findings, Status.SKIP)).component == "gpu1"
    gpus = [make_gpu(i, "gb200-nvl72", health_mask=None, health_summary=2) for i in range(1)]
    assert one(judge("fabric.health_mask", make_snapshot("gb200-nvl72", gpus),
                     "gb200-nvl72")).status is Status.FAIL
