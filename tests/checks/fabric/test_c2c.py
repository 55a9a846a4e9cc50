"""c2c.links and c2c.error_rate (checks/fabric/c2c.py), on snapshots built from the model."""

from __future__ import annotations

import copy

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import C2cLink, Gpu, NvmlInfo
from clusterdiag.checks.core.finding import Action, Finding, Status
from tests.checks.harness import run_check

NOW = 1_700_000_000.0
BW = 44_712  # MB/s a link: the simulated GB200's (agent/sim/state/hardware.py)


def c2c_gpu(index: int, links: int = 5, bw: int = BW) -> Gpu:
    """A GB200 GPU as the collector stores it: C2C mode on, every link active."""
    return Gpu(index=index, c2c_enabled=True, c2c_link_count=links, c2c_links=[
        C2cLink(link=i, active=True, max_bw_mbps=bw,
                errors={"crc": 0, "replay": 0, "replay_b2b": 0}) for i in range(links)])


def x86_gpu(index: int) -> Gpu:
    """An H100 on an x86 host: NVML answers NotSupported for field 170."""
    return Gpu(index=index, unsupported={"c2c_link_count": "NotSupported"})


def snap(gpus: list[Gpu], taken_at: float = NOW) -> Snapshot:
    return Snapshot(node="n1", taken_at=taken_at,
                    nvml=NvmlInfo(device_count=len(gpus), gpus=gpus))


def tray(*changed: Gpu) -> list[Gpu]:
    """Four healthy GB200 GPUs, with ``changed`` in their places."""
    gpus = [c2c_gpu(i) for i in range(4)]
    for gpu in changed:
        gpus[gpu.index] = gpu
    return gpus


def bad(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status not in (Status.PASS, Status.SKIP)]


# --- c2c.links ------------------------------------------------------------------------

def test_a_healthy_tray_passes_every_gpu() -> None:
    findings = run_check("c2c.links", snap(tray()), profile="gb200-nvl72")
    assert [(f.status, f.component) for f in findings] == [
        (Status.PASS, f"gpu{i}") for i in range(4)]
    assert findings[0].observed == {"links": "5/5 up", "bandwidth": "44712 MB/s",
                                    "c2c_mode": "enabled"}


def test_an_x86_host_skips_once_with_the_reason() -> None:
    (finding,) = run_check("c2c.links", snap([x86_gpu(i) for i in range(8)]),
                           profile="dgx-h100")
    assert finding.status is Status.SKIP
    assert finding.component == "node"
    assert "no Grace CPU" in finding.message
    assert finding.observed == "NotSupported"


def test_a_link_down_fails_naming_the_gpu_and_link() -> None:
    gpu = c2c_gpu(2)
    gpu.c2c_links[3].active = False
    (finding,) = bad(run_check("c2c.links", snap(tray(gpu))))
    assert (finding.status, finding.component, finding.action) == (
        Status.FAIL, "gpu2", Action.REBOOT)
    assert finding.observed == "4/5 (down: 3)"
    assert finding.expected == "5/5"


def test_a_gpu_with_fewer_links_than_its_tray_fails() -> None:
    (finding,) = bad(run_check("c2c.links", snap(tray(c2c_gpu(1, links=4)))))
    assert finding.component == "gpu1"
    assert finding.message == "NVLink-C2C link count differs from the tray's"
    assert (finding.observed, finding.expected) == (4, 5)


def test_a_gpu_with_slower_links_than_its_tray_fails() -> None:
    (finding,) = bad(run_check("c2c.links", snap(tray(c2c_gpu(3, bw=BW // 2)))))
    assert finding.component == "gpu3"
    assert finding.message == "NVLink-C2C link bandwidth differs from the tray's"
    assert (finding.observed, finding.expected) == ("22356 MB/s", "44712 MB/s")


def test_a_tray_split_in_two_fails_every_gpu() -> None:
    gpus = tray(c2c_gpu(2, bw=BW // 2), c2c_gpu(3, bw=BW // 2))
    findings = bad(run_check("c2c.links", snap(gpus)))
    assert sorted(f.component for f in findings) == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert {f.expected for f in findings} == {"one bandwidth on every GPU"}


def test_no_absolute_bandwidth_is_judged() -> None:
    """A tray whose GPUs all report another bandwidth and link count passes."""
    findings = run_check("c2c.links", snap([c2c_gpu(i, links=10, bw=1) for i in range(4)]))
    assert {f.status for f in findings} == {Status.PASS}


def test_an_unreadable_link_is_an_error_not_a_failure() -> None:
    gpu = c2c_gpu(0)
    gpu.c2c_links[1].active = None
    gpu.errors["c2c_links.1.active"] = "Unknown"
    findings = run_check("c2c.links", snap(tray(gpu)))
    assert [(f.status, f.component) for f in bad(findings)] == [(Status.ERROR, "gpu0")]


def test_an_unreadable_link_count_is_an_error() -> None:
    gpu = Gpu(index=0, errors={"c2c_link_count": "Unknown"})
    findings = run_check("c2c.links", snap(tray(gpu)))
    assert [(f.status, f.component) for f in bad(findings)] == [(Status.ERROR, "gpu0")]


# --- c2c.error_rate -------------------------------------------------------------------

def grown(dt: float, gpu: int, link: int, **grow: int) -> tuple[Snapshot, Snapshot]:
    before = snap(tray(), taken_at=NOW - dt)
    after = copy.deepcopy(before)
    after.taken_at = NOW
    assert after.nvml is not None
    for name, value in grow.items():
        after.nvml.gpus[gpu].c2c_links[link].errors[name] += value
    return before, after


def test_error_rate_skips_without_an_earlier_sample() -> None:
    (finding,) = run_check("c2c.error_rate", snap(tray()), level="full")
    assert finding.status is Status.SKIP
    assert "earlier sample" in finding.message


def test_quiet_counters_pass() -> None:
    before, after = grown(10, 0, 0)
    findings = run_check("c2c.error_rate", after, previous=before, level="full")
    assert [(f.status, f.observed) for f in findings] == [
        (Status.PASS, "15 counters over 10.0 s")] * 4


def test_replays_increasing_warn_on_the_link() -> None:
    before, after = grown(10, 2, 0, replay=500)
    (finding,) = bad(run_check("c2c.error_rate", after, previous=before, level="full"))
    assert (finding.status, finding.component, finding.action) == (
        Status.WARN, "gpu2.c2c0", Action.INVESTIGATE)
    assert finding.message == "C2C replays increasing"
    assert finding.observed["events"] == 500
    assert finding.observed["per_s"] == 50.0


def test_fewer_than_min_events_are_not_a_verdict() -> None:
    before, after = grown(10, 2, 0, crc=2)
    assert not bad(run_check("c2c.error_rate", after, previous=before, level="full"))


def test_a_configured_rate_fails() -> None:
    before, after = grown(10, 1, 4, crc=500)
    (finding,) = bad(run_check("c2c.error_rate", after, previous=before, level="full",
                               params={"fail_per_s": 10.0}))
    assert (finding.status, finding.component, finding.action) == (
        Status.FAIL, "gpu1.c2c4", Action.REBOOT)


def test_a_driver_without_the_counters_skips() -> None:
    """Before NVML 575 the driver answers InvalidArgument for fields 231-233."""
    gpus = tray()
    for gpu in gpus:
        for link in gpu.c2c_links:
            link.errors.clear()
            gpu.unsupported[f"c2c_links.{link.link}.errors.replay"] = "InvalidArgument"
    before, after = snap(gpus, taken_at=NOW - 10), snap(copy.deepcopy(gpus))
    findings = run_check("c2c.error_rate", after, previous=before, level="full")
    assert {f.status for f in findings} == {Status.SKIP}
    assert "NVML 575" in findings[0].message


def test_error_rate_skips_on_an_x86_host() -> None:
    gpus = [x86_gpu(i) for i in range(8)]
    (finding,) = run_check("c2c.error_rate", snap(gpus), previous=snap(gpus, NOW - 10),
                           level="full")
    assert finding.status is Status.SKIP
    assert "no Grace CPU" in finding.message
