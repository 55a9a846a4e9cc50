"""fabric.clique (checks/fabric/clique.py)."""

from __future__ import annotations

import pytest

from clusterdiag.checks.core.finding import Action, Status
from tests.checks.fabric.factory import RACK, ZERO, by_status, judge, make_gpu, make_snapshot, one


def test_clique_gb200_tray_agrees() -> None:
    finding = one(judge("fabric.clique", make_snapshot("gb200-nvl72"), "gb200-nvl72"))
    assert finding.status is Status.PASS
    assert finding.observed == f"{RACK}/4026"


def test_clique_odd_gpu_is_named() -> None:
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[2] = make_gpu(2, "gb200-nvl72", clique_id=4027)
    findings = judge("fabric.clique", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    bad = one(findings)
    assert (bad.status, bad.component) == (Status.FAIL, "gpu2")
    assert bad.observed == f"{RACK}/4027"
    assert bad.expected == f"{RACK}/4026"
    assert bad.action is Action.INVESTIGATE


def test_clique_zeros_on_gb200_fail() -> None:
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[3] = make_gpu(3, "gb200-nvl72", cluster_uuid=ZERO, clique_id=0)
    findings = judge("fabric.clique", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu3"
    assert bad.message == "GPU not in an NVLink clique"
    assert one(by_status(findings, Status.PASS)).component == "node"
    # A non-zero clique id with a zero UUID is not in the domain either.
    gpus[3] = make_gpu(3, "gb200-nvl72", cluster_uuid=ZERO)
    findings = judge("fabric.clique", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    assert one(by_status(findings, Status.FAIL)).component == "gpu3"


def test_clique_split_tray_fails_on_the_node() -> None:
    gpus = [make_gpu(i, "gb200-nvl72", clique_id=4026 + i // 2) for i in range(4)]
    finding = one(judge("fabric.clique", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72"))
    assert (finding.status, finding.component) == (Status.FAIL, "node")
    assert finding.observed["gpu3"] == f"{RACK}/4027"


@pytest.mark.parametrize("platform", ["dgx-h200", "dgx-h100", "dgx-a100"])
def test_clique_zeros_on_hgx_are_fine(platform: str) -> None:
    finding = one(judge("fabric.clique", make_snapshot(platform), platform))
    assert finding.status is Status.SKIP
    assert finding.message == "clique applies to NVL72 trays"


def test_clique_skips_gpus_still_registering() -> None:
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[1] = make_gpu(1, "gb200-nvl72", state=2, cluster_uuid=ZERO, clique_id=0)
    findings = judge("fabric.clique", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    assert one(by_status(findings, Status.SKIP)).component == "gpu1"
    assert one(by_status(findings, Status.PASS)).component == "node"
