"""``run --from-snapshot FILE [--previous FILE]`` through the real command: a saved
snapshot judged again gives what the live run gave, rates are judged between two saved
snapshots, every report option applies, and a hostile file is one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import REPO, run_cli

SCHEMA = json.loads((REPO / "reports/schema/node-report.v1.json").read_text())
REAL_H200 = REPO / "tests/fixtures/real/h200-vm-580.159.04.snapshot.json"
GPU_LOST = ("nodes:\n  - {names: n1, profile: dgx-h100}\n"
            "faults:\n  - {node: n1, kind: gpu_lost, gpu: 2}\n")


def _save_snapshot(tmp_path: Path, simulate: str, name: str = "snap.json") -> Path:
    proc = run_cli("snapshot", "--simulate", simulate)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / name
    path.write_text(proc.stdout)
    return path


def _verdicts(report: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return sorted((f["check"], f["component"], f["status"], f["message"])
                  for f in report["findings"])


def _judged(*args: str) -> tuple[int, dict[str, Any]]:
    proc = run_cli("run", *args, "--format", "json")
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    jsonschema.validate(report, SCHEMA)
    return proc.returncode, report


def _spec(tmp_path: Path) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(GPU_LOST)
    return spec


def test_a_saved_healthy_snapshot_judges_as_the_live_run(tmp_path: Path) -> None:
    saved = _save_snapshot(tmp_path, "dgx-h100")
    live_rc, live = _judged("--simulate", "dgx-h100")
    again_rc, again = _judged("--from-snapshot", str(saved))
    assert live_rc == again_rc == 0
    assert again["profile"]["name"] == live["profile"]["name"] == "dgx-h100"
    assert again["profile"]["auto_detected"] is True
    assert _verdicts(again) == _verdicts(live)
    assert again["inventory"] == live["inventory"]


def test_a_saved_faulty_snapshot_fails_as_the_live_run(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    saved = _save_snapshot(tmp_path, str(spec))
    live_rc, live = _judged("--simulate", str(spec))
    again_rc, again = _judged("--from-snapshot", str(saved))
    assert live_rc == again_rc == 1
    assert _verdicts(again) == _verdicts(live)
    fails = {(f["check"], f["component"]) for f in again["findings"] if f["status"] == "fail"}
    assert ("gpu.responsive", "gpu2") in fails


def test_a_saved_snapshot_is_judged_under_another_profile(tmp_path: Path) -> None:
    saved = _save_snapshot(tmp_path, "dgx-h100")
    rc, report = _judged("--from-snapshot", str(saved), "--profile", "dgx-a100")
    assert rc == 1
    assert report["profile"] == {"name": "dgx-a100", "auto_detected": False,
                                 "reason": "set by configuration", "provisional": False}
    assert any(f["check"] == "gpu.model" and f["status"] == "fail" for f in report["findings"])


def _first_compute_port(snap: dict[str, Any]) -> dict[str, Any]:
    # A snapshot holds facts, not roles (those are the judge's): a rail sits beside a GPU.
    assert {d["role"] for d in snap["infiniband"]} == {"unknown"}
    dev = next(d for d in snap["infiniband"] if d["gpu_hops"])
    port: dict[str, Any] = dev["ports"][0]
    port["_name"] = f"{dev['name']}/{port['port']}"
    return port


def test_previous_judges_the_rates_between_the_two(tmp_path: Path) -> None:
    saved = _save_snapshot(tmp_path, "dgx-h100")
    snap = json.loads(saved.read_text())
    earlier = json.loads(saved.read_text())
    earlier["taken_at"] = snap["taken_at"] - 60
    if snap.get("boot_clock_s") is not None:
        earlier["boot_clock_s"] = snap["boot_clock_s"] - 60
    port = _first_compute_port(snap)
    port["counters"]["symbol_error"] = (port["counters"].get("symbol_error") or 0) + 5000
    component = port.pop("_name")
    saved.write_text(json.dumps(snap))
    before = tmp_path / "before.json"
    before.write_text(json.dumps(earlier))

    rc, report = _judged("--from-snapshot", str(saved), "--previous", str(before),
                         "--checks", "ib.error_rate")
    assert rc == 1
    assert report["level"] == "full"
    fails = [f for f in report["findings"] if f["status"] == "fail"]
    assert [(f["check"], f["component"], f["action"]) for f in fails] == \
        [("ib.error_rate", component, "reseat_cable")]
    # The same pair the other way round is refused: rates need the earlier one as --previous.
    proc = run_cli("run", "--from-snapshot", str(before), "--previous", str(saved))
    assert proc.returncode == 2
    assert "--previous" in proc.stderr
    assert "earlier" in proc.stderr
    # Without --previous the rate check has nothing to compare with and fails nothing.
    rc, alone = _judged("--from-snapshot", str(saved), "--checks", "ib.error_rate")
    assert rc == 0
    assert {f["status"] for f in alone["findings"]} == {"skip"}


def test_previous_of_another_node_is_refused(tmp_path: Path) -> None:
    saved = _save_snapshot(tmp_path, "dgx-h100")
    other = json.loads(saved.read_text())
    other["node"] = "someone-else"
    other["taken_at"] -= 60
    before = tmp_path / "other.json"
    before.write_text(json.dumps(other))
    proc = run_cli("run", "--from-snapshot", str(saved), "--previous", str(before))
    assert proc.returncode == 2
    assert "someone-else" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_kernel_log_window_is_judged_as_of_the_snapshot(tmp_path: Path) -> None:
    """A snapshot shipped two days later still shows the Xid it was taken for."""
    spec = tmp_path / "xid.yaml"
    spec.write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n"
                    "faults:\n  - {node: n1, kind: xid, gpu: 1}\n")
    saved = _save_snapshot(tmp_path, str(spec))
    snap = json.loads(saved.read_text())
    shift = 2 * 86400
    snap["taken_at"] -= shift
    snap["kernel_log"]["boot_time"] -= shift
    for event in snap["kernel_log"]["xids"]:
        if event.get("time") is not None:
            event["time"] -= shift
    saved.write_text(json.dumps(snap))
    rc, report = _judged("--from-snapshot", str(saved), "--checks", "gpu.xid")
    assert rc == 1
    assert any(f["component"] == "gpu1" and f["status"] == "fail" for f in report["findings"])


@pytest.mark.parametrize("fmt", ["md", "html", "line", "table"])
def test_every_report_option_applies(tmp_path: Path, fmt: str) -> None:
    saved = _save_snapshot(tmp_path, str(_spec(tmp_path)))
    out, bad = tmp_path / f"report.{fmt}", tmp_path / "exclude.txt"
    proc = run_cli("run", "--from-snapshot", str(saved), "--format", fmt, "--output", str(out),
                   "--exclude-file", str(bad))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert "gpu.responsive" in out.read_text()
    assert bad.read_text() == "n1\n"


def test_the_real_h200_snapshot_is_judged_from_the_command_line() -> None:
    rc, report = _judged("--from-snapshot", str(REAL_H200))
    assert rc == 0
    assert report["profile"]["name"] == "generic"
    assert [f["check"] for f in report["findings"] if f["status"] == "warn"] == ["host.profile"]


def _bad_one_line(path: str, *extra: str, needle: str) -> None:
    proc = run_cli("run", "--from-snapshot", path, *extra, timeout=30)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert path in lines[0] or not path
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("content", "needle"), [
    (b"\x00\xff garbage", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"node": "n1"}', "no schema tag"),
    (b'{"schema": "clusterdiag/snapshot/v9", "node": "n1", "taken_at": 1}', "snapshot/v9"),
    (b'{"schema": "clusterdiag/node-report/v1"}', "node-report"),
    (b'{"schema": "clusterdiag/snapshot/v1", "taken_at": 1}', "missing key 'node'"),
    (b'{"schema": "clusterdiag/snapshot/v1", "node": "n1", "taken_at": "x"}', "taken_at"),
    (b'{"schema": "clusterdiag/snapshot/v1", "node": "n1", "taken_at": NaN}',
     "a value out of range: $.taken_at (NaN)"),
    (b'{"schema": "clusterdiag/snapshot/v1", "node": "n1\\u001b[2J", "taken_at": 1}',
     "host name"),
    (b'{"schema": "clusterdiag/snapshot/v1", "node": "n1", "taken_at": 1, '
     b'"pci": [{"bdf": 7}]}', "$.pci[0]"),
    (b'{"schema": "clusterdiag/snapshot/v1", "node": "n1", "taken_at": 1e999}',
     "a value out of range: $.taken_at (1e999)"),
    (b"[" * 100000 + b"]" * 100000, "not JSON"),
])
def test_garbage_is_one_line_and_exit_2(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    _bad_one_line(str(path), needle=needle)


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GiB of nothing on disk
    _bad_one_line(str(path), needle="larger than")


def test_a_fifo_a_device_and_a_directory_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    _bad_one_line(str(fifo), needle="FIFO")
    _bad_one_line("/dev/zero", needle="character device")
    _bad_one_line(str(tmp_path), needle="directory")
    _bad_one_line(str(tmp_path / "absent.json"), needle="No such file")


def test_previous_garbage_is_named_as_previous(tmp_path: Path) -> None:
    saved = _save_snapshot(tmp_path, "dgx-h100")
    junk = tmp_path / "junk.json"
    junk.write_text("{")
    proc = run_cli("run", "--from-snapshot", str(saved), "--previous", str(junk))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"clusterdiag: --previous {junk}: not JSON")


@pytest.mark.parametrize("extra", [("--simulate", "dgx-h100"), ("--root", "/"),
                                   ("--nodes", "n[1-2]"), ("--node", "n1")])
def test_source_flags_do_not_mix_with_a_saved_snapshot(tmp_path: Path,
                                                       extra: tuple[str, ...]) -> None:
    proc = run_cli("run", "--from-snapshot", str(REAL_H200), *extra)
    assert proc.returncode == 2
    assert extra[0] in proc.stderr
    assert "cannot be used with it" in proc.stderr


def test_previous_alone_is_a_usage_error() -> None:
    proc = run_cli("run", "--previous", str(REAL_H200))
    assert proc.returncode == 2
    assert proc.stderr.strip() == "clusterdiag: --previous needs --from-snapshot"


def test_the_command_does_not_hang_on_a_fifo_given_as_previous(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    try:
        proc = run_cli("run", "--from-snapshot", str(REAL_H200), "--previous", str(fifo),
                       timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("blocked on the FIFO")
    assert proc.returncode == 2
    assert "FIFO" in proc.stderr


def test_a_snapshot_of_a_real_h100_ib_tree_judges_as_the_live_run(tmp_path: Path) -> None:
    """The gpud H100 sysfs tree (8 ConnectX-7 NDR ports, a BlueField-3 bond), read with
    --root: saved and judged again, it gives what reading the tree gave."""
    tree = str(REPO / "tests/fixtures/ib/gpud-h100")
    proc = run_cli("snapshot", "--root", tree)
    assert proc.returncode == 0, proc.stderr
    saved = tmp_path / "h100.json"
    saved.write_text(proc.stdout)
    live_rc, live = _judged("--root", tree, "--checks", "ib.*")
    again_rc, again = _judged("--from-snapshot", str(saved), "--checks", "ib.*")
    assert again_rc == live_rc
    assert _verdicts(again) == _verdicts(live)
    assert any(f["component"].startswith("mlx5_") for f in again["findings"])


def test_a_counter_beyond_64_bits_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Turned into a float for the report's telemetry, such a count overflowed."""
    data = json.loads(REAL_H200.read_text())
    data["nvml"]["gpus"][0]["ecc_volatile_corrected"] = 1 << 66
    path = tmp_path / "huge-count.json"
    path.write_text(json.dumps(data))
    _bad_one_line(str(path), needle="$.nvml.gpus[0].ecc_volatile_corrected (beyond 64 bits)")
