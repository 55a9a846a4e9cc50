"""gpu.responsive and gpu.count (checks/gpu/presence.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import Gpu
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import (
    GENERIC,
    NOW,
    bdf,
    bridge,
    make_gpu,
    make_snap,
    only,
    pci_gpu,
    run,
)


def test_responsive_passes_each_answering_gpu() -> None:
    findings = run("gpu.responsive", make_snap(n=4))
    assert [(f.status, f.component) for f in findings] == [
        (Status.PASS, f"gpu{i}") for i in range(4)]


@pytest.mark.parametrize(("lost", "action"), [("GpuIsLost", Action.REBOOT),
                                               ("ResetRequired", Action.RESET_GPU),
                                               ("timeout", Action.REBOOT)])
def test_responsive_fails_a_lost_gpu(lost: str, action: Action) -> None:
    gpus = [make_gpu(0), Gpu(index=1, responsive=False, lost=lost)]
    findings = run("gpu.responsive", make_snap(gpus))
    assert findings[0].status is Status.PASS
    assert (findings[1].status, findings[1].component, findings[1].action) == (
        Status.FAIL, "gpu1", action)


def test_responsive_fails_an_unanswered_gpu_with_a_stable_message() -> None:
    snap = make_snap([make_gpu(0)], unanswered=[1], device_count=2)
    findings = run("gpu.responsive", snap)
    fail = only(findings, Status.FAIL)
    assert [(f.component, f.message, f.action) for f in fail] == [
        ("gpu1", "GPU did not answer NVML within the deadline", Action.REBOOT)]


def test_responsive_fails_when_nvml_init_hangs() -> None:
    snap = make_snap([], device_count=None, errors={"init": "NVML did not answer"})
    assert [(f.status, f.component, f.action) for f in run("gpu.responsive", snap)] == [
        (Status.FAIL, "node", Action.REBOOT)]


def test_responsive_fails_a_gpu_whose_calls_error() -> None:
    gpu = make_gpu(0, temperature_c=None, errors={"temperature_c": "Unknown: Unknown Error"})
    findings = run("gpu.responsive", make_snap([gpu]))
    assert (findings[0].status, findings[0].action) == (Status.FAIL, Action.REBOOT)
    assert findings[0].observed == {"temperature_c": "Unknown: Unknown Error"}
    # ... and the check that reads the value skips rather than failing it twice.
    assert only(run("gpu.temperature", make_snap([gpu])), Status.SKIP)


def test_responsive_driver_broken_with_gpus_on_pci() -> None:
    snap = make_snap([], device_count=None, library_error="DriverNotLoaded",
                     library_message="Driver Not Loaded", pci=[pci_gpu(0), pci_gpu(1)])
    (finding,) = run("gpu.responsive", snap)
    assert (finding.status, finding.component, finding.action) == (
        Status.FAIL, "node", Action.REBOOT)
    assert finding.message == "NVIDIA GPUs on PCI but the driver does not answer"
    assert finding.observed["error"] == "DriverNotLoaded"
    assert finding.observed["message"] == "Driver Not Loaded"


def test_responsive_library_missing_with_gpus_on_pci_is_a_driver_install_problem() -> None:
    snap = make_snap([], device_count=None, library_error="LibraryNotFound",
                     pci=[pci_gpu(0)])
    (finding,) = run("gpu.responsive", snap)
    assert (finding.status, finding.action) == (Status.FAIL, Action.FIX_CONFIG)


def test_responsive_no_driver_and_no_gpu_is_not_a_gpu_node() -> None:
    snap = make_snap([], device_count=None, library_error="LibraryNotFound",
                     pci=[bridge(0)])
    (finding,) = run("gpu.responsive", snap)
    assert finding.status is Status.SKIP
    assert finding.message == ("no NVIDIA GPU on this node (PCI) and no driver "
                               "(libnvidia-ml.so.1 not found)")


def test_responsive_without_nvml_but_gpus_on_pci_fails() -> None:
    snap = Snapshot(node="n1", taken_at=NOW, pci=[pci_gpu(0)], nvml=None)
    (finding,) = run("gpu.responsive", snap)
    assert (finding.status, finding.action) == (Status.FAIL, Action.REBOOT)


def test_responsive_permission_problem_is_ours_not_the_node() -> None:
    snap = make_snap([], device_count=None, library_error="NoPermission", pci=[pci_gpu(0)])
    (finding,) = run("gpu.responsive", snap)
    assert finding.status is Status.ERROR


# --- gpu.count -----------------------------------------------------------------------


def test_count_matches_profile() -> None:
    (finding,) = run("gpu.count", make_snap())
    assert (finding.status, finding.observed, finding.expected) == (
        Status.PASS, {"pci": 8, "nvml": 8}, 8)


def test_count_names_the_bus_id_nvml_lost() -> None:
    snap = make_snap([make_gpu(i) for i in range(8) if i != 3],
                     pci=[pci_gpu(i) for i in range(8)])
    findings = run("gpu.count", snap)
    fail = only(findings, Status.FAIL)
    assert [(f.component, f.action, f.observed["bus_id"]) for f in fail] == [
        ("node", Action.REBOOT, bdf(3))]
    assert fail[0].message == "GPU on PCI but not enumerated by NVML"


def test_count_without_bus_ids_compares_counts() -> None:
    gpus = [make_gpu(i, pci_bdf=None) for i in range(7)]
    findings = run("gpu.count", make_snap(gpus, pci=[pci_gpu(i) for i in range(8)]))
    assert [f.message for f in only(findings, Status.FAIL)] == ["fewer GPUs in NVML than on PCI"]


def test_count_gpu_gone_from_pci_fails_against_the_profile() -> None:
    gpus = [make_gpu(i) for i in range(7)]
    findings = run("gpu.count", make_snap(gpus))
    assert [(f.status, f.message, f.action) for f in findings] == [
        (Status.FAIL, "fewer GPUs than the profile expects", Action.REBOOT)]


def test_count_more_than_profile_warns_fix_config() -> None:
    findings = run("gpu.count", make_snap(n=9))
    assert [(f.status, f.action) for f in findings] == [(Status.WARN, Action.FIX_CONFIG)]


def test_count_skips_without_profile_count_when_sources_agree() -> None:
    (finding,) = run("gpu.count", make_snap(n=4), GENERIC)
    assert finding.status is Status.SKIP


def test_count_skips_a_node_without_gpus() -> None:
    snap = make_snap([], device_count=0, pci=[bridge(0)])
    (finding,) = run("gpu.count", snap, GENERIC)
    assert (finding.status, finding.message) == (Status.SKIP, "no NVIDIA GPU on this node")


def test_count_driver_down_still_compares_pci_with_profile() -> None:
    snap = make_snap([], device_count=None, library_error="DriverNotLoaded",
                     pci=[pci_gpu(i) for i in range(6)])
    findings = run("gpu.count", snap)
    assert [(f.status, f.observed) for f in findings] == [
        (Status.FAIL, {"pci": 6, "nvml": None})]



def test_responsive_leaves_nvlink_and_fabric_read_errors_to_their_families() -> None:
    gpu = make_gpu(0, errors={"nvlinks.3.errors.crc": "Unknown", "fabric": "Unknown: x"})
    assert [f.status for f in run("gpu.responsive", make_snap([gpu]))] == [Status.PASS]
