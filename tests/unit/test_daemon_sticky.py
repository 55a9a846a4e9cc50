"""Recorded XID events: into the snapshot, resolved by reboot/reset, sticky otherwise."""

from __future__ import annotations

from clusterdiag.agent.daemon.cycle import judge
from clusterdiag.agent.daemon.state import Events
from clusterdiag.agent.daemon.sticky import add_sticky, event_from, inject, resolved
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import Gpu, NvmlInfo
from clusterdiag.agent.model.host import HostInfo
from clusterdiag.agent.model.kernel import KernelEvent, KernelLog
from clusterdiag.agent.run.runner import RunOptions
from clusterdiag.agent.settings.config import Config
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.reports.model.node import NodeReport

T = 1_800_000_000.0


def _event(code: int = 79, gpu: int = 2, when: float = T) -> dict[str, object]:
    return event_from({"xid": code, "gpu_index": gpu, "gpu_uuid": "GPU-x", "time": when})


def _snap(**kw: object) -> Snapshot:
    gpus = [Gpu(index=i, pci_bdf=f"0000:{i:02x}:00.0", uuid=f"GPU-{i}") for i in range(4)]
    snap = Snapshot(node="n1", taken_at=T + 100, nvml=NvmlInfo(device_count=4, gpus=gpus))
    for key, value in kw.items():
        setattr(snap, key, value)
    return snap


def test_event_id_is_readable_and_bursts_share_it() -> None:
    assert _event()["id"] == f"xid79-gpu2-{int(T)}"
    assert _event(when=T + 0.4)["id"] == _event()["id"]
    assert event_from({"xid": 13, "gpu_index": None, "time": T})["id"].startswith("xid13-gpux-")


def test_inject_only_active_events() -> None:
    events = Events([_event(), _event(48, 1)])
    events.clear(str(events.items[1]["id"]), "x")
    snap = _snap()
    inject(snap, events)
    assert [(e.gpu_index, e.xid, e.time) for e in snap.nvml.events] == [(2, 79, T)]


def test_resolved_by_reboot_or_reset_of_that_gpu_only() -> None:
    event = _event()
    assert resolved(_snap(host=HostInfo(hostname="n1", boot_time=T - 10)), event) is None
    rebooted = _snap(host=HostInfo(hostname="n1", boot_time=T + 50))
    assert "reboot" in (resolved(rebooted, event) or "")
    other = KernelLog("file:x", events=[KernelEvent("gpu_reset", "m", "r", "0000:01:00.0",
                                                   T + 5)])
    assert resolved(_snap(kernel_log=other), event) is None
    own = KernelLog("file:x", events=[KernelEvent("gpu_reset", "m", "r", "0000:02:00.0",
                                                 T + 5)])
    assert "GPU reset" in (resolved(_snap(kernel_log=own), event) or "")
    before = KernelLog("file:x", events=[KernelEvent("gpu_reset", "m", "r", None, T - 5)])
    assert resolved(_snap(kernel_log=before), event) is None


def _report(*findings: Finding) -> NodeReport:
    return NodeReport("n1", {}, "0", "t", 0.0, "full", "agent", list(findings))


def test_sticky_finding_says_why_it_is_still_there() -> None:
    report = _report(Finding(Status.PASS, "gpu2", "older Xid errors", check="gpu.xid"))
    add_sticky(report, Events([_event()]))
    fails = report.failures()
    assert len(fails) == 1
    assert fails[0].check == "gpu.xid"
    assert fails[0].component == "gpu2"
    assert fails[0].action.value == "reboot"
    assert "no reboot or reset" in fails[0].observed["still_here_because"]
    assert fails[0].observed["clear_with"].endswith(str(_event()["id"]))
    assert not [f for f in report.findings if f.status is Status.PASS and f.component == "gpu2"]


def test_no_sticky_when_gpu_xid_already_fails_or_xid_needs_nothing() -> None:
    report = _report(Finding(Status.FAIL, "gpu2", "Xid 79", check="gpu.xid"))
    add_sticky(report, Events([_event()]))
    assert len(report.failures()) == 1
    report = _report()
    add_sticky(report, Events([_event(code=13)]))  # an application Xid: nothing sticky
    assert report.failures() == []


def test_judge_passes_previous_and_history() -> None:
    previous, snap = _snap(), _snap()
    previous.taken_at = T + 40
    report = judge(snap, Config(), RunOptions(level="full", mode="agent", profile="dgx-h100"),
                   previous, Events([_event()]), T + 100)
    assert report.mode == "agent"
    assert any(f.check == "gpu.xid" and f.component == "gpu2" and f.status is Status.FAIL
               for f in report.findings)
