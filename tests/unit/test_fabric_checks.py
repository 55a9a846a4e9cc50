"""The fabric checks (Fabric Manager, NVML fabric info, NVL72 cliques, health mask, IMEX),
judged on hand-built snapshots of real platforms."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from clusterdiag.agent.config import Config
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import FabricInfo, Gpu, NvmlInfo
from clusterdiag.agent.model.host import HostInfo, ServiceState
from clusterdiag.agent.runner import RunOptions, plan
from clusterdiag.checks import fabric as fabric_checks
from clusterdiag.checks.fabric.health import decode_health_mask
from clusterdiag.checks.finding import Action, Finding, Status
from clusterdiag.checks.profile import load_profile
from clusterdiag.checks.registry import REGISTRY, CheckContext

NOW = 1_700_000_000.0
ZERO = "00000000-0000-0000-0000-000000000000"
RACK = "9c6f5af3-2b1e-4c1d-9f55-0a1b2c3d4e5f"
# A healthy NVL72 GPU's mask as the simulator builds it: partition assigned, degraded BW,
# route recovery, route unhealthy and access-timeout recovery all FALSE, config NONE.
HEALTHY_MASK = 0x1 << 12 | 0x2 | 0x2 << 2 | 0x2 << 4 | 0x2 << 6 | 1 << 8
GPUS = {"generic": 8, "dgx-h100": 8, "dgx-h200": 8, "dgx-a100": 8, "gb200-nvl72": 4,
        "hgx-h100-pcie": 8}


# --- factory --------------------------------------------------------------------------

def fabric_for(platform: str) -> FabricInfo | None:
    """What NVML reports per GPU on each platform (gpud PRs #1106/#1108, gpu-operator#2511)."""
    if platform in ("dgx-a100", "hgx-h100-pcie"):
        return None  # Hopper+ only; NotSupported on PCIe cards
    if platform == "gb200-nvl72":
        return FabricInfo(state=3, status=0, cluster_uuid=RACK, clique_id=4026,
                          health_mask=HEALTHY_MASK, health_summary=1)
    # HGX H100/H200: completed once Fabric Manager is done, zeros for domain and clique.
    return FabricInfo(state=3, status=0, cluster_uuid=ZERO, clique_id=0, health_mask=0,
                      health_summary=None)


def make_gpu(index: int, platform: str, **fabric_changes: Any) -> Gpu:
    gpu = Gpu(index=index, pci_bdf=f"0000:{0x18 + 16 * index:02x}:00.0")
    fabric = fabric_for(platform)
    if fabric is None:
        gpu.unsupported["fabric"] = "NotSupported"
    else:
        for key, value in fabric_changes.items():
            setattr(fabric, key, value)
        gpu.fabric = fabric
    return gpu


def make_snapshot(platform: str, gpus: list[Gpu] | None = None,
                  services: dict[str, str] | None = None, has_systemd: bool = True,
                  host: bool = True) -> Snapshot:
    gpus = gpus if gpus is not None else [make_gpu(i, platform) for i in range(GPUS[platform])]
    info = None
    if host:
        info = HostInfo("n1", has_systemd=has_systemd, services=[
            ServiceState(name, active=state, sub="running" if state == "active" else "dead",
                         load="not-found" if state == "not-found" else "loaded")
            for name, state in (services or {}).items()])
    return Snapshot(node="n1", taken_at=NOW, host=info,
                    nvml=NvmlInfo(device_count=len(gpus), gpus=gpus))


def judge(check_id: str, snapshot: Snapshot, platform: str, *, mode: str = "run",
          **params: Any) -> list[Finding]:
    spec = REGISTRY[check_id]
    ctx = CheckContext(snapshot=snapshot, profile=load_profile(platform),
                       params={**spec.params, **params}, mode=mode, now=NOW)
    findings = list(spec.func(ctx))
    assert findings, f"{check_id} yielded nothing"
    for finding in findings:  # every action a check emits is declared
        if finding.status in (Status.FAIL, Status.WARN):
            assert finding.action in spec.actions, (check_id, finding)
    return findings


def by_status(findings: list[Finding], status: Status) -> list[Finding]:
    return [f for f in findings if f.status is status]


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


def statuses(findings: list[Finding]) -> set[Status]:
    return {f.status for f in findings}


# --- catalog --------------------------------------------------------------------------

def test_catalog_declares_the_contract() -> None:
    ids = sorted(i for i in REGISTRY
                 if REGISTRY[i].func.__module__.startswith(f"{fabric_checks.__name__}."))
    assert ids == ["fabric.clique", "fabric.health_mask", "fabric.imex", "fabric.manager",
                   "fabric.state"]
    assert REGISTRY["fabric.manager"].params == {"unit": "nvidia-fabricmanager.service"}
    assert REGISTRY["fabric.imex"].params == {"unit": "nvidia-imex.service"}
    assert REGISTRY["fabric.imex"].skip_in == frozenset({"prolog"})
    assert set(REGISTRY["fabric.imex"].actions) <= {Action.FIX_CONFIG, Action.INVESTIGATE}
    assert REGISTRY["fabric.manager"].needs == ("host",)
    assert REGISTRY["fabric.state"].needs == ("nvml",)


# --- fabric.manager -------------------------------------------------------------------

FM = "nvidia-fabricmanager.service"


@pytest.mark.parametrize("platform", ["dgx-h100", "dgx-a100"])
def test_manager_passes_when_active_on_nvswitch_boards(platform: str) -> None:
    finding = one(judge("fabric.manager", make_snapshot(platform, services={FM: "active"}),
                        platform))
    assert finding.status is Status.PASS


@pytest.mark.parametrize(("state", "status"), [("failed", Status.FAIL),
                                                ("inactive", Status.FAIL),
                                                ("not-found", Status.FAIL),
                                                ("activating", Status.WARN)])
def test_manager_not_running(state: str, status: Status) -> None:
    finding = one(judge("fabric.manager", make_snapshot("dgx-h100", services={FM: state}),
                        "dgx-h100"))
    assert finding.status is status
    if status is Status.FAIL:
        assert finding.action is Action.FIX_CONFIG


def test_manager_unit_name_is_a_parameter_and_matches_without_suffix() -> None:
    snap = make_snapshot("dgx-h100", services={"nvidia-fabricmanager": "active"})
    assert one(judge("fabric.manager", snap, "dgx-h100")).status is Status.PASS
    snap = make_snapshot("dgx-h100", services={"fm-custom.service": "inactive", FM: "active"})
    assert one(judge("fabric.manager", snap, "dgx-h100", unit="fm-custom.service")).status \
        is Status.FAIL


@pytest.mark.parametrize("platform", ["gb200-nvl72", "hgx-h100-pcie"])
def test_manager_skips_where_there_is_no_fabric_manager(platform: str) -> None:
    # A GB200 tray never runs it: an inactive unit there must not fail.
    snap = make_snapshot(platform, services={FM: "inactive"})
    finding = one(judge("fabric.manager", snap, platform))
    assert finding.status is Status.SKIP
    assert finding.message == "no Fabric Manager on this platform"


def test_manager_skips_on_nvl72_even_if_a_site_profile_says_fabric_manager() -> None:
    profile = dataclasses.replace(load_profile("gb200-nvl72"), fabric_manager=True)
    ctx = CheckContext(snapshot=make_snapshot("gb200-nvl72", services={FM: "failed"}),
                       profile=profile, params=REGISTRY["fabric.manager"].params)
    assert one(list(REGISTRY["fabric.manager"].func(ctx))).status is Status.SKIP


def test_manager_skips_without_systemd_and_errors_without_state() -> None:
    snap = make_snapshot("dgx-h100", has_systemd=False)
    assert one(judge("fabric.manager", snap, "dgx-h100")).status is Status.SKIP
    assert one(judge("fabric.manager", make_snapshot("dgx-h100"), "dgx-h100")).status \
        is Status.ERROR
    assert one(judge("fabric.manager", make_snapshot("dgx-h100", host=False),
                     "dgx-h100")).status is Status.ERROR


# --- fabric.state ---------------------------------------------------------------------

@pytest.mark.parametrize("platform", ["dgx-h100", "dgx-h200", "gb200-nvl72"])
def test_state_completed_success_passes(platform: str) -> None:
    findings = judge("fabric.state", make_snapshot(platform), platform)
    assert statuses(findings) == {Status.PASS}
    assert len(findings) == GPUS[platform]


@pytest.mark.parametrize("platform", ["dgx-a100", "hgx-h100-pcie"])
def test_state_unsupported_skips(platform: str) -> None:
    finding = one(judge("fabric.state", make_snapshot(platform), platform))
    assert (finding.status, finding.component) == (Status.SKIP, "node")


def test_state_one_unsupported_gpu_skips_alone() -> None:
    gpus = [make_gpu(i, "dgx-h100") for i in range(8)]
    gpus[6] = make_gpu(6, "dgx-a100")
    findings = judge("fabric.state", make_snapshot("dgx-h100", gpus), "dgx-h100")
    assert one(by_status(findings, Status.SKIP)).component == "gpu6"
    assert len(by_status(findings, Status.PASS)) == 7


@pytest.mark.parametrize("check_id", ["fabric.state", "fabric.health_mask"])
def test_pcie_platform_skips_whatever_nvml_says(check_id: str) -> None:
    gpus = [make_gpu(i, "dgx-h100", state=1, health_summary=2) for i in range(8)]
    finding = one(judge(check_id, make_snapshot("hgx-h100-pcie", gpus), "hgx-h100-pcie"))
    assert finding.status is Status.SKIP
    assert finding.message == "no NVLink fabric on this platform"
    # With no expectations (generic), NVML's answer is judged.
    findings = judge(check_id, make_snapshot("hgx-h100-pcie", gpus), "generic")
    assert len(by_status(findings, Status.FAIL)) == 8


def test_state_unsupported_on_nvl72_warns_never_fails() -> None:
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[2].fabric = FabricInfo(state=0, status=0, cluster_uuid=ZERO, clique_id=0)
    findings = judge("fabric.state", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    warn = one(by_status(findings, Status.WARN))
    assert warn.component == "gpu2"
    assert not by_status(findings, Status.FAIL)


@pytest.mark.parametrize("state", [1, 2])
def test_state_not_done_fails(state: int) -> None:
    gpus = [make_gpu(i, "dgx-h100") for i in range(8)]
    gpus[5] = make_gpu(5, "dgx-h100", state=state)
    findings = judge("fabric.state", make_snapshot("dgx-h100", gpus), "dgx-h100")
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu5"
    assert bad.observed == {1: "not started", 2: "in progress"}[state]
    assert bad.message == "GPU fabric registration not completed"


def test_state_completed_with_error_status_fails() -> None:
    # A real bad GB200 node: Completed / Insufficient Resources / clique 0 / zero UUID.
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[0] = make_gpu(0, "gb200-nvl72", status=23, clique_id=0, cluster_uuid=ZERO)
    findings = judge("fabric.state", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    bad = one(by_status(findings, Status.FAIL))
    assert (bad.component, bad.observed) == ("gpu0", "INSUFFICIENT_RESOURCES")
    clique = judge("fabric.clique", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    assert one(by_status(clique, Status.FAIL)).component == "gpu0"


def test_state_unreadable_is_an_error() -> None:
    gpus = [make_gpu(i, "dgx-h100") for i in range(8)]
    gpus[1].fabric = None
    gpus[1].errors["fabric"] = "Unknown"
    findings = judge("fabric.state", make_snapshot("dgx-h100", gpus), "dgx-h100")
    assert one(by_status(findings, Status.ERROR)).component == "gpu1"


# --- fabric.clique --------------------------------------------------------------------

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


# --- fabric.health_mask ---------------------------------------------------------------

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


# --- fabric.imex ----------------------------------------------------------------------

IMEX = "nvidia-imex.service"


def test_imex_runs_on_nvl72() -> None:
    snap = make_snapshot("gb200-nvl72", services={IMEX: "active"})
    assert one(judge("fabric.imex", snap, "gb200-nvl72")).status is Status.PASS


@pytest.mark.parametrize("state", ["inactive", "failed", "not-found", "activating"])
def test_imex_only_ever_warns(state: str) -> None:
    snap = make_snapshot("gb200-nvl72", services={IMEX: state})
    finding = one(judge("fabric.imex", snap, "gb200-nvl72"))
    assert finding.status is Status.WARN


def test_imex_never_errors_or_fails_on_missing_evidence() -> None:
    for snap in (make_snapshot("gb200-nvl72"), make_snapshot("gb200-nvl72", host=False),
                 make_snapshot("gb200-nvl72", has_systemd=False)):
        assert one(judge("fabric.imex", snap, "gb200-nvl72")).status is Status.SKIP
    snap = make_snapshot("gb200-nvl72")
    assert snap.host is not None
    snap.host.services = [ServiceState(IMEX, error="systemctl: timeout")]
    assert one(judge("fabric.imex", snap, "gb200-nvl72")).status is Status.WARN


@pytest.mark.parametrize("platform", ["dgx-h100", "hgx-h100-pcie", "dgx-a100"])
def test_imex_says_nothing_where_not_expected(platform: str) -> None:
    snap = make_snapshot(platform, services={IMEX: "inactive"})
    finding = one(judge("fabric.imex", snap, platform))
    assert finding.status is Status.SKIP
    assert "not expected" in finding.message


@pytest.mark.parametrize("mode", ["prolog", "run", "healthcheck"])
def test_imex_is_skipped_in_the_prolog(mode: str) -> None:
    # Through the runner's plan: a per-job IMEX never drains a node in the prolog.
    run, skipped = plan(Config(), RunOptions(mode=mode, patterns=("fabric.*",)))
    ran = {spec.id for spec in run}
    assert {"fabric.manager", "fabric.state", "fabric.clique", "fabric.health_mask"} <= ran
    if mode == "prolog":
        assert "fabric.imex" not in ran
        finding = one([f for f in skipped if f.check == "fabric.imex"])
        assert finding.status is Status.SKIP
    else:
        assert "fabric.imex" in ran
