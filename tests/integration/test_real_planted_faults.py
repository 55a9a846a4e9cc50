"""Faults planted in real captures — the real H200 snapshot clusterdiag took
(tests/fixtures/real) and the real H100 InfiniBand tree from gpud (tests/fixtures/ib,
Apache-2.0) — each caught by the intended check, on the intended component, with the
intended action, and by nothing else: every other finding is what the untouched capture
gives. (``run --from-snapshot`` has not landed; the snapshots are judged through the
library, ``runner.evaluate``, the path that flag will take.)"""

from __future__ import annotations

import copy
import json
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import ib as ib_collector
from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.gpu import NvLink
from clusterdiag.agent.model.kernel import XidEvent
from clusterdiag.agent.read.sources import SourceEnv
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.settings.config import Config
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.core.registry import History
from tests.conftest import REPO

H200 = REPO / "tests/fixtures/real/h200-vm-580.159.04.snapshot.json"
H100_IB = REPO / "tests/fixtures/ib/gpud-h100"
Key = tuple[str, str, str, str]  # check, component, status, action


def _keys(findings: list[Finding]) -> Counter[Key]:
    return Counter((f.check, f.component, f.status.value, f.action.value) for f in findings)


def _new_verdicts(baseline: list[Finding], planted: list[Finding]) -> set[Key]:
    """What the planted fault changed: findings that are not in the untouched capture's
    report, less passes and skips (a port not ACTIVE skips ib.rate). What went away is a
    pass, or the same check's milder verdict on the same component (a fail that replaces
    a warning)."""
    added = _keys(planted) - _keys(baseline)
    removed = _keys(baseline) - _keys(planted)
    changed = {(check, comp) for check, comp, _, _ in added}
    assert all(status == "pass" or (check, comp) in changed
               for check, comp, status, _ in removed), removed
    return {k for k in added if k[2] not in ("pass", "skip")}


# --- the real H200 snapshot --------------------------------------------------------------


def _h200() -> Snapshot:
    return Snapshot.from_dict(json.loads(H200.read_text()))


def _judge(snap: Snapshot, previous: Snapshot | None = None) -> list[Finding]:
    options = RunOptions(level="full" if previous is not None else "quick")
    return evaluate(snap, Config(), options, previous=previous).findings


def _with_xid(code: int, message: str) -> Snapshot:
    snap = _h200()
    assert snap.kernel_log is not None
    snap.kernel_log.xids.append(XidEvent(
        xid=code, pci_bdf=snap.nvml.gpus[0].pci_bdf if snap.nvml else "", pid=4242,
        process="python3", message=message, time=time.time() - 120,
        raw=f"NVRM: Xid (PCI:0000:00:06): {code}, pid=4242, name=python3, {message}"))
    return snap


@pytest.mark.parametrize(("code", "message", "action"), [
    (54, "Unspecified error.", "reseat_cable"),  # CHECK_MECHANICALS: aux power
    (46, "Unspecified error.", "reset_gpu"),  # RESET_GPU, missing from the old table
    (151, "Unspecified error.", "reboot"),  # RESTART_VM
    (168, "Unspecified error.", "rma"),  # bucketless, fatal: lost memory capacity
    (149, "NETIR_LINK_DOWN Fatal XC0 i0 Link 03 (0x021425c6 0x00000000 0x0 0x0 0x0 0x0)",
     "reset_gpu"),
    (154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
     "reset_gpu"),
])
def test_xid_planted_in_the_real_h200_snapshot(code: int, message: str, action: str) -> None:
    assert _new_verdicts(_judge(_h200()), _judge(_with_xid(code, message))) == {
        ("gpu.xid", "gpu0", "fail", action)}


def test_xid_nonfatal_nvlink5_and_restart_app_in_the_real_snapshot_change_nothing() -> None:
    baseline = _judge(_h200())
    for code, message in ((145, "RLW_SRC_TRACK Nonfatal XC1 i0 Link 03 (0x040868e2 0x8)"),
                          (13, "Graphics Exception"), (63, "Row Remapper: New row marked")):
        assert _new_verdicts(baseline, _judge(_with_xid(code, message))) == set(), code


def _clocked(reasons: int, sm: int, slowdown_ns: int = 0, at: float = 0.0) -> Snapshot:
    snap = _h200()
    assert snap.nvml is not None
    gpu = snap.nvml.gpus[0]
    gpu.clock_event_reasons, gpu.sm_clock_mhz, gpu.sm_clock_max_mhz = reasons, sm, 1980
    gpu.clock_event_time_ns = {"sw_thermal": 0, "hw_thermal": slowdown_ns, "hw_power_brake": 0}
    snap.taken_at += at
    return snap


def test_locked_clocks_planted_in_the_real_h200_snapshot() -> None:
    baseline = _judge(_clocked(0x1, 345))  # idle, as captured
    assert _new_verdicts(baseline, _judge(_clocked(0x2, 1410))) == {
        ("gpu.clocks", "gpu0", "warn", "fix_config")}


def test_applications_clock_below_the_profile_warns_on_an_idle_real_h200() -> None:
    """nvidia-smi -ac 1980,1410 on an idle GPU: the current clock (345 MHz, reason Idle)
    shows nothing; the applications clock does, against the profile's 1980 MHz."""
    options = RunOptions(level="quick", profile="hgx-h200-8gpu")
    baseline = evaluate(_clocked(0x1, 345), Config(), options).findings
    capped = _clocked(0x1, 345)
    assert capped.nvml is not None
    capped.nvml.gpus[0].sm_app_clock_mhz = 1410
    findings = evaluate(capped, Config(), options).findings
    assert _new_verdicts(baseline, findings) == {("gpu.clocks", "gpu0", "warn", "fix_config")}
    warn = next(f for f in findings if f.check == "gpu.clocks" and f.status is Status.WARN)
    assert warn.message == ("GPU 0 applications clock set to 1410 MHz, below the profile's "
                            "SM clock 1980 MHz")
    capped.nvml.gpus[0].sm_app_clock_mhz = 1980  # the default: no warning
    assert _new_verdicts(baseline, evaluate(capped, Config(), options).findings) == set()


def test_slowdown_time_growing_between_two_real_samples() -> None:
    before = _clocked(0x1, 345, 0, at=-60.0)
    baseline = _judge(_clocked(0x1, 345, 0), previous=before)
    grown = _judge(_clocked(0x1, 345, 9_000_000_000), previous=before)  # 9 s of 60
    assert _new_verdicts(baseline, grown) == {("gpu.clocks", "gpu0", "warn", "investigate")}


def _nvlinked(crc: int, replay: int, at: float = 0.0) -> Snapshot:
    """The real H200 as a one-GPU machine with its 18 NVLinks up, as a real H200 shows
    them (the shared real set's nvlink/nvlink-s__linux-x86_64__nvidia-h200__590.48.01.txt,
    nvidia-smi nvlink -s: 18 links at 26.562 GB/s), link 3's CRC and replay counters at
    ``crc`` and ``replay``."""
    snap = _h200()
    assert snap.nvml is not None
    gpu = snap.nvml.gpus[0]
    for key in ("nvlinks", "nvlink_count"):
        gpu.unsupported.pop(key, None)
    gpu.nvlink_count = 18
    gpu.nvlinks = [NvLink(link=n, active=True, version=6, speed_mbps=26562,
                          errors={"replay": replay if n == 3 else 0, "recovery": 0,
                                  "crc": crc if n == 3 else 0}) for n in range(18)]
    snap.taken_at += at
    return snap


def test_nvlink_error_storm_on_a_generic_one_gpu_h200_is_judged() -> None:
    """One H200 and no NVSwitch is detected generic; its counters still judge it."""
    before = _nvlinked(0, 0, at=-60.0)
    options = RunOptions(level="full")
    baseline = evaluate(_nvlinked(0, 0), Config(), options, previous=before)
    assert baseline.profile["name"] == "generic"
    storm = evaluate(_nvlinked(60_000, 40), Config(), options, previous=before)  # 1000 CRC/s
    assert _new_verdicts(baseline.findings, storm.findings) == {
        ("nvlink.error_rate", "gpu0.link3", "fail", "reset_gpu")}


# --- the real H100 InfiniBand tree ---------------------------------------------------------

PORT = "mlx5_4/ports/1"


def _tree(tmp: Path, name: str) -> Path:
    root = tmp / name
    shutil.copytree(H100_IB, root)
    return root


def _write(root: Path, rel: str, text: str) -> None:
    (root / "sys/class/infiniband" / rel).write_text(text + "\n")


def _read(root: Path, taken_at: float) -> Snapshot:
    devs = ib_collector.collect(SourceEnv(root=root), SourceStats(), time.monotonic() + 10)
    return Snapshot(node="n1", taken_at=taken_at, infiniband=devs)


def _ib_judge(snap: Snapshot, previous: Snapshot | None = None,
              history: History | None = None) -> list[Finding]:
    options = RunOptions(level="full", profile="dgx-h100", patterns=("ib.*",))
    return evaluate(snap, Config(), options, previous=previous, history=history).findings


def test_port_init_planted_in_the_real_h100_tree(tmp_path: Path) -> None:
    clean = _tree(tmp_path, "clean")
    planted = _tree(tmp_path, "planted")
    for state in ("2: INIT", "3: ARMED"):
        _write(planted, f"{PORT}/state", state)
        assert _new_verdicts(_ib_judge(_read(clean, 1000.0)), _ib_judge(_read(planted, 1000.0))
                             ) == {("ib.port_state", "mlx5_4/1", "fail", "investigate")}, state


def test_transport_counter_growth_planted_in_the_real_h100_tree(tmp_path: Path) -> None:
    root = _tree(tmp_path, "t")
    first = _read(root, 1000.0)
    baseline = _ib_judge(_read(root, 1030.0), previous=first)
    _write(root, f"{PORT}/hw_counters/rnr_nak_retry_err", "12")
    grown = _ib_judge(_read(root, 1030.0), previous=first)
    assert _new_verdicts(baseline, grown) == {
        ("ib.transport_errors", "mlx5_4/1", "fail", "investigate")}


def test_saturated_narrow_counter_planted_in_the_real_h100_tree(tmp_path: Path) -> None:
    """A 4-bit counter that went from 0 to its maximum, 15, in 30 s proves at least 15
    events: past the fail limit of 10, so it fails instead of warning "rate unknown"."""
    root = _tree(tmp_path, "s")
    first = _read(root, 1000.0)
    baseline = _ib_judge(_read(root, 1030.0), previous=first)
    _write(root, f"{PORT}/counters/local_link_integrity_errors", "15")
    pinned = _ib_judge(_read(root, 1030.0), previous=first)
    assert _new_verdicts(baseline, pinned) == {
        ("ib.error_rate", "mlx5_4/1", "fail", "reseat_cable")}


def test_link_flapping_over_the_agents_hour_in_the_real_h100_tree(tmp_path: Path) -> None:
    """Five link error recoveries over half an hour, one per interval at most: the last
    interval alone warns; the agent's window (ctx.history) fails it."""
    root = _tree(tmp_path, "f")
    _write(root, f"{PORT}/counters/link_error_recovery", "4")
    first = _read(root, 1000.0)
    _write(root, f"{PORT}/counters/link_error_recovery", "5")
    second = _read(root, 1030.0)
    baseline = _ib_judge(copy.deepcopy(second), previous=first)
    window = History({"taken_at": 1030.0 - 1800.0,
                      "counters": {"mlx5_4/1": {"link_error_recovery": 0}}})
    trend = _ib_judge(second, previous=first, history=window)
    assert ("ib.error_rate", "mlx5_4/1", "warn", "reseat_cable") in _keys(baseline)
    assert _new_verdicts(baseline, trend) == {("ib.error_rate", "mlx5_4/1", "fail", "reseat_cable")}
    (flap,) = [f for f in trend if f.status is Status.FAIL]
    assert (flap.observed["counter"], flap.observed["events"]) == ("link_error_recovery", 5)
